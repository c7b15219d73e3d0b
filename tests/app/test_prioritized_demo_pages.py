"""Every page opens a ``bufcore demo --prioritized`` run (its train buffer saved with a
prioritized sampler and its ``_sampler`` leaf, ``replay`` records in its log) as it opens a plain
demo run: without an exception, an error or a warning."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.ui import BUFFER_KEY
from bufcore.runs.demo import run_demo
from tests.app.conftest import PAGES, Dashboard
from tests.support import TINY_DEMO


@pytest.fixture(scope="module")
def prioritized_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("prioritized") / "demo"
    run_demo(run, dataclasses.replace(TINY_DEMO, prioritized=True))
    return run


@pytest.mark.parametrize("page", list(PAGES))
def test_the_page_shows_a_prioritized_run_without_errors(
    dashboard: Dashboard, prioritized_run: Path, page: str
) -> None:
    at = dashboard(page, prioritized_run, query={BUFFER_KEY: "train"})
    assert not at.exception
    assert [e.body for e in at.error] == []
    assert [w.body for w in at.warning] == []

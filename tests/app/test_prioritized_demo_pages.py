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
from tests.app.test_replay_page import LOG_TAB_QUERY, charts, legend, texts
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


def test_the_replay_pages_log_tab_shows_a_prioritized_run_without_errors(
    dashboard: Dashboard, prioritized_run: Path
) -> None:
    at = dashboard("replay", prioritized_run, query={BUFFER_KEY: "train", **LOG_TAB_QUERY})
    assert not at.exception
    assert [e.body for e in at.error] == []
    assert [w.body for w in at.warning] == []
    assert charts(at)


def test_the_sampling_lab_names_the_prioritized_sampler_instead_of_offering_a_weighting(
    dashboard: Dashboard, prioritized_run: Path
) -> None:
    at = dashboard("sampling_lab", prioritized_run, query={BUFFER_KEY: "train"})
    assert [r.label for r in at.radio if r.label == "Weighting"] == []
    assert any("Prioritized windows" in c.value and "max of its rows' priorities" in c.value
               for c in at.caption)


def test_the_replay_page_draws_the_demos_trajectory_shares_over_training(
    dashboard: Dashboard, prioritized_run: Path
) -> None:
    at = dashboard("replay", prioritized_run, query={BUFFER_KEY: "train", **LOG_TAB_QUERY})
    figure = charts(at)["Top trajectories' share of the window draws"]
    assert legend(figure) == ["top 5 trajectories' share (%)", "trajectories drawn"]
    assert figure["resolve"] == {"scale": {"y": "independent"}}  # drawn on the right axis
    assert all(key not in texts(at, "caption") for key in ("`top_share`", "`windows_drawn`"))
    assert any(e.label.startswith("The 5 most-drawn trajectories") for e in at.expander)


def test_the_replay_pages_log_scale_writes_its_ticks_out(
    dashboard: Dashboard, prioritized_run: Path
) -> None:
    at = dashboard("replay", prioritized_run, query={BUFFER_KEY: "train", **LOG_TAB_QUERY})
    figure = charts(at)["Importance weights (min, median, max)"]
    median = next(one for one in figure["layer"] if one["mark"]["type"] == "line")
    y = median["encoding"]["y"]
    assert y["scale"]["type"] == "log"
    # Ticks at chosen values printed in full ("0.05", never "5" for 0.05 and 50 alike).
    assert y["axis"]["values"] and y["axis"]["format"] == "~g"


def test_the_sampling_labs_snippet_draws_a_prioritized_buffer_without_a_weighting_view(
    dashboard: Dashboard, prioritized_run: Path
) -> None:
    at = dashboard("sampling_lab", prioritized_run, query={BUFFER_KEY: "train"})
    code = " ".join(block.value for block in at.code)
    assert "buf.sample(" in code and "with_weighting" not in code

"""Fixtures for dashboard tests: one small demo run per test session, and AppTest factories.

The run is generated once (``bufcore demo`` with a tiny configuration, a fraction of a second)
into a session temporary directory; tests that change files copy it first. ``dashboard`` runs
the real entry script (``app/main.py``) with the run configured as the dashboard's root, on the
page asked for, with Streamlit's caches cleared so no test sees another's results.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.elements.lib import policies
from streamlit.testing.v1 import AppTest

from app.sources import ROOTS_ENV, RUNS_ENV
from bufcore.runs.demo import run_demo
from tests.support import TINY_DEMO

ENTRY = Path(__file__).resolve().parents[2] / "app" / "main.py"
# Page paths relative to the entry script, as AppTest.switch_page wants them.
PAGES = {
    "overview": "../pages/overview.py",
    "fifo": "../pages/fifo.py",
    "trajectories": "../pages/trajectories.py",
    "sampling_lab": "../pages/sampling_lab.py",
    "z_buffer": "../pages/z_buffer.py",
    "metrics": "../pages/metrics.py",
    "curriculum": "../pages/curriculum.py",
    "td_ema": "../pages/td_ema.py",
    "live": "../pages/live.py",
    "compare": "../pages/compare.py",
    "replay": "../pages/replay.py",
}


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny demo run (do not modify: copy it with ``run_copy``)."""
    root = tmp_path_factory.mktemp("dashboard-runs")
    run_demo(root / "demo", TINY_DEMO)
    return root / "demo"


@pytest.fixture
def run_copy(demo_run: Path, tmp_path: Path) -> Path:
    """A private copy of the demo run, under ``tmp_path/runs/demo``, free to modify."""
    target = tmp_path / "runs" / "demo"
    shutil.copytree(demo_run, target)
    return target


# A work directory laid out as BFM-Zero writes it (tests/fixtures/make_bfm_zero_workdir.py).
BFM_ZERO = Path(__file__).resolve().parents[1] / "fixtures" / "bfm_zero_workdir"


@pytest.fixture
def bfm_zero_run(tmp_path: Path) -> Path:
    """A private copy of the BFM-Zero work directory, under ``tmp_path/runs/bfm_zero``."""
    target = tmp_path / "runs" / "bfm_zero"
    shutil.copytree(BFM_ZERO, target)
    return target


def shown(markdown: str) -> str:
    """The text Streamlit shows for a Markdown string of the dashboard: CommonMark drops a
    backslash before ASCII punctuation (what ``app.text.literal`` adds to paths and errors)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


Dashboard = Callable[..., AppTest]


@pytest.fixture
def dashboard(monkeypatch: pytest.MonkeyPatch) -> Iterator[Dashboard]:
    """``dashboard(page, *runs, roots=(), query=None, opened=())``: an AppTest of ``page``,
    already run, with the lazy expanders keyed ``opened`` open."""

    def open_page(
        page: str, *runs: Path, roots: tuple[Path, ...] = (), query: dict[str, str] | None = None,
        opened: tuple[str, ...] = (),
    ) -> AppTest:
        monkeypatch.setenv(RUNS_ENV, ":".join(map(str, runs)))
        monkeypatch.setenv(ROOTS_ENV, ":".join(map(str, roots)))
        at = AppTest.from_file(str(ENTRY), default_timeout=60)
        at.query_params.update(query or {})
        for key in opened:  # ui.lazy_expander keys: drawn open, as after a click
            at.session_state[key] = True
        at.run()
        if page != "overview":
            at.switch_page(PAGES[page]).run()
        return at

    st.cache_data.clear()
    st.cache_resource.clear()
    yield open_page
    st.cache_data.clear()
    st.cache_resource.clear()


class _Collect(logging.Handler):
    """Keeps every message logged to it."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def widget_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The warnings Streamlit logs about widget state (a widget with a default value whose
    key is also set through session state) while the test runs.

    Streamlit logs that warning once per process; the flag is reset so every test sees it.
    Its logger does not propagate to pytest's caplog, so a handler is attached directly.
    """
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    logger = logging.getLogger(policies.__name__)
    handler = _Collect()
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)

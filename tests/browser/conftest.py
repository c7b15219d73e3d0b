"""Fixtures for the real-browser tests: a demo run and a BFM-Zero work directory, ``streamlit
run`` on each, Debian's chromium.

The dashboard runs as users run it (``streamlit run app/serve.py`` on 127.0.0.1, a free port),
on a tiny demo run generated once per session. Playwright drives ``/usr/bin/chromium`` with the
flags of DESIGN §5 and a fresh context (its own profile: no cookies or storage carried over)
per test. Without ``/usr/bin/chromium`` every browser test skips, saying how to install it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.__main__ import streamlit_command
from app.sources import ROOTS_ENV, RUNS_ENV
from bufcore.runs.demo import run_demo
from tests.support import TINY_DEMO

REPO = Path(__file__).resolve().parents[2]
BFM_ZERO = REPO / "tests" / "fixtures" / "bfm_zero_workdir"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
START_TIMEOUT_S = 90.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    """``/usr/bin/chromium``, or a skip saying how to get it."""
    if not CHROMIUM.exists():
        pytest.skip(
            f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`; "
            "`make test` does it when run as root) to run the browser tests"
        )
    return CHROMIUM


@pytest.fixture(scope="session")
def browser_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny demo run for the browser tests."""
    run = tmp_path_factory.mktemp("browser-runs") / "demo"
    run_demo(run, TINY_DEMO)
    return run


@contextmanager
def serve(run: Path, *, base: str = "") -> Iterator[str]:
    """``http://127.0.0.1:PORT/`` of ``streamlit run app/serve.py`` started on ``run`` with the
    flags ``python -m app`` gives it (with ``base``, Streamlit's ``server.baseUrlPath``, and
    the URL ends in ``/base/``), stopped on exit; its output goes to
    ``test-artifacts/streamlit-<run name>.log``."""
    port = _free_port()
    env = {**os.environ, RUNS_ENV: str(run), ROOTS_ENV: "", "PYTHONPATH": str(REPO),
           "STREAMLIT_SERVER_BASE_URL_PATH": base}
    root = f"http://127.0.0.1:{port}/" + (f"{base}/" if base else "")
    log = SCREENSHOTS.parent / f"streamlit-{run.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as output:
        server = subprocess.Popen(streamlit_command(port), env=env, cwd=REPO, stdout=output,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{root}_stcore/health"):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start; see {log}") from None
                time.sleep(0.3)
        yield root
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="session")
def dashboard_url(chromium_path: Path, browser_run: Path) -> Iterator[str]:
    """``http://127.0.0.1:PORT/`` of ``streamlit run app/serve.py`` on the demo run."""
    with serve(browser_run) as url:
        yield url


@pytest.fixture(scope="session")
def bfm_zero_url(chromium_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard started on a copy of a BFM-Zero work directory laid out as BFM-Zero
    writes it (tests/fixtures/bfm_zero_workdir: only the train buffer, no metrics.jsonl)."""
    run = tmp_path_factory.mktemp("browser-bfm-zero") / "bfm_zero"
    shutil.copytree(BFM_ZERO, run)
    with serve(run) as url:
        yield url


@pytest.fixture(scope="session")
def browser(chromium_path: Path) -> Iterator[object]:
    """A headless chromium (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium_path),
                                              args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@contextmanager
def fresh_tab(browser: Any) -> Iterator[Any]:
    """A 1400 x 1800 tab in a fresh browser context (no cookie, cache or storage of another
    test), waiting up to 30 s for what it is asked; the context is closed on exit."""
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    try:
        tab = context.new_page()
        tab.set_default_timeout(30_000)
        yield tab
    finally:
        context.close()


@pytest.fixture
def page(browser: Any, dashboard_url: str) -> Iterator[Any]:
    """A tab in a fresh browser context (nothing kept from other tests)."""
    with fresh_tab(browser) as tab:
        yield tab

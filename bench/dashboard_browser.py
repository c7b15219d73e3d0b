"""The dashboard as a browser gets it: each page's first render and Resample where it has one.

``python -m bench.dashboard_browser [--run DIR]`` writes a demo run (``bufcore demo``'s
defaults with ``--prioritized``) unless one is given, serves it as ``python -m app`` does
(``streamlit run app/serve.py`` on 127.0.0.1) and drives Debian's ``/usr/bin/chromium`` with
Playwright (the flags of DESIGN §5):

- **first render**: a fresh tab (a new page, so a new Streamlit session, in a browser that has
  loaded the dashboard before, as a user's has), from navigation until the script has finished
  and every chart on the page is drawn; median of 3 per page, after one visit per page that
  warms the server's caches and the browser's HTTP cache;
- the Replay page twice: its checkpoint's tab (a link to the page opens it) and its log's
  (``rp_part``), each drawn alone;
- **Resample** on the Sampling lab and the Replay page's checkpoint tab: from the click until
  the next seed is in the caption and the URL and the charts are drawn again; median of 15
  (3 tabs x 5 clicks) per buffer.

Targets (issue 19): first render < 2 s, Resample < 0.3 s. The one-minute load average before
and after is printed beside the numbers: on a shared machine it decides most of them. So is the
**floor**, measured before and after the pages in the same browser and the same way:
``bench/floor_app.py`` served alone, a page with only a title, and one with a three-point
Vega-Lite chart and a Resample button (every dashboard chart is Vega-Lite). No dashboard page
renders or resamples faster than that. With plotly installed (the ``bench`` extra) it also
measures the same chart drawn by Plotly, what the dashboard used to pay per fresh tab.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PAGES = ("", "fifo", "trajectories", "sampling_lab?buffer=expert", "sampling_lab?buffer=train",
         "z_buffer", "curriculum", "td_ema", "metrics", "live", "compare", "replay?buffer=train",
         "replay?buffer=train&rp_part=From+the+log")
# Pages with a Resample button, and the URL key that holds its seed.
SEED_KEYS = {"sampling_lab": "lab_seed", "replay": "rp_seed"}
IDLE = ("() => { const w = document.querySelector('[data-testid=\"stStatusWidget\"]');"
        " return !w || !w.innerText.includes('Running'); }")
DRAWN = ("() => !document.querySelector('[data-testid=\"stSkeleton\"]') && Array.from("
         "document.querySelectorAll('[data-testid=\"stPlotlyChart\"]'))"
         ".every(e => e.querySelector('.main-svg')) && Array.from("
         "document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]'))"
         ".every(e => e.querySelector('canvas, svg'))")
TIMEOUT_MS = 60_000


@contextmanager
def dashboard(run: Path) -> Iterator[str]:
    """``streamlit run app/serve.py`` on ``run``, yielding its URL once it answers."""
    from app.sources import ROOTS_ENV, RUNS_ENV

    env = {**os.environ, RUNS_ENV: str(run), ROOTS_ENV: "", "PYTHONPATH": str(ROOT)}
    with served(ROOT / "app" / "serve.py", env) as url:
        yield url


@contextmanager
def served(script: Path, env: dict[str, str]) -> Iterator[str]:
    """``streamlit run script`` on a free local port, with the flags ``python -m app`` starts
    the dashboard with, yielding its URL once it answers."""
    from app.__main__ import streamlit_command

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen(
        streamlit_command(port, entry=script),
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "_stcore/health"):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("streamlit did not start") from None
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def open_page(context: Any, url: str) -> tuple[Any, float]:
    """A new tab on ``url`` and the seconds until its script ended and its charts were drawn."""
    tab = context.new_page()
    start = time.perf_counter()
    tab.goto(url)
    tab.wait_for_selector("h1", timeout=TIMEOUT_MS)
    tab.wait_for_function(IDLE, timeout=TIMEOUT_MS, polling=10)
    tab.wait_for_function(DRAWN, timeout=TIMEOUT_MS, polling=10)
    return tab, time.perf_counter() - start


def resample(tab: Any, key: str = "lab_seed") -> float:
    """Seconds from a click on Resample until the next seed's batch is shown and drawn and the
    seed is in the URL under ``key``."""
    # Under load the first run's caption can land after the status widget went idle.
    tab.wait_for_function("() => /Seed \\d+:/.test(document.body.innerText)",
                          timeout=TIMEOUT_MS, polling=10)
    seed = int(re.search(r"Seed (\d+):", tab.inner_text("body")).group(1))  # type: ignore[union-attr]
    start = time.perf_counter()
    tab.get_by_role("button", name="Resample").click()
    tab.wait_for_function(f"() => document.body.innerText.includes('Seed {seed + 1}:')",
                          timeout=TIMEOUT_MS, polling=5)
    tab.wait_for_function(IDLE, timeout=TIMEOUT_MS, polling=5)
    tab.wait_for_function(DRAWN, timeout=TIMEOUT_MS, polling=5)
    elapsed = time.perf_counter() - start
    if f"{key}={seed + 1}" not in tab.url:
        raise RuntimeError(f"Resample did not put the seed in the URL: {tab.url}")
    return elapsed


def measure_floor(context: Any) -> dict[str, float]:
    """First render of ``bench/floor_app.py`` without and with its one chart, Vega-Lite's and
    (with plotly installed) Plotly's (median of 3), and its Resample (median of 5)."""
    result = {}
    floors = [("floor, title only", ""), ("floor, one Vega-Lite chart", "?chart=vega")]
    if importlib.util.find_spec("plotly") is not None:
        floors.append(("floor, one Plotly chart", "?chart=1"))
    with served(ROOT / "bench" / "floor_app.py", dict(os.environ)) as url:
        for name, query in floors:
            open_page(context, url + query)[0].close()
            renders = []
            for _ in range(3):
                tab, seconds = open_page(context, url + query)
                renders.append(seconds)
                tab.close()
            result[f"{name}: first render (s)"] = round(statistics.median(renders), 2)
        tab = open_page(context, url + "?chart=vega")[0]
        clicks = [resample(tab) for _ in range(5)]
        tab.close()
        result["floor, one Vega-Lite chart: Resample (s)"] = round(statistics.median(clicks), 3)
    return result


def measure_pages(context: Any, url: str, pages: tuple[str, ...]) -> dict[str, Any]:
    """Each page's first render (median of 3 fresh tabs) and Resample where it has one."""
    result: dict[str, Any] = {}
    for page in pages:  # warm the server's caches and the browser's HTTP cache
        open_page(context, url + page)[0].close()
    for page in pages:
        renders, clicks = [], []
        for _ in range(3):
            tab, seconds = open_page(context, url + page)
            renders.append(seconds)
            key = SEED_KEYS.get(page.split("?")[0])
            # Replay's log tab has no Resample.
            if key is not None and "rp_part=" not in page:
                clicks += [resample(tab, key) for _ in range(5)]
            tab.close()
        name = page or "overview"
        result[f"{name}: first render (s)"] = round(statistics.median(renders), 2)
        if clicks:
            result[f"{name}: Resample (s)"] = round(statistics.median(clicks), 3)
    return result


def measure(run: Path, pages: tuple[str, ...]) -> dict[str, Any]:
    """The floor, then every page, then the floor again, in one browser (see the docstring)."""
    from playwright.sync_api import sync_playwright

    result: dict[str, Any] = {"load_before": round(os.getloadavg()[0], 2)}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1800})
        before = measure_floor(context)
        with dashboard(run) as url:
            result.update(measure_pages(context, url, pages))
        after = measure_floor(context)
        for key, seconds in before.items():
            result[key.replace("(s)", "(s, before / after the pages)")] = [seconds, after[key]]
        browser.close()
    result["load_after"] = round(os.getloadavg()[0], 2)
    return result


def _pages(text: str) -> tuple[str, ...]:
    """``--pages``: the comma-separated paths, stripped (``"fifo, "`` -> ``("fifo", "")``)."""
    return tuple(item.strip() for item in text.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard_browser",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, help="a run directory (default: a fresh demo run "
                        "with --prioritized, so the Replay page has a sampler to show)")
    parser.add_argument("--pages", type=_pages, default=PAGES,
                        help="comma-separated URL paths to measure, as in the address bar "
                        "after the host (`fifo,curriculum`; an empty item is the Overview; "
                        "default: every page)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-browser-") as scratch:
        run = args.run
        if run is None:
            from bufcore.runs.demo import DemoOptions, run_demo

            run = Path(scratch) / "demo"
            run_demo(run, DemoOptions(prioritized=True))
        result = measure(run, args.pages)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

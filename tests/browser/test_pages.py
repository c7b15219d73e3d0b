"""Every dashboard page in a real browser: it renders without an exception and shows its
title; Resample and a slider work; a full-page screenshot of each page is saved under
``test-artifacts/screenshots/`` to look at."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import torch

from app.serve import page_names
from bufcore import Trajectory, TrajectoryReplayBuffer, load_buffer
from tests.browser.conftest import SCREENSHOTS, fresh_tab, serve
from tests.replay_support import REPLAY_BUFFERS, write_replay_run

pytestmark = pytest.mark.slow

# URL path (from app/main.py's page files) -> the navigation title.
PAGES = {
    "": "Overview",
    "fifo": "FIFO occupancy",
    "trajectories": "Trajectories",
    "sampling_lab": "Sampling lab",
    "z_buffer": "Z-buffer",
    "metrics": "Metrics",
    "curriculum": "Curriculum",
    "td_ema": "TD-EMA",
    "live": "Live",
    "compare": "Compare",
    "replay": "Replay statistics",
}
EXCEPTION = '[data-testid="stException"]'


def settle(page: Any) -> None:
    """Wait until the app is drawn and its script has stopped running."""
    page.wait_for_selector('[data-testid="stApp"]')
    page.wait_for_selector("h1")
    page.wait_for_timeout(500)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " || !document.querySelector('[data-testid=\"stStatusWidget\"]').innerText"
        ".includes('Running')",
        timeout=60_000,
    )
    page.wait_for_timeout(1_000)  # charts draw after the script ends


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def visible_title(page: Any) -> str:
    heading = page.locator("h1").first
    assert heading.is_visible()
    return str(heading.inner_text()).strip()


@pytest.mark.parametrize("path", list(PAGES), ids=lambda p: p or "overview")
def test_every_page_renders_with_its_title_and_no_exception(
    page: Any, dashboard_url: str, path: str
) -> None:
    page.goto(dashboard_url + path)
    settle(page)
    screenshot(page, path or "overview")
    assert page.locator(EXCEPTION).count() == 0
    # The title names the page (its first word at least: "FIFO", "Sampling", "Z-buffer").
    first_word = PAGES[path].split()[0].lower()
    assert first_word in visible_title(page).lower()


@pytest.mark.parametrize("path", ["fifo", "replay?buffer=train", "sampling_lab?lab_seed=3"])
def test_a_link_to_a_page_reaches_the_server_at_once_with_no_failed_request(
    page: Any, dashboard_url: str, path: str
) -> None:
    # Streamlit's frontend alone first probes /<page>/_stcore/health (a 404) and waits 100 ms.
    health: list[str] = []
    failed: list[str] = []
    page.on("response", lambda reply: (health.append(reply.url)
                                       if reply.url.endswith("/_stcore/health") else None,
                                       failed.append(f"{reply.status} {reply.url}")
                                       if reply.status >= 400 else None))
    page.goto(dashboard_url + path)
    settle(page)
    assert page.locator(EXCEPTION).count() == 0
    assert failed == []
    assert health == [dashboard_url + "_stcore/health"]


def test_every_navigation_link_is_a_page_url_that_names_the_server_base(
    page: Any, dashboard_url: str
) -> None:
    # The routes follow the file names; the links are what Streamlit itself made of them.
    page.goto(dashboard_url)
    settle(page)
    links = page.locator('[data-testid="stSidebarNavLink"]')
    paths = {urlparse(links.nth(i).get_attribute("href")).path for i in range(links.count())}
    assert len(paths) == len(PAGES)
    assert paths <= {f"/{name}" for name in page_names()}


def test_under_a_base_url_path_a_link_to_a_page_reaches_the_server_at_once(
    browser: Any, browser_run: Path
) -> None:
    with serve(browser_run, base="bufcore") as url, fresh_tab(browser) as tab:
        health: list[str] = []
        tab.on("response", lambda reply: health.append(f"{reply.status} {reply.url}")
               if "/_stcore/health" in reply.url else None)
        tab.goto(url + "replay?buffer=train")
        settle(tab)
        assert tab.locator(EXCEPTION).count() == 0
        assert "Replay" in visible_title(tab)
        assert health == [f"200 {url}_stcore/health"]
        health.clear()
        tab.goto(url.rstrip("/"))  # the default page, without the trailing slash
        settle(tab)
        assert "Overview" in visible_title(tab)
        assert health == [f"200 {url}_stcore/health"]


def test_resample_on_the_sampling_lab_draws_without_an_exception(
    page: Any, dashboard_url: str
) -> None:
    page.goto(dashboard_url + "sampling_lab")
    settle(page)
    page.get_by_role("button", name="Resample").click()
    settle(page)
    screenshot(page, "sampling_lab-resampled")
    assert page.locator(EXCEPTION).count() == 0


def test_moving_the_live_refresh_slider_updates_the_link(page: Any, dashboard_url: str) -> None:
    page.goto(dashboard_url + "live")
    settle(page)
    # Streamlit 1.67's slider is an <input type="range"> (ARIA role slider, implicit).
    slider = page.get_by_role("slider").first
    before = int(slider.input_value())
    slider.focus()
    page.keyboard.press("ArrowRight")
    settle(page)
    assert page.locator(EXCEPTION).count() == 0
    assert int(slider.input_value()) == before + 1
    # The interval is bound to the URL, so a copied link reproduces it.
    page.wait_for_url(re.compile(r"live_every="))
    assert parse_qs(urlparse(page.url).query)["live_every"] == [str(before + 1)]


def test_the_metrics_page_draws_the_logged_curves_and_downloads_them_as_csv(
    page: Any, dashboard_url: str
) -> None:
    page.goto(dashboard_url + "metrics")
    settle(page)
    assert page.locator(EXCEPTION).count() == 0
    # The demo's losses and reward, each in its own chart (drawn after the script ends).
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    charts.nth(2).wait_for()
    assert charts.count() == 3
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the shown points (CSV)").click()
    with open(download.value.path(), encoding="utf-8") as file:
        lines = file.read().splitlines()
    assert lines[0] == "run,metric,curve,step,value"
    assert {line.split(",")[1] for line in lines[1:]} == {
        "train/policy_loss", "train/value_loss", "train/reward_mean"}


VEGA_DRAWN = ("() => Array.from(document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]'))"
              ".every(e => e.querySelector('canvas, svg'))")


def plotly_requests(tab: Any) -> list[str]:
    """The URLs of Plotly's bundle this tab asks for from now on (Streamlit loads it lazily,
    with the first Plotly chart)."""
    asked: list[str] = []
    tab.on("request", lambda r: asked.append(r.url) if "Plotly" in r.url else None)
    return asked


@pytest.mark.parametrize(("query", "count"), [("buffer=train", 4), ("buffer=z", 3)])
def test_the_fifo_page_draws_vega_lite_charts_and_never_loads_plotly(
    browser: Any, dashboard_url: str, query: str, count: int
) -> None:
    with fresh_tab(browser) as tab:
        asked = plotly_requests(tab)
        tab.goto(dashboard_url + "fifo?" + query)
        settle(tab)
        charts = tab.locator('[data-testid="stVegaLiteChart"]')
        charts.nth(count - 1).wait_for()
        tab.wait_for_function(VEGA_DRAWN)
        screenshot(tab, f"fifo-{query.split('=')[1]}")
        assert charts.count() == count
        assert tab.locator('[data-testid="stPlotlyChart"]').count() == 0
        assert asked == []
        assert tab.locator(EXCEPTION).count() == 0


# Charts each page draws on the demo run, all Vega-Lite (the Sampling lab's, before Draw N).
VEGA_PAGES = {
    "curriculum": 6, "compare": 5, "trajectories": 4, "sampling_lab?buffer=expert": 1,
    "sampling_lab?buffer=train": 1, "sampling_lab?buffer=z": 1, "td_ema": 4, "metrics": 3,
    "live": 3, "z_buffer?z_colour=age": 4, "z_buffer?z_colour=source": 4,
}


@pytest.mark.parametrize(("path", "count"), list(VEGA_PAGES.items()))
def test_a_page_draws_only_vega_lite_and_never_loads_plotly(
    browser: Any, dashboard_url: str, path: str, count: int
) -> None:
    with fresh_tab(browser) as tab:
        asked = plotly_requests(tab)
        tab.goto(dashboard_url + path)
        settle(tab)
        charts = tab.locator('[data-testid="stVegaLiteChart"]')
        charts.nth(count - 1).wait_for()
        if path.startswith("sampling_lab"):  # and the frequencies over many draws
            tab.get_by_role("button", name=re.compile(r"^Draw [\d,]+ batches$")).click()
            charts.nth(count).wait_for()
            count += 1
        tab.wait_for_function(VEGA_DRAWN)
        screenshot(tab, "vega-" + re.sub(r"\W+", "-", path))
        assert charts.count() == count
        assert tab.locator('[data-testid="stPlotlyChart"]').count() == 0
        assert asked == []
        assert tab.locator(EXCEPTION).count() == 0


def test_hovering_a_cell_of_the_emd_heatmap_names_its_motion_and_round(
    browser: Any, dashboard_url: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(dashboard_url + "curriculum")
        settle(tab)
        tab.wait_for_function(VEGA_DRAWN)
        chart = tab.locator('[data-testid="stVegaLiteChart"]').first
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        tip = tab.locator("#vg-tooltip-element.visible")
        # The middle of the plot is a cell whatever the motions and rounds.
        tab.mouse.move(box["x"] + 0.5 * box["width"], box["y"] + 0.5 * box["height"])
        tip.wait_for()
        text = tip.inner_text()
        assert "motion" in text and "round" in text and "EMD" in text


def test_hovering_the_fifo_occupancy_chart_shows_a_point_tooltip(
    browser: Any, dashboard_url: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(dashboard_url + "fifo?buffer=train")
        settle(tab)
        tab.wait_for_function(VEGA_DRAWN)
        chart = tab.locator('[data-testid="stVegaLiteChart"]').nth(3)
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        tip = tab.locator("#vg-tooltip-element.visible")
        # Sweep the plot until the pointer meets a point of the fill or wrap line.
        for fy in [k / 20 for k in range(2, 16)]:
            for fx in [k / 100 for k in range(5, 98)]:
                tab.mouse.move(box["x"] + fx * box["width"], box["y"] + fy * box["height"])
                if tip.count():
                    break
            if tip.count():
                break
        assert "step" in tip.inner_text()


# What each page says the BFM-Zero run lacks; the others draw from its train buffer.
BFM_ZERO_LACKS = {
    "z_buffer": "This needs a ZBuffer checkpoint",
    "curriculum": "This needs evaluation rounds",
    "td_ema": "This needs train records with TD statistics",
    "live": "This needs a metrics.jsonl to follow",
    "replay": "This needs a buffer checkpoint with a PrioritizedSampler",
}


@pytest.mark.parametrize("path", list(PAGES), ids=lambda p: p or "overview")
def test_every_page_opens_a_bfm_zero_work_directory(
    browser: Any, bfm_zero_url: str, path: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(bfm_zero_url + path)
        settle(tab)
        screenshot(tab, f"bfm_zero-{path or 'overview'}")
        assert tab.locator(EXCEPTION).count() == 0
        text = tab.locator('[data-testid="stMain"]').inner_text()
        assert "file is missing" not in text
        assert tab.locator('[data-testid="stAlertContentError"]').count() == 0
        if path in BFM_ZERO_LACKS:
            assert BFM_ZERO_LACKS[path] in text.replace("\n", " ")
def test_compare_opens_on_the_run_against_its_latest_earlier_checkpoint(
    page: Any, dashboard_url: str
) -> None:
    page.goto(dashboard_url + "compare")
    settle(page)
    screenshot(page, "compare-default")
    assert page.locator(EXCEPTION).count() == 0
    b = page.locator('[data-testid="stSelectbox"]').filter(has_text="B: run or checkpoint")
    assert b.locator("input").input_value() == "demo/checkpoints/step-000030"
    assert page.get_by_text("checkpoint at step 30, round 1").count() == 1
    assert page.get_by_text("A and B are the same").count() == 0


def shown_snippet(tab: Any) -> str:
    """The Sampling lab's Python snippet, from the popover that holds it (opened, then
    closed again with Escape)."""
    tab.get_by_role("button", name="Reproduce this batch in Python").click()
    code = tab.locator('[data-testid="stCode"]').first
    code.wait_for(state="visible")
    text = code.inner_text()
    tab.keyboard.press("Escape")
    return str(text)


def test_opening_the_batch_table_draws_it_and_it_stays_open_across_a_resample(
    page: Any, dashboard_url: str
) -> None:
    page.goto(dashboard_url + "sampling_lab?buffer=train&lab_seed=4")
    settle(page)
    table = page.locator('[data-testid="stExpander"]').filter(has_text="The batch as a table")
    assert table.locator('[data-testid="stDataFrame"]').count() == 0
    table.get_by_text("The batch as a table").click()
    table.locator('[data-testid="stDataFrame"]').wait_for(state="visible")
    page.get_by_role("button", name="Resample").click()
    page.wait_for_url(re.compile(r"lab_seed=5"))
    settle(page)
    assert page.locator(EXCEPTION).count() == 0
    assert table.locator('[data-testid="stDataFrame"]').is_visible()


def test_resample_puts_the_new_seed_in_the_link_and_the_link_shows_that_batch(
    page: Any, browser: Any, dashboard_url: str
) -> None:
    page.goto(dashboard_url + "sampling_lab?buffer=train&lab_seed=4")
    settle(page)
    page.get_by_role("button", name="Resample").click()
    page.wait_for_url(re.compile(r"lab_seed=5"))
    settle(page)
    assert page.locator(EXCEPTION).count() == 0
    code = shown_snippet(page)
    assert "manual_seed(5)" in code
    # The copied link, in a fresh browser profile: the same seed, the same snippet.
    with fresh_tab(browser) as other:
        other.goto(page.url)
        settle(other)
        assert "Seed 5:" in other.inner_text("body")
        assert shown_snippet(other) == code


def received_frames(tab: Any) -> list[bytes]:
    """The websocket frames ``tab`` receives from now on, appended as they come (clear the
    list to start afresh): what the server sent for a rerun."""
    frames: list[bytes] = []
    tab.on("websocket", lambda socket: socket.on("framereceived", lambda payload: frames.append(
        payload if isinstance(payload, bytes) else payload.encode())))
    return frames


def test_resample_in_the_sampling_lab_reruns_only_the_draw(
    browser: Any, dashboard_url: str
) -> None:
    with fresh_tab(browser) as tab:
        frames = received_frames(tab)
        tab.goto(dashboard_url + "sampling_lab?buffer=train&lab_seed=7")
        settle(tab)
        frames.clear()
        tab.get_by_role("button", name="Resample").click()
        tab.wait_for_url(re.compile(r"lab_seed=8"))
        settle(tab)
        sent = b"".join(frames)
        assert "Seed 8:" in tab.inner_text("body")
        assert b"Seed 8:" in sent
        # The page's introduction, above the draw, is not sent again: only the draw reran.
        assert b"Draws real batches" not in sent
        assert tab.locator(EXCEPTION).count() == 0


def test_a_checkpoint_replaced_between_two_resamples_in_the_lab_warns(
    browser: Any, browser_run: Path, tmp_path: Path
) -> None:
    # The draw is a fragment: its rerun must read the checkpoint's summary afresh.
    run = tmp_path / "demo"
    shutil.copytree(browser_run, run)
    with serve(run) as url, fresh_tab(browser) as tab:
        tab.goto(url + "sampling_lab?buffer=expert&lab_seed=7")
        settle(tab)
        warnings = tab.locator('[data-testid="stAlertContentWarning"]')
        assert warnings.count() == 0
        path = run / "checkpoint/buffers/expert"
        buffer = load_buffer(path)
        count = len(buffer.priorities)
        buffer.update_priorities(torch.linspace(1.0, 2.0, count), torch.arange(count))
        buffer.save(path)
        tab.get_by_role("button", name="Resample").click()
        tab.wait_for_url(re.compile(r"lab_seed=8"))
        settle(tab)
        assert "now holds another checkpoint" in warnings.first.inner_text()
        assert tab.locator(EXCEPTION).count() == 0


@pytest.fixture(scope="module")
def replay_url(chromium_path: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard on a run with replay records and a checkpoint of each replay kind."""
    run = tmp_path_factory.mktemp("browser-replay") / "replay"
    write_replay_run(run)
    with serve(run) as url:
        yield url


def charts_drawn(page: Any, count: int) -> int:
    """How many Vega-Lite charts the page drew, once at least ``count`` are there, each
    drawn."""
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    charts.nth(count - 1).wait_for()
    page.wait_for_function(VEGA_DRAWN)
    return int(charts.count())


# Charts each checkpoint's tab draws; the log's tab draws 6.
REPLAY_CHARTS = {"rows": 2, "windows": 3, "advanced": 4, "naive": 2, "episode": 0}
LOG_CHARTS = 6


@pytest.mark.parametrize("name", [name for name in REPLAY_BUFFERS if REPLAY_CHARTS[name]])
def test_the_replay_page_draws_each_kind_of_buffer(
    browser: Any, replay_url: str, name: str
) -> None:
    with fresh_tab(browser) as tab:
        asked = plotly_requests(tab)
        tab.goto(replay_url + f"replay?buffer={name}")
        settle(tab)
        assert charts_drawn(tab, REPLAY_CHARTS[name]) == REPLAY_CHARTS[name]
        screenshot(tab, f"replay-{name}")
        assert tab.locator('[data-testid="stPlotlyChart"]').count() == 0
        assert asked == []
        assert tab.locator(EXCEPTION).count() == 0
        assert tab.locator('[data-testid="stAlertContentError"]').count() == 0


def test_the_replay_pages_log_tab_draws_the_logs_charts_in_place_of_the_checkpoints(
    browser: Any, replay_url: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(replay_url + "replay?buffer=advanced")
        settle(tab)
        charts_drawn(tab, REPLAY_CHARTS["advanced"])
        tab.get_by_role("tab", name="From the log").click()
        tab.wait_for_url(re.compile(r"rp_part=From\+the\+log"))
        settle(tab)
        assert charts_drawn(tab, LOG_CHARTS) == LOG_CHARTS
        # Nothing of the checkpoint's part is drawn, not even hidden in its closed tab.
        assert tab.get_by_role("button", name="Resample").count() == 0
        assert tab.get_by_text("Priorities and importance weights", exact=True).count() == 0
        screenshot(tab, "replay-log-tab")
        assert tab.locator(EXCEPTION).count() == 0


def test_an_episode_buffers_replay_page_shows_its_counters_and_draws_no_chart(
    browser: Any, replay_url: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(replay_url + "replay?buffer=episode")
        settle(tab)
        assert "Refused samples" in tab.inner_text("body")
        assert tab.locator('[data-testid="stVegaLiteChart"]').count() == 0
        assert tab.locator(EXCEPTION).count() == 0


def test_resample_on_the_replay_page_puts_the_next_seed_in_the_link(
    browser: Any, replay_url: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(replay_url + "replay?buffer=windows&rp_seed=2")
        settle(tab)
        tab.get_by_role("button", name="Resample").click()
        tab.wait_for_url(re.compile(r"rp_seed=3"))
        settle(tab)
        assert tab.locator(EXCEPTION).count() == 0
        assert "Seed 3:" in tab.inner_text("body")
        screenshot(tab, "replay-windows-resampled")


def test_resample_on_the_replay_page_reruns_the_checkpoint_part_alone(
    browser: Any, replay_url: str
) -> None:
    with fresh_tab(browser) as tab:
        frames = received_frames(tab)
        tab.goto(replay_url + "replay?buffer=windows&rp_seed=2")
        settle(tab)
        assert b"buffer replays what it holds" in b"".join(frames)  # the page's caption
        frames.clear()
        tab.get_by_role("button", name="Resample").click()
        tab.wait_for_url(re.compile(r"rp_seed=3"))
        settle(tab)
        sent = b"".join(frames)
        assert b"Seed 3:" in sent
        assert b"Priority distribution" in sent  # the checkpoint's charts, redrawn
        assert b"buffer replays what it holds" not in sent  # the rest of the page, left as it was
        assert charts_drawn(tab, REPLAY_CHARTS["windows"]) == REPLAY_CHARTS["windows"]
        assert tab.locator(EXCEPTION).count() == 0


def test_a_replay_tab_switch_takes_the_closed_tabs_controls_out_of_the_link_and_back(
    browser: Any, replay_url: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(replay_url + "replay?buffer=windows&rp_seed=2")
        settle(tab)
        tab.get_by_role("button", name="Resample").click()
        tab.wait_for_url(re.compile(r"rp_seed=3"))
        settle(tab)
        tab.get_by_role("tab", name="From the log").click()
        tab.wait_for_url(re.compile(r"rp_part="))
        settle(tab)
        assert "rp_seed" not in tab.url  # the closed tab's controls leave the link
        tab.get_by_role("tab", name="From the checkpoint").click()
        tab.wait_for_url(re.compile(r"rp_seed=3"))
        settle(tab)
        assert "Seed 3:" in tab.inner_text("body")
        assert "rp_part" not in tab.url  # the default tab: a link without it opens there
        assert tab.locator(EXCEPTION).count() == 0


@pytest.fixture(scope="module")
def rlinf_url(chromium_path: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard on an RLinf buffer directory written by bufcore's TrajectoryReplayBuffer."""
    path = tmp_path_factory.mktemp("browser-rlinf") / "rlinf"
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(path))
    generator = torch.Generator().manual_seed(0)
    rb.add_trajectories([
        Trajectory(model_weights_id=f"step_{i // 10}", rewards=torch.randn(16, 4),
                   dones=torch.rand(17, 4, generator=generator) < 0.1,
                   curr_obs={"state": torch.randn(16, 4, 3)})
        for i in range(40)
    ])
    rb.close()
    with serve(path) as url:
        yield url


# The RLinf views: what each page shows of an RLinf directory.
RLINF_SHOWS = {
    "": "Healthy",
    "trajectories": "Reading 20 of 40 trajectory files",
    "sampling_lab": "Seed 0: 256 rows",
    "fifo": "Trajectories indexed",
}


# Charts of the RLinf views: FIFO's id strip and window history; the samples per trajectory
# and the episodes inside those read; where the batch landed.
RLINF_CHARTS = {"fifo": 2, "trajectories": 3, "sampling_lab": 1}


@pytest.mark.parametrize("path", list(RLINF_SHOWS), ids=lambda p: p or "overview")
def test_every_rlinf_view_opens_an_rlinf_directory(
    browser: Any, rlinf_url: str, path: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(rlinf_url + path)
        settle(tab)
        screenshot(tab, f"rlinf-{path or 'overview'}")
        assert tab.locator(EXCEPTION).count() == 0
        assert tab.locator('[data-testid="stAlertContentError"]').count() == 0
        text = tab.locator('[data-testid="stMain"]').inner_text()
        assert RLINF_SHOWS[path] in text.replace("\n", " ")
        if path in RLINF_CHARTS:  # all drawn by Vega-Lite
            tab.wait_for_function(VEGA_DRAWN)
            assert tab.locator('[data-testid="stVegaLiteChart"]').count() == RLINF_CHARTS[path]
            assert tab.locator('[data-testid="stPlotlyChart"]').count() == 0


def test_resample_on_an_rlinf_directory_puts_the_next_seed_in_the_link(
    browser: Any, rlinf_url: str
) -> None:
    with fresh_tab(browser) as tab:
        tab.goto(rlinf_url + "sampling_lab?lab_seed=2")
        settle(tab)
        tab.get_by_role("button", name="Resample").click()
        tab.wait_for_url(re.compile(r"lab_seed=3"))
        settle(tab)
        assert tab.locator(EXCEPTION).count() == 0
        assert "manual_seed(3)" in shown_snippet(tab)

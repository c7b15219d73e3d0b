"""Issue 19's user-visible items, each checked in a real browser as a user meets it: what the
main area says, which warnings and errors are drawn, what the link holds.

Read-only checks use the session's demo run (``dashboard_url``). Checks that need damaged or
changed files, or that write (Curriculum's Save), use private copies of the demo run, built
once for this module under one root and served by one dashboard of their own; each page
picks its copy with the ``run`` query parameter.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from bufcore.runs.demo import run_demo
from tests.app.test_moments import rerun_stopped_early
from tests.app.test_overview_page import flip_a_row_byte, set_target
from tests.browser.conftest import BFM_ZERO, serve
from tests.browser.test_pages import EXCEPTION, VEGA_DRAWN, screenshot, settle, shown_snippet
from tests.support import TINY_DEMO

pytestmark = pytest.mark.slow

MAIN = '[data-testid="stMain"]'
ERROR = '[data-testid="stAlertContentError"]'
WARNING = '[data-testid="stAlertContentWarning"]'
INFO = '[data-testid="stAlertContentInfo"]'
CHART = '[data-testid="stVegaLiteChart"]'


def main_text(page: Any) -> str:
    """The main area's text on one line (Markdown's code spans and bold lose their marks)."""
    return " ".join(str(page.locator(MAIN).inner_text()).split())


def texts(page: Any, selector: str) -> list[str]:
    return [" ".join(str(e.inner_text()).split()) for e in page.locator(selector).all()]


def metric(page: Any, label: str) -> Any:
    """The metric whose label is ``label`` (its value is the text after the label)."""
    return page.locator('[data-testid="stMetric"]').filter(
        has=page.locator('[data-testid="stMetricLabel"]').get_by_text(label, exact=True))


def opened(page: Any, url: str) -> None:
    page.goto(url)
    settle(page)
    assert page.locator(EXCEPTION).count() == 0


# ------------------------------------------------------------ private copies, one dashboard
@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root of damaged or changed copies of the tiny demo run (and a BFM-Zero work
    directory), each under its own name."""
    root = tmp_path_factory.mktemp("browser-user-checks") / "user_checks"
    root.mkdir()
    demo = root / "intact"
    run_demo(demo, TINY_DEMO)
    for name in ("hostile", "unusable", "torn", "rerun", "restarted", "save"):
        shutil.copytree(demo, root / name)
    # A checkpoint naming an unknown __target__, and rows that fail verification.
    set_target(root / "hostile" / "checkpoint" / "buffers" / "z", "os.system")
    flip_a_row_byte(root / "hostile" / "checkpoint" / "buffers" / "train")
    for name in ("train", "expert", "z"):
        set_target(root / "unusable" / "checkpoint" / "buffers" / name, "os.system")
    # A writer that died mid-line: the last line torn, no newline after it.
    with open(root / "torn" / "metrics.jsonl", "a") as log:
        log.write('{"step": 9999, "kind": "buff')
    # A new run's log, stopped early, beside the old run's checkpoint.
    rerun_stopped_early(root / "rerun")
    # The same log restarted: a second `run` record, then steps from 10 again.
    records = [json.loads(line) for line in
               (root / "restarted" / "metrics.jsonl").read_text().splitlines()]
    later = max(r["time"] for r in records) + 60
    with open(root / "restarted" / "metrics.jsonl", "a") as log:
        for record in ({**records[0], "time": later}, {"step": 10, "time": later + 1,
                                                       "kind": "train"}):
            log.write(json.dumps(record) + "\n")
    # A ring that wrapped and stands mid-way (cursor 10 of 30): both sides of the cursor.
    run_demo(root / "mid_ring", replace(TINY_DEMO, steps=70))
    # BFM-Zero's layout (train buffer only, no log) with an expert buffer beside it.
    shutil.copytree(BFM_ZERO, root / "bfm_expert")
    shutil.copytree(demo / "checkpoint" / "buffers" / "expert",
                    root / "bfm_expert" / "checkpoint" / "buffers" / "expert")
    return root


@pytest.fixture(scope="module")
def private_url(chromium_path: Path, runs: Path) -> Iterator[str]:
    """The dashboard rooted at :func:`runs`; ``?run=<name>`` picks a copy."""
    with serve(runs) as url:
        yield url


# --------------------------------------------------------------------- a refused typed path
@pytest.mark.parametrize("path", ["fifo?buffer=train", "compare"])
def test_a_refused_typed_path_replaces_the_previous_run_in_the_main_area(
    page: Any, dashboard_url: str, path: str
) -> None:
    opened(page, dashboard_url + path)
    page.locator(CHART).first.wait_for()
    box = page.get_by_role("textbox", name="Open a path")
    box.fill("/etc")
    box.press("Enter")
    page.wait_for_url(re.compile(r"open_path=%2Fetc"))
    page.locator(MAIN).locator(ERROR).first.wait_for()
    settle(page)
    screenshot(page, "user-refused-" + path.split("?")[0])
    assert page.locator(EXCEPTION).count() == 0
    said = texts(page, f"{MAIN} {ERROR}")
    assert any(e.startswith("Not opened: /etc: outside the dashboard's roots") for e in said)
    assert page.locator(CHART).count() == 0  # nothing of the run shown before
    assert parse_qs(urlparse(page.url).query)["open_path"] == ["/etc"]


def test_a_path_typed_on_compare_becomes_a_against_the_rest_of_its_run(
    page: Any, dashboard_url: str
) -> None:
    opened(page, dashboard_url + "compare")
    box = page.get_by_role("textbox", name="Open a path")
    box.fill("checkpoints/step-000030")
    box.press("Enter")
    page.wait_for_url(re.compile(r"open_path=checkpoints"))
    side_a = page.locator('[data-testid="stSelectbox"]').filter(has_text="A: run or checkpoint")
    side_b = page.locator('[data-testid="stSelectbox"]').filter(has_text="B: run or checkpoint")
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=\"stSelectbox\"] input')]"
        ".some(e => e.value === 'demo/checkpoints/step-000030')")
    settle(page)
    assert side_a.locator("input").input_value() == "demo/checkpoints/step-000030"
    assert side_b.locator("input").input_value() == "demo"
    assert page.locator(EXCEPTION).count() == 0 and page.locator(ERROR).count() == 0
    assert "A and B are the same" not in main_text(page)


# -------------------------------------------------------------------- Overview: health check
def test_the_overview_names_an_unknown_target_and_rows_that_fail_verification(
    page: Any, private_url: str
) -> None:
    opened(page, private_url + "?run=hostile")
    page.locator(ERROR).nth(1).wait_for()
    screenshot(page, "user-overview-hostile")
    errors = texts(page, f"{MAIN} {ERROR}")
    unknown = [e for e in errors if e.startswith("Buffer z cannot be used")]
    damaged = [e for e in errors if e.startswith("Buffer train is damaged")]
    # `__target__` as written, not Markdown's bold "target" (app.text.literal escapes it).
    assert len(unknown) == 1
    assert "unknown __target__ 'os.system'; known targets: bufcore." in unknown[0]
    assert len(damaged) == 1 and "buffer.hdf5: sha256 of block 0" in damaged[0]
    assert "Healthy" not in main_text(page)


def test_a_page_left_without_a_usable_buffer_says_why_each_is_unusable(
    page: Any, private_url: str
) -> None:
    opened(page, private_url + "fifo?run=unusable")
    page.locator(INFO).filter(has_text="This needs a").wait_for()
    errors = texts(page, f"{MAIN} {ERROR}")
    unusable = [e for e in errors if "is unusable" in e]
    assert {e.split()[1] for e in unusable} == {"train", "expert", "z"}
    assert all("unknown __target__ 'os.system'; known targets" in e for e in unusable)
    assert "no readable checkpoint here" not in main_text(page)
    assert page.locator(CHART).count() == 0


def test_a_torn_last_log_line_is_listed_as_skipped_on_the_overview(
    page: Any, private_url: str
) -> None:
    opened(page, private_url + "?run=torn")
    skipped = page.locator('[data-testid="stExpander"]').filter(has_text="1 log lines skipped")
    skipped.wait_for()
    skipped.locator("summary").click()
    why = skipped.locator('[data-testid="stText"]')
    why.wait_for()
    assert "torn: the last line has no newline" in why.inner_text()
    assert page.locator(ERROR).count() == 0


# ------------------------------------------------------------------- which moment is shown
def test_the_overview_shows_the_step_and_time_of_the_checkpoint_and_the_log(
    page: Any, dashboard_url: str
) -> None:
    opened(page, dashboard_url)
    page.locator('[data-testid="stCaptionContainer"]').filter(
        has_text="Log: last record step").wait_for()
    text = main_text(page)
    assert re.search(r"Checkpoint: step 60, written \S", text), text
    assert "Log: last record step 60" in text
    assert page.locator(WARNING).count() == 0


@pytest.mark.parametrize(("run", "says"), [
    ("rerun", ("different runs", "older than the log")),
    ("restarted", ("restarted",)),
])
def test_the_overview_warns_when_log_and_checkpoint_are_not_one_run(
    page: Any, private_url: str, run: str, says: tuple[str, ...]
) -> None:
    opened(page, private_url + f"?run={run}")
    page.locator(WARNING).first.wait_for()
    screenshot(page, f"user-overview-{run}")
    warnings = texts(page, f"{MAIN} {WARNING}")
    assert any(all(part in w for part in says) for w in warnings), warnings


# ----------------------------------------------------------------------------------- Live
def test_live_says_the_finished_demo_run_has_finished_at_step_n_of_n(
    page: Any, dashboard_url: str
) -> None:
    opened(page, dashboard_url + "live")
    page.get_by_text("Step 60 of 60 (100%)").wait_for()
    text = main_text(page)
    assert "Finished: the run logged its end" in text
    assert "none: finished" in metric(page, "Time left").inner_text()
    assert "Stalled" not in text and "Running:" not in text


# ---------------------------------------------------------------------------- Sampling lab
def test_the_sampling_lab_names_its_path_and_counts_batches_and_windows(
    page: Any, dashboard_url: str, browser_run: Path
) -> None:
    opened(page, dashboard_url + "sampling_lab?buffer=train&lab_draws=20&lab_batch=64"
           "&lab_seq=8")
    train = browser_run / "checkpoint" / "buffers" / "train"
    page.get_by_text("Sampling from").wait_for()
    assert f"Sampling from {train} (" in main_text(page)
    box = page.get_by_role("spinbutton", name="Batches to draw")
    assert box.input_value() == "20"
    assert page.locator('[data-testid="stWidgetLabel"]').get_by_text(
        "Batches to draw", exact=True).is_visible()
    page.get_by_role("button", name="Draw 20 batches").click()
    metric(page, "Windows drawn").wait_for()
    settle(page)
    screenshot(page, "user-sampling-lab-draw-n")
    assert metric(page, "Batches drawn").locator('[data-testid="stMetricValue"]').inner_text() \
        == "20"
    assert metric(page, "Windows drawn").locator('[data-testid="stMetricValue"]').inner_text() \
        == "160"  # 20 batches x 8 windows of 8 rows
    labels = texts(page, '[data-testid="stMetricLabel"]')
    assert "Trajectories" in labels
    assert not [label for label in labels if label.startswith("Draws")]
    assert "Trajectorys" not in main_text(page)


def test_a_sampling_lab_link_made_on_another_checkpoint_warns(
    page: Any, dashboard_url: str
) -> None:
    opened(page, dashboard_url + "sampling_lab?buffer=expert&lab_pin=" + "0" * 16)
    page.locator(WARNING).first.wait_for()
    assert any("This link was made on another checkpoint" in w
               for w in texts(page, f"{MAIN} {WARNING}"))


# ---------------------------------------------------------------------------------- TD-EMA
def test_the_td_ema_preview_matches_what_training_clipped_at_the_runs_settings(
    page: Any, dashboard_url: str
) -> None:
    opened(page, dashboard_url + "td_ema")
    metric(page, "Clipped at max (logged)").wait_for()
    assert "from the logged distribution" in main_text(page)
    for bound in ("min", "max"):
        shown = {kind: metric(page, f"Clipped at {bound} ({kind})").locator(
            '[data-testid="stMetricValue"]').inner_text() for kind in ("preview", "logged")}
        preview, logged = (float(shown[k].rstrip("%")) for k in ("preview", "logged"))
        assert abs(preview - logged) < 0.5, shown


# ------------------------------------------------------------------------------------ FIFO
def test_fifo_names_the_end_flag_and_shows_the_fill_without_a_delta_arrow(
    page: Any, dashboard_url: str
) -> None:
    opened(page, dashboard_url + "fifo?buffer=train")
    page.locator(CHART).nth(3).wait_for()  # the page is drawn to its end
    headers = texts(page, f'{MAIN} [data-testid="stHeadingWithActionElements"]')
    assert "Episode ends (the truncated flag)" in headers
    assert not [h for h in headers if "boundaries" in h.lower()]
    filled = metric(page, "Filled (100%)")
    assert filled.locator('[data-testid="stMetricValue"]').inner_text() == "30"
    assert page.locator('[data-testid="stMetricDelta"]').count() == 0


def test_fifo_draws_the_episode_map_of_a_ring_that_wrapped_at_its_cursor(
    page: Any, private_url: str
) -> None:
    # Charts draw on a canvas, so where the labels sit either side of the cursor is pinned on
    # the spec (tests/app/test_ring_figures.py); this screenshot is for a person to look at.
    opened(page, private_url + "fifo?run=mid_ring&buffer=train")
    page.locator(CHART).nth(3).wait_for()
    page.wait_for_function(VEGA_DRAWN)
    assert metric(page, "Cursor (next write)").locator(
        '[data-testid="stMetricValue"]').inner_text() == "10"
    ends = page.locator(CHART).nth(2)  # ring, slot age, episode ends, occupancy
    ends.scroll_into_view_if_needed()
    screenshot(page, "user-fifo-mid-ring")
    assert ends.locator("canvas").count() == 1


# ------------------------------------------------------------------------------ Curriculum
def test_saving_twice_with_the_same_knobs_says_the_second_would_duplicate(
    page: Any, private_url: str, runs: Path
) -> None:
    opened(page, private_url + "curriculum?run=save&cur_mode=lin")
    save = page.get_by_role("button", name="Save as new checkpoint")
    save.click()
    page.get_by_text("Saved a new expert checkpoint").wait_for()
    settle(page)
    save.click()
    not_saved = page.locator(INFO).filter(has_text="Not saved")
    not_saved.wait_for()
    settle(page)
    screenshot(page, "user-curriculum-saved-twice")
    said = " ".join(not_saved.inner_text().split())
    assert "expert-lin-1 already holds these rows" in said and "Nothing was written" in said
    assert sorted(p.name for p in (runs / "save" / "reprioritized").iterdir()) == [
        "expert-lin-1"]
    assert page.locator(ERROR).count() == 0


def test_apply_on_the_curriculum_page_turns_the_priorities_on_in_the_lab(
    page: Any, dashboard_url: str
) -> None:
    opened(page, dashboard_url + "curriculum?cur_mode=lin")
    page.get_by_role("button", name="Apply to session copy").click()
    page.get_by_text("Applied: the Sampling lab now samples").wait_for()
    settle(page)
    # Through the sidebar, as a user goes: the same session, so the same copy.
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Sampling lab").click()
    toggle = page.get_by_role(
        "switch", name="Sample with this session's re-prioritized priorities")
    toggle.wait_for()
    settle(page)
    assert toggle.is_checked()
    assert "re-prioritized priorities" in shown_snippet(page)


# ------------------------------------------------------------------------ BFM-Zero, no log
def test_a_bfm_zero_run_with_an_expert_buffer_draws_its_curriculum_without_a_log(
    page: Any, private_url: str
) -> None:
    opened(page, private_url + "curriculum?run=bfm_expert")
    page.locator(CHART).first.wait_for()
    page.wait_for_function(VEGA_DRAWN)
    screenshot(page, "user-bfm-zero-curriculum")
    assert "Priorities saved in the expert buffer expert" in texts(
        page, f'{MAIN} [data-testid="stHeadingWithActionElements"]')
    assert page.locator(CHART).count() == 1
    assert page.locator(ERROR).count() == 0


@pytest.mark.parametrize(("path", "needs"), [
    ("td_ema", "This needs train records with TD statistics"),
    ("live", "This needs a metrics.jsonl to follow"),
])
def test_a_bfm_zero_page_says_what_the_run_lacks_instead_of_an_empty_chart(
    page: Any, private_url: str, path: str, needs: str
) -> None:
    opened(page, private_url + f"{path}?run=bfm_expert")
    page.locator(INFO).filter(has_text=needs).wait_for()
    said = [i for i in texts(page, f"{MAIN} {INFO}") if needs in i]
    assert len(said) == 1 and "no metrics.jsonl" in said[0]
    assert page.locator(CHART).count() == 0
    assert page.locator(ERROR).count() == 0

"""The Live page: it follows a run's log across reruns, and says what it cannot follow."""

from __future__ import annotations

import json
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bufcore import RunLogger
from tests.app.conftest import Dashboard


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.info, *at.error, *at.warning])


def test_live_shows_the_demo_run_up_to_its_last_step(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("live", demo_run)
    assert not at.exception
    assert at.title[0].value == "Live"
    last = max(int(line.split(b'"step": ')[1].split(b",")[0])
               for line in (demo_run / "metrics.jsonl").read_bytes().splitlines())
    assert progress(at) == f"Step {last:,} of {last:,} (100%)"
    assert not at.get("plotly_chart")
    titles = [json.loads(chart.proto.spec)["title"]["text"] for chart in at.get("vega_lite_chart")]
    assert titles == ["Buffer occupancy", "TD error: running EMA vs each batch",
                      f"Evaluation round {last_round(demo_run)} at step {last:,}".replace(",", "")]


def last_round(run: Path) -> int:
    rounds = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return int([r for r in rounds if r["kind"] == "eval"][-1]["round"])


def test_live_redraws_its_charts_with_the_same_spec_and_new_data(
    dashboard: Dashboard, run_copy: Path
) -> None:
    # Streamlit swaps the data of a chart whose spec is unchanged, in place: no blank frame.
    at = dashboard("live", run_copy)
    before = [chart.proto for chart in at.get("vega_lite_chart")[:2]]
    with RunLogger(run_copy, fresh=False) as logger:
        logger.log("buffer", 10**6, {"train": {"len": 1, "capacity": 2}})
        logger.log("train", 10**6 + 1, {"td/ema_mean": 0.5, "td/ema_std": 1.0,
                                         "td/batch_mean": 0.4, "td/batch_std": 0.9})
    at.run()
    after = [chart.proto for chart in at.get("vega_lite_chart")[:2]]
    assert [p.spec for p in after] == [p.spec for p in before]
    assert [p.datasets for p in after] != [p.datasets for p in before]


def test_live_picks_up_records_appended_between_reruns(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("live", run_copy)
    held = int(metric(at, "Records held").replace(",", ""))
    with RunLogger(run_copy, fresh=False) as logger:
        logger.log("buffer", 10**6, {"train": {"len": 1, "capacity": 2}})
        logger.log("train", 10**6 + 1, {"td/ema_mean": 0.5})
    at.run()
    assert not at.exception
    assert progress(at).startswith(f"Step {10**6 + 1:,} of ")
    assert metric(at, "New this refresh") == "2"
    assert metric(at, "Records held") == f"{held + 2:,}"


def test_live_starts_over_when_a_new_run_replaces_the_log(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("live", run_copy)
    with RunLogger(run_copy, fresh=True) as logger:
        logger.log("run", 0, {"writer": "test"})
    at.run()
    assert not at.exception
    assert "was replaced (a new run started)" in texts(at)
    assert metric(at, "Records held") == "1"


def test_live_restores_its_controls_from_the_query_parameters(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("live", demo_run, query={"live_on": "false", "live_every": "7"})
    assert not at.exception
    assert at.toggle(key="live_on").value is False
    assert at.slider(key="live_every").value == 7
    assert [b.label for b in at.button] == ["Refresh now"]


def test_live_on_a_buffer_checkpoint_says_it_has_no_log(
    dashboard: Dashboard, demo_run: Path
) -> None:
    buffer = demo_run / "checkpoint" / "buffers" / "z"
    at = dashboard("live", buffer)
    assert not at.exception
    assert f"{buffer}: a single buffer checkpoint has no metrics log" in texts(at)


def test_live_on_an_empty_log_says_no_records_yet(dashboard: Dashboard, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b"")
    at = dashboard("live", run)
    assert not at.exception
    assert f"{run / 'metrics.jsonl'}: no records yet" in texts(at)


def test_live_on_a_log_with_torn_lines_lists_them_as_skipped(
    dashboard: Dashboard, run_copy: Path
) -> None:
    with open(run_copy / "metrics.jsonl", "ab") as file:
        file.write(b'{"step": 1, "ti\n')
    with RunLogger(run_copy, fresh=False) as logger:
        logger.log("train", 10**6, {"td/ema_mean": 0.5})
    at = dashboard("live", run_copy)
    assert not at.exception
    assert progress(at).startswith(f"Step {10**6:,} of ")
    assert at.expander[0].label == "1 log lines skipped"


def successes(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in at.success)


def progress(at: AppTest) -> str:
    return str(at.get("progress")[0].proto.text)


def test_live_says_a_finished_run_has_finished(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("live", demo_run)
    assert "**Finished**: the run logged its end" in successes(at)
    assert metric(at, "Time left") == "none: finished"


def test_live_shows_a_running_run_as_step_x_of_its_plan_with_the_time_left(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    # A record every 4 s, the last one a second ago: stalled only after 5 x 4 s of silence.
    clock = [time.time() - 45.0]

    def tick() -> float:
        clock[0] += 4.0
        return clock[0]

    with RunLogger(tmp_path / "run", clock=tick) as logger:
        logger.log("run", 0, {"total_steps": 400})
        for step in range(10, 110, 10):
            logger.log("train", step, {"loss": 1.0})
    at = dashboard("live", tmp_path / "run")
    assert not at.exception
    assert "**Running**" in successes(at)
    assert progress(at) == "Step 100 of 400 (25%)"
    # 100 steps in 40 s over the records: 300 steps to go at 2.5 steps/s.
    assert metric(at, "Time left") == "2 min"


def test_live_says_a_run_that_went_silent_has_stalled(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    with RunLogger(tmp_path / "run", clock=lambda: time.time() - 3600) as logger:
        logger.log("run", 0, {"total_steps": 400})
        logger.log("train", 10, {"loss": 1.0})
    at = dashboard("live", tmp_path / "run")
    assert not at.exception
    assert not at.success
    assert any("**Stalled**: no record for 60 min" in w.value for w in at.warning)


def test_live_says_when_a_run_logged_no_plan(dashboard: Dashboard, tmp_path: Path) -> None:
    with RunLogger(tmp_path / "run") as logger:
        logger.log("train", 10, {"loss": 1.0})
    at = dashboard("live", tmp_path / "run")
    assert not at.exception
    assert not at.get("progress")
    assert any("Step 10; the run logged no plan" in c.value for c in at.caption)

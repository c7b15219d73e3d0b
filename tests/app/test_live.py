"""app.live without Streamlit: the log tail (appends, torn lines, restarts, the bound) and the
Live page's series and the evaluation round it draws (its figures: test_live_figures.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.live import (
    FINISHED,
    RUNNING,
    STALLED,
    LiveTail,
    age_text,
    eval_round,
    metrics_path,
    occupancy,
    run_status,
    td_series,
)
from app.ring import occupancy as ring_occupancy
from bufcore import RunLogger
from bufcore.inspect import BUFFER_CHECKPOINT, RUN_DIRECTORY


def log(run: Path, steps: range, *, fresh: bool = False, kind: str = "train") -> None:
    with RunLogger(run, fresh=fresh) as logger:
        for step in steps:
            logger.log(kind, step, {"loss": step / 2})


def steps(records: list[dict[str, object]]) -> list[object]:
    return [record["step"] for record in records]


def test_a_first_poll_reads_every_record_and_ends_at_the_file_size(tmp_path: Path) -> None:
    log(tmp_path, range(5), fresh=True)
    tail = LiveTail(tmp_path / "metrics.jsonl")
    assert steps(tail.poll()) == [0, 1, 2, 3, 4]
    assert tail.offset == os.path.getsize(tmp_path / "metrics.jsonl")
    assert not tail.restarted


def test_a_poll_after_an_append_returns_only_the_appended_records(tmp_path: Path) -> None:
    log(tmp_path, range(3), fresh=True)
    tail = LiveTail(tmp_path / "metrics.jsonl")
    tail.poll()
    log(tmp_path, range(3, 6))
    assert steps(tail.poll()) == [3, 4, 5]
    assert steps(tail.records) == [0, 1, 2, 3, 4, 5]


def test_a_poll_with_nothing_appended_returns_nothing_and_keeps_the_records(
    tmp_path: Path,
) -> None:
    log(tmp_path, range(3), fresh=True)
    tail = LiveTail(tmp_path / "metrics.jsonl")
    tail.poll()
    assert tail.poll() == []
    assert steps(tail.records) == [0, 1, 2]


def test_a_last_line_its_logger_is_still_writing_waits_until_its_newline_arrives(
    tmp_path: Path,
) -> None:
    log(tmp_path, range(2), fresh=True)
    line = json.dumps({"step": 2, "time": 1.0, "kind": "train", "loss": 1.0}).encode() + b"\n"
    path = tmp_path / "metrics.jsonl"
    with RunLogger(tmp_path, fresh=False):  # the run is live: its line is caught half copied
        with open(path, "ab") as file:
            file.write(line[:10])
        tail = LiveTail(path)
        assert steps(tail.poll()) == [0, 1]
        with open(path, "ab") as file:
            file.write(line[10:])
        assert steps(tail.poll()) == [2]
    assert tail.problems == []


@pytest.mark.parametrize("polls", [1, 2, 5])
def test_a_torn_last_line_is_listed_once_however_often_the_tail_polls(
    tmp_path: Path, polls: int
) -> None:
    log(tmp_path, range(2), fresh=True)
    path = tmp_path / "metrics.jsonl"
    with open(path, "ab") as file:
        file.write(b'{"step": 2, "ti')  # its writer was killed mid-line
    tail = LiveTail(path)
    for _ in range(polls):
        tail.poll()
    assert steps(tail.records) == [0, 1]
    assert len(tail.problems) == 1
    assert "torn" in tail.problems[0]


def test_an_invalid_complete_line_is_skipped_and_named_in_problems(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    log(tmp_path, range(1), fresh=True)
    with open(path, "ab") as file:
        file.write(b"not json\n")
    log(tmp_path, range(1, 2))
    tail = LiveTail(path)
    assert steps(tail.poll()) == [0, 1]
    assert len(tail.problems) == 1
    assert str(path) in tail.problems[0]


@pytest.mark.parametrize("new_steps", [1, 2, 5, 40], ids=lambda n: f"new run of {n}")
def test_a_replaced_log_drops_what_was_held_and_reads_the_new_run(
    tmp_path: Path, new_steps: int
) -> None:
    # 40 lines make the new file longer than the old offset: only its inode tells.
    log(tmp_path, range(100, 105), fresh=True)
    tail = LiveTail(tmp_path / "metrics.jsonl")
    tail.poll()
    log(tmp_path, range(new_steps), fresh=True)
    assert steps(tail.poll()) == list(range(new_steps))
    assert tail.restarted
    assert steps(tail.records) == list(range(new_steps))
    assert tail.total == new_steps


def test_the_restarted_flag_clears_on_the_next_poll(tmp_path: Path) -> None:
    log(tmp_path, range(5), fresh=True)
    tail = LiveTail(tmp_path / "metrics.jsonl")
    tail.poll()
    log(tmp_path, range(2), fresh=True)
    tail.poll()
    assert not (tail.poll(), tail.restarted)[1]


def test_a_removed_log_drops_the_records_held(tmp_path: Path) -> None:
    log(tmp_path, range(3), fresh=True)
    tail = LiveTail(tmp_path / "metrics.jsonl")
    tail.poll()
    (tmp_path / "metrics.jsonl").unlink()
    assert tail.poll() == []
    assert (tail.restarted, tail.records, tail.offset) == (True, [], 0)


def test_a_log_not_yet_created_reads_empty_then_its_records_once_written(
    tmp_path: Path,
) -> None:
    tail = LiveTail(tmp_path / "metrics.jsonl")
    assert (tail.poll(), tail.restarted) == ([], False)
    log(tmp_path, range(2), fresh=True)
    assert steps(tail.poll()) == [0, 1]


@pytest.mark.parametrize("bound", [1, 2, 3, 7])
def test_only_the_most_recent_records_are_held(tmp_path: Path, bound: int) -> None:
    log(tmp_path, range(10), fresh=True)
    tail = LiveTail(tmp_path / "metrics.jsonl", max_records=bound)
    tail.poll()
    log(tmp_path, range(10, 12))
    tail.poll()
    assert steps(tail.records) == list(range(12 - bound, 12))
    assert tail.total == 12


def test_the_latest_record_of_a_kind_survives_falling_out_of_the_bound(tmp_path: Path) -> None:
    log(tmp_path, range(1), fresh=True, kind="eval")
    log(tmp_path, range(1, 5))
    tail = LiveTail(tmp_path / "metrics.jsonl", max_records=2)
    tail.poll()
    latest = tail.latest("eval")
    assert latest is not None and latest["step"] == 0
    assert tail.of_kind("eval") == []


@pytest.mark.parametrize("bound", [0, -1, True, 2.0])
def test_a_bound_that_is_not_a_positive_int_is_refused(tmp_path: Path, bound: object) -> None:
    with pytest.raises(ValueError, match="max_records"):
        LiveTail(tmp_path / "metrics.jsonl", max_records=bound)  # type: ignore[arg-type]


def test_a_path_that_is_not_a_path_is_refused() -> None:
    with pytest.raises(TypeError, match="path"):
        LiveTail(3)  # type: ignore[arg-type]


def test_a_directory_in_place_of_the_log_raises_value_error(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").mkdir()
    with pytest.raises(ValueError, match=r"metrics\.jsonl"):
        LiveTail(tmp_path / "metrics.jsonl").poll()


def test_a_buffer_checkpoint_has_no_log_and_a_run_has_one(tmp_path: Path) -> None:
    assert metrics_path(tmp_path, BUFFER_CHECKPOINT) is None
    assert metrics_path(tmp_path, RUN_DIRECTORY) == tmp_path / "metrics.jsonl"


def buffer_record(step: int, length: int, capacity: int) -> dict[str, object]:
    return {"step": step, "time": 0.0, "kind": "buffer",
            "train": {"len": length, "capacity": capacity}, "note": "x"}


@pytest.mark.parametrize("capacity", [1, 2, 3, 1000])
def test_occupancy_is_the_percentage_of_capacity_per_buffer(capacity: int) -> None:
    records = [buffer_record(s, min(s, capacity), capacity) for s in (1, 2, 3)]
    (series,) = occupancy([*records, {"step": 9, "time": 0.0, "kind": "train"}])
    assert series.name == "train"
    np.testing.assert_allclose(series.y, [100 * min(s, capacity) / capacity for s in (1, 2, 3)])
    np.testing.assert_array_equal(series.x, [1, 2, 3])


def test_occupancy_ignores_a_buffer_without_capacity() -> None:
    record = {"step": 1, "time": 0.0, "kind": "buffer", "z": {"len": 3, "capacity": 0}}
    assert occupancy([record]) == []


@pytest.mark.parametrize(
    "stats",
    [
        {"len": 3, "capacity": -4},
        {"len": float("inf"), "capacity": 4},
        {"len": float("nan"), "capacity": 4},
        {"len": 3, "capacity": float("inf")},
        {"len": True, "capacity": 4},
    ],
    ids=["negative capacity", "infinite len", "nan len", "infinite capacity", "bool len"],
)
def test_live_occupancy_skips_the_entries_the_fifo_page_skips(stats: dict[str, object]) -> None:
    # Both pages chart one buffer's fill from the same records: they must count the same ones.
    good = buffer_record(1, 2, 4)
    bad = {"step": 2, "time": 0.0, "kind": "buffer", "train": stats}
    (series,) = occupancy([good, bad])
    fifo = ring_occupancy([good, bad], "train")
    np.testing.assert_array_equal(series.x, fifo.step)
    np.testing.assert_allclose(series.y, 100 * fifo.fill)
    np.testing.assert_array_equal(series.x, [1])


def test_td_series_takes_the_ema_fields_of_train_records_and_skips_missing_values() -> None:
    records = [
        {"step": 4, "time": 0.0, "kind": "train", "td/ema_mean": 1.0, "td/ema_std": 0.5},
        {"step": 8, "time": 0.0, "kind": "train", "td/ema_mean": None, "td/ema_std": 0.4},
        {"step": 9, "time": 0.0, "kind": "eval", "td/ema_mean": 7.0},
    ]
    series = td_series(records)
    assert sorted(series) == ["td/ema_mean", "td/ema_std"]
    np.testing.assert_array_equal(series["td/ema_mean"].x, [4])
    np.testing.assert_array_equal(series["td/ema_std"].y, [0.5, 0.4])


@pytest.mark.parametrize("motions", [1, 2, 5])
def test_an_eval_round_holds_each_motions_emd_and_probability(motions: int) -> None:
    record = {"step": 300, "round": 2, "kind": "eval", "motion_ids": list(range(motions)),
              "emd": [float(m) for m in range(motions)], "probability": [1 / motions] * motions}
    evaluation = eval_round(record)
    assert (evaluation.round, evaluation.step) == (2, 300)
    assert evaluation.motions == [str(m) for m in range(motions)]
    np.testing.assert_array_equal(evaluation.emd, list(range(motions)))
    assert evaluation.probability is not None and len(evaluation.probability) == motions


def test_an_eval_round_reads_a_null_emd_as_nan_and_a_missing_probability_as_none() -> None:
    evaluation = eval_round({"motion_ids": [0, 1], "emd": [None, 1.0]})
    assert np.isnan(evaluation.emd[0]) and evaluation.probability is None
    assert (evaluation.round, evaluation.step) == ("?", "?")


@pytest.mark.parametrize("record", [
    {"motion_ids": [0, 1], "emd": [1.0]},
    {"motion_ids": [0], "emd": ["far"]},
    {"emd": [1.0]},
])
def test_an_eval_record_the_chart_cannot_draw_is_refused(record: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="record: expected"):
        eval_round(record)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-1, "0 s ago"), (4.2, "4 s ago"), (180, "3 min ago"), (9000, "2.5 h ago")],
)
def test_age_text_reads_in_the_largest_fitting_unit(seconds: float, text: str) -> None:
    assert age_text(seconds) == text


# ------------------------------------------------------------------------------ run status
def timed(*points: tuple[int, float], kind: str = "train") -> list[dict[str, Any]]:
    """Records at (step, time) points."""
    return [{"step": step, "time": when, "kind": kind} for step, when in points]


PLAN = {"step": 0, "time": 0.0, "kind": "run", "total_steps": 1000}


def test_a_run_writing_records_is_running_with_its_step_of_the_plan_and_an_eta() -> None:
    records = timed((100, 10.0), (200, 20.0), (300, 30.0))
    status = run_status(records, run=PLAN, now=31.0, refresh_seconds=2)
    assert status.state == RUNNING
    assert status.progress == "300 of 1,000 (30%)"
    assert status.rate == pytest.approx(10.0)
    assert status.eta == pytest.approx(70.0)


def test_an_end_record_last_means_finished() -> None:
    records = [*timed((100, 10.0), (200, 20.0)), *timed((200, 21.0), kind="end")]
    status = run_status(records, run=None, now=10_000.0, refresh_seconds=2)
    assert status.state == FINISHED and status.eta is None
    assert "logged its end" in status.reason


def test_records_after_an_end_record_mean_the_run_went_on() -> None:
    records = [*timed((100, 10.0), kind="end"), *timed((150, 20.0))]
    assert run_status(records, run=None, now=21.0, refresh_seconds=2).state == RUNNING


def test_reaching_the_planned_steps_means_finished_without_an_end_record() -> None:
    status = run_status(timed((500, 5.0), (1000, 10.0)), run=PLAN, now=99.0, refresh_seconds=2)
    assert status.state == FINISHED and "planned 1,000 steps" in status.reason
    assert status.progress == "1,000 of 1,000 (100%)"


@pytest.mark.parametrize(("silent", "state"), [(9.9, RUNNING), (10.1, STALLED)])
def test_a_run_silent_for_more_than_five_refresh_intervals_is_stalled(
    silent: float, state: str
) -> None:
    records = timed((1, 0.0), (2, 0.5), (3, 1.0))
    status = run_status(records, run=PLAN, now=1.0 + silent, refresh_seconds=2)
    assert status.state == state
    if state == STALLED:
        assert "longer than 5 refresh intervals (10 s)" in status.reason
    assert (status.eta is None) == (state == STALLED)


def test_a_run_that_logs_every_minute_is_not_stalled_after_a_few_refreshes() -> None:
    records = timed((1, 0.0), (2, 60.0), (3, 120.0))
    assert run_status(records, run=PLAN, now=200.0, refresh_seconds=2).state == RUNNING
    status = run_status(records, run=PLAN, now=421.0, refresh_seconds=2)
    assert status.state == STALLED
    assert "usually logs every 60 s" in status.reason


@pytest.mark.parametrize("plan", [None, {"kind": "run"}, {"total_steps": 0},
                                  {"total_steps": True}, {"total_steps": "1000"},
                                  {"total_steps": 10.5}])
def test_without_a_usable_plan_there_is_no_total_and_no_eta(plan: dict[str, Any] | None) -> None:
    status = run_status(timed((1, 0.0), (2, 1.0)), run=plan, now=1.5, refresh_seconds=2)
    assert status.total is None and status.eta is None and status.progress == "2"


def test_a_single_record_has_no_speed_and_no_eta() -> None:
    status = run_status(timed((5, 0.0)), run=PLAN, now=1.0, refresh_seconds=2)
    assert status.rate is None and status.eta is None and status.state == RUNNING


def test_run_status_refuses_no_records() -> None:
    with pytest.raises(ValueError, match="records"):
        run_status([], run=None, now=0.0, refresh_seconds=2)

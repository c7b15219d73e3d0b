"""Which moment a view shows: the checkpoint's and the log's step and time, and the warnings when
they disagree or come from different runs (app/moments.py), on the pages that mix them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from app.moments import Moment, checkpoint_moment, disagreements, log_moment
from app.run_data import read_source
from tests.app.conftest import Dashboard

LOG = Path("metrics.jsonl")


def record(step: int, time: float, kind: str = "train", **fields: Any) -> dict[str, Any]:
    return {"step": step, "time": time, "kind": kind, **fields}


def steady_log(
    last: int, *, start: float = 1000.0, checkpoints: tuple[int, ...] = ()
) -> list[dict[str, Any]]:
    records = [record(0, start, "run")]
    records += [record(step, start + step, "train") for step in range(10, last + 1, 10)]
    records += [record(step, start + step, "checkpoint") for step in checkpoints]
    return sorted(records, key=lambda r: (r["step"], r["kind"] != "run"))


# ------------------------------------------------------------------------------ log_moment
def test_a_log_without_records_has_no_moment() -> None:
    assert log_moment([], LOG) is None


def test_the_log_moment_is_its_last_record_and_its_start() -> None:
    log = log_moment(steady_log(100, checkpoints=(50,)), LOG)
    assert log is not None
    assert (log.last.step, log.last.time, log.start, log.runs) == (100, 1100.0, 1000.0, 1)
    assert log.checkpoints == {50}


@pytest.mark.parametrize("restart", ["run record", "step goes back"])
def test_a_restarted_log_counts_its_runs_and_starts_at_the_latest(restart: str) -> None:
    records = steady_log(100)
    again = record(0, 5000.0, "run") if restart == "run record" else record(5, 5000.0)
    records += [again, record(20, 5020.0)]
    log = log_moment(records, LOG)
    assert log is not None
    assert (log.runs, log.start, log.restart_step) == (2, 5000.0, again["step"])


# ---------------------------------------------------------------------------- disagreements
def test_one_moment_of_one_run_gives_no_warning() -> None:
    log = log_moment(steady_log(100, checkpoints=(100,)), LOG)
    assert disagreements(Moment(100, 1100.0, Path("run.json")), log) == []


def test_a_checkpoint_behind_the_log_says_by_how_many_steps() -> None:
    log = log_moment(steady_log(1200, checkpoints=(450, 900)), LOG)
    (warning,) = disagreements(Moment(900, 1900.0, Path("run.json")), log)
    assert "300 steps behind" in warning and "step 900" in warning and "1,200" in warning


def test_a_checkpoint_older_than_the_log_belongs_to_another_run() -> None:
    # A re-run stopped early: a new log of 104 steps beside the old run's step-1500 checkpoint.
    log = log_moment(steady_log(100, start=9000.0), LOG)
    (warning,) = disagreements(Moment(1500, 2500.0, Path("run.json")), log)
    assert "different runs" in warning and "older than the log" in warning


def test_a_checkpoint_ahead_of_the_log_belongs_to_another_run() -> None:
    log = log_moment(steady_log(100), LOG)
    (warning,) = disagreements(Moment(1500, None, Path("run.json")), log)
    assert "different runs" in warning and "ahead of the log's last record" in warning


def test_a_checkpoint_at_a_step_the_run_never_saved_belongs_to_another_run() -> None:
    log = log_moment(steady_log(1200, checkpoints=(450, 900)), LOG)
    (warning,) = disagreements(Moment(600, None, Path("run.json")), log)
    assert "never saved a checkpoint at" in warning


def test_a_restarted_log_is_named_before_the_checkpoint_comparison() -> None:
    records = [*steady_log(1500, checkpoints=(1500,)), record(0, 9000.0, "run"),
               record(10, 9010.0)]
    warnings = disagreements(Moment(1500, 2500.0, Path("run.json")), log_moment(records, LOG))
    assert len(warnings) == 2
    assert "restarted" in warnings[0] and "different runs" in warnings[1]


def test_a_checkpoint_without_a_log_gives_no_warning() -> None:
    assert disagreements(Moment(5, 1.0, Path("run.json")), None) == []


def test_a_time_too_large_for_a_float_counts_as_unknown() -> None:
    log = log_moment([record(1, 10**400)], LOG)
    assert log is not None and disagreements(Moment(1, 5.0, Path("run.json")), log) == []


# -------------------------------------------------------------------------- checkpoint_moment
def test_the_checkpoint_moment_of_a_run_is_run_json_step_and_time(demo_run: Path) -> None:
    data = read_source(demo_run, roots=(demo_run,))
    moment = checkpoint_moment(data)
    assert moment is not None and data.run is not None
    assert (moment.step, moment.where) == (data.run.step, data.run.path)
    assert moment.time == os.stat(data.run.path).st_mtime


def test_the_checkpoint_moment_of_a_bfm_zero_run_is_its_train_status(
    bfm_zero_run: Path,
) -> None:
    moment = checkpoint_moment(read_source(bfm_zero_run, roots=(bfm_zero_run,)))
    assert moment is not None
    assert (moment.step, moment.unit, moment.where.name) == (120, "env step", "train_status.json")


# ---------------------------------------------------------------------------------- pages
def rerun_stopped_early(run: Path) -> None:
    """The log of a new run stopped at step 104, beside the old run's step-1500 checkpoint: the
    new log starts after the checkpoint was written."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    later = os.stat(run / "checkpoint" / "run.json").st_mtime + 3600
    kept = [json.loads(line) for line in lines][:5]
    for item in kept:
        item["time"] += later - kept[0]["time"]
    (run / "metrics.jsonl").write_text("".join(json.dumps(item) + "\n" for item in kept))


PAGES_WITH_BOTH = ["overview", "fifo", "curriculum", "td_ema", "live", "compare"]


@pytest.mark.parametrize("page", PAGES_WITH_BOTH)
def test_a_page_mixing_log_and_checkpoint_warns_they_come_from_different_runs(
    dashboard: Dashboard, run_copy: Path, page: str
) -> None:
    rerun_stopped_early(run_copy)
    at = dashboard(page, run_copy, query={"live_on": "false"})
    assert not at.exception
    assert any("different runs" in w.value for w in at.warning)


@pytest.mark.parametrize("page", PAGES_WITH_BOTH)
def test_a_page_mixing_log_and_checkpoint_shows_the_step_and_time_of_each(
    dashboard: Dashboard, demo_run: Path, page: str
) -> None:
    at = dashboard(page, demo_run, query={"live_on": "false"})
    assert not at.exception
    captions = [c.value for c in at.caption]
    assert any("**Checkpoint:** step 60, written" in c and "**Log:** last record step 60" in c
               for c in captions), captions
    assert not any("different runs" in w.value or "behind" in w.value for w in at.warning)


def test_fifo_says_the_checkpoint_is_behind_a_log_that_ran_on(
    dashboard: Dashboard, run_copy: Path
) -> None:
    state = json.loads((run_copy / "checkpoint" / "run.json").read_text())
    with open(run_copy / "metrics.jsonl", "a") as log:
        log.write(json.dumps(record(state["step"] + 40, 4e9)) + "\n")
    at = dashboard("fifo", run_copy)
    assert any("40 steps behind the log" in w.value for w in at.warning)


@pytest.mark.parametrize("page", ["sampling_lab", "trajectories", "z_buffer"])
def test_a_checkpoint_page_shows_the_checkpoint_step(
    dashboard: Dashboard, demo_run: Path, page: str
) -> None:
    at = dashboard(page, demo_run)
    assert any("**Checkpoint:** step 60, written" in c.value for c in at.caption)


def test_the_sampling_lab_shows_the_path_it_samples_from(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "train"})
    train = demo_run / "checkpoint" / "buffers" / "train"
    assert any(f"Sampling from `{train}`" in c.value for c in at.caption)

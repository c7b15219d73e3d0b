"""run.json and metrics.jsonl summaries (bufcore.inspect)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from bufcore import RunLogger
from bufcore.curriculum.history import Round, history_to_state
from bufcore.curriculum.priorities import PriorityOptions
from bufcore.errors import CorruptCheckpointError, CorruptFileError
from bufcore.inspect import summarize_metrics, summarize_run_checkpoint

TD_EMA = {"ema_mean": 0.5, "ema_std": 0.25, "step_count": 12, "momentum": 0.99,
          "warmup_steps": 10, "nonfinite_count": 1}


def run_json(rounds: int = 2) -> dict[str, Any]:
    history = [
        Round(step=100 * (i + 1), emd={1: 0.5 + i, 2: 1.5 + i}, priority={1: 1.0, 2: 2.0})
        for i in range(rounds)
    ]
    return {
        "format": "bufcore-run-checkpoint", "version": 1, "step": 200, "round": rounds,
        "seed": 3, "options": {"capacity": 10}, "agent": {},
        "curriculum": history_to_state(PriorityOptions(), history), "td_ema": dict(TD_EMA),
    }


def write_run(checkpoint: Path, data: dict[str, Any]) -> Path:
    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / "run.json").write_text(json.dumps(data))
    return checkpoint


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_the_run_summary_counts_rounds_and_gives_the_last_mean_emd(
    tmp_path: Path, rounds: int
) -> None:
    summary = summarize_run_checkpoint(write_run(tmp_path / "checkpoint", run_json(rounds)))
    curriculum = summary.curriculum
    assert curriculum is not None
    assert (curriculum.rounds, curriculum.last_step) == (rounds, 100 * rounds)
    assert curriculum.last_mean_emd == pytest.approx(rounds)  # mean of 0.5+i and 1.5+i
    assert (summary.step, summary.round, summary.seed) == (200, rounds, 3)


def test_a_curriculum_without_rounds_has_no_last_round(tmp_path: Path) -> None:
    summary = summarize_run_checkpoint(write_run(tmp_path / "c", run_json(0)))
    assert summary.curriculum is not None
    assert (summary.curriculum.rounds, summary.curriculum.last_mean_emd) == (0, None)


def test_the_run_summary_gives_the_td_ema_state_as_saved(tmp_path: Path) -> None:
    summary = summarize_run_checkpoint(write_run(tmp_path / "c", run_json()))
    assert summary.td_ema is not None
    assert vars(summary.td_ema) == TD_EMA


def test_a_run_without_curriculum_or_td_ema_reports_none(tmp_path: Path) -> None:
    data = run_json()
    del data["curriculum"], data["td_ema"]
    summary = summarize_run_checkpoint(write_run(tmp_path / "c", data))
    assert (summary.curriculum, summary.td_ema) == (None, None)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"format": "something-else"}, r"run\['format'\]: expected 'bufcore-run-checkpoint'"),
        ({"version": 2}, r"run\['version'\]: expected 1, got 2"),
        ({"version": True}, r"run\['version'\]"),
        ({"step": -1}, r"run\['step'\]"),
        ({"seed": "x"}, r"run\['seed'\]: expected an int or null"),
        ({"td_ema": {"ema_mean": 0.0}}, r"run\['td_ema'\]: missing key 'ema_std'"),
    ],
)
def test_a_malformed_run_json_names_the_file_and_field(
    tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    checkpoint = write_run(tmp_path / "c", {**run_json(), **change})
    with pytest.raises(CorruptCheckpointError, match=rf"run\.json: {problem}"):
        summarize_run_checkpoint(checkpoint)


def test_a_malformed_curriculum_round_names_its_path_under_curriculum(tmp_path: Path) -> None:
    data = run_json()
    data["curriculum"]["rounds"][1]["step"] = -5
    with pytest.raises(
        CorruptCheckpointError, match=r"run\['curriculum'\]: state\['rounds'\]\[1\]\['step'\]"
    ):
        summarize_run_checkpoint(write_run(tmp_path / "c", data))


def test_run_json_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "run.json").write_text("[1, 2")
    with pytest.raises(CorruptCheckpointError, match=r"run\.json: not valid JSON"):
        summarize_run_checkpoint(tmp_path / "c")


def test_a_missing_run_json_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    with pytest.raises(CorruptCheckpointError, match=r"run\.json: file is missing"):
        summarize_run_checkpoint(tmp_path / "c")


# ---------------------------------------------------------------------------- metrics
def write_metrics(run: Path, text: str) -> Path:
    run.mkdir(exist_ok=True)
    (run / "metrics.jsonl").write_text(text)
    return run


def record(step: int, **fields: Any) -> dict[str, Any]:
    return {"step": step, "time": 1.0, "kind": "train", **fields}


def lines(*records: dict[str, Any]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


@pytest.mark.parametrize("records", [1, 2, 5])
def test_metrics_count_the_records_and_read_the_last(tmp_path: Path, records: int) -> None:
    text = lines(*(record(i) for i in range(records)))
    summary = summarize_metrics(write_metrics(tmp_path / "run", text))
    assert (summary.records, summary.size, summary.skipped) == (records, len(text), 0)
    assert summary.last == record(records - 1)


def test_a_record_a_running_logger_is_still_writing_is_neither_counted_nor_skipped(
    tmp_path: Path,
) -> None:
    with RunLogger(tmp_path / "run") as logger:
        logger.log("train", 1, {})
        with logger.path.open("ab") as file:
            file.write(b'{"ste')
        summary = summarize_metrics(tmp_path / "run")
    assert (summary.records, summary.last["step"], summary.skipped) == (1, 1, 0)


def test_an_empty_log_has_no_last_record(tmp_path: Path) -> None:
    summary = summarize_metrics(write_metrics(tmp_path / "run", ""))
    assert (summary.records, summary.last) == (0, None)


def test_a_last_record_longer_than_a_read_block_is_read_whole(tmp_path: Path) -> None:
    big = record(7, note="x" * (3 << 20))
    summary = summarize_metrics(write_metrics(tmp_path / "run", lines(record(1), big)))
    assert summary.last == big


# One rule with read_metrics: a line that is not a valid record is skipped and listed.
SKIPPED_LINES = {
    "not json": "not json\n",
    "not an object": "[1, 2]\n",
    "blank": "\n",
    "no time": '{"step": 3}\n',
    "torn, no writer": '{"step": 3, "ti',
}


@pytest.mark.parametrize("bad", SKIPPED_LINES.values(), ids=list(SKIPPED_LINES))
def test_a_last_line_that_is_no_valid_record_is_skipped_and_listed_not_an_error(
    tmp_path: Path, bad: str
) -> None:
    run = write_metrics(tmp_path / "run", lines(record(1), record(2)) + bad)
    summary = summarize_metrics(run)
    assert (summary.records, summary.last, summary.skipped) == (2, record(2), 1)
    assert summary.problems[0].startswith(f"{run / 'metrics.jsonl'}: byte ")


def test_a_torn_line_closed_off_by_a_resumed_logger_is_skipped_and_listed(
    tmp_path: Path,
) -> None:
    run = write_metrics(tmp_path / "run", lines(record(1)) + '{"step": 2, "ti')
    with RunLogger(run, fresh=False):
        pass  # resuming closes the torn line off with a newline
    summary = summarize_metrics(run)
    assert (summary.records, summary.last, summary.skipped) == (1, record(1), 1)
    assert "(line 2): not valid JSON" in summary.problems[0]


def test_a_blank_line_in_the_middle_is_skipped_and_the_last_record_read(tmp_path: Path) -> None:
    summary = summarize_metrics(write_metrics(tmp_path / "run", lines(record(1)) + "\n"
                                              + lines(record(2))))
    assert (summary.records, summary.last, summary.skipped) == (2, record(2), 1)


def test_a_log_record_keeps_its_non_finite_values(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with RunLogger(run) as logger:
        logger.log("train", 1, {"loss": math.nan})
    last = summarize_metrics(run).last
    assert last is not None and math.isnan(last["loss"])


def test_a_metrics_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / "metrics.jsonl")
    with pytest.raises(CorruptFileError, match="not a regular file"):
        summarize_metrics(tmp_path / "run")

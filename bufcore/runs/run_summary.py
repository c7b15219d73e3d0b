"""Summaries of a run directory: its ``checkpoint/run.json``, its ``metrics.jsonl`` and the
``train_status.json`` BFM-Zero writes, read without touching a buffer.

- :func:`summarize_run_checkpoint`: ``run.json``'s step, round, seed, options, curriculum and
  TD-EMA state; the curriculum is parsed by :mod:`bufcore.curriculum.history`'s own readers.
- :func:`summarize_metrics`: the log's record count and last record, read by
  :func:`bufcore.runs.runlog.read_metrics`, so a line it skips is skipped (and counted) here too.
- :func:`summarize_train_status`: BFM-Zero's ``checkpoint/train_status.json``.

A buffer checkpoint's own summary is :mod:`bufcore.runs.summary`'s job. Files are read by
:mod:`bufcore.persist` only; ``bufcore inspect`` and the dashboard see these through
:mod:`bufcore.inspect`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bufcore.curriculum.history import options_from_state, rounds_from_state
from bufcore.errors import CorruptCheckpointError, CorruptFileError, StateError
from bufcore.fields import Field
from bufcore.persist.run_checkpoint import (
    METRICS_FILE,
    RUN_STATE,
    TRAIN_STATUS,
    read_run_state,
    read_train_status,
)
from bufcore.runs.runlog import read_metrics

# How many skipped log lines a metrics summary describes (it counts them all).
MAX_PROBLEMS = 20


@dataclass(frozen=True)
class CurriculumSummary:
    """The EMD curriculum saved in run.json.

    Attributes:
        mode: How EMDs become priorities (``"lin"``, ``"exp"`` or ``"bin"``).
        min_val: Lower EMD clamp.
        max_val: Upper EMD clamp.
        scale: Multiplier after clamping.
        rounds: Evaluation rounds recorded.
        last_step: Training step of the last round, or None without rounds.
        last_mean_emd: Mean EMD over the motions of the last round, or None.
    """

    mode: str
    min_val: float
    max_val: float
    scale: float
    rounds: int
    last_step: int | None
    last_mean_emd: float | None


@dataclass(frozen=True)
class TDEMASummary:
    """The TD-error EMA normaliser's state saved in run.json (field names as saved)."""

    ema_mean: float
    ema_std: float
    step_count: int
    momentum: float
    warmup_steps: int
    nonfinite_count: int


@dataclass(frozen=True)
class RunCheckpointSummary:
    """A run's ``checkpoint/run.json``.

    Attributes:
        path: The file.
        step: Training step of the checkpoint.
        round: Curriculum round of the checkpoint.
        seed: The run's seed (None when not recorded).
        options: The run's options as saved (plain JSON).
        curriculum: The curriculum, or None when not saved.
        td_ema: The TD-EMA state, or None when not saved.
        replicated: Buffers every rank holds alike, of a checkpoint saved by several ranks
            (run.json's ``replicated``; empty for one rank).
    """

    path: Path
    step: int
    round: int
    seed: int | None
    options: dict[str, Any]
    curriculum: CurriculumSummary | None
    td_ema: TDEMASummary | None
    replicated: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetricsSummary:
    """A run's ``metrics.jsonl``, read as :func:`~bufcore.runs.runlog.read_metrics` reads it.

    Attributes:
        path: The file.
        size: Bytes.
        records: Valid records (a line still being appended is not counted).
        last: The last valid record (non-finite floats in place), or None when there is none.
        skipped: Lines skipped: complete lines that are no valid record, and a torn last line.
        problems: Why, one message per skipped line (the first :data:`MAX_PROBLEMS`).
    """

    path: Path
    size: int
    records: int
    last: dict[str, Any] | None
    skipped: int = 0
    problems: tuple[str, ...] = ()


def summarize_run_checkpoint(checkpoint: str | os.PathLike[str]) -> RunCheckpointSummary:
    """Summarize ``run.json`` in the run checkpoint directory ``checkpoint``.

    Its format and version are checked, and the fields it reports (the curriculum through
    :mod:`bufcore.curriculum.history`'s own parsers).

    Raises:
        FileNotFoundError: ``checkpoint`` is not a directory.
        CorruptCheckpointError: run.json is missing, not a regular file, not JSON, of another
            format or version, or a field it reports is malformed (names the file and field).
    """
    data = read_run_state(checkpoint)
    where = Path(checkpoint).absolute() / RUN_STATE
    try:
        return _run_summary(where, Field(data, "run", part="state"))
    except StateError as err:
        raise CorruptCheckpointError(where, str(err)) from err


def _run_summary(where: Path, run: Field) -> RunCheckpointSummary:
    options = run.optional("options", {})
    options.mapping()
    curriculum = run.optional("curriculum", None)
    td_ema = run.optional("td_ema", None)
    return RunCheckpointSummary(
        path=where,
        step=run.key("step").integer(minimum=0),
        round=run.key("round").integer(minimum=0),
        seed=run.optional("seed", None).validate(_seed),
        options=dict(options.value),
        curriculum=None if curriculum.value is None else _curriculum(curriculum),
        td_ema=None if td_ema.value is None else _td_ema(td_ema),
        replicated=tuple(run.optional("replicated", []).validate(_names)),
    )


def _names(value: Any, where: str) -> list[str]:
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return value
    raise TypeError(f"{where}: expected a list of buffer names, got {value!r:.80}")


def _seed(value: Any, where: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"{where}: expected an int or null, got {value!r:.80}")


def _curriculum(curriculum: Field) -> CurriculumSummary:
    """The curriculum state at ``curriculum``, parsed by the curriculum's own readers."""
    state = curriculum.mapping()
    try:
        options = options_from_state(state)
        rounds = rounds_from_state(state, _first_round_motions(state))
    except StateError as err:
        # Those readers name the key path from the state's root: say where that root sits.
        raise curriculum.error(str(err)) from err
    last = rounds[-1] if rounds else None
    return CurriculumSummary(
        mode=options.mode,
        min_val=options.min_val,
        max_val=options.max_val,
        scale=options.scale,
        rounds=len(rounds),
        last_step=None if last is None else last.step,
        last_mean_emd=None if last is None else math.fsum(last.emd.values()) / len(last.emd),
    )


def _first_round_motions(state: Any) -> set[int]:
    """The motion ids of the first round: every round must cover the same ones.

    Malformed ids are left to :func:`rounds_from_state`, which reports them with their path.
    """
    rounds = state.get("rounds")
    first = rounds[0] if isinstance(rounds, list) and rounds else None
    ids = first.get("motion_ids") if isinstance(first, dict) else None
    if isinstance(ids, list) and all(type(i) is int for i in ids):
        return set(ids)
    return set()


def _td_ema(td_ema: Field) -> TDEMASummary:
    return TDEMASummary(
        ema_mean=td_ema.key("ema_mean").real(),
        ema_std=td_ema.key("ema_std").real(minimum=0.0),
        step_count=td_ema.key("step_count").integer(minimum=0),
        momentum=td_ema.key("momentum").real(minimum=0.0),
        warmup_steps=td_ema.key("warmup_steps").integer(minimum=0),
        nonfinite_count=td_ema.key("nonfinite_count").integer(minimum=0),
    )


@dataclass(frozen=True)
class TrainStatusSummary:
    """The ``train_status.json`` a BFM-Zero checkpoint directory holds.

    Attributes:
        path: The file.
        time: Env steps trained when the checkpoint was saved (BFM-Zero's ``time``).
    """

    path: Path
    time: int


def summarize_train_status(checkpoint: str | os.PathLike[str]) -> TrainStatusSummary:
    """Summarize BFM-Zero's ``train_status.json`` in the checkpoint directory ``checkpoint``.

    Raises:
        FileNotFoundError: ``checkpoint`` is not a directory.
        CorruptCheckpointError: the file is missing, not a JSON object, or its ``time`` is not
            an int >= 0 (names the file and field).
    """
    data = read_train_status(checkpoint)
    where = Path(checkpoint).absolute() / TRAIN_STATUS
    try:
        time = Field(data, "train_status", part="state").key("time").integer(minimum=0)
    except StateError as err:
        raise CorruptCheckpointError(where, str(err)) from err
    return TrainStatusSummary(where, time)


def summarize_metrics(run: str | os.PathLike[str]) -> MetricsSummary:
    """Count the records of ``metrics.jsonl`` in the run directory ``run`` and keep the last.

    The log is read with :func:`~bufcore.runs.runlog.read_metrics`, by the same rule as every
    other reader: a line that is no valid record (not strict JSON, blank, a torn line a resumed
    run closed off, ...) is skipped and counted in ``skipped``, never an error. A last line
    still being written is not counted; a torn one (no logger has the file open) is skipped.

    Raises:
        FileNotFoundError: ``run`` is not a directory.
        CorruptFileError: metrics.jsonl is missing, not a regular file (a link, a FIFO, ...)
            or unreadable.
    """
    directory = Path(run)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a directory")
    path = directory / METRICS_FILE
    records = skipped = 0
    last: dict[str, Any] | None = None
    problems: list[str] = []
    offset = 0
    try:
        size = path.lstat().st_size
        while True:
            found: list[str] = []
            batch, end = read_metrics(path, offset, problems=found)
            if end < offset:  # replaced while reading: a new run, start over
                records = skipped = offset = 0
                last, problems = None, []
                continue
            records += len(batch)
            last = batch[-1] if batch else last
            skipped += len(found)
            problems += found[: MAX_PROBLEMS - len(problems)]
            if end == offset:
                break
            offset = end
    except FileNotFoundError:
        raise CorruptFileError(path, "file is missing") from None
    except (OSError, ValueError) as err:
        raise CorruptFileError(path, str(err)) from err
    return MetricsSummary(path, size, records, last, skipped, tuple(problems))

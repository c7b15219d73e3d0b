"""Which moment each part of a view shows: the checkpoint's step and time, the log's, and whether
the two can be shown side by side.

A page that draws buffer contents (from a checkpoint) beside logged metrics (from
``metrics.jsonl``) mixes two moments: a run checkpoints every few hundred steps while it logs
every step, and a re-run may have replaced the log while the old checkpoint stays. This module
finds both moments (:func:`checkpoint_moment`, :func:`log_moment`) and what a reader must be
told about them (:func:`disagreements`): the log restarted, the checkpoint is older than the
log's start or ahead of its last record (another run), or they are simply at different steps.
Pure functions of summaries and records; the Streamlit drawing is :func:`app.ui.show_moments`.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.run_data import SourceData
from bufcore.inspect import CONFIG_FILE

# File times are rounded by some file systems; a checkpoint this close to the log's start
# counts as written after it.
CLOCK_SLACK_S = 2.0


@dataclass(frozen=True)
class Moment:
    """When one part of a source was written.

    Attributes:
        step: The training step it holds (None: not recorded, as for a lone buffer checkpoint).
        time: When it was written, in seconds since the epoch (None: unknown).
        where: The file that says so.
        unit: What ``step`` counts (``"step"``, or ``"env step"`` for BFM-Zero's
            train_status.json).
    """

    step: int | None
    time: float | None
    where: Path
    unit: str = "step"

    def describe(self) -> str:
        """``"step 1,500, written 2026-01-02 10:13:11"`` (the parts that are known)."""
        parts = []
        if self.step is not None:
            parts.append(f"{self.unit} {self.step:,}")
        if self.time is not None:
            parts.append(f"written {clock(self.time)}")
        return ", ".join(parts) or "step and time unknown"


@dataclass(frozen=True)
class LogMoment:
    """What a metrics log says about when it was written.

    Attributes:
        last: Its last record's step and time.
        start: The time of the first record of the latest run in it (None: not a usable time).
        runs: How many runs the log holds (a restart: a ``run`` record after the first
            record, or a step going back).
        restart_step: The step the latest run started at (None with one run).
        checkpoints: Steps of the ``checkpoint`` records of the latest run.
    """

    last: Moment
    start: float | None
    runs: int
    restart_step: int | None
    checkpoints: frozenset[int]


def clock(seconds: float) -> str:
    """Local date and time of ``seconds`` since the epoch, to the second."""
    try:
        return dt.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):
        return f"{seconds:.0f} s after the epoch"


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def checkpoint_moment(data: SourceData) -> Moment | None:
    """The step and time of the source's checkpoint: run.json's step (bufcore runs), else
    train_status.json's env step (BFM-Zero), else only when its buffers were written; None
    when it has no readable checkpoint."""
    if data.run is not None:
        return Moment(data.run.step, _mtime(data.run.path), data.run.path)
    if data.train_status is not None:
        status = data.train_status
        return Moment(status.time, _mtime(status.path), status.path, "env step")
    own = [entry for entry in data.buffers if entry.summary is not None and "/" not in entry.name]
    if not own:
        return None
    times = [(t, entry.path / CONFIG_FILE) for entry in own
             if (t := _mtime(entry.path / CONFIG_FILE)) is not None]
    if not times:
        return Moment(None, None, own[0].path / CONFIG_FILE)
    newest, where = max(times)
    return Moment(None, newest, where)


def log_moment(records: Sequence[dict[str, Any]], where: Path) -> LogMoment | None:
    """The log's last step and time, where its latest run started, and its checkpoint
    records; None for a log without records. Records are as :func:`bufcore.read_metrics`
    returns them (``step`` an int, ``time`` a finite number)."""
    if not records:
        return None
    runs, first = 1, 0
    for index in range(1, len(records)):
        record, previous = records[index], records[index - 1]
        if record["kind"] == "run" or record["step"] < previous["step"]:
            runs, first = runs + 1, index
    latest = records[first:]
    last = records[-1]
    return LogMoment(
        last=Moment(last["step"], _seconds(last["time"]), where),
        start=_seconds(latest[0]["time"]),
        runs=runs,
        restart_step=latest[0]["step"] if runs > 1 else None,
        checkpoints=frozenset(r["step"] for r in latest if r["kind"] == "checkpoint"),
    )


def _seconds(value: float) -> float | None:
    """A record's time as a float, or None when it is no usable time (an int of 400 digits is
    valid JSON and a finite number, but no float)."""
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


def disagreements(checkpoint: Moment | None, log: LogMoment | None) -> list[str]:
    """What a reader of a view built from both must know, most serious first (empty when the
    two show one moment of one run).

    - the log holds several runs (it restarted);
    - the checkpoint was written before the log's latest run started, or holds a later step
      than the log's last record: another run wrote it;
    - the log's run logged checkpoints, none at the checkpoint's step: not this run's;
    - otherwise the two are at different steps (the log usually runs ahead of the last
      checkpoint while a run trains).
    """
    found: list[str] = []
    if log is not None and log.runs > 1:
        at = "" if log.start is None else f" at {clock(log.start)}"
        found.append(
            f"The log restarted: it holds {log.runs} runs, the latest from step "
            f"{log.restart_step:,}{at}. Charts from the log show every run's records."
        )
    if checkpoint is None or log is None:
        return found
    step, last = checkpoint.step, log.last.step
    other = _other_run(checkpoint, log)
    if other is not None:
        found.append(
            f"The checkpoint and the log belong to different runs: the checkpoint "
            f"({checkpoint.describe()}) is {other}. Buffer views show that checkpoint; log "
            "views show the log's run."
        )
    elif step is not None and last is not None and step != last:
        found.append(
            f"The checkpoint is {last - step:,} steps behind the log: buffer views show step "
            f"{step:,}, log views run to step {last:,}."
        )
    return found


def _other_run(checkpoint: Moment, log: LogMoment) -> str | None:
    """Why the checkpoint cannot be the log's run's, or None when it can be."""
    if (
        checkpoint.time is not None and log.start is not None
        and checkpoint.time < log.start - CLOCK_SLACK_S
    ):
        start = "latest run" if log.runs > 1 else "first record"
        return f"older than the log's {start} ({clock(log.start)})"
    step, last = checkpoint.step, log.last.step
    if step is None or last is None:
        return None
    if step > last:
        return f"ahead of the log's last record (step {last:,})"
    if log.checkpoints and step not in log.checkpoints:
        return "at a step the log's run never saved a checkpoint at"
    return None

"""Following a run while it writes: tail its ``metrics.jsonl`` and read what arrived as series.

:class:`LiveTail` holds one reader's place in a log (byte offset, the records read so far,
bounded to the most recent :data:`MAX_RECORDS`) and :meth:`LiveTail.poll` reads only the
lines appended since the last poll, through :func:`bufcore.read_metrics`. A log replaced by a
new run (renamed over, shorter than the offset, or removed) drops what was held and starts
over. :func:`run_status` says whether the run is running, finished or stalled, how far it is
through its plan and when it should end. The functions below turn held records into the series
and the evaluation round the Live page draws (:mod:`app.live_figures` draws them). Nothing here
imports Streamlit.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.ring import occupancy as buffer_occupancy
from bufcore import read_metrics
from bufcore.inspect import BUFFER_CHECKPOINT, METRICS_FILE

# Records a tail keeps (the most recent ones): a week-long run's log never fills memory.
MAX_RECORDS = 20_000
# Skipped-line messages a tail keeps.
MAX_PROBLEMS = 200
# One poll reads at most this many chunks (read_metrics reads ~8 MiB per call), so a refresh
# of a huge log returns; the next poll continues where this one stopped.
MAX_READS_PER_POLL = 16
# The train record fields of TD-EMA (bufcore.TDWeighting.update's metrics).
TD_FIELDS = ("td/ema_mean", "td/ema_std", "td/batch_mean", "td/batch_std")
# A run is stalled after this many refresh intervals (or of its own usual gaps between
# records, when those are longer) without a new record.
STALL_INTERVALS = 5
# The most recent records the run's speed (and its usual gap) is measured over.
RATE_RECORDS = 200
# The record kind a run logs last (the demo does), and the run record's field for its plan.
END_KIND = "end"
PLAN_FIELD = "total_steps"
RUNNING, FINISHED, STALLED = "running", "finished", "stalled"


def metrics_path(source: Path, kind: str) -> Path | None:
    """Where a source of ``kind`` keeps its ``metrics.jsonl`` (it may not exist yet), or None
    for a single buffer checkpoint, which has no log."""
    return None if kind == BUFFER_CHECKPOINT else Path(source) / METRICS_FILE


def _identity(path: Path) -> tuple[int, int] | None:
    """The file's (device, inode), or None when it is missing: a new run renames a new file
    over the log, which changes the inode even when the new file is already longer."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


class LiveTail:
    """One reader's place in a metrics log: read only what was appended since the last poll.

    Args:
        path: The ``metrics.jsonl`` file (a missing one reads as empty until it appears).
        max_records: How many of the most recent records to keep.

    Raises:
        TypeError: ``path`` is not a path.
        ValueError: ``max_records`` is not an int >= 1.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_records: int = MAX_RECORDS) -> None:
        if not isinstance(path, str | os.PathLike):
            raise TypeError(f"path: expected a path (str or os.PathLike), got {path!r:.80}")
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
            raise ValueError(f"max_records: expected an int >= 1, got {max_records!r}")
        self.path = Path(path)
        self.max_records = max_records
        self.offset = 0
        self.restarted = False
        self.total = 0  # records read since the (last) start, kept or not
        self._records: deque[dict[str, Any]] = deque(maxlen=max_records)
        self._latest: dict[str, dict[str, Any]] = {}
        self._problems: deque[str] = deque(maxlen=MAX_PROBLEMS)
        self._identity: tuple[int, int] | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records held (at most ``max_records``, the most recent), in file order."""
        return list(self._records)

    @property
    def problems(self) -> list[str]:
        """Messages for the lines skipped (complete lines that are no valid record, and a torn
        last line), each once, the most recent ones."""
        return list(self._problems)

    def latest(self, kind: str) -> dict[str, Any] | None:
        """The last record of ``kind`` read since the start, even if no longer held."""
        return self._latest.get(kind)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """The held records of ``kind``, in order."""
        return [record for record in self._records if record["kind"] == kind]

    def poll(self) -> list[dict[str, Any]]:
        """Read the complete lines appended since the last poll.

        A last line without its newline yet is left for a later poll. When the log was
        replaced or removed, :attr:`restarted` is True after this call and the records held
        before are gone: the result and :attr:`records` then hold the new run's from its start.

        Returns:
            The new records, in file order.

        Raises:
            OSError: the file exists but cannot be read.
            ValueError: ``path`` is not a regular file.
        """
        self.restarted = False
        identity = _identity(self.path)
        if self.offset and identity != self._identity:
            self._start_over()
        self._identity = identity
        new: list[dict[str, Any]] = []
        problems: list[str] = []
        for _ in range(MAX_READS_PER_POLL):
            batch, end = read_metrics(self.path, self.offset, problems=problems)
            if end < self.offset:
                # Shorter than our offset, or not at a line end there: a new run.
                self._start_over()
                new, problems = [], []
                continue
            new += batch
            if end == self.offset:
                break
            self.offset = end
        # A torn last line is described again by every poll that reaches it: list it once.
        self._problems.extend(p for p in problems if p not in self._problems)
        self._records.extend(new)
        self.total += len(new)
        for record in new:
            self._latest[record["kind"]] = record
        return new[-self.max_records:]

    def _start_over(self) -> None:
        self.offset = 0
        self.total = 0
        self.restarted = True
        self._records.clear()
        self._latest.clear()
        self._problems.clear()


@dataclass(frozen=True)
class RunStatus:
    """Where a followed run stands.

    Attributes:
        state: :data:`RUNNING`, :data:`FINISHED` or :data:`STALLED`.
        step: The last record's step.
        total: The steps the run planned (its ``run`` record's ``total_steps``), or None.
        rate: Steps per second over the recent records, or None when it cannot be measured.
        eta: Seconds until step ``total`` at ``rate`` while running, else None.
        silent: Seconds since the last record was written.
        stall_after: Seconds of silence after which the run counts as stalled.
        reason: Why ``state``, in words.
    """

    state: str
    step: int
    total: int | None
    rate: float | None
    eta: float | None
    silent: float
    stall_after: float
    reason: str

    @property
    def progress(self) -> str:
        """``"1,200 of 1,500 (80%)"``, or ``"1,200"`` without a plan."""
        if self.total is None:
            return f"{self.step:,}"
        return f"{self.step:,} of {self.total:,} ({min(self.step / self.total, 1.0):.0%})"


def planned_steps(run: dict[str, Any] | None) -> int | None:
    """The ``total_steps`` a ``run`` record announces (an int >= 1), or None."""
    total = None if run is None else run.get(PLAN_FIELD)
    if isinstance(total, bool) or not isinstance(total, int) or total < 1:
        return None
    return total


def run_status(
    records: Sequence[dict[str, Any]],
    *,
    run: dict[str, Any] | None,
    now: float,
    refresh_seconds: float,
) -> RunStatus:
    """The state of the run whose most recent records are ``records``.

    Finished: the last record is an ``end`` record (the demo logs one after its last step),
    or the run planned ``total_steps`` in its ``run`` record and the last step reached them.
    Stalled: otherwise, when no record arrived for :data:`STALL_INTERVALS` refresh intervals,
    or as many of the run's own usual gaps between records where those are longer (a run that
    logs every minute is not stalled after ten seconds). Running: otherwise. The speed is
    measured over the last :data:`RATE_RECORDS` records.

    Args:
        records: The records held, in file order (at least one).
        run: The run's ``run`` record (its plan), or None.
        now: The current time (seconds since the epoch, as the records' ``time``).
        refresh_seconds: The page's refresh interval.

    Raises:
        ValueError: ``records`` is empty.
    """
    if not records:
        raise ValueError("records: expected at least one record, got none")
    last = records[-1]
    step = int(last["step"])
    total = planned_steps(run)
    recent = records[-RATE_RECORDS:]
    times = np.array([float(r["time"]) for r in recent], dtype=np.float64)
    gaps = np.diff(times)
    gaps = gaps[gaps > 0]
    usual = float(np.median(gaps)) if gaps.size else 0.0
    stall_after = STALL_INTERVALS * max(float(refresh_seconds), usual)
    silent = max(0.0, now - float(last["time"]))
    span, advanced = times[-1] - times[0], step - int(recent[0]["step"])
    rate = advanced / span if span > 0 and advanced > 0 else None
    if last["kind"] == END_KIND:
        state, reason = FINISHED, f"the run logged its end at step {step:,}"
    elif total is not None and step >= total:
        state, reason = FINISHED, f"the run reached its planned {total:,} steps"
    elif silent > stall_after:
        state = STALLED
        if usual > refresh_seconds:
            reason = (f"no record for {duration_text(silent)}, though the run usually logs "
                      f"every {duration_text(usual)} ({STALL_INTERVALS} such gaps count as "
                      "stalled)")
        else:
            reason = (f"no record for {duration_text(silent)}, longer than {STALL_INTERVALS} "
                      f"refresh intervals ({duration_text(stall_after)})")
    else:
        pace = "" if rate is None else f"{rate:,.1f} steps/s; "
        state, reason = RUNNING, f"{pace}the last record arrived {age_text(silent)}"
    eta = None
    if state == RUNNING and total is not None and rate is not None:
        eta = (total - step) / rate
    return RunStatus(state, step, total, rate, eta, silent, stall_after, reason)


def duration_text(seconds: float) -> str:
    """``age_text`` without "ago": ``"4 s"``, ``"3 min"``, ``"2.5 h"``."""
    return age_text(seconds).removesuffix(" ago")


@dataclass(frozen=True)
class Series:
    """One named curve: x (steps) and y values, float64."""

    name: str
    x: np.ndarray
    y: np.ndarray


def occupancy(records: Iterable[dict[str, Any]]) -> list[Series]:
    """Fill level (percent of capacity) per buffer over steps, from ``buffer`` records.

    A buffer record holds one object per buffer (the demo's ``train`` and ``z``); each buffer
    is read with :func:`app.ring.occupancy`, the FIFO page's reader, so both pages count the
    same records (``len`` and a finite ``capacity > 0``).
    """
    buffers = [record for record in records if record.get("kind") == "buffer"]
    names = dict.fromkeys(
        name for record in buffers for name, value in record.items() if isinstance(value, dict)
    )
    series = []
    for name in names:
        fill = buffer_occupancy(buffers, name)
        if len(fill.step):
            series.append(Series(name, fill.step, 100.0 * fill.fill))
    return series


def td_series(records: Iterable[dict[str, Any]]) -> dict[str, Series]:
    """The TD-EMA fields (:data:`TD_FIELDS`) of ``train`` records, each over steps."""
    points: dict[str, tuple[list[float], list[float]]] = {f: ([], []) for f in TD_FIELDS}
    for record in records:
        if record.get("kind") != "train":
            continue
        for field in TD_FIELDS:
            value = _number(record.get(field))
            if value is not None:
                points[field][0].append(float(record["step"]))
                points[field][1].append(value)
    return {
        field: Series(field, np.array(xs), np.array(ys))
        for field, (xs, ys) in points.items() if xs
    }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True)
class EvalRound:
    """One evaluation round, as the Live page draws it.

    Attributes:
        round: The record's ``round`` (``"?"`` when absent).
        step: The record's ``step`` (``"?"`` when absent).
        motions: The motion ids, as text (one bar each).
        emd: Each motion's EMD to its expert frames (NaN where the record has null).
        probability: Each motion's sampling probability now, or None when not logged.
    """

    round: object
    step: object
    motions: list[str]
    emd: np.ndarray
    probability: np.ndarray | None


def eval_round(record: dict[str, Any]) -> EvalRound:
    """The evaluation round an ``eval`` record holds.

    Raises:
        ValueError: ``record`` lacks ``motion_ids`` and ``emd`` lists of one length, or an
            ``emd`` value is neither a number nor null.
    """
    ids, emds = record.get("motion_ids"), record.get("emd")
    if not isinstance(ids, list) or not isinstance(emds, list) or len(ids) != len(emds):
        raise ValueError("record: expected an eval record with motion_ids and emd of one length")
    values = [_number(v) for v in emds]
    if any(value is None and v is not None for value, v in zip(values, emds, strict=True)):
        raise ValueError("record: expected numbers (or null) in emd")
    emd = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    probability = record.get("probability")
    chances = None
    if isinstance(probability, list) and len(probability) == len(ids):
        chances = np.array(probability, dtype=np.float64)
    return EvalRound(record.get("round", "?"), record.get("step", "?"), [str(m) for m in ids],
                     emd, chances)


def age_text(seconds: float) -> str:
    """How long ago, in words: ``"4 s ago"``, ``"3 min ago"``, ``"2.5 h ago"``."""
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"

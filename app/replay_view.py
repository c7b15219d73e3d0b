"""The Replay statistics view's data: a prioritized or DI-engine buffer's per-item figures
binned for drawing, a seeded draw from it (Resample), and its logged ``replay`` records as
aligned series.

Checkpoint figures come from :func:`bufcore.inspect.replay_items` (each held item's priority,
draw probability, importance weight, use and ``collect_iter``) and
:func:`bufcore.inspect.window_shares` (a prioritized trajectory buffer's window draws per
trajectory). Priorities and importance weights span decades, so they are binned on a log scale
(:func:`log_histogram`), each bin giving its share of the held items, of the draws the sampler
promises and of the drawn batch.

:func:`draw_batch` draws with the buffer's own sampler from a copy of the cached, index-only
buffer and a generator seeded with the page's seed: the cached buffer (and the annealing of its
beta) never changes, so a seed always gives the same rows and weights.

Log figures come from records of kind ``replay`` (``buffer.log_stats(RunLogger(run), step)``):
each group of :data:`GROUPS` is drawn where the log holds any of its keys, and said to be
missing otherwise; every other numeric key is kept under its own name
(:attr:`ReplaySeries.extra`), so a key a newer bufcore logs is shown, not dropped.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from app.td_view import spread_rows
from bufcore import AdvancedReplayBuffer, RingPosition
from bufcore.inspect import (
    IS_WEIGHT_QUANTILES,
    PRIORITY_QUANTILES,
    REPLAY_KIND,
    CheckpointSummary,
    ReplayItems,
    WindowShares,
    has_replay_items,
)

ADVANCED = AdvancedReplayBuffer.__name__
# What the log part draws: chart -> the record keys it reads.
GROUPS: dict[str, tuple[str, ...]] = {
    "priority quantiles": tuple(key for key, _ in PRIORITY_QUANTILES),
    "importance weights": tuple(key for key, _ in IS_WEIGHT_QUANTILES),
    "push and sample rates": ("push_rate", "sample_rate"),
    "throughput ratio": ("thruput_ratio", "thruput_min", "thruput_max"),
    "refused pushes and samples": ("refused_pushes", "refused_samples"),
    "use": ("use_mean", "use_max"),
    "staleness": ("staleness_mean", "staleness_max"),
}
# Keys every DI-engine record holds that the page shows as latest figures, not charts.
FIGURE_KEYS = ("count", "capacity", "push_count", "sample_count", "sample_calls", "removed",
               "beta", "max_priority")
# What a prioritized online buffer's records (bufcore.ReplayTally) say of the window draws
# since the previous record: drawn by the page when present, never listed as lacking (DI-engine
# buffers draw no windows).
DOMINANCE_KEYS = ("top_share", "trajectories_drawn", "windows_drawn", "top_trajectories")
KNOWN_KEYS = (frozenset(key for keys in GROUPS.values() for key in keys) | set(FIGURE_KEYS)
              | set(DOMINANCE_KEYS))
# Record fields that are no figure of the buffer.
_RESERVED = ("step", "time", "kind", "nonfinite", "buffer", "last_refusal")
# The buffer name of records that give none.
UNNAMED = "replay"
# Records drawn per series at most (evenly spread, first and last kept).
MAX_RECORDS = 4_000
# Bins of the log-scale histograms.
LOG_BINS = 40
# Above this many distinct values, a count histogram bins them.
UNIT_BINS = 60



# The page imports only app/: the bufcore.inspect names it needs are re-exported here.
__all__ = [
    "ADVANCED", "DOMINANCE_KEYS", "GROUPS", "CheckpointSummary", "CountHistogram", "Dominance",
    "DrawRequest",
    "Drawn", "LogHistogram", "ReplayItems", "ReplaySeries", "WindowShares", "count_histogram",
    "dominance", "draw_batch", "has_replay_items", "log_histogram", "replay_series",
    "replayable", "trajectory_rows",
]


def replayable(summary: CheckpointSummary) -> bool:
    """Whether the page has something to show for the checkpoint ``summary`` describes: it
    saved a prioritized sampler, or it is a DI-engine buffer (an episode buffer shows its
    counters only)."""
    return has_replay_items(summary) or summary.ding is not None


# ------------------------------------------------------------------------- the log
@dataclass(frozen=True)
class ReplaySeries:
    """One buffer's ``replay`` records, aligned.

    Attributes:
        buffer: The records' ``buffer`` field (the class name), or :data:`UNNAMED`.
        steps: The drawn records' steps (int64).
        values: Every numeric key of the records -> float64 per drawn record (NaN where a
            record lacks it or logged None), keys in order of first appearance.
        refusals: ``(step, reason)`` each time ``last_refusal`` changed, over every record.
        total: Records before the spread (:data:`MAX_RECORDS`).
        last: The last record.
    """

    buffer: str
    steps: np.ndarray
    values: dict[str, np.ndarray]
    refusals: tuple[tuple[int, str], ...]
    total: int
    last: Mapping[str, Any]

    def __len__(self) -> int:
        return len(self.steps)

    def has(self, key: str) -> bool:
        """Whether any drawn record holds a finite value of ``key``."""
        column = self.values.get(key)
        return column is not None and bool(np.isfinite(column).any())

    def column(self, key: str) -> np.ndarray:
        """``key``'s values (all NaN when the records lack it)."""
        column = self.values.get(key)
        return np.full(len(self.steps), math.nan) if column is None else column

    def lacking(self) -> list[str]:
        """The charts of :data:`GROUPS` none of whose keys the records hold."""
        return [name for name, keys in GROUPS.items() if not any(map(self.has, keys))]

    @property
    def extra(self) -> list[str]:
        """Numeric keys with a finite value that no chart or figure of the page reads."""
        return [key for key in self.values if key not in KNOWN_KEYS and self.has(key)]


def _number(value: Any) -> float:
    """A record value as a float; NaN for None, bools and anything not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:  # an int beyond float's range (valid JSON)
        return math.nan


def replay_series(records: Sequence[Mapping[str, Any]]) -> dict[str, ReplaySeries]:
    """The ``replay`` records of ``records``, one series per ``buffer`` name (in order of
    first appearance); top-level numeric keys only (a nested mapping is no figure of a
    buffer's ``stats()``)."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        if record.get("kind") == REPLAY_KIND:
            name = record.get("buffer")
            grouped.setdefault(name if isinstance(name, str) and name else UNNAMED,
                               []).append(record)
    return {name: _series(name, rows) for name, rows in grouped.items()}


def _series(name: str, rows: list[Mapping[str, Any]]) -> ReplaySeries:
    refusals: list[tuple[int, str]] = []
    previous = None
    for record in rows:
        reason = record.get("last_refusal")
        if isinstance(reason, str) and reason != previous:
            refusals.append((int(record["step"]), reason))
        previous = reason
    kept = [rows[i] for i in spread_rows(len(rows), MAX_RECORDS)]
    keys = dict.fromkeys(
        key for record in kept for key, value in record.items()
        if key not in _RESERVED and (value is None or not math.isnan(_number(value)))
    )
    values = {key: np.array([_number(r.get(key)) for r in kept], dtype=np.float64)
              for key in keys}
    steps = np.array([int(r["step"]) for r in kept], dtype=np.int64)
    return ReplaySeries(name, steps, values, tuple(refusals), len(rows), rows[-1])


# ------------------------------------------------------------------------- histograms
@dataclass(frozen=True)
class LogHistogram:
    """Positive values binned on a log scale, as shares of three populations.

    Attributes:
        edges: The bins' edges (geometric, ``bins + 1``).
        held: Share of the items in each bin (of those with a positive, finite value).
        expected: Share of the draws the sampler promises in each bin, or None.
        drawn: Share of the drawn batch in each bin, or None.
        left_out: Items whose value is 0 or not finite (not on a log axis).
        drawn_count: Values in the drawn batch (0 without one).
    """

    edges: np.ndarray
    held: np.ndarray
    expected: np.ndarray | None
    drawn: np.ndarray | None
    left_out: int
    drawn_count: int


def log_histogram(
    values: np.ndarray,
    *,
    probability: np.ndarray | None = None,
    drawn: np.ndarray | None = None,
    bins: int = LOG_BINS,
) -> LogHistogram:
    """``values`` (and the ``drawn`` batch's values) on ``bins`` geometric bins spanning the
    positive finite values of both; ``probability`` (one per value) gives the expected share.

    Raises:
        ValueError: ``bins < 1``, or ``probability`` not one per value.
    """
    if bins < 1:
        raise ValueError(f"bins: expected >= 1, got {bins}")
    data = np.asarray(values, dtype=np.float64)
    if probability is not None and len(probability) != len(data):
        raise ValueError(f"probability: expected one per value ({len(data)}), got "
                         f"{len(probability)}")
    usable = np.isfinite(data) & (data > 0)
    batch = None if drawn is None else np.asarray(drawn, dtype=np.float64)
    batch = None if batch is None else batch[np.isfinite(batch) & (batch > 0)]
    pool = data[usable] if batch is None else np.concatenate([data[usable], batch])
    edges = _geometric_edges(pool, bins)
    held = _shares(data[usable], edges)
    expected = None
    if probability is not None:
        weights = np.asarray(probability, dtype=np.float64)[usable]
        counts = np.histogram(data[usable], bins=edges, weights=weights)[0]
        expected = counts / counts.sum() if counts.sum() > 0 else counts
    return LogHistogram(
        edges=edges, held=held, expected=expected,
        drawn=None if batch is None else _shares(batch, edges),
        left_out=int((~usable).sum()), drawn_count=0 if batch is None else len(batch),
    )


def _geometric_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """``bins + 1`` geometric edges from the smallest to the largest value (a constant gets
    one decade around it; no values, the decade ``[1, 10]``)."""
    if len(values) == 0:
        return np.geomspace(1.0, 10.0, bins + 1)
    low, high = float(values.min()), float(values.max())
    if low == high:
        low, high = low / math.sqrt(10.0), high * math.sqrt(10.0)
    return np.geomspace(low, high, bins + 1)


def _shares(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    counts = np.histogram(values, bins=edges)[0].astype(np.float64)
    return counts / counts.sum() if counts.sum() > 0 else counts


@dataclass(frozen=True)
class CountHistogram:
    """Whole-number values (use counts, staleness) counted per value or per bin.

    Attributes:
        left: Each bar's lowest value.
        width: Each bar's width (1 per value, or the bin's width).
        counts: Items per bar.
        missing: Items without a value (NaN: no ``collect_iter``).
        per_value: Whether each bar is one whole value (else a bin of several).
    """

    left: np.ndarray
    width: np.ndarray
    counts: np.ndarray
    missing: int
    per_value: bool = True


def count_histogram(values: np.ndarray, *, bins: int = UNIT_BINS) -> CountHistogram:
    """One bar per whole value when the values span at most ``bins`` of them, else ``bins``
    equal bins.

    Raises:
        ValueError: ``bins < 1``.
    """
    if bins < 1:
        raise ValueError(f"bins: expected >= 1, got {bins}")
    data = np.asarray(values, dtype=np.float64)
    known = data[np.isfinite(data)]
    missing = len(data) - len(known)
    if len(known) == 0:
        empty = np.zeros(0)
        return CountHistogram(empty, empty, empty.astype(np.int64), missing)
    low, high = math.floor(known.min()), math.floor(known.max())
    if high - low < bins:
        counts = np.bincount((np.floor(known) - low).astype(np.int64), minlength=high - low + 1)
        left = np.arange(low, high + 1, dtype=np.float64)
        return CountHistogram(left, np.ones(len(left)), counts, missing)
    counts, edges = np.histogram(known, bins=bins, range=(low, high + 1))
    return CountHistogram(edges[:-1], np.diff(edges), counts, missing, per_value=False)


# ------------------------------------------------------------------------- drawing
@dataclass(frozen=True)
class DrawRequest:
    """What Resample draws.

    Attributes:
        kind: The buffer's class name.
        batch_size: Rows in all (items, for a DI-engine buffer).
        seq_length: Window length for a trajectory buffer, else None.
        seed: The generator's seed (>= 0).
        held: Slots a DI-engine buffer has written (its checkpoint's length).
        capacity: Its slots.
        steps: The draws its sampler had made when saved (what its beta anneals with), or
            None to draw with the buffer's as it stands.

    Raises:
        ValueError: a size below 1 or a negative seed.
    """

    kind: str
    batch_size: int
    seq_length: int | None
    seed: int
    held: int = 0
    capacity: int = 0
    steps: int | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size: expected >= 1, got {self.batch_size}")
        if self.seq_length is not None and self.seq_length < 1:
            raise ValueError(f"seq_length: expected >= 1, got {self.seq_length}")
        if self.seed < 0:
            raise ValueError(f"seed: expected >= 0, got {self.seed}")


@dataclass(frozen=True)
class Drawn:
    """One drawn batch.

    Attributes:
        rows: int64: each drawn row's flat storage row (a DI-engine buffer's slot).
        priority: float64: each drawn row's stored priority.
        importance: float64: the importance weight each drawn row carries.
        trajectory: int64 per drawn window: its trajectory's position in
            ``trajectories()``; None for row draws.
        seq_length: The window length, or None for row draws.
    """

    rows: np.ndarray
    priority: np.ndarray
    importance: np.ndarray
    trajectory: np.ndarray | None
    seq_length: int | None

    @property
    def windows(self) -> int:
        """Windows drawn (rows, for row draws)."""
        return len(self.rows) // (self.seq_length or 1)


def draw_batch(buffer: Any, request: DrawRequest) -> Drawn:
    """One batch drawn as the buffer draws it, with a generator seeded by ``request.seed``,
    from a copy whose sampler has made ``request.steps`` draws: ``buffer`` and its sampler's
    annealing stay as they are.

    A bufcore buffer draws with ``sample_index`` (the rows and weights ``sample`` would
    read); an ``AdvancedReplayBuffer`` with its prioritized sampler over its written slots,
    the draw its ``sample`` makes after removing stale items and passing its throughput check.

    Raises:
        ValueError: what the sampler raises (nothing held, every priority zero, no trajectory
            long enough, a batch size that is not a multiple of seq_length).
    """
    generator = torch.Generator().manual_seed(request.seed)
    if request.kind == ADVANCED:
        sampler = copy.deepcopy(buffer.sampler)
        clone = None
    else:
        clone = copy.deepcopy(buffer)
        sampler = clone.sampler
    if request.steps is not None:
        # The saved count, whatever another page's draws did to the shared cached buffer.
        sampler.steps = request.steps
    if clone is None:
        index = sampler.draw(RingPosition(request.held, request.capacity), request.batch_size,
                             generator)
    else:
        index = (clone.sample_index(request.batch_size, request.seq_length, generator=generator)
                 if request.seq_length is not None else
                 clone.sample_index(request.batch_size, generator=generator))
    rows = index.rows.numpy().astype(np.int64)
    importance = (np.ones(len(rows)) if index.weights is None
                  else index.weights.numpy().astype(np.float64))
    trajectory = None if index.trajectory is None else index.trajectory.numpy().astype(np.int64)
    return Drawn(rows, sampler.priorities(rows).numpy().astype(np.float64), importance,
                 trajectory, request.seq_length)


# ------------------------------------------------------------------------- trajectories
@dataclass(frozen=True)
class Dominance:
    """Which trajectories prioritized window draws favour.

    Attributes:
        order: Positions in the trajectory table, largest share first.
        share: Each trajectory's chance of giving a drawn window (table order).
        uniform: Its chance if every valid window were equally likely (table order).
        eligible: Trajectories holding at least one window.
        effective: ``1 / sum(share ** 2)``: how many equally likely trajectories the draws
            are worth.
        top_share: The share of the largest 10 % of eligible trajectories (at least one).
    """

    order: np.ndarray
    share: np.ndarray
    uniform: np.ndarray
    eligible: int
    effective: float
    top_share: float


def dominance(shares: WindowShares) -> Dominance:
    """How concentrated the window draws of ``shares`` are."""
    share = np.asarray(shares.share, dtype=np.float64)
    windows = np.asarray(shares.windows, dtype=np.float64)
    uniform = windows / windows.sum() if windows.sum() > 0 else np.zeros(len(windows))
    order = np.argsort(-share, kind="stable")
    eligible = int((windows > 0).sum())
    squares = float((share ** 2).sum())
    top = max(1, math.ceil(eligible * 0.1))
    return Dominance(order, share, uniform, eligible,
                     1.0 / squares if squares > 0 else 0.0, float(share[order[:top]].sum()))


def trajectory_rows(
    shares: WindowShares, ranking: Dominance, drawn: Drawn | None, *, top: int
) -> dict[str, np.ndarray]:
    """The ``top`` trajectories by share as table columns: position, env, first time row,
    rows, windows, share and share without priorities (in %), and with ``drawn`` the windows
    of the batch from each."""
    chosen = ranking.order[:top]
    table = shares.table
    columns: dict[str, np.ndarray] = {
        "trajectory": chosen,
        "env": table.env.cpu().numpy()[chosen],
        "first row": table.start.cpu().numpy()[chosen],
        "rows": table.lengths.cpu().numpy()[chosen],
        "windows": np.asarray(shares.windows)[chosen],
        "share of draws %": 100.0 * ranking.share[chosen],
        "without priorities %": 100.0 * ranking.uniform[chosen],
    }
    if drawn is not None and drawn.trajectory is not None:
        hits = np.bincount(drawn.trajectory, minlength=len(ranking.share))
        columns["drawn windows"] = hits[chosen]
    return columns

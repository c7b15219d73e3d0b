"""Where a FIFO ring stands: its filled region and slots, slot ages, episode-boundary maps and
occupancy over training, as plain arrays for the FIFO occupancy page.

A ring of ``capacity`` time rows writes row ``cursor`` next (``cursor = (cursor + n) %
capacity``, DESIGN §2.1). Before it wraps, rows ``[0, length)`` are filled, row 0 the oldest;
after, every row is filled and row ``cursor`` is the oldest. Everything here derives from the
checkpoint's ``(capacity, length, cursor, full)`` and, for the wrap count, which a checkpoint
does not record, from the run log's ``buffer`` records. No function here reads files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from app.downsample import MAX_POINTS, Reduced, min_max


@dataclass(frozen=True)
class RingState:
    """A ring's position.

    Attributes:
        capacity: Time rows when full.
        length: Time rows filled.
        cursor: Row written next.
        full: Whether the ring has wrapped at least once.
        oldest: Slot of the oldest row held, or None when empty.
        newest: Slot of the newest row held, or None when empty.
        wraps: Times the ring wrapped (from the log), or None when unknown.
        wraps_step: Training step of the log record ``wraps`` came from, or None.
    """

    capacity: int
    length: int
    cursor: int
    full: bool
    oldest: int | None
    newest: int | None
    wraps: int | None = None
    wraps_step: int | None = None

    @property
    def fill(self) -> float:
        """Fraction of the slots filled."""
        return self.length / self.capacity

    def wraps_text(self) -> str:
        """The wrap count as a reader should take it (``"3"``, ``">= 1"``, ``"0"``)."""
        if self.wraps is not None:
            return f"{self.wraps:,}"
        return ">= 1" if self.full else "0"


def ring_state(
    capacity: int, length: int, cursor: int, full: bool, *, wraps: int | None = None,
    wraps_step: int | None = None,
) -> RingState:
    """The ring's oldest and newest slot from its saved position.

    Raises:
        ValueError: ``capacity < 1``, ``length`` outside ``[0, capacity]``, ``cursor`` outside
            ``[0, capacity)``, or ``full`` with ``length != capacity``.
    """
    _check_position(capacity, length, cursor, full)
    if length == 0:
        return RingState(capacity, 0, cursor, full, None, None, wraps, wraps_step)
    oldest = cursor if full else 0
    newest = (cursor - 1) % capacity
    return RingState(capacity, length, cursor, full, oldest, newest, wraps, wraps_step)


def _check_position(capacity: int, length: int, cursor: int, full: bool) -> None:
    if capacity < 1:
        raise ValueError(f"capacity: expected >= 1, got {capacity}")
    if not 0 <= length <= capacity:
        raise ValueError(f"length: expected in [0, {capacity}], got {length}")
    if not 0 <= cursor < capacity:
        raise ValueError(f"cursor: expected in [0, {capacity}), got {cursor}")
    if full and length != capacity:
        raise ValueError(f"full: a full ring holds {capacity} rows, got length {length}")


def slot_age(capacity: int, length: int, cursor: int, full: bool) -> np.ndarray:
    """Age of every slot in writes since it was written: 0 for the newest row, NaN if empty.

    One write is one time row (all envs of a ``[time, env]`` buffer).

    Raises:
        ValueError: an impossible position (see :func:`ring_state`).
    """
    _check_position(capacity, length, cursor, full)
    slots = np.arange(capacity, dtype=np.float64)
    age = np.mod(cursor - 1 - slots, capacity)
    if not full:
        age[length:] = np.nan
    return age


def ring_segments(state: RingState, *, max_segments: int = 360) -> tuple[np.ndarray, np.ndarray]:
    """The ring cut into at most ``max_segments`` equal arcs: each arc's first slot and the
    fraction of its slots that are filled (for drawing the ring; big rings are binned).

    Raises:
        ValueError: ``max_segments < 1``.
    """
    if max_segments < 1:
        raise ValueError(f"max_segments: expected >= 1, got {max_segments}")
    segments = min(state.capacity, max_segments)
    edges = np.linspace(0, state.capacity, segments + 1).round().astype(np.int64)
    filled = np.zeros(state.capacity, dtype=np.float64)
    filled[: state.length] = 1.0  # before a wrap [0, length); after, every slot
    sums = np.add.reduceat(filled, edges[:-1])
    return edges[:-1], sums / np.diff(edges)


def window_runs(
    starts: np.ndarray, seq_length: int, capacity: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The slots each window of ``seq_length`` time rows covers, as runs of adjacent slots.

    A window starting near the ring's end continues at slot 0 (``(start + k) % capacity``),
    so it is two runs: ``[start, capacity - 1]`` and ``[0, rest - 1]``.

    Returns:
        ``(window, first, last)``: for each run, the index of its window in ``starts`` and its
        first and last slot (inclusive); one run per window, two for a wrapped one.

    Raises:
        ValueError: ``capacity < 1``, ``seq_length`` outside ``[1, capacity]``, or a start
            outside ``[0, capacity)``.
    """
    if capacity < 1:
        raise ValueError(f"capacity: expected >= 1, got {capacity}")
    if not 1 <= seq_length <= capacity:
        raise ValueError(f"seq_length: expected in [1, {capacity}], got {seq_length}")
    first = np.asarray(starts, dtype=np.int64).reshape(-1)
    if first.size and (first.min() < 0 or first.max() >= capacity):
        raise ValueError(f"starts: expected slots in [0, {capacity}), got {first.min()}.."
                         f"{first.max()}")
    window = np.arange(len(first))
    end = first + seq_length - 1
    wrapped = end >= capacity
    # The part before the wrap ends at the last slot; the rest starts again at slot 0.
    head_last = np.minimum(end, capacity - 1)
    order = np.argsort(np.concatenate([window, window[wrapped]]), kind="stable")
    return (
        np.concatenate([window, window[wrapped]])[order],
        np.concatenate([first, np.zeros(int(wrapped.sum()), dtype=np.int64)])[order],
        np.concatenate([head_last, end[wrapped] - capacity])[order],
    )


@dataclass(frozen=True)
class BinnedMap:
    """A ``[time, env]`` flag map reduced to at most a cell budget, any flag in a bin kept.

    Attributes:
        cells: ``[time_bins, env_bins]`` 1.0 where any flag of the bin is set, else 0.0.
        time_starts: First time row of each time bin.
        env_starts: First env of each env bin.
        time_rows: Time rows before binning.
        envs: Envs before binning.
    """

    cells: np.ndarray
    time_starts: np.ndarray
    env_starts: np.ndarray
    time_rows: int
    envs: int

    @property
    def binned(self) -> bool:
        """Whether cells were merged."""
        return self.cells.shape != (self.time_rows, self.envs)

    def caption(self) -> str:
        """``"64,000 -> 48,000 cells (any boundary per bin)"`` or ``"640 cells"``."""
        total = self.time_rows * self.envs
        if not self.binned:
            return f"{total:,} cells"
        return f"{total:,} -> {self.cells.size:,} cells (any boundary per bin)"


def boundary_map(
    flags: np.ndarray, *, max_cells: int = MAX_POINTS, max_envs: int = 256
) -> BinnedMap:
    """End flags ``[time, env]`` (or ``[time, env, 1]``) as at most ``max_cells`` cells.

    Envs are merged first when there are more than ``max_envs``, then time rows so that the
    map fits ``max_cells``; a bin is set when any flag in it is (max pooling with torch), so no
    boundary disappears.

    Raises:
        ValueError: ``flags`` is not 2-D (after dropping a trailing 1), or a budget below 1.
    """
    if max_cells < 1 or max_envs < 1:
        raise ValueError(f"max_cells, max_envs: expected >= 1, got {max_cells}, {max_envs}")
    array = np.asarray(flags)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.ndim != 2:
        raise ValueError(f"flags: expected [time, env] end flags, got shape {array.shape}")
    rows, envs = array.shape
    env_bin = -(-envs // max_envs) if envs else 1
    env_bins = -(-envs // env_bin) if envs else 0
    time_budget = max(1, max_cells // max(env_bins, 1))
    time_bin = max(1, -(-rows // time_budget))
    cells = _max_pool(torch.from_numpy(array != 0), time_bin, env_bin)
    return BinnedMap(
        cells=cells.numpy().astype(np.float64),
        time_starts=np.arange(0, rows, time_bin, dtype=np.int64),
        env_starts=np.arange(0, envs, env_bin, dtype=np.int64),
        time_rows=rows,
        envs=envs,
    )


def _max_pool(flags: torch.Tensor, time_bin: int, env_bin: int) -> torch.Tensor:
    """Any-set pooling of a bool ``[T, E]`` over ``time_bin x env_bin`` blocks (ragged ends)."""
    rows, envs = flags.shape
    padded_rows = -(-rows // time_bin) * time_bin
    padded_envs = -(-envs // env_bin) * env_bin
    padded = torch.zeros(padded_rows, padded_envs, dtype=torch.bool)
    padded[:rows, :envs] = flags
    blocks = padded.reshape(padded_rows // time_bin, time_bin, padded_envs // env_bin, env_bin)
    return blocks.any(dim=3).any(dim=1)


@dataclass(frozen=True)
class Occupancy:
    """One buffer's fill over training, from the log's ``buffer`` records.

    Attributes:
        step: Training step of each record.
        fill: ``len / capacity`` at that step.
        wraps: Wrap count at that step (NaN where the record has none).
    """

    step: np.ndarray
    fill: np.ndarray
    wraps: np.ndarray


def occupancy(records: Iterable[Mapping[str, Any]], buffer: str) -> Occupancy:
    """The fill of ``buffer`` over the ``buffer`` records that mention it (others skipped).

    A record counts when ``record[buffer]`` holds numbers ``len`` and ``capacity > 0``.
    """
    steps: list[float] = []
    fills: list[float] = []
    wraps: list[float] = []
    for record in records:
        stats = record.get(buffer)
        if not isinstance(stats, Mapping):
            continue
        length, capacity = stats.get("len"), stats.get("capacity")
        if not (isinstance(length, int | float) and _number(length)):
            continue
        if not (isinstance(capacity, int | float) and _number(capacity)) or capacity <= 0:
            continue
        steps.append(float(record.get("step", len(steps))))
        fills.append(float(length) / float(capacity))
        wrap = stats.get("wraps")
        wraps.append(float(wrap) if isinstance(wrap, int | float) and _count(wrap) else np.nan)
    return Occupancy(np.array(steps), np.array(fills), np.array(wraps))


def latest_wraps(records: Sequence[Mapping[str, Any]], buffer: str) -> tuple[int, int] | None:
    """``(wraps, step)`` from the last ``buffer`` record giving a wrap count for ``buffer``."""
    for record in reversed(records):
        stats = record.get(buffer)
        if isinstance(stats, Mapping) and _count(stats.get("wraps")):
            return int(stats["wraps"]), int(record.get("step", 0))
    return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)


def _count(value: object) -> bool:
    """Whether ``value`` is a number a 64-bit counter holds (a log may hold any JSON number)."""
    return _number(value) and isinstance(value, int | float) and 0 <= value < 2**63


def slot_age_series(state: RingState, *, max_points: int = MAX_POINTS) -> Reduced:
    """:func:`slot_age` against the slot, reduced to ``max_points`` (min/max per bucket)."""
    age = slot_age(state.capacity, state.length, state.cursor, state.full)
    return min_max(np.arange(state.capacity, dtype=np.float64), age, max_points=max_points)

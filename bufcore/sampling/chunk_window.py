"""RLinf's chunk sampling maths: the sliding window of trajectories and the bucketize mapping.

A disk trajectory buffer samples single rows ("chunks") from its newest ``window_size``
trajectories (all of them for 0), uniformly over their rows with replacement, so each
trajectory weighs its row count ``T * B`` (REFERENCE §9.4):

1. the window's cumulative row ends, ``ends[k] = count_0 + ... + count_k``;
2. ``count`` draws of a global row id in ``[0, total)`` from the caller's generator;
3. ``position = bucketize(id, ends, right=True)`` (which trajectory of the window) and
   ``local = id - start(position)`` (which of its rows).

Example: row counts ``[4, 3, 2]`` with window 2 -> ids ``[1, 2]``, ends ``[3, 5]``; global ids
0, 1, 2 -> trajectory 1, rows 0, 1, 2; 3, 4 -> trajectory 2, rows 0, 1. Window 0 -> ends
``[4, 7, 9]``.

Unlike RLinf, a draw returns exactly ``count`` rows (RLinf clamps ``count`` to the window's
rows, REFERENCE §9.7). The sampler holds no rows: the buffer passes the window's ids and row
counts and gathers what the draw names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from bufcore.checks import MAX_COUNT, check_int

_Item = TypeVar("_Item")


def newest(items: Sequence[_Item], window_size: int) -> Sequence[_Item]:
    """The newest ``window_size`` of ``items`` (oldest first), all of them for 0: the
    trajectories a window of that size samples from (the buffer's index and the dashboard's
    read of a directory's index both take their window here)."""
    return items[-window_size:] if window_size else items


@dataclass(frozen=True)
class ChunkWindow:
    """The trajectories a draw picks from, oldest first.

    Attributes:
        ids: Trajectory ids.
        ends: int64 ``[len(ids)]`` cumulative row ends.
    """

    ids: tuple[int, ...]
    ends: torch.Tensor

    @classmethod
    def of(cls, items: Sequence[tuple[int, int]]) -> ChunkWindow:
        """The window of ``(trajectory id, rows)`` items, oldest first."""
        counts = torch.tensor([count for _, count in items], dtype=torch.int64)
        return cls(tuple(trajectory_id for trajectory_id, _ in items), torch.cumsum(counts, 0))

    @property
    def total(self) -> int:
        """Rows in the window."""
        return int(self.ends[-1]) if len(self.ids) else 0

    @property
    def starts(self) -> torch.Tensor:
        """int64 ``[len(ids)]`` first global row id of each trajectory."""
        return self.ends - torch.diff(self.ends, prepend=self.ends.new_zeros(1))


@dataclass(frozen=True)
class ChunkDraw:
    """Where drawn rows sit: ``position`` (int64 ``[count]``, into :attr:`ChunkWindow.ids`)
    and ``local`` (int64 ``[count]``, the row of that trajectory)."""

    position: torch.Tensor
    local: torch.Tensor


@dataclass(frozen=True)
class ChunkIndex:
    """Where a draw reads, by trajectory: ``trajectory_id`` (int64 ``[count]``) and ``row``
    (int64 ``[count]``: the flat row ``t * B + b`` of that trajectory)."""

    trajectory_id: torch.Tensor
    row: torch.Tensor

    @classmethod
    def of(cls, window: ChunkWindow, draw: ChunkDraw) -> ChunkIndex:
        """The ids and rows ``draw`` names in ``window``."""
        ids = torch.tensor(window.ids, dtype=torch.int64)
        return cls(ids[draw.position], draw.local.clone())


def locate(window: ChunkWindow, rows: torch.Tensor) -> ChunkDraw:
    """Map global row ids of ``window`` to (trajectory position, local row) by bucketize."""
    position = torch.bucketize(rows, window.ends, right=True)
    return ChunkDraw(position, rows - window.starts[position])


class SlidingWindowSampler:
    """Uniform row draws over the newest ``window_size`` trajectories (0: all).

    The window is recomputed only when the buffer's index changed (it passes a version that
    any change bumps), as RLinf caches it.

    Raises:
        TypeError: ``window_size`` is not an int.
        ValueError: ``window_size < 0``.
    """

    def __init__(self, window_size: int) -> None:
        self.window_size = check_int(window_size, "sample_window_size", minimum=0)
        self._cached: tuple[int, ChunkWindow] | None = None

    def window(
        self, version: int, newest: Callable[[int], Sequence[tuple[int, int]]]
    ) -> ChunkWindow:
        """The window at index ``version``; ``newest(k)`` gives the newest ``k`` items
        ``(id, rows)`` oldest first (all for ``k == 0``)."""
        if self._cached is None or self._cached[0] != version:
            self._cached = (version, ChunkWindow.of(newest(self.window_size)))
        return self._cached[1]

    def draw(self, window: ChunkWindow, count: int, generator: torch.Generator) -> ChunkDraw:
        """``count`` rows of ``window``, uniformly with replacement.

        Raises:
            TypeError: ``count`` is not an int.
            ValueError: ``count < 1``, or the window has no rows.
        """
        count = check_int(count, "num_chunks", minimum=1, maximum=MAX_COUNT)
        if window.total == 0:
            raise ValueError("num_chunks: the sampling window holds no rows")
        rows = torch.randint(0, window.total, (count,), generator=generator, dtype=torch.int64)
        return locate(window, rows)

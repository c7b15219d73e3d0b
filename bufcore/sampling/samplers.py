"""Samplers: which rows or windows a draw reads, holding no rows (DESIGN §1).

A buffer owns a storage and a sampler. To sample, it tells the sampler where the ring stands
(:class:`RingPosition`: rows held, capacity, envs per time row) and, for a trajectory buffer,
what window it wants (:class:`WindowRequest`), and gets a
:class:`~bufcore.sampling.index.SampleIndex` back; then it gathers the storage at those rows.
One sampler object serves any buffer that needs its distribution, and a buffer is a new kind
when it is built with another sampler.

Implementations:

- :class:`UniformRows`: filled rows uniformly with replacement (``DictBuffer``, ``ZBuffer``).
- :class:`OnlineWindows`: windows of an online ring whose episode boundaries it maintains as
  rows are written (:class:`~bufcore.sampling.boundaries.OnlineBoundaries`), drawn by
  rejection first (:func:`~bufcore.sampling.windows.sample_window_starts`).
- :class:`PriorityWindows`: windows of a fixed table of trajectories, each trajectory weighted
  by its priority (the expert buffer; :func:`~bufcore.sampling.windows.draw_from_table`).
- :class:`~bufcore.sampling.prioritized.PrioritizedSampler` (its own module): rows or windows by
  per-row priorities, with importance weights; it keeps per-row state, so its buffer tells it
  about writes (:class:`FollowsWrites`).

Both window samplers take either weighting (:mod:`bufcore.sampling.windows`). A sampler that
holds state beyond what the rows determine gives it as plain data through ``state_dict()`` and
takes it back with ``load_state_dict()``; the buffer saves it with its own state.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from bufcore.checks import concrete_device
from bufcore.sampling.boundaries import OnlineBoundaries
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.windows import (
    RowSpans,
    TrajectoryTable,
    Weighting,
    check_weighting,
    draw_from_table,
    sample_window_starts,
    table_position,
    window_index,
)


@dataclass(frozen=True)
class RingPosition:
    """Where a ring stands, as a sampler needs it.

    Attributes:
        length: Time rows held (the filled rows are the physical rows ``[0, length)``).
        capacity: Time rows of the ring.
        env_count: Env columns per time row (1 for ``[time]`` rows).
    """

    length: int
    capacity: int
    env_count: int = 1


@dataclass(frozen=True)
class WindowRequest:
    """The windows one sample asks for.

    Attributes:
        length: Rows per window (the ``seq_length`` of the call).
        need: Rows of one trajectory a window reads: ``length`` plus 1 when the row after each
            window row is read too (``next``).
        locate: Whether to fill :attr:`SampleIndex.trajectory` (``sample_index`` does; a
            ``sample`` that only gathers does not pay for it).
        spans: Where each stored row sits in its trajectory, for samplers that draw windows
            through their rows (the prioritized sampler); the buffer's window sampler gives it
            (:meth:`WindowSampler.spans`), None where it has none.
    """

    length: int
    need: int
    locate: bool = False
    spans: RowSpans | None = None


class Sampler(Protocol):
    """Draws where a sample reads.

    ``draw`` returns ``count`` rows (``window`` None) or ``count`` windows of ``window.length``
    rows each, slice-major, as flat storage rows. It may raise ``ValueError`` when nothing can
    be drawn (no trajectory long enough); it draws only from ``generator``.
    """

    def draw(
        self,
        ring: RingPosition,
        count: int,
        generator: torch.Generator,
        *,
        window: WindowRequest | None = None,
    ) -> SampleIndex: ...


@runtime_checkable
class FollowsWrites(Protocol):
    """A sampler that keeps state per stored row (the prioritized sampler's priorities), told
    by its buffer where each write landed.

    The buffer calls :meth:`bind` before its first write (an allocation that fails there leaves
    the buffer unwritten), :meth:`written` after every write and :meth:`reset` when it is
    cleared.
    """

    def bind(self, capacity: int, env_count: int) -> None:
        """Allocate for a ring of ``capacity`` time rows of ``env_count`` envs.

        Raises:
            ValueError: bound to a ring of another shape already.
            MemoryError: the per-row state cannot be allocated.
        """
        ...

    def written(self, ring: RingPosition, start: int, count: int) -> None:
        """``count`` time rows were written from physical row ``start`` (wrapping; of more
        than ``capacity`` rows the last ``capacity`` stay); ``ring`` is where it stands now."""
        ...

    def reset(self) -> None:
        """Every row is gone (the buffer was cleared)."""
        ...


def check_sampler(sampler: Any, argument: str = "sampler") -> Sampler:
    """``sampler`` once checked to have a ``draw`` method.

    Raises:
        TypeError: it has none (a class passed instead of an instance, say).
    """
    if isinstance(sampler, type) or not callable(getattr(sampler, "draw", None)):
        raise TypeError(
            f"{argument}: expected a Sampler (an object with draw()), got {sampler!r:.80}"
        )
    return sampler  # type: ignore[no-any-return]


def checked_rows(index: Any, ring: RingPosition, count: int, device: torch.device) -> SampleIndex:
    """A sampler's answer to a draw of ``count`` rows, checked before anything is gathered:
    a hand-written sampler that returns a row outside the filled ones would otherwise read
    rows never written (or fail inside the gather, or on CUDA with a device assert).

    Raises:
        TypeError: not a :class:`SampleIndex`, or rows that are not an integer tensor.
        ValueError: not ``count`` rows on ``device``, another ``env_count`` than the ring's, or
            a row outside the filled rows ``[0, length * env_count)``.
    """
    if not isinstance(index, SampleIndex):
        raise TypeError(f"sampler: draw() returned a {type(index).__name__}, not a SampleIndex")
    rows = index.rows
    if not isinstance(rows, torch.Tensor) or rows.dtype not in (torch.int64, torch.int32):
        got = rows.dtype if isinstance(rows, torch.Tensor) else type(rows).__name__
        raise TypeError(f"sampler: expected int64 rows, got {got}")
    on = concrete_device(rows.device)
    if tuple(rows.shape) != (count,) or on != concrete_device(device) or (
        index.env_count != ring.env_count
    ):
        raise ValueError(
            f"sampler: expected {count} rows on {device} with env_count {ring.env_count}, got "
            f"shape {list(rows.shape)} on {on} with env_count {index.env_count}"
        )
    filled = ring.length * ring.env_count
    low, high = (int(v) for v in torch.aminmax(rows)) if count else (0, 0)
    if low < 0 or high >= filled:
        raise ValueError(
            f"sampler: expected rows in [0, {filled}) (the filled rows), got rows in "
            f"[{low}, {high}]"
        )
    return index


class UniformRows:
    """Filled rows uniformly with replacement: ``torch.randint(length * env_count)``.

    Windows are not its distribution: a request with ``window`` raises ``ValueError``.
    """

    def draw(
        self,
        ring: RingPosition,
        count: int,
        generator: torch.Generator,
        *,
        window: WindowRequest | None = None,
    ) -> SampleIndex:
        if window is not None:
            raise ValueError("UniformRows draws rows, not windows")
        rows = torch.randint(
            ring.length * ring.env_count, (count,), generator=generator, device=generator.device
        )
        return SampleIndex(rows, ring.env_count)


class WindowSampler(ABC):
    """What both window samplers share: the weighting, and turning window starts into an
    index; each says where its trajectories are and how it draws starts."""

    def __init__(self, weighting: Weighting) -> None:
        self._weighting = check_weighting(weighting)

    @property
    def weighting(self) -> Weighting:
        """``"trajectory"`` (the reference's) or ``"window"``."""
        return self._weighting

    def with_weighting(self, weighting: Weighting) -> Any:
        """A copy sharing this sampler's trajectories that draws with ``weighting``.

        Raises:
            ValueError: an unknown weighting.
        """
        view = copy.copy(self)
        view._weighting = check_weighting(weighting)
        return view

    @abstractmethod
    def trajectories(self) -> TrajectoryTable:
        """The trajectories windows are drawn from, sorted by env, then time."""

    def spans(self) -> RowSpans | None:
        """Where each stored row sits in its trajectory, for a sampler that draws windows
        through their rows; None when the trajectories are not rows of a ring."""
        return None

    @abstractmethod
    def _starts(
        self, count: int, need: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` window starts ``(time, env)`` of windows reading ``need`` rows.

        Raises:
            ValueError: no trajectory can hold such a window.
        """

    def draw(
        self,
        ring: RingPosition,
        count: int,
        generator: torch.Generator,
        *,
        window: WindowRequest | None = None,
    ) -> SampleIndex:
        """``count`` windows (see :class:`Sampler`).

        Raises:
            ValueError: ``window`` is None, or no trajectory can hold such a window (the
                message gives the stored length range) or every one that can has priority 0.
        """
        if window is None:
            raise ValueError(f"{type(self).__name__} draws windows: pass window=")
        start, env = self._starts(count, window.need, generator)
        rows = window_index(
            start, env, length=window.length, capacity=ring.capacity, env_count=ring.env_count
        )
        located = table_position(self.trajectories(), start, env) if window.locate else None
        return SampleIndex(rows, ring.env_count, located)

    def state_dict(self) -> dict[str, Any]:
        """The sampler's own state as plain data."""
        return {"weighting": self._weighting}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`state_dict` gave.

        Raises:
            ValueError: an unknown weighting (nothing changes).
        """
        self._weighting = check_weighting(state["weighting"])


class OnlineWindows(WindowSampler):
    """Windows of an online ring, whose trajectories it follows as rows are written.

    The buffer hands it each written block's end flags (:meth:`extend`), or all of them after
    a load (:meth:`rebuild`); trajectories are in absolute time (time ``tau`` lives at physical
    row ``tau % capacity``).

    Args:
        capacity: Time rows of the ring.
        device: Where the boundary tables live (the storage's device).
        weighting: ``"trajectory"`` or ``"window"``.

    Raises:
        ValueError: ``capacity < 1`` or an unknown weighting.
        TypeError: ``capacity`` is not an int.
    """

    def __init__(
        self, capacity: int, *, device: torch.device, weighting: Weighting = "trajectory"
    ) -> None:
        super().__init__(weighting)
        self._boundaries = OnlineBoundaries(capacity, device=device)

    def extend(self, end: torch.Tensor) -> None:
        """Follow a written block of end flags ``[n, E]`` (bool)."""
        self._boundaries.extend(end)

    def rebuild(self, end: torch.Tensor, *, cursor: int, is_full: bool) -> None:
        """Recompute the trajectories from a ring's physical end flags ``[rows, E]``."""
        self._boundaries.rebuild(end, cursor=cursor, is_full=is_full)

    def reset(self) -> None:
        """Forget every trajectory (the ring was emptied), in place: copies made by
        :meth:`with_weighting` share the boundaries and must see it too."""
        self._boundaries.clear()

    def trajectories(self) -> TrajectoryTable:
        return self._boundaries.table()

    def spans(self) -> RowSpans:
        return self._boundaries

    def _starts(
        self, count: int, need: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return sample_window_starts(
            self._boundaries, count=count, need=need, weighting=self._weighting,
            generator=generator,
        )


class PriorityWindows(WindowSampler):
    """Windows of a fixed table of trajectories, each trajectory weighted by its priority.

    Args:
        table: The trajectories (physical rows, one env).
        priorities: ``[n]`` non-negative weights, one per trajectory of ``table``; the buffer
            validates them (a zero priority is never drawn).
        weighting: ``"trajectory"`` or ``"window"``.

    Raises:
        ValueError: an unknown weighting, or not one priority per trajectory.
    """

    def __init__(
        self, table: TrajectoryTable, priorities: torch.Tensor, *, weighting: Weighting
    ) -> None:
        super().__init__(weighting)
        self._table = table
        self.priorities = priorities

    @property
    def priorities(self) -> torch.Tensor:
        """``[n]`` weight of each trajectory."""
        return self._priorities

    @priorities.setter
    def priorities(self, values: torch.Tensor) -> None:
        if values.shape != self._table.start.shape:
            raise ValueError(
                f"priorities: expected one per trajectory ({len(self._table.start)}), got "
                f"shape {list(values.shape)}"
            )
        self._priorities = values

    def trajectories(self) -> TrajectoryTable:
        return self._table

    def _starts(
        self, count: int, need: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return draw_from_table(
            self._table, count=count, need=need, weighting=self._weighting,
            generator=generator, priorities=self._priorities,
        )

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "priorities": self._priorities.tolist()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`state_dict` gave (the buffer checks the priorities' values).

        Raises:
            ValueError: an unknown weighting, or not one priority per trajectory (nothing
                changes).
        """
        weighting = check_weighting(state["weighting"])
        self.priorities = torch.as_tensor(
            state["priorities"], dtype=self._priorities.dtype, device=self._priorities.device
        )
        self._weighting = weighting

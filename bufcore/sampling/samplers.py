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

Both window samplers take either weighting (:mod:`bufcore.sampling.windows`). A sampler that
holds state beyond what the rows determine gives it as plain data through ``state_dict()`` and
takes it back with ``load_state_dict()``; the buffer saves it with its own state.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from bufcore.sampling.boundaries import OnlineBoundaries
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.windows import (
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
    """

    length: int
    need: int
    locate: bool = False


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
        """Forget every trajectory (the ring was emptied)."""
        self._boundaries = OnlineBoundaries(
            self._boundaries.capacity, device=self._boundaries.device
        )

    def trajectories(self) -> TrajectoryTable:
        return self._boundaries.table()

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

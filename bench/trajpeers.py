"""One adapter per trajectory-sampling implementation, in two small interfaces.

**Index subjects** (:class:`IndexSubject`) build the row indices of one batch of windows over
``[capacity, E]`` end flags, without reading any payload. Each is filled from a
:class:`~bench.rollout.FlagStream` when created (untimed); its ``step()`` is what a training loop
does per update: account for one new time step of flags, then draw ``windows`` windows of
``seq_length`` rows inside trajectories and compute their rows.

- ``bufcore``: :meth:`bufcore.sampling.boundaries.OnlineBoundaries.extend` (the incremental
  boundary update of ``TrajectoryDictBufferMultiDim.extend``),
  :func:`bufcore.sampling.windows.sample_window_starts` and
  :func:`bufcore.sampling.windows.window_index` (flat rows ``time % capacity * E + env``).
- ``torchrl SliceSampler``: ``ReplayBuffer(LazyTensorStorage(capacity * E, ndim=2),
  SliceSampler(num_slices=windows, end_key="truncated", traj_key=None, cache_values=False),
  dim_extend=0)`` holding only the end flags, so the storage is ``[capacity, E]`` time first (the
  ``[time, env]`` layout) and its windows run along time inside one env's trajectory. ``step()``
  is ``rb.extend`` of one ``[1, E]`` row and ``rb.sampler.sample(rb.storage, batch)``: torchrl
  rescans the flags on every sample (its cache is cleared by every write anyway).
- ``BFM-Zero rescan``: what the reference does (REFERENCE §4.2): write the row into the flag
  ring, then :func:`bufcore.sampling.boundaries.find_start_stop_traj` over all
  ``[capacity, E]`` flags before each sample, the eligibility filter and
  :func:`bench.perleaf.get_idxs`.
- ``BFM-Zero cached table``: the same draw from a table computed once and never updated (no
  extend): stale after the first write, so not a valid design; it is the reference's draw
  alone, as if keeping its table current cost nothing.
- ``bufcore (update only)`` / ``bufcore (draw only)``: the two halves of bufcore's step, timed
  apart, to show where its time goes (reported in µs only).

**Window subjects** (:class:`WindowPeer`) hold a full ``[capacity, E]`` buffer of BFM-Zero's
online rows and sample ``batch`` rows as ``batch // seq_length`` windows, with ``next`` (the row
after each one) for :data:`KEYS_TP1`. One peer may expose several samplers over the same
storage (torchrl with and without cached boundaries), so the rows are written once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from bench.peers import available, package_version
from bench.perleaf import PerLeafTrajectoryBuffer, get_idxs
from bench.rollout import FlagStream
from bench.workload import Nested
from bufcore import TrajectoryDictBufferMultiDim
from bufcore.sampling.boundaries import OnlineBoundaries, find_start_stop_traj
from bufcore.sampling.windows import sample_window_starts, window_index

END_KEY = "truncated"
KEYS_T = ["observation", "action", "z", "terminated", "truncated", "reward"]
"""Window rows returned by BFM-Zero's online buffer (train.py's ``output_key_t`` without
``step_count``, which this workload does not store)."""
KEYS_TP1 = ["observation", "terminated"]
"""Rows returned under ``next`` (train.py's ``output_key_tp1``)."""
FILL_STEPS = 125
"""Time rows per extend while filling (untimed; fewer, larger writes fill faster)."""

BUFCORE = "bufcore"
BUFCORE_UPDATE = "bufcore (update only)"
BUFCORE_DRAW = "bufcore (draw only)"
TORCHRL = "torchrl SliceSampler"
TORCHRL_CACHED = "torchrl SliceSampler (cache)"
RESCAN = "BFM-Zero rescan"
CACHED_TABLE = "BFM-Zero cached table"
PER_LEAF = "per-leaf (cached boundaries)"


@dataclass(frozen=True)
class IndexShape:
    """The index workload: a ``[capacity, envs]`` ring, ``windows`` windows of ``seq_length``."""

    capacity: int
    envs: int
    windows: int
    seq_length: int

    @property
    def batch(self) -> int:
        """Rows per batch (samples)."""
        return self.windows * self.seq_length


class IndexSubject(Protocol):
    """Builds one batch of window indices per ``step()`` (see the module docstring)."""

    def step(self) -> None: ...


def _cpu() -> torch.device:
    return torch.device("cpu")


def _steps(stream: FlagStream) -> list[torch.Tensor]:
    """The steady-state ``[1, E]`` flag rows, sliced once (views)."""
    return [stream.truncated[stream.step(i)] for i in range(stream.steady)]


def _physical_ring(stream: FlagStream, capacity: int) -> tuple[torch.Tensor, int]:
    """The ``[capacity, E]`` flag ring after the fill, and its cursor (the next row to write)."""
    times = torch.arange(stream.fill - capacity, stream.fill)
    ring = torch.empty(capacity, stream.envs, dtype=torch.bool)
    ring[times % capacity] = stream.truncated[times]
    return ring, stream.fill % capacity


# ------------------------------------------------------------------------------ bufcore index
class BufcoreIndex:
    """bufcore's online index path; ``part`` times one half of it (``"update"``/``"draw"``)."""

    def __init__(self, stream: FlagStream, shape: IndexShape, part: str = "all") -> None:
        self.shape = shape
        self.part = part
        self.boundaries = OnlineBoundaries(shape.capacity, device=_cpu())
        for rows in stream.fill_chunks(FILL_STEPS):
            self.boundaries.extend(stream.truncated[rows])
        self.steps = _steps(stream)
        self.generator = torch.Generator().manual_seed(0)
        self.i = 0

    def step(self) -> None:
        shape = self.shape
        if self.part != "draw":
            self.boundaries.extend(self.steps[self.i % len(self.steps)])
            self.i += 1
        if self.part == "update":
            return
        start, env = sample_window_starts(
            self.boundaries,
            count=shape.windows,
            need=shape.seq_length,
            weighting="trajectory",
            generator=self.generator,
        )
        window_index(
            start, env, length=shape.seq_length, capacity=shape.capacity, env_count=shape.envs
        )


# ------------------------------------------------------------------------------ torchrl index
def _quiet_torchrl() -> None:
    logging.getLogger("torchrl").setLevel(logging.WARNING)


def _flags_td(flags: torch.Tensor) -> Any:
    from tensordict import TensorDict  # type: ignore[import-untyped]

    return TensorDict({END_KEY: flags.unsqueeze(-1)}, batch_size=list(flags.shape))


class TorchrlIndex:
    """torchrl's ``SliceSampler`` without cached values over a ``[capacity, E]`` flag storage."""

    def __init__(self, stream: FlagStream, shape: IndexShape) -> None:
        from torchrl.data import (  # type: ignore[import-untyped]
            LazyTensorStorage,
            ReplayBuffer,
            SliceSampler,
        )

        _quiet_torchrl()
        self.shape = shape
        sampler = SliceSampler(
            num_slices=shape.windows, end_key=END_KEY, traj_key=None, cache_values=False
        )
        # ndim=2 counts capacity in elements; dim_extend=0 extends along time ([n, E] batches).
        storage = LazyTensorStorage(shape.capacity * shape.envs, ndim=2)
        self.buffer = ReplayBuffer(
            storage=storage, sampler=sampler, batch_size=shape.batch, dim_extend=0
        )
        for rows in stream.fill_chunks(FILL_STEPS):
            self.buffer.extend(_flags_td(stream.truncated[rows]))
        self.steps = [_flags_td(flags) for flags in _steps(stream)]
        self.i = 0

    def step(self) -> None:
        self.buffer.extend(self.steps[self.i % len(self.steps)])
        self.i += 1
        self.buffer.sampler.sample(self.buffer.storage, self.shape.batch)


# ----------------------------------------------------------------------------- BFM-Zero index
class RescanIndex:
    """The reference's index path: full rescan of the flag ring before every sample."""

    def __init__(self, stream: FlagStream, shape: IndexShape, *, rescan: bool = True) -> None:
        self.shape = shape
        self.rescan = rescan
        self.ring, self.cursor = _physical_ring(stream, shape.capacity)
        self.steps = _steps(stream)
        self.generator = torch.Generator().manual_seed(0)
        self.table = find_start_stop_traj(self.ring, at_capacity=True, cursor=self.cursor - 1)
        self.i = 0

    def step(self) -> None:
        shape = self.shape
        if self.rescan:
            self.ring[self.cursor] = self.steps[self.i % len(self.steps)][0]
            self.i += 1
            self.cursor = (self.cursor + 1) % shape.capacity
            self.table = find_start_stop_traj(self.ring, at_capacity=True, cursor=self.cursor - 1)
        start_idx, _, lengths = self.table
        eligible = lengths >= shape.seq_length
        rows = get_idxs(
            shape.seq_length,
            shape.windows,
            lengths[eligible],
            start_idx[eligible],
            shape.capacity,
            self.generator,
        )
        rows.unbind(-1)


@dataclass(frozen=True)
class IndexImpl:
    """How to build one index subject.

    Attributes:
        name: Row label.
        create: Stream, shape -> a filled subject.
        samples: Whether a step yields a batch (False for bufcore's half steps: µs only).
        version: Package versions, for the report.
    """

    name: str
    create: Callable[[FlagStream, IndexShape], IndexSubject]
    samples: bool
    version: str


def index_implementations() -> tuple[list[IndexImpl], list[str]]:
    """The index subjects that can run here, and the missing peer packages."""
    bufcore_version = package_version("bufcore")
    found = [
        IndexImpl(BUFCORE, BufcoreIndex, True, bufcore_version),
        IndexImpl(RESCAN, RescanIndex, True, ""),
        IndexImpl(
            CACHED_TABLE, lambda stream, shape: RescanIndex(stream, shape, rescan=False), True, ""
        ),
        IndexImpl(
            BUFCORE_UPDATE,
            lambda stream, shape: BufcoreIndex(stream, shape, "update"),
            False,
            bufcore_version,
        ),
        IndexImpl(
            BUFCORE_DRAW,
            lambda stream, shape: BufcoreIndex(stream, shape, "draw"),
            False,
            bufcore_version,
        ),
    ]
    missing: list[str] = []
    if available("torchrl") and available("tensordict"):
        found.insert(1, IndexImpl(TORCHRL, TorchrlIndex, True, _torchrl_version()))
    else:
        missing.append("torchrl")
    return found, missing


def _torchrl_version() -> str:
    return f"{package_version('torchrl')} (tensordict {package_version('tensordict')})"


# --------------------------------------------------------------------------- window subjects
class WindowPeer(Protocol):
    """A buffer of ``[time, env]`` rows with one or more named samplers over it."""

    def extend(self, data: Any) -> None: ...

    def samplers(self) -> dict[str, Callable[[], Any]]: ...


@dataclass(frozen=True)
class WindowImpl:
    """How to feed and build one window peer.

    Attributes:
        name: Label of the peer (its samplers carry their own row labels).
        prepare: ``[n, E, ...]`` nested batch -> this peer's input (untimed).
        create: ``(capacity, envs)`` -> an empty peer of ``capacity`` time rows.
        version: Package versions, for the report.
    """

    name: str
    prepare: Callable[[Nested], Any]
    create: Callable[[int, int], WindowPeer]
    version: str


@dataclass(frozen=True)
class WindowShape:
    """``batch`` rows per sample as ``batch // seq_length`` windows."""

    batch: int
    seq_length: int

    @property
    def windows(self) -> int:
        return self.batch // self.seq_length


class BufcoreWindows:
    """``bufcore.TrajectoryDictBufferMultiDim(n_dim=2, end_key="truncated")``."""

    def __init__(self, capacity: int, shape: WindowShape) -> None:
        self.shape = shape
        self.buffer = TrajectoryDictBufferMultiDim(
            capacity=capacity,
            n_dim=2,
            seq_length=shape.seq_length,
            output_key_t=KEYS_T,
            output_key_tp1=KEYS_TP1,
            end_key=END_KEY,
            seed=0,
        )

    def extend(self, data: Any) -> None:
        self.buffer.extend(data)

    def samplers(self) -> dict[str, Callable[[], Any]]:
        return {BUFCORE: lambda: self.buffer.sample(self.shape.batch)}


class TorchrlWindows:
    """torchrl over one ``[capacity, E]`` storage, sampled with and without cached values.

    ``next`` the torchrl way: windows of ``seq_length + 1`` rows (strict length, so all inside
    one trajectory), split into the first ``seq_length`` rows and the last ``seq_length`` rows
    (of :data:`KEYS_TP1`), each made contiguous ``[batch, ...]`` as bufcore returns them.
    """

    def __init__(self, capacity: int, envs: int, shape: WindowShape) -> None:
        from torchrl.data import (
            LazyTensorStorage,
            ReplayBuffer,
            SliceSampler,
        )

        _quiet_torchrl()
        self.shape = shape
        # ndim=2 counts capacity in elements; dim_extend=0 extends along time ([n, E] batches).
        storage = LazyTensorStorage(capacity * envs, ndim=2)
        self.buffers: dict[str, Any] = {}
        for name, cache in ((TORCHRL_CACHED, True), (TORCHRL, False)):
            sampler = SliceSampler(
                num_slices=shape.windows, end_key=END_KEY, traj_key=None, cache_values=cache
            )
            self.buffers[name] = ReplayBuffer(
                storage=storage,
                sampler=sampler,
                batch_size=shape.windows * (shape.seq_length + 1),
                dim_extend=0,
            )

    def extend(self, data: Any) -> None:
        # One writer: the other buffer shares the storage (and sees its writes).
        self.buffers[TORCHRL_CACHED].extend(data)

    def _sample(self, name: str) -> Any:
        windows = self.buffers[name].sample().view(self.shape.windows, -1)
        out = windows[:, :-1].reshape(-1)
        out["next"] = windows[:, 1:].select(*KEYS_TP1).reshape(-1)
        return out

    def samplers(self) -> dict[str, Callable[[], Any]]:
        return {name: functools.partial(self._sample, name) for name in self.buffers}


class PerLeafWindows:
    """:class:`bench.perleaf.PerLeafTrajectoryBuffer` (boundaries cached until an extend)."""

    def __init__(self, capacity: int, shape: WindowShape) -> None:
        self.shape = shape
        self.buffer = PerLeafTrajectoryBuffer(
            capacity,
            seq_length=shape.seq_length,
            output_key_t=KEYS_T,
            output_key_tp1=KEYS_TP1,
            end_key=END_KEY,
        )

    def extend(self, data: Any) -> None:
        self.buffer.extend(data)

    def samplers(self) -> dict[str, Callable[[], Any]]:
        return {PER_LEAF: lambda: self.buffer.sample(self.shape.batch)}


def _to_tensordict(batch: Nested) -> Any:
    from tensordict import TensorDict

    leaf = batch[END_KEY]
    return TensorDict(batch, batch_size=list(leaf.shape[:2]))


def window_implementations(
    shape: WindowShape,
) -> tuple[WindowImpl, list[WindowImpl], list[str]]:
    """bufcore, the peers that can run here, and the missing peer packages."""
    base = WindowImpl(
        BUFCORE,
        lambda batch: batch,
        lambda capacity, envs: BufcoreWindows(capacity, shape),
        package_version("bufcore"),
    )
    peers: list[WindowImpl] = []
    missing: list[str] = []
    if available("torchrl") and available("tensordict"):
        peers.append(
            WindowImpl(
                "torchrl",
                _to_tensordict,
                lambda capacity, envs: TorchrlWindows(capacity, envs, shape),
                _torchrl_version(),
            )
        )
    else:
        missing.append("torchrl")
    peers.append(
        WindowImpl(PER_LEAF, lambda batch: batch, lambda c, envs: PerLeafWindows(c, shape), "")
    )
    return base, peers, missing

"""The ``online`` scenario of a headline child: a ``[time, env]`` buffer written every step.

One env step of an online loop writes ``[1, envs]`` rows (one time row, every env) and draws
one batch of windows with ``next`` (``batch // seq_length`` windows of ``seq_length`` rows,
BFM-Zero's keys :data:`bench.trajpeers.KEYS_T` / :data:`bench.trajpeers.KEYS_TP1`). The buffer
holds ``capacity`` time rows and is filled untimed, past its wrap, with episodes from
:mod:`bench.rollout` (as :mod:`bench.trajectory` fills its buffers). Then ``blocks`` rounds time
one block each of:

- ``step``: extend ``[1, envs]`` then one sample (steps per second);
- ``sample``: one sample, no extend in between (window rows per second; ``next`` rows are not
  counted);
- ``extend``: one ``[1, envs]`` extend (rows per second).

``sample`` runs right after ``step``, whose last call was a sample, so a buffer that caches its
trajectory table until the next write starts the block with a valid table.

Implementations (the adapters of :mod:`bench.trajpeers`): ``bufcore``
(:class:`~bufcore.TrajectoryDictBufferMultiDim`), ``per-leaf`` (the seed's buffer: a full
rescan of the end flags on the first sample after each extend) and ``torchrl`` (``SliceSampler``
with ``cache_values=False``, as a user who writes every step must run it; its adapter writes
through the shared storage's other buffer, whose sampler is never used here).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from bench.blocks import ROWS_PER_S, SAMPLES_PER_S, STEPS_PER_S, OpRecord, measure_rounds
from bench.child_spec import ChildSpec
from bench.peers import package_version
from bench.rollout import flag_stream, rollout_pool, with_flags
from bench.trajpeers import (
    BUFCORE,
    END_KEY,
    PER_LEAF,
    TORCHRL,
    BufcoreWindows,
    PerLeafWindows,
    TorchrlWindows,
    WindowPeer,
    WindowShape,
)
from bench.workload import Nested

STEP, SAMPLE, EXTEND = "step", "sample", "extend"
FILL_STEPS = 25
"""Time rows per source batch, and per extend of the untimed fill."""
POOL_BATCHES = 2
STEADY_STEPS = 256
"""Distinct ``[1, envs]`` extends of the timed loops (cycled)."""


def _to_tensordict(batch: Nested) -> Any:
    from tensordict import TensorDict  # type: ignore[import-untyped]

    return TensorDict(batch, batch_size=list(batch[END_KEY].shape[:2]))


def _peer(
    name: str, capacity: int, envs: int, shape: WindowShape
) -> tuple[WindowPeer, Callable[[], Any], Callable[[Nested], Any], str]:
    """The peer, its sampler, its input conversion and its version."""
    peer: WindowPeer
    if name == "bufcore":
        peer = BufcoreWindows(capacity, shape)
        return peer, peer.samplers()[BUFCORE], _same, package_version("bufcore")
    if name == "per-leaf":
        peer = PerLeafWindows(capacity, shape)
        return peer, peer.samplers()[PER_LEAF], _same, ""
    peer = TorchrlWindows(capacity, envs, shape)
    version = f"{package_version('torchrl')} (tensordict {package_version('tensordict')})"
    return peer, peer.samplers()[TORCHRL], _to_tensordict, version


def _same(batch: Nested) -> Nested:
    return batch


def _time_row(batch: Nested, t: int) -> Nested:
    """Time row ``t`` of a ``[steps, envs, ...]`` nested batch, as ``[1, envs, ...]`` views."""
    return {
        key: _time_row(value, t) if isinstance(value, dict) else value[t : t + 1]
        for key, value in batch.items()
    }


def online(spec: ChildSpec) -> tuple[str, dict[str, OpRecord]]:
    """Fill the buffer untimed, then time ``step``, ``sample`` and ``extend``."""
    shape = WindowShape(batch=spec.batch, seq_length=spec.seq_length)
    peer, sample, prepare, version = _peer(spec.implementation, spec.capacity, spec.envs, shape)
    stream = flag_stream(spec.capacity, spec.envs, steady=STEADY_STEPS)
    pool = rollout_pool(POOL_BATCHES, FILL_STEPS, spec.envs)
    for k, rows in enumerate(stream.fill_chunks(FILL_STEPS)):
        peer.extend(prepare(with_flags(pool[k % len(pool)], stream, rows)))
    # Each step writes a different payload row with the stream's next flags (views, no copy).
    steps = [
        prepare(
            with_flags(
                _time_row(pool[i % len(pool)], i // len(pool) % FILL_STEPS), stream, stream.step(i)
            )
        )
        for i in range(stream.steady)
    ]
    source = itertools.cycle(steps).__next__

    def extend() -> None:
        peer.extend(source())

    def step() -> None:
        peer.extend(source())
        sample()

    step()  # warm every path once (the step's sample leaves any cached table valid)
    records = {
        STEP: OpRecord(STEPS_PER_S, 1, spec.calls),
        SAMPLE: OpRecord(SAMPLES_PER_S, spec.batch, spec.calls),
        EXTEND: OpRecord(ROWS_PER_S, spec.envs, spec.calls),
    }
    measure_rounds({STEP: step, SAMPLE: sample, EXTEND: extend}, records, spec.blocks)
    return version, records

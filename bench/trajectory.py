"""The trajectory-sampling phases: window indices and windows with ``next``, in one process.

Both phases measure what BFM-Zero's online training does with its ``[time, env]`` buffer
(``TrajectoryDictBufferMultiDim(n_dim=2, end_key="truncated")``, batch 1024 as 128 windows of
8 rows). A *sample* is one transition (row) of a window, so one call yields ``batch`` samples;
``next`` rows are not counted.

1. **Index** (:data:`OP_INDEX`, and :data:`OP_INDEX_US` for the same blocks in µs per call): on
   a full ``[index_capacity, index_envs]`` ring of end flags (``[5000, 1024]``, BFM-Zero's
   default), each call extends one time step and builds the row indices of one batch, no
   payload (:mod:`bench.trajpeers` lists the subjects). Every subject lives for the whole phase
   (flags and tables are small) and each round measures all of them back to back, in an order
   that rotates, at every thread count.
2. **Windows with next** (:data:`OP_WINDOWS`): ``sample(batch)`` of BFM-Zero's online keys
   (:data:`bench.trajpeers.KEYS_T`, ``next``: :data:`bench.trajpeers.KEYS_TP1`) from a full,
   wrapped buffer of ``capacity`` time rows x ``envs`` envs (4,718 B per row), no extend between
   samples (so cached boundaries stay valid: that is where caching can help at all). As in the
   transition phase, bufcore's buffer stays alive and each peer is built, filled, measured
   interleaved with bufcore and freed, so at most two buffers exist at once.

Every implementation is filled with the same episodes (:mod:`bench.rollout`). Calls per timed
block are set per subject from one timed call, so every block lasts about ``block_seconds``
whatever the subject's speed (bufcore's index call takes ~0.1-0.3 ms, torchrl's ~25 ms).
Repeats are tagged with their round, so ratios pair measurements taken back to back; minor
page faults per call are counted beside every block.
"""

from __future__ import annotations

import gc
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.memory import minor_faults, settle_allocator
from bench.rollout import FlagStream, flag_stream, rollout_pool, with_flags
from bench.runner import Results, log
from bench.timing import timed, torch_threads
from bench.trajpeers import (
    BUFCORE,
    IndexShape,
    WindowImpl,
    WindowPeer,
    WindowShape,
    index_implementations,
    window_implementations,
)
from bench.workload import ROW_BYTES, Nested

OP_INDEX = "window index"
OP_INDEX_US = "index build"
OP_WINDOWS = "sample+next"
OPS = (OP_INDEX, OP_INDEX_US, OP_WINDOWS)
SAMPLES_PER_S = "samples/s"
US_PER_CALL = "µs/call"

STEADY_STEPS = 4096
"""Distinct one-step extends of the index phase (cycled)."""
POOL_STEPS = 25
"""Time rows per source batch of the window phase."""
MIN_CALLS, MAX_CALLS = 2, 20_000


@dataclass(frozen=True)
class TrajectoryConfig:
    """What the trajectory phases measure.

    Attributes:
        index_capacity: Time rows of the index phase's ring.
        index_envs: Envs of the index phase's ring.
        capacity: Time rows of the window phase's buffers.
        envs: Envs of the window phase's buffers.
        batch_size: Rows per sample (``batch_size // seq_length`` windows).
        seq_length: Rows per window.
        rounds: Timed blocks per subject and thread count.
        block_seconds: Target duration of one timed block.
        pool_batches: Distinct source batches of ``POOL_STEPS x envs`` rows (cycled by fills).
        threads: torch intra-op thread counts; the first is the headline.
    """

    index_capacity: int
    index_envs: int
    capacity: int
    envs: int
    batch_size: int
    seq_length: int
    rounds: int
    block_seconds: float
    pool_batches: int
    threads: tuple[int, ...]

    @property
    def buffer_bytes(self) -> int:
        """Payload bytes of one window-phase buffer."""
        return self.capacity * self.envs * ROW_BYTES


def calibrate(step: Callable[[], object], block_seconds: float) -> int:
    """Calls of ``step`` that take about ``block_seconds`` (after one warm-up call).

    The per-call time is the median of a few calls (at least 3, about 20 ms in all), so one
    call slowed by a neighbour on the machine does not shrink every block of the subject.
    """
    step()
    times: list[float] = []
    while len(times) < 3 or (sum(times) < 0.02 and len(times) < 100):
        times.append(timed(step)[0])
    calls = math.ceil(block_seconds / max(statistics.median(times), 1e-7))
    return max(MIN_CALLS, min(MAX_CALLS, calls))


def _block(step: Callable[[], object], calls: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(calls):
            step()

    return run


def measure(step: Callable[[], object], calls: int) -> tuple[float, float]:
    """Seconds of ``calls`` calls of ``step`` and the minor page faults per call."""
    before = minor_faults()
    seconds, _ = timed(_block(step, calls))
    return seconds, (minor_faults() - before) / calls


def index_phase(cfg: TrajectoryConfig, results: Results) -> None:
    """Phase 1 (see the module docstring)."""
    shape = IndexShape(
        capacity=cfg.index_capacity,
        envs=cfg.index_envs,
        windows=cfg.batch_size // cfg.seq_length,
        seq_length=cfg.seq_length,
    )
    stream = flag_stream(shape.capacity, shape.envs, STEADY_STEPS)
    impls, missing = index_implementations()
    _note_missing(results, missing)
    subjects = []
    for impl in impls:
        log(f"trajectory index: filling {impl.name} ([{shape.capacity}, {shape.envs}] flags)")
        _record_version(results, impl.name, impl.version)
        subject = impl.create(stream, shape)
        with torch_threads(cfg.threads[0]):
            calls = calibrate(subject.step, cfg.block_seconds)
        subjects.append((impl, subject, calls))
    log(f"trajectory index: {len(subjects)} subjects, {cfg.rounds} rounds x threads {cfg.threads}")
    for rep in range(cfg.rounds):
        shift = rep % len(subjects)
        for threads in cfg.threads:
            with torch_threads(threads):
                for impl, subject, calls in [*subjects[shift:], *subjects[:shift]]:
                    seconds, faults = measure(subject.step, calls)
                    tag = f"index#{rep}"
                    if impl.samples:
                        rate = calls * shape.batch / seconds
                        results.add(OP_INDEX, impl.name, threads, SAMPLES_PER_S, rate, tag, faults)
                    per_call = seconds / calls * 1e6
                    results.add(OP_INDEX_US, impl.name, threads, US_PER_CALL, per_call, tag, faults)
    del subjects, stream
    gc.collect()


def _fill(impl: WindowImpl, peer: WindowPeer, stream: FlagStream, pool: Sequence[Nested]) -> None:
    """Write the whole stream's fill into ``peer``, ``POOL_STEPS`` time rows per extend."""
    for k, rows in enumerate(stream.fill_chunks(POOL_STEPS)):
        peer.extend(impl.prepare(with_flags(pool[k % len(pool)], stream, rows)))


def window_phase(cfg: TrajectoryConfig, results: Results) -> None:
    """Phase 2 (see the module docstring)."""
    shape = WindowShape(batch=cfg.batch_size, seq_length=cfg.seq_length)
    stream = flag_stream(cfg.capacity, cfg.envs, steady=0)
    pool = rollout_pool(cfg.pool_batches, POOL_STEPS, cfg.envs)
    base_impl, peers, missing = window_implementations(shape)
    _note_missing(results, missing)
    size = f"[{cfg.capacity}, {cfg.envs}] rows ({cfg.buffer_bytes / 1e9:.2f} GB)"
    log(f"trajectory windows: filling bufcore to {size}")
    _record_version(results, base_impl.name, base_impl.version)
    base = base_impl.create(cfg.capacity, cfg.envs)
    _fill(base_impl, base, stream, pool)
    base_sample = base.samplers()[BUFCORE]
    with torch_threads(cfg.threads[0]):
        base_calls = calibrate(base_sample, cfg.block_seconds)
    for impl in peers:
        log(f"trajectory windows: filling {impl.name} to {size}")
        _record_version(results, impl.name, impl.version)
        peer = impl.create(cfg.capacity, cfg.envs)
        _fill(impl, peer, stream, pool)
        pair = [(BUFCORE, base_sample, base_calls)]
        with torch_threads(cfg.threads[0]):
            for name, sample in peer.samplers().items():
                pair.append((name, sample, calibrate(sample, cfg.block_seconds)))
        log(
            f"trajectory windows: bufcore vs {impl.name}, {cfg.rounds} rounds x threads "
            f"{cfg.threads}"
        )
        for rep in range(cfg.rounds):
            for threads in cfg.threads:
                with torch_threads(threads):
                    tag = f"{impl.name}#{rep}"
                    for name, sample, calls in pair if rep % 2 == 0 else pair[::-1]:
                        seconds, faults = measure(sample, calls)
                        rate = calls * cfg.batch_size / seconds
                        results.add(OP_WINDOWS, name, threads, SAMPLES_PER_S, rate, tag, faults)
        del peer, pair
        gc.collect()
    del base, base_sample, pool, stream
    gc.collect()


def _record_version(results: Results, name: str, version: str) -> None:
    """Versions are per package ("torchrl SliceSampler" -> "torchrl"); bench code has none."""
    if version:
        results.versions.setdefault(name.split()[0], version)


def _note_missing(results: Results, missing: Sequence[str]) -> None:
    for name in missing:
        if name not in results.missing:
            results.missing.append(name)
            log(f"{name} is not installed (pip install -e '.[bench]'); its rows are skipped")


def run(cfg: TrajectoryConfig, results: Results) -> None:
    """Run both trajectory phases, adding their measurements to ``results``."""
    # As in the transition part (bench.memory): malloc thresholds of a long-running process,
    # so per-call outputs of a few MB are not faulted in again on every call.
    settle_allocator()
    index_phase(cfg, results)
    window_phase(cfg, results)

"""The in-process measurement phases (diagnostics), run in one process on the same data.

The headline numbers come from fresh processes (:mod:`bench.headline`); this process first
settles its malloc thresholds (:func:`bench.memory.settle_allocator`), as a long-running training
process has them, and then measures:

1. **Steady state** (``sample`` and ``extend`` into an allocated, full buffer). bufcore's buffer
   stays alive for the whole phase; each other implementation (the contiguous-array ceiling,
   then every peer) is built, filled to capacity, measured with its repeats interleaved with
   bufcore's (order alternating, both thread counts in every round) and freed before the next.
   So at most two big buffers exist at once, and slow drift of the machine hits bufcore and the
   peer alike. bufcore's row pools all its repeats from every round.
2. **First fill** (allocation included): each implementation in turn creates an empty buffer of
   ``fill_rows`` capacity and extends it until full; the order rotates every round.
3. **Disk**: bufcore save and cold load of a full ``ckpt_rows`` buffer, interleaved with a raw
   sequential write+fsync and a cold raw read of the same number of bytes.

Before every timed step that allocates (fills, saves, loads, raw I/O), the memory it will use is
pre-faulted, untimed (:mod:`bench.memory` says why). Minor page faults are counted per call.
Every repeat is tagged with its round, so ratios can pair measurements taken back to back
(:func:`bench.timing.paired_ratio`).

Progress goes to stderr; the numbers go into :class:`Results`.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench import disk
from bench.ceilings import ceiling_impl
from bench.memory import minor_faults, prefault, settle_allocator
from bench.peers import Implementation, Subject, bufcore_impl, peer_implementations
from bench.timing import Series, timed, torch_threads
from bench.workload import ROW_BYTES, Nested, make_pool, pack_rows, slice_batch

ROWS_PER_S = "rows/s"
MB_PER_S = "MB/s"


@dataclass(frozen=True)
class Config:
    """What one run measures.

    Attributes:
        capacity: Rows of the steady-state buffers.
        batch_size: Rows per extend and per sample.
        fill_rows: Capacity (and rows written) of the first-fill buffers.
        ckpt_rows: Rows of the checkpointed buffer.
        repeats: Timed blocks per implementation and thread count, per steady-state round.
        calls: Calls per timed block (steady state).
        fill_repeats: First fills per implementation and thread count.
        disk_repeats: Saves/loads (and raw writes/reads) per thread count.
        threads: torch intra-op thread counts; the first is the headline.
        pool_batches: Distinct source batches cycled through by every write.
        tmp_dir: Scratch directory for checkpoints (on the disk being measured).
    """

    capacity: int
    batch_size: int
    fill_rows: int
    ckpt_rows: int
    repeats: int
    calls: int
    fill_repeats: int
    disk_repeats: int
    threads: tuple[int, ...]
    pool_batches: int
    tmp_dir: Path


@dataclass
class Results:
    """Every measured series, keyed by (op, implementation), then by thread count."""

    series: dict[tuple[str, str], dict[int, Series]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    checkpoint_bytes: int = 0
    seconds: float = 0.0

    def add(
        self,
        op: str,
        subject: str,
        threads: int,
        unit: str,
        value: float,
        tag: str,
        faults: float | None = None,
    ) -> None:
        """Record one repeat; ``tag`` names the round (back-to-back measurements share it)."""
        by_threads = self.series.setdefault((op, subject), {})
        by_threads.setdefault(threads, Series(unit)).add(value, tag, faults)

    def get(self, op: str, subject: str, threads: int) -> Series | None:
        return self.series.get((op, subject), {}).get(threads)


def log(message: str) -> None:
    """Progress line on stderr (stdout is kept for the table)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def fill(subject: Subject, inputs: Sequence[Any], tail: Any | None, rows: int, batch: int) -> None:
    """Extend ``subject`` with ``rows`` rows, cycling through ``inputs``.

    ``tail`` is the last, partial batch when ``rows`` is not a multiple of ``batch``.
    """
    for i in range(rows // batch):
        subject.extend(inputs[i % len(inputs)])
    if tail is not None:
        subject.extend(tail)


def _prepared(
    impl: Implementation, pool: Sequence[Nested], rows: int, batch: int
) -> tuple[list[Any], Any | None]:
    """``impl``'s inputs for the pool, and the partial tail batch ``fill`` needs for ``rows``."""
    inputs = [impl.prepare(b) for b in pool]
    remainder = rows % batch
    tail = impl.prepare(slice_batch(pool[0], remainder)) if remainder else None
    return inputs, tail


def _measure_steady(
    name: str,
    subject: Subject,
    inputs: Sequence[Any],
    cfg: Config,
    threads: int,
    results: Results,
    start: int,
    tag: str,
) -> None:
    batch = cfg.batch_size

    def sample() -> None:
        for _ in range(cfg.calls):
            subject.sample(batch)

    def extend() -> None:
        for i in range(cfg.calls):
            subject.extend(inputs[(start + i) % len(inputs)])

    for op, step in (("sample", sample), ("extend", extend)):
        before = minor_faults()
        seconds, _ = timed(step)
        faults = (minor_faults() - before) / cfg.calls
        results.add(op, name, threads, ROWS_PER_S, cfg.calls * batch / seconds, tag, faults)


def steady_phase(
    cfg: Config, pool: Sequence[Nested], others: Sequence[Implementation], results: Results
) -> None:
    """Phase 1 (see the module docstring)."""
    base_impl = bufcore_impl()
    base_inputs, base_tail = _prepared(base_impl, pool, cfg.capacity, cfg.batch_size)
    log(f"steady: filling bufcore to {cfg.capacity:,} rows")
    base = base_impl.create(cfg.capacity)
    fill(base, base_inputs, base_tail, cfg.capacity, cfg.batch_size)
    for impl in others:
        inputs, tail = _prepared(impl, pool, cfg.capacity, cfg.batch_size)
        log(f"steady: filling {impl.name} to {cfg.capacity:,} rows")
        subject = impl.create(cfg.capacity)
        fill(subject, inputs, tail, cfg.capacity, cfg.batch_size)
        pair = [(base_impl.name, base, base_inputs), (impl.name, subject, inputs)]
        for _, warm, warm_inputs in pair:
            warm.sample(cfg.batch_size)
            warm.extend(warm_inputs[0])
        log(f"steady: bufcore vs {impl.name}, {cfg.repeats} rounds x threads {cfg.threads}")
        for rep in range(cfg.repeats):
            for threads in cfg.threads:
                with torch_threads(threads):
                    tag = f"{impl.name}#{rep}"
                    for name, buf, buf_inputs in pair if rep % 2 == 0 else pair[::-1]:
                        _measure_steady(name, buf, buf_inputs, cfg, threads, results, rep, tag)
        del subject, inputs, tail, pair
        gc.collect()
    del base, base_inputs, base_tail
    gc.collect()


def first_fill_phase(
    cfg: Config, pool: Sequence[Nested], impls: Sequence[Implementation], results: Results
) -> None:
    """Phase 2: time from creating an empty buffer to holding ``fill_rows`` rows."""
    rows, batch = cfg.fill_rows, cfg.batch_size
    # Slack for the row padding and per-leaf allocations of the implementations.
    fill_bytes = int(rows * ROW_BYTES * 1.05) + (64 << 20)
    log(f"first fill: {rows:,} rows, {cfg.fill_repeats} rounds x threads {cfg.threads}")
    for rep in range(cfg.fill_repeats):
        for threads in cfg.threads:
            with torch_threads(threads):
                shift = rep % len(impls)
                for impl in [*impls[shift:], *impls[:shift]]:
                    inputs, tail = _prepared(impl, pool, rows, batch)
                    gc.collect()
                    prefault(fill_bytes)

                    def build(
                        create: Callable[[int], Subject] = impl.create,
                        inputs: list[Any] = inputs,
                        tail: Any = tail,
                    ) -> Subject:
                        subject = create(rows)
                        fill(subject, inputs, tail, rows, batch)
                        return subject

                    before = minor_faults()
                    seconds, subject = timed(build)
                    faults = (minor_faults() - before) / -(-rows // batch)
                    results.add(
                        "first fill",
                        impl.name,
                        threads,
                        ROWS_PER_S,
                        rows / seconds,
                        f"fill#{rep}",
                        faults,
                    )
                    del subject, inputs, tail
                    gc.collect()


def disk_phase(cfg: Config, pool: Sequence[Nested], results: Results) -> None:
    """Phase 3: bufcore save / cold load against raw sequential write / cold read."""
    impl = bufcore_impl()
    inputs, tail = _prepared(impl, pool, cfg.ckpt_rows, cfg.batch_size)
    buffer = impl.create(cfg.ckpt_rows)
    fill(buffer, inputs, tail, cfg.ckpt_rows, cfg.batch_size)
    dictbuffer = buffer.buffer  # type: ignore[attr-defined]
    cfg.tmp_dir.mkdir(parents=True, exist_ok=True)
    ckpt = cfg.tmp_dir / "checkpoint"
    raw = cfg.tmp_dir / "raw.bin"
    try:
        disk.bufcore_save(dictbuffer, ckpt)  # untimed: learn the size, warm the code paths
        nbytes = disk.tree_bytes(ckpt)
        results.checkpoint_bytes = nbytes
        # The raw source (and read target) holds real rows, touched before any timing.
        data = np.empty(nbytes, dtype=np.uint8)
        packed = pack_rows(pool[0]).numpy().reshape(-1)
        for start in range(0, nbytes, packed.size):
            chunk = data[start : start + packed.size]
            chunk[:] = packed[: chunk.size]
        log(
            f"disk: {nbytes / 1e6:,.0f} MB checkpoint in {cfg.tmp_dir}, "
            f"{cfg.disk_repeats} rounds x threads {cfg.threads}"
        )
        for rep in range(cfg.disk_repeats):
            for threads in cfg.threads:
                with torch_threads(threads):
                    steps: list[tuple[str, str, Callable[[], float]]] = [
                        ("save", "bufcore", lambda: disk.bufcore_save(dictbuffer, ckpt)),
                        ("load (cold)", "bufcore", lambda: disk.bufcore_load(ckpt)),
                        ("save", "raw write+fsync", lambda: disk.raw_write(raw, data)),
                        ("load (cold)", "raw read", lambda: disk.raw_read(raw, data)),
                    ]
                    if rep % 2:
                        steps = [*steps[2:], *steps[:2]]
                    for op, name, step in steps:
                        gc.collect()
                        # Room for the page cache and the loaded rows (see bench.memory).
                        prefault(2 * nbytes)
                        seconds = step()
                        results.add(
                            op, name, threads, MB_PER_S, nbytes / seconds / 1e6, f"disk#{rep}"
                        )
                    disk.remove(raw)
    finally:
        disk.remove(ckpt)
        disk.remove(raw)


def run(cfg: Config, results: Results | None = None) -> Results:
    """Run every phase and return the measurements (added to ``results`` when given)."""
    started = time.perf_counter()
    results = Results() if results is None else results
    settle_allocator()
    peers, missing = peer_implementations(cfg.batch_size)
    results.missing = missing
    base = bufcore_impl()
    ceiling = ceiling_impl(cfg.batch_size)
    for impl in (base, *peers, ceiling):
        results.versions[impl.name] = impl.version
    for name in missing:
        log(f"{name} is not installed (pip install -e '.[bench]'); its rows are skipped")
    pool = make_pool(cfg.pool_batches, cfg.batch_size)
    steady_phase(cfg, pool, [ceiling, *peers], results)
    first_fill_phase(cfg, pool, [base, *peers, ceiling], results)
    disk_phase(cfg, pool, results)
    results.seconds = time.perf_counter() - started
    return results

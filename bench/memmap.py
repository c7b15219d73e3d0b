"""The ``memmap`` row: a DictBuffer past RAM, file-backed, beside torchrl's memory-mapped storage,
each measurement in a fresh process (DESIGN §6).

``python -m bench --only memmap`` measures, at each ``--memmap-rows`` size (default 1 M and 6 M
transitions of BFM-Zero's 4.7 KB rows: 4.7 GB and 28 GB), in one child process per
implementation and round (``python -m bench.memmap '<json spec>'``, one torch thread):

- ``fill``: create the buffer and extend it with batches of 1024 until it holds ``rows``
  (rows/s of the whole fill, faults per extend);
- every file the buffer made is written back (``fsync``, untimed, each implementation alike): a
  fill of 28 GB leaves gigabytes of dirty pages whose writeback would slow the first blocks, a
  backlog a training loop writing 1024 rows at a time never builds up;
- then ``blocks`` rounds of one block each of ``sample`` (``sample(1024)``) and ``extend``
  (1024 rows into the full, wrapping ring): rows/s (median of the blocks), minor and major page
  faults per call;
- the child's peak resident memory (``VmHWM``) and, at the end, ``VmRSS`` split into anonymous
  and file pages.

Implementations: ``bufcore-file`` (``DictBuffer(backing=BackingFile(...))``, out of core chosen
by size: above half the machine's memory), ``bufcore-ram`` (``DictBuffer`` in memory, only
where its rows take at most half the machine's memory; listed as skipped otherwise) and
``torchrl-memmap`` (``ReplayBuffer(storage=LazyMemmapStorage(rows, scratch_dir=...))``, one file
per leaf). Files go under ``--tmp-dir``/memmap (on the disk, not tmpfs) and are deleted when each
child ends.

``open`` (at ``--memmap-open-rows``, default 1 M): how a checkpoint opens file-backed, the two
ways the issue names. A file-backed buffer is filled and saved (timed: ``save``); then, with the
checkpoint's pages evicted from the page cache, ``copy``: ``DictBuffer.load(ckpt,
backing=BackingFile(...))`` (timed, peak RSS), and ``map``: the checkpoint's ``buffer.hdf5``
datasets mapped read-only where they lie (numpy ``memmap`` at each dataset's offset; a
diagnostic, no bufcore code does this). Each is then sampled: a first block with its file
evicted from the page cache (every row read from disk), then ``blocks`` more (the cache fills
as they go: fast with the map's readahead, slowly with the copy's out-of-core reads, which
fetch only the pages a gather touches).

Targets (the issue's): ``bufcore-file`` sample >= 2x ``torchrl-memmap`` at the largest size, and
its peak RSS under 8 GB.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import os
import resource
import shutil
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.children import run_json_child
from bench.headline import missing_modules, rotation
from bench.workload import LEAVES, ROW_BYTES, make_pool

ROOT = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = ("bufcore-file", "bufcore-ram", "torchrl-memmap")
REQUIRES: dict[str, tuple[str, ...]] = {"torchrl-memmap": ("torchrl", "tensordict")}
FILL, SAMPLE, EXTEND = "fill", "sample", "extend"
SAVE, COPY, MAP = "save", "copy", "map"
SAMPLE_TARGET = 2.0  # bufcore-file / torchrl-memmap, sample, at the largest size
RSS_TARGET_GIB = 8.0
CHILD_TIMEOUT_S = 1800
GIB = 2**30


@dataclass(frozen=True)
class MemmapSpec:
    """What one child measures.

    Attributes:
        implementation: One of :data:`IMPLEMENTATIONS`, or ``"open"`` (the checkpoint opening).
        rows: Transitions the buffer holds.
        scratch: Directory for the child's files (a fresh subdirectory is used and removed).
        batch: Rows per extend and per sample.
        calls: Calls per timed block.
        blocks: Timed blocks per op.
        pool_batches: Distinct source batches the extends cycle through.
        threads: torch intra-op threads.
    """

    implementation: str
    rows: int
    scratch: str
    batch: int = 1024
    calls: int = 8
    blocks: int = 3
    pool_batches: int = 16
    threads: int = 1

    def __post_init__(self) -> None:
        if self.implementation not in (*IMPLEMENTATIONS, "open"):
            raise ValueError(
                f"implementation: expected one of {[*IMPLEMENTATIONS, 'open']}, got "
                f"{self.implementation!r}"
            )
        for name in ("rows", "batch", "calls", "blocks", "pool_batches", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {value!r}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> MemmapSpec:
        return cls(**json.loads(text))


# ---------------------------------------------------------------------------- the child
@dataclass
class IoRecord:
    """The timed blocks of one op: rates, and minor and major page faults per call."""

    rows_per_call: int
    calls: int
    rates: list[float] = field(default_factory=list)
    minor: list[float] = field(default_factory=list)
    major: list[float] = field(default_factory=list)

    def time(self, block: Callable[[], object]) -> None:
        """Run ``block`` (``calls`` calls) once, timed, and record it."""
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        block()
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        self.rates.append(self.calls * self.rows_per_call / seconds)
        self.minor.append((after.ru_minflt - before.ru_minflt) / self.calls)
        self.major.append((after.ru_majflt - before.ru_majflt) / self.calls)

    def repeat(self, step: Callable[[], object]) -> None:
        """Time one block of ``calls`` calls of ``step`` (each result dropped at once, as a
        training loop drops its batch, so bufcore reuses its output memory)."""

        def block() -> None:
            for _ in range(self.calls):
                step()

        self.time(block)

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": statistics.median(self.rates),
            "minor_faults_per_call": statistics.median(self.minor),
            "major_faults_per_call": statistics.median(self.major),
            "blocks": [
                {"rate": r, "minor": a, "major": b}
                for r, a, b in zip(self.rates, self.minor, self.major, strict=True)
            ],
        }


def memory_status() -> dict[str, float]:
    """This process's peak and current resident memory, in GiB (``/proc/self/status``)."""
    wanted = {"VmHWM": "peak_rss", "VmRSS": "rss", "RssAnon": "rss_anon", "RssFile": "rss_file"}
    found: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in wanted:
            found[wanted[name]] = int(value.split()[0]) * 1024 / GIB
    return found


def reset_peak_rss() -> None:
    """Start this process's ``VmHWM`` over from its current RSS (``clear_refs`` 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def unmap(view: Any) -> None:
    """Drop this process's page-table entries of the whole mapping ``view`` lies in
    (``MADV_DONTNEED``; a shared file mapping keeps its data), so :func:`evict` can then drop
    its pages from the page cache: mapped pages are never evicted."""
    import ctypes
    import mmap

    storage = view.untyped_storage()
    start = storage.data_ptr() // mmap.PAGESIZE * mmap.PAGESIZE
    length = storage.data_ptr() + storage.nbytes() - start
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.madvise(start, length, mmap.MADV_DONTNEED) != 0:
        raise OSError(ctypes.get_errno(), "madvise(MADV_DONTNEED) failed")


def flush(path: Path) -> None:
    """Write back every file under ``path`` (``fsync``); their pages stay cached."""
    for file in (p for p in path.rglob("*") if p.is_file()):
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def evict(path: Path) -> None:
    """Write back and drop ``path``'s pages from the page cache (every file under a directory)."""
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else [path]
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


Measured = tuple[str, dict[str, IoRecord], dict[str, Any]]
"""What a child's scenario returns: the version, its op records and extra fields."""


def build(name: str, rows: int, batch: int, scratch: Path) -> tuple[str, Any, Callable[[Any], Any]]:
    """An empty buffer of ``name`` (its version, the buffer, and its input conversion)."""
    if name == "torchrl-memmap":
        import importlib.metadata
        import logging

        from tensordict import TensorDict  # type: ignore[import-untyped]
        from torchrl.data import LazyMemmapStorage, ReplayBuffer  # type: ignore[import-untyped]

        logging.getLogger("torchrl").setLevel(logging.WARNING)
        storage = LazyMemmapStorage(rows, scratch_dir=str(scratch / "torchrl"))
        version = f"torchrl {importlib.metadata.version('torchrl')}"
        return (
            version,
            ReplayBuffer(storage=storage, batch_size=batch),
            lambda data: TensorDict(data, batch_size=[batch]),
        )
    from bufcore import BackingFile, DictBuffer

    backing = BackingFile(scratch / "ring.bin") if name == "bufcore-file" else None
    return "bufcore", DictBuffer(capacity=rows, seed=0, backing=backing), lambda data: data


def steady(spec: MemmapSpec, scratch: Path) -> Measured:
    """Fill, then sample and extend blocks (see the module docstring)."""
    version, buffer, convert = build(spec.implementation, spec.rows, spec.batch, scratch)
    pool = [convert(batch) for batch in make_pool(spec.pool_batches, spec.batch)]
    source = itertools.cycle(pool).__next__
    extends = -(-spec.rows // spec.batch)
    records = {
        FILL: IoRecord(spec.batch, extends),
        SAMPLE: IoRecord(spec.batch, spec.calls),
        EXTEND: IoRecord(spec.batch, spec.calls),
    }
    sample = (lambda: buffer.sample()) if spec.implementation.startswith("torchrl") else (
        lambda: buffer.sample(spec.batch)
    )
    records[FILL].time(lambda: [buffer.extend(source()) for _ in range(extends)])
    flush(scratch)
    sample()
    for _ in range(spec.blocks):
        records[SAMPLE].repeat(sample)
        records[EXTEND].repeat(lambda: buffer.extend(source()))
    extra: dict[str, Any] = {"memory_gib": memory_status()}  # while the buffer lives
    backing = getattr(buffer, "backing", None)
    if backing is not None:
        extra["out_of_core"] = backing.out_of_core
    return version, records, extra


def open_checkpoint(spec: MemmapSpec, scratch: Path) -> Measured:
    """Save a file-backed buffer, then open its checkpoint by copying and by mapping."""
    import h5py
    import numpy as np
    import torch

    from bufcore import BackingFile, DictBuffer

    batch = spec.batch
    pool = make_pool(spec.pool_batches, batch)
    source = itertools.cycle(pool).__next__
    records = {SAVE: IoRecord(spec.rows, 1), COPY: IoRecord(spec.rows, 1)}
    for way in (COPY, MAP):
        records[f"{way} sample first"] = IoRecord(batch, spec.calls)
        records[f"{way} sample next"] = IoRecord(batch, spec.calls)
    filled = DictBuffer(capacity=spec.rows, seed=0, backing=BackingFile(scratch / "filled.bin"))
    for _ in range(-(-spec.rows // batch)):
        filled.extend(source())
    checkpoint = scratch / "ckpt"
    records[SAVE].time(functools.partial(filled.save, checkpoint))
    del filled  # its backing file goes with it
    evict(checkpoint)
    peaks: dict[str, float] = {}
    loaded: list[Any] = []
    # Out of core, as a checkpoint larger than memory would be opened; the peak counts from here.
    target = BackingFile(scratch / "copy.bin", out_of_core=True)
    reset_peak_rss()
    records[COPY].time(lambda: loaded.append(DictBuffer.load(checkpoint, backing=target)))
    peaks["copy"] = memory_status()["peak_rss"]
    copy = loaded[0]
    unmap(copy.storage["z"])
    evict(scratch / "copy.bin")
    records[f"{COPY} sample first"].repeat(lambda: copy.sample(batch))
    for _ in range(spec.blocks):
        records[f"{COPY} sample next"].repeat(lambda: copy.sample(batch))
    # The mapping: each contiguous dataset of buffer.hdf5 as a read-only array where it lies.
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    payload = checkpoint / "buffer.hdf5"
    leaves: dict[str, torch.Tensor] = {}
    with h5py.File(payload, "r") as h5:
        for name, dataset in h5.items():
            leaves[name] = torch.from_numpy(
                np.memmap(payload, dtype=dataset.dtype, mode="r", offset=dataset.id.get_offset(),
                          shape=dataset.shape)
            )
    generator = torch.Generator().manual_seed(0)
    outputs = {n: torch.empty((batch, *t.shape[1:]), dtype=t.dtype) for n, t in leaves.items()}

    def map_sample() -> None:
        index = torch.randint(spec.rows, (batch,), generator=generator)
        for name, leaf in leaves.items():
            torch.index_select(leaf, 0, index, out=outputs[name])

    evict(payload)
    records[f"{MAP} sample first"].repeat(map_sample)
    for _ in range(spec.blocks):
        records[f"{MAP} sample next"].repeat(map_sample)
    extra = {"memory_gib": memory_status(), "peak_rss_gib": peaks,
             "checkpoint_bytes": payload.stat().st_size}
    return "bufcore", records, extra


def measure(spec: MemmapSpec) -> dict[str, Any]:
    """Run ``spec`` in this process (in a fresh scratch directory, removed after); the child's
    JSON object."""
    import torch

    torch.set_num_threads(spec.threads)
    warnings.filterwarnings("ignore")  # torchrl's deprecation notes would swamp stderr
    scratch = Path(spec.scratch) / f"{spec.implementation}-{os.getpid()}"
    scratch.mkdir(parents=True)
    try:
        run = open_checkpoint if spec.implementation == "open" else steady
        version, records, extra = run(spec, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "implementation": spec.implementation,
        "rows": spec.rows,
        "version": version,
        "pid": os.getpid(),
        **extra,
        "ops": {op: record.to_json() for op, record in records.items()},
    }


def run_child(spec: MemmapSpec) -> dict[str, Any]:
    """:func:`measure` in a fresh ``python -m bench.memmap`` process.

    Raises:
        RuntimeError: the child failed (its stderr's tail is in the message).
    """
    return run_json_child("bench.memmap", spec.to_json(), threads=spec.threads,
                          what=f"{spec.implementation} ({spec.rows:,} rows)",
                          timeout_s=CHILD_TIMEOUT_S)


# ---------------------------------------------------------------------------- the parent
@dataclass(frozen=True)
class MemmapConfig:
    """What the row measures (see the module docstring)."""

    sizes: tuple[int, ...] = (1_000_000, 6_000_000)
    open_rows: int | None = 1_000_000
    rounds: int = 1
    calls: int = 8
    blocks: int = 3
    scratch: str = str(ROOT / "bench" / "results" / "tmp" / "memmap")
    threads: int = 1

    def spec(self, implementation: str, rows: int) -> MemmapSpec:
        return MemmapSpec(implementation, rows, self.scratch, calls=self.calls,
                          blocks=self.blocks, threads=self.threads)


def ram_fits(rows: int) -> bool:
    """Whether ``rows`` transitions in memory take at most half the machine's memory."""
    return rows * ROW_BYTES <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


def unavailable(implementation: str, rows: int) -> str | None:
    """Why ``implementation`` does not run at ``rows`` here, or None."""
    lacking = missing_modules(implementation, REQUIRES)
    if lacking:
        return f"not installed (missing {', '.join(lacking)}; pip install -e '.[bench]')"
    if implementation == "bufcore-ram" and not ram_fits(rows):
        return (f"{rows * ROW_BYTES / 1e9:.1f} GB of rows take more than half of this machine's "
                "memory")
    return None


@dataclass
class MemmapResults:
    config: MemmapConfig
    children: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def rates(self, implementation: str, rows: int, op: str) -> list[dict[str, Any]]:
        return [
            child["ops"][op] for child in self.children
            if child["implementation"] == implementation and child["rows"] == rows
            and op in child["ops"]
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "config": dataclasses.asdict(self.config),
            "skipped": self.skipped,
            "load_average_1min": self.loads,
            "seconds": round(self.seconds, 1),
            "children": self.children,
        }


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(
    cfg: MemmapConfig,
    *,
    runner: Callable[[MemmapSpec], dict[str, Any]] = run_child,
    log: Callable[[str], None] = _log,
) -> MemmapResults:
    """Each size's implementations in rotated order, one fresh child each, for every round;
    then the ``open`` child. The scratch directory is removed at the end."""
    started = time.perf_counter()
    results = MemmapResults(cfg)
    try:
        for rows in cfg.sizes:
            present = []
            for name in IMPLEMENTATIONS:
                reason = unavailable(name, rows)
                if reason:
                    results.skipped[f"{name} at {rows:,}"] = reason
                    log(f"memmap: {name} at {rows:,} rows skipped: {reason}")
                else:
                    present.append(name)
            for round_, order in enumerate(rotation(present, cfg.rounds)):
                for name in order:
                    results.loads.append(os.getloadavg()[0])
                    log(f"memmap round {round_ + 1}/{cfg.rounds}: {name} {rows:,} rows "
                        f"(load {results.loads[-1]:.2f})")
                    results.children.append(runner(cfg.spec(name, rows)))
        if cfg.open_rows:
            results.loads.append(os.getloadavg()[0])
            log(f"memmap: open {cfg.open_rows:,} rows (load {results.loads[-1]:.2f})")
            results.children.append(runner(cfg.spec("open", cfg.open_rows)))
    finally:
        shutil.rmtree(cfg.scratch, ignore_errors=True)
    results.loads.append(os.getloadavg()[0])
    results.seconds = time.perf_counter() - started
    return results


# ---------------------------------------------------------------------------- the report
def _median(records: list[dict[str, Any]], key: str) -> float | None:
    return statistics.median(r[key] for r in records) if records else None


def render(results: MemmapResults) -> str:
    """The table (markdown): rows/s and faults per call per size and implementation."""
    cfg = results.config
    loads = results.loads or [0.0]
    lines = [
        f"past RAM (fresh process each; {cfg.rounds} round(s); rows/s median, faults per call "
        f"minor/major; 1-min load average {min(loads):.1f}-{max(loads):.1f})",
        "| rows | implementation | fill | extend | sample(1024) | sample faults | peak RSS | "
        "RSS at end (anon + file) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rows in cfg.sizes:
        for name in IMPLEMENTATIONS:
            children = [c for c in results.children
                        if c["implementation"] == name and c["rows"] == rows]
            if not children:
                continue
            cells = []
            for op in (FILL, EXTEND, SAMPLE):
                rate = _median(results.rates(name, rows, op), "rate")
                cells.append("-" if rate is None else f"{rate:,.0f}")
            samples = results.rates(name, rows, SAMPLE)
            minor, major = _median(samples, "minor_faults_per_call"), _median(
                samples, "major_faults_per_call")
            memory = children[-1]["memory_gib"]
            peak = max(c["memory_gib"]["peak_rss"] for c in children)
            lines.append(
                f"| {rows:,} | {name} | {' | '.join(cells)} | {minor:.0f}/{major:.0f} | "
                f"{peak:.2f} GiB | {memory['rss']:.2f} ({memory['rss_anon']:.2f} + "
                f"{memory['rss_file']:.2f}) GiB |"
            )
    largest = max(cfg.sizes)
    ours = _median(results.rates("bufcore-file", largest, SAMPLE), "rate")
    peer = _median(results.rates("torchrl-memmap", largest, SAMPLE), "rate")
    if ours is not None and peer is not None:
        ratio = ours / peer
        verdict = "met" if ratio >= SAMPLE_TARGET else "missed"
        lines.append(f"sample at {largest:,}: bufcore-file / torchrl-memmap = {ratio:.2f}x "
                     f"({verdict} >= {SAMPLE_TARGET:g}x)")
    peaks = [c["memory_gib"]["peak_rss"] for c in results.children
             if c["implementation"] == "bufcore-file" and c["rows"] == largest]
    if peaks:
        verdict = "met" if max(peaks) < RSS_TARGET_GIB else "missed"
        lines.append(f"bufcore-file peak RSS at {largest:,}: {max(peaks):.2f} GiB ({verdict} < "
                     f"{RSS_TARGET_GIB:g} GiB)")
    for child in results.children:
        if child["implementation"] != "open":
            continue
        rate = {op: record["rate"] for op, record in child["ops"].items()}
        lines.append(
            f"open a {child['rows']:,}-row checkpoint ({child['checkpoint_bytes'] / 1e9:.1f} GB):"
            f" save {rate[SAVE]:,.0f} rows/s; copy into a backing file {rate[COPY]:,.0f} rows/s "
            f"(out of core, peak RSS {child['peak_rss_gib']['copy']:.2f} GiB), then sample: "
            f"first block (evicted) {rate[f'{COPY} sample first']:,.0f} / next "
            f"{rate[f'{COPY} sample next']:,.0f} rows/s; map buffer.hdf5 (no copy, unverified, "
            f"read-only) sample: first block {rate[f'{MAP} sample first']:,.0f} / next "
            f"{rate[f'{MAP} sample next']:,.0f} rows/s"
        )
    for what, reason in results.skipped.items():
        lines.append(f"{what}: {reason}")
    versions = sorted({c["version"] for c in results.children})
    lines.append(f"versions: {', '.join(versions)}; row {ROW_BYTES} bytes, {len(LEAVES)} leaves")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Child entry point: one JSON spec in, one JSON line out."""
    if len(argv) != 1:
        print("usage: python -m bench.memmap '<json spec>'", file=sys.stderr)
        return 2
    print(json.dumps(measure(MemmapSpec.from_json(argv[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

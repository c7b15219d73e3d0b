"""The ``persist-engine`` row: bufcore's checkpoint engine against the simplest alternative.

DESIGN rule 5 keeps a mechanism only where a guarantee test or a bench row needs it. This row
decides the engine of :mod:`bufcore.persist` (packed slots written with ``pwrite`` at the HDF5
offsets and hashed as they go; a reader thread streaming the file through a slot ring into the
rows while hashing threads check it) against the simplest code that writes and checks the same
files:

- ``simple`` save: h5py ``write_direct`` of each leaf, block by block, from the storage's
  strided leaf views (copied contiguous first: h5py takes only contiguous arrays) into a staging
  directory; then each file hashed from the page cache (two threads, one digest per manifest
  block) while it is fsynced; manifest; rename (:func:`bufcore.persist.atomic.publish_directory`).
- ``simple`` load: h5py ``read_direct`` of each leaf, block by block, into a contiguous bounce
  array copied into the preallocated storage views, while two threads hash the file's manifest
  blocks (``pread`` + sha256) at the same time; the digests compared at the end.
- ``engine`` save / load: bufcore's :func:`~bufcore.persist.checkpoint.save_checkpoint`
  and :func:`~bufcore.persist.checkpoint.load_checkpoint` copying into the same views.
- ``raw`` write / read: the disk's ceilings (:mod:`bench.disk`): one file of the checkpoint's
  size written from memory and fsynced; buffer.hdf5 read cold into a touched array.

Both write and read the same format (the manifest's per-block digests), from and into the same
memory: a ``[rows, 4720]`` byte matrix holding BFM-Zero's transition leaves side by side (the
layout of bufcore's storage). Every measurement runs in its own fresh Python process
(``python -m bench.persist_engine '<json>'``), the order rotated every round; loads are cold:
before each, the checkpoint's files are fsynced and dropped from the page cache with
``posix_fadvise(DONTNEED)`` (:func:`bench.disk.drop_cache`). Rates are checkpoint bytes over wall
time in MB/s (10^6 bytes); the table gives the median over processes and the slowest one.

``python -m bench --only persist-engine`` runs it (200,000 and 1,000,000 rows, 3 rounds;
``--quick``: 50,000 rows); results go to ``bench/results/persist_engine.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from bench import disk
from bench.timing import timed
from bench.workload import LEAVES

ROOT = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = ("engine", "simple", "raw")
OPS = ("save", "load")
ROW_ALIGN = 16
TARGET = "bench.persist_engine.Rows"
SEPARATOR = "."
CHILD_TIMEOUT_S = 900
_BLOCK_BYTES = 64 << 20
_HASH_THREADS = 2


# ----------------------------------------------------------------------------- the rows
def row_layout() -> tuple[int, dict[tuple[str, ...], int]]:
    """Bytes per packed row (aligned) and each leaf's byte offset, widest dtype first."""
    offsets: dict[tuple[str, ...], int] = {}
    offset = 0
    for leaf in sorted(LEAVES, key=lambda leaf: -leaf.dtype.itemsize):
        offsets[leaf.path] = offset
        offset += leaf.nbytes
    return -(-offset // ROW_ALIGN) * ROW_ALIGN, offsets


def leaf_views(matrix: np.ndarray[Any, Any]) -> dict[tuple[str, ...], torch.Tensor]:
    """Each leaf as a strided typed view ``[rows, *shape]`` of the packed byte matrix."""
    _, offsets = row_layout()
    rows = torch.from_numpy(matrix)
    views = {}
    for leaf in LEAVES:
        start = offsets[leaf.path]
        column = rows[:, start : start + leaf.nbytes].view(leaf.dtype)
        views[leaf.path] = column.view(matrix.shape[0], *leaf.shape)
    return views


def filled_matrix(rows: int) -> np.ndarray[Any, Any]:
    """A touched packed matrix of ``rows`` rows (random bytes; bool columns 0 or 1)."""
    width, offsets = row_layout()
    matrix = np.empty((rows, width), dtype=np.uint8)
    tile = np.random.default_rng(0).integers(0, 256, size=(4096, width), dtype=np.uint8)
    for leaf in LEAVES:
        if leaf.dtype == torch.bool:
            start = offsets[leaf.path]
            tile[:, start : start + leaf.nbytes] &= 1
    for start in range(0, rows, len(tile)):
        stop = min(rows, start + len(tile))
        matrix[start:stop] = tile[: stop - start]
    return matrix


def spec_of() -> Any:
    from bufcore.tree import LeafSpec

    return {leaf.path: LeafSpec(leaf.shape, leaf.dtype) for leaf in LEAVES}


# ---------------------------------------------------------------- the simple alternative
def _hash_blocks(fd: int, size: int, block: int) -> list[str]:
    """sha256 of each ``block``-byte block of the file open as ``fd``, on two threads."""

    def one(index: int) -> str:
        sha = hashlib.sha256()
        position, stop = index * block, min(size, (index + 1) * block)
        while position < stop:
            data = os.pread(fd, min(_BLOCK_BYTES // 8, stop - position), position)
            if not data:
                break
            sha.update(data)
            position += len(data)
        return sha.hexdigest()

    with ThreadPoolExecutor(_HASH_THREADS) as pool:
        return list(pool.map(one, range(-(-size // block))))


def _seal(path: Path, block: int | None) -> dict[str, Any]:
    """fsync ``path`` while hashing it from the page cache; its manifest entry."""
    fd = os.open(path, os.O_RDONLY)
    try:
        syncer = threading.Thread(target=os.fsync, args=(fd,))
        syncer.start()
        size = os.fstat(fd).st_size
        if block is None:
            entry: dict[str, Any] = {"sha256": _hash_blocks(fd, size, max(1, size))[0]}
        else:
            entry = {"block_bytes": block, "sha256_blocks": _hash_blocks(fd, size, block)}
        syncer.join()
    finally:
        os.close(fd)
    return {"size": size, **entry}


def simple_save(path: Path, views: dict[tuple[str, ...], torch.Tensor]) -> None:
    """The checkpoint of ``views`` written with h5py ``write_direct`` (module docstring)."""
    from bufcore.persist.atomic import publish_directory
    from bufcore.persist.checkpoint.format import (
        CONFIG,
        MANIFEST,
        PAYLOAD,
        STATE,
        build_manifest,
        replaceable_checkpoint,
    )
    from bufcore.tree import join_key_path

    spec = spec_of()
    names = {key: join_key_path(key, SEPARATOR) for key in spec}
    rows = next(iter(views.values())).shape[0]

    def write(staging: Path) -> None:
        with h5py.File(staging / PAYLOAD, "w", libver="earliest") as h5:
            for key, view in views.items():
                array = view.numpy()
                dataset = h5.create_dataset(names[key], shape=array.shape, dtype=array.dtype)
                step = max(1, _BLOCK_BYTES // max(1, array[:1].nbytes))
                for start in range(0, rows, step):
                    block = np.ascontiguousarray(array[start : start + step])
                    dataset.write_direct(block, dest_sel=np.s_[start : start + len(block)])
        for name, data in ((CONFIG, {"__target__": TARGET}), (STATE, {})):
            (staging / name).write_text(json.dumps(data) + "\n", encoding="utf-8")
        files = {PAYLOAD: _seal(staging / PAYLOAD, 32 << 20)}
        files.update({name: _seal(staging / name, None) for name in (CONFIG, STATE)})
        manifest = build_manifest(
            names=names,
            target=TARGET,
            separator=SEPARATOR,
            batch_dims=1,
            env_count=None,
            rows=rows,
            spec=spec,
            files=files,
        )
        (staging / MANIFEST).write_text(json.dumps(manifest) + "\n", encoding="utf-8")
        _seal(staging / MANIFEST, None)

    publish_directory(path, write, replaceable=replaceable_checkpoint)


def simple_load(path: Path, views: dict[tuple[str, ...], torch.Tensor]) -> None:
    """Read the checkpoint at ``path`` into ``views`` with h5py ``read_direct``, hashing
    buffer.hdf5's blocks on two threads meanwhile (module docstring).

    Raises:
        CorruptCheckpointError: a file differs from the manifest.
    """
    from bufcore.errors import CorruptCheckpointError
    from bufcore.persist.checkpoint.format import (
        MANIFEST,
        PAYLOAD,
        check_manifest,
        manifest_spec,
        parse_json,
        payload_digests,
    )
    from bufcore.persist.checkpoint.verify import verify_bytes
    from bufcore.persist.snapshot import CheckpointSnapshot

    with CheckpointSnapshot(path) as snapshot:
        manifest = parse_json(snapshot.read(MANIFEST), path / MANIFEST)
        check_manifest(path, manifest)
        for name, expected in manifest["files"].items():
            if name != PAYLOAD:
                verify_bytes(path / name, snapshot.read(name), expected)
        digests = payload_digests(path / PAYLOAD, manifest)
        _, names = manifest_spec(path, manifest)
        fd = snapshot.open(PAYLOAD)
    try:
        block = digests.block_bytes or max(1, digests.size)
        with ThreadPoolExecutor(1) as hasher:
            hashed = hasher.submit(_hash_blocks, fd, digests.size, block)
            with h5py.File(os.fdopen(os.dup(fd), "rb"), "r") as h5:
                for key, view in views.items():
                    dataset = h5[names[key]]
                    rows = dataset.shape[0]
                    step = max(1, _BLOCK_BYTES // max(1, view[:1].numpy().nbytes))
                    bounce = np.empty((min(rows, step), *dataset.shape[1:]), dtype=dataset.dtype)
                    target = view.numpy()
                    for start in range(0, rows, step):
                        stop = min(rows, start + step)
                        part = bounce[: stop - start]
                        dataset.read_direct(part, source_sel=np.s_[start:stop])
                        np.copyto(target[start:stop], part)
            got = hashed.result()
    finally:
        os.close(fd)
    if tuple(got) != digests.sha256:
        raise CorruptCheckpointError(path / PAYLOAD, "sha256 does not match the manifest")


def engine_save(path: Path, views: dict[tuple[str, ...], torch.Tensor]) -> None:
    """The checkpoint of ``views`` written by bufcore's save path."""
    from bufcore.persist.checkpoint import save_checkpoint

    # What a buffer's state_dict() hands save_checkpoint (the spec is read off the rows).
    state = {
        "target": TARGET,
        "config": {},
        "state": {},
        "nested_key_separator": SEPARATOR,
        "batch_dims": 1,
        "rows": {key: views[key] for key in spec_of()},
    }
    save_checkpoint(path, state)


def engine_load(path: Path, views: dict[tuple[str, ...], torch.Tensor]) -> None:
    """Read the checkpoint at ``path`` into ``views`` through bufcore's load path."""
    from bufcore.persist.checkpoint import OpenedCheckpoint, load_checkpoint

    def build(opened: OpenedCheckpoint) -> None:
        opened.row_source(SEPARATOR, 1).read_into(views)

    load_checkpoint(path, build)


# ------------------------------------------------------------------------------ the child
@dataclass(frozen=True)
class EngineSpec:
    """One measurement: ``op`` by ``implementation`` on ``rows`` rows, at ``path``.

    ``path`` is the checkpoint to write (save) or read (load); ``source`` is the checkpoint a
    raw read reads buffer.hdf5 of, and whose size a raw write writes.
    """

    op: str
    implementation: str
    rows: int
    path: str
    source: str = ""

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


def measure(spec: EngineSpec) -> dict[str, Any]:
    """Run one measurement in this process; ``{"seconds", "bytes"}``."""
    torch.set_num_threads(1)
    path = Path(spec.path)
    savers: dict[str, Callable[[Path, Any], None]] = {
        "engine": engine_save,
        "simple": simple_save,
    }
    loaders: dict[str, Callable[[Path, Any], None]] = {
        "engine": engine_load,
        "simple": simple_load,
    }
    width, _ = row_layout()
    if spec.op == "save":
        matrix = filled_matrix(spec.rows)
        if spec.implementation == "raw":
            nbytes = disk.tree_bytes(Path(spec.source))
            data = np.resize(matrix.reshape(-1), nbytes)
            seconds = disk.raw_write(path, data)
        else:
            views = leaf_views(matrix)
            disk.remove(path)
            seconds, _ = timed(lambda: savers[spec.implementation](path, views))
            nbytes = disk.tree_bytes(path)
        disk.remove(path)
        return {"seconds": seconds, "bytes": nbytes}
    if spec.implementation == "raw":
        payload = Path(spec.source) / "buffer.hdf5"
        out = np.ones(payload.stat().st_size, dtype=np.uint8)  # touched, as a ceiling
        return {"seconds": disk.raw_read(payload, out), "bytes": disk.tree_bytes(payload.parent)}
    disk.drop_cache(path)
    views = leaf_views(np.zeros((spec.rows, width), dtype=np.uint8))
    seconds, _ = timed(lambda: loaders[spec.implementation](path, views))
    return {"seconds": seconds, "bytes": disk.tree_bytes(path)}


def run_child(spec: EngineSpec) -> dict[str, Any]:
    """:func:`measure` in a fresh ``python -m bench.persist_engine`` process."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.persist_engine", spec.to_json()],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ----------------------------------------------------------------------------- the parent
@dataclass
class EngineResults:
    """MB/s per ``(rows, op, implementation)`` over rounds."""

    rates: dict[tuple[int, str, str], list[float]] = field(default_factory=dict)
    checkpoint_bytes: dict[int, int] = field(default_factory=dict)

    def add(self, rows: int, op: str, implementation: str, result: dict[str, Any]) -> None:
        rate = result["bytes"] / result["seconds"] / 1e6
        self.rates.setdefault((rows, op, implementation), []).append(rate)

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpoint_bytes": {str(k): v for k, v in self.checkpoint_bytes.items()},
            "rates_mb_s": [
                {"rows": rows, "op": op, "implementation": impl, "values": values}
                for (rows, op, impl), values in self.rates.items()
            ],
        }


def rotation(round_index: int) -> list[tuple[str, str]]:
    """The ``(op, implementation)`` order of one round: every pair, rotated by the round."""
    pairs = [(op, impl) for op in OPS for impl in IMPLEMENTATIONS]
    shift = round_index % len(pairs)
    return pairs[shift:] + pairs[:shift]


def run(sizes: tuple[int, ...], rounds: int, tmp_dir: Path) -> EngineResults:
    """Every ``(op, implementation)`` in its own process, ``rounds`` times per size."""
    results = EngineResults()
    tmp_dir.mkdir(parents=True, exist_ok=True)
    for rows in sizes:
        source = tmp_dir / f"persist-engine-{rows}"
        target = tmp_dir / f"persist-engine-{rows}-out"
        try:
            # The checkpoint every load reads (and whose size the raw write writes).
            _prepare(rows, source)
            results.checkpoint_bytes[rows] = disk.tree_bytes(source)
            for index in range(rounds):
                for op, impl in rotation(index):
                    path = target if op == "save" else source
                    spec = EngineSpec(op, impl, rows, str(path), str(source))
                    results.add(rows, op, impl, run_child(spec))
                    print(
                        f"persist-engine: {rows:,} rows, round {index + 1}/{rounds}: "
                        f"{op} {impl} {results.rates[(rows, op, impl)][-1]:,.0f} MB/s",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            disk.remove(source)
            disk.remove(target)
    return results


def _prepare(rows: int, path: Path) -> None:
    """Write the checkpoint the loads read, with bufcore's save, in this process."""
    engine_save(path, leaf_views(filled_matrix(rows)))


def render(results: EngineResults) -> str:
    """The table: median [slowest] MB/s per implementation, and the ratio to the ceiling."""
    lines = [
        "persist engine (fresh process per measurement; MB/s median [slowest]; "
        "x = median / median of raw)",
        "| rows | op | engine | simple | raw (ceiling) | engine x | simple x | simple/engine |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rows in sorted(results.checkpoint_bytes):
        for op in OPS:
            cells = {}
            medians = {}
            for impl in IMPLEMENTATIONS:
                values = results.rates.get((rows, op, impl), [])
                if values:
                    medians[impl] = statistics.median(values)
                    cells[impl] = f"{medians[impl]:,.0f} [{min(values):,.0f}] n={len(values)}"
            raw = medians.get("raw")
            ratios = {
                impl: f"{medians[impl] / raw:.2f}x" if raw and impl in medians else "-"
                for impl in ("engine", "simple")
            }
            both = medians.get("engine") and medians.get("simple")
            versus = f"{medians['simple'] / medians['engine']:.2f}" if both else "-"
            lines.append(
                f"| {rows:,} | {op} | {cells.get('engine', '-')} | {cells.get('simple', '-')} | "
                f"{cells.get('raw', '-')} | {ratios['engine']} | {ratios['simple']} | {versus} |"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Child entry point: one JSON spec in, one JSON line out."""
    if len(argv) != 1:
        print("usage: python -m bench.persist_engine '<json spec>'", file=sys.stderr)
        return 2
    spec = EngineSpec(**json.loads(argv[0]))
    print(json.dumps(measure(spec)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

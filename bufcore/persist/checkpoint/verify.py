"""Checking what a load reads against the manifest: small files whole, buffer.hdf5 as it is read.

The small JSON files are read whole and checked before anything parses them
(:func:`verify_bytes`). ``buffer.hdf5`` is checked one of two ways, against its block digests
(:func:`~bufcore.persist.checkpoint.format.payload_digests`).

**The whole file, while a full load reads it.** :class:`PayloadStream` starts a
:class:`~bufcore.persist.checkpoint.hashing.BlockHasher` on the file as the load opens it, so the
blocks are hashed on background threads while the loader reads the rows through HDF5
(:mod:`bufcore.persist.checkpoint.read_payload`); whichever comes first reads a block from the
disk, the other from the page cache. :meth:`PayloadStream.finish` reports damage, and the load
raises it before returning anything (``tests/fault/test_corruption.py``). Measured against
bufcore's earlier engine (a reader thread streaming the file through a ring of slots into the
rows while hashing threads hashed the same slots): that engine did not load faster than this
(bench row ``persist-engine``), so it went.

**Only the blocks a partial read touches.** A read of some rows (``read_leaf``, a
``load_buffer(..., leaves=...)``) reads only what it needs; :class:`BlockReader` hashes exactly
the manifest blocks (``block_bytes`` each) that those bytes lie in and compares them with the
manifest before any of the bytes is handed out, once per block per opening. A manifest of format
version 1 lists one digest for the whole file: then any read hashes the whole file.

Which bytes a read touches (:func:`read_extents`, :func:`metadata_extents`):

- the rows' own bytes: for a contiguous dataset (bufcore's layout) the rows asked for, at
  ``get_offset()``; for a chunked one every chunk it stores, whichever rows are asked;
- the HDF5 metadata h5py reads to find them, taken as every byte of the file outside the
  datasets' raw data (in bufcore's layout the front of the file: the first block). A compact
  dataset keeps its values in its object header, so in that metadata, and so does an
  unallocated one (its fill value).

A layout this cannot map to bytes (none HDF5 has beyond those and the virtual and external ones
:mod:`bufcore.persist.hdf5_guard` refuses) makes the read verify the whole file: nothing is
skipped. Without a manifest (BFM-Zero's own directories) there is nothing to verify against, and
the bytes are read as they are.

Bytes are hashed, then read again (from the page cache) through the same open file: a checkpoint
is never changed in place (a save publishes a new directory), so they are the bytes hashed.

Needed by: ``tests/persist/test_block_reads.py`` (partial loads and ``read_leaf`` refuse a damaged
byte in the blocks they read, and hash no other block) and ``tests/app/test_verified_reads.py``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.checkpoint.hashing import BlockHasher, Digests, hash_range, mismatch


# ------------------------------------------------------------------------------- small files
def verify_bytes(path: Path, data: bytes, expected: dict[str, Any]) -> None:
    """Check the content of a small file against its (checked) manifest entry.

    Raises:
        CorruptCheckpointError: the size or the whole-file ``sha256`` differs.
    """
    if len(data) != expected["size"]:
        raise CorruptCheckpointError(
            path, f"size {len(data)} bytes, manifest says {expected['size']}"
        )
    if hashlib.sha256(data).hexdigest() != expected["sha256"]:
        raise CorruptCheckpointError(path, "sha256 does not match the manifest")


# ------------------------------------------------------------- all of buffer.hdf5, streamed
class PayloadStream:
    """buffer.hdf5 being hashed, block by block, against its manifest entry.

    Args:
        path: The file (for messages).
        fd: The file, open for reading; the stream owns it and closes it in :meth:`finish`.
        expected: Its size and block digests, or None: nothing to check (the file is only
            closed).
    """

    def __init__(self, path: Path, fd: int, expected: Digests | None) -> None:
        self.path = path
        self._fd = fd
        self._expected = expected
        self._hasher = None if expected is None else BlockHasher(fd, expected.block_bytes)

    def finish(self) -> CorruptCheckpointError | None:
        """Wait for the hashing and close the file; the damage found, if any (idempotent)."""
        damage = None
        if self._hasher is not None and self._expected is not None:
            try:
                digests, size = self._hasher.result()
                damage = mismatch(self.path, self._expected, digests, size)
            except OSError as err:
                damage = CorruptCheckpointError(self.path, f"reading failed ({err})")
            self._hasher = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        return damage


# ----------------------------------------------------- the blocks a partial read touches
# Byte extents of a file: starts and stops (exclusive), int64 arrays of one length.
Extents = tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]


def extents(pairs: list[tuple[int, int]]) -> Extents:
    """Extents from ``(start, stop)`` pairs."""
    starts = np.array([start for start, _ in pairs], dtype=np.int64)
    stops = np.array([stop for _, stop in pairs], dtype=np.int64)
    return starts, stops


def join(*parts: Extents) -> Extents:
    """The extents of all ``parts`` together."""
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _raw_data(dataset: h5py.Dataset) -> Extents | None:
    """Where ``dataset`` keeps its values in the file, or None for a layout not mapped here.

    Empty for a compact or unallocated dataset (its values live in the metadata).
    """
    layout = dataset.id.get_create_plist().get_layout()
    if layout == h5py.h5d.COMPACT:
        return extents([])
    if layout == h5py.h5d.CONTIGUOUS:
        offset = dataset.id.get_offset()
        size = dataset.id.get_storage_size()
        return extents([] if offset is None or size == 0 else [(offset, offset + size)])
    if layout == h5py.h5d.CHUNKED:
        infos = [dataset.id.get_chunk_info(i) for i in range(dataset.id.get_num_chunks())]
        return extents([(i.byte_offset, i.byte_offset + i.size) for i in infos if i.size])
    return None


def read_extents(
    dataset: h5py.Dataset, rows: slice | np.ndarray[Any, Any] | None
) -> Extents | None:
    """The bytes of ``dataset``'s values that reading ``rows`` touches; None: unmapped layout.

    Args:
        dataset: The dataset (its first axis is time rows).
        rows: None for every row, a step-1 slice of rows, or sorted distinct row indices.
    """
    raw = _raw_data(dataset)
    if raw is None or rows is None or len(raw[0]) == 0:
        return raw
    if dataset.id.get_create_plist().get_layout() != h5py.h5d.CONTIGUOUS:
        return raw  # a chunk holds many rows: every chunk is verified
    offset = int(raw[0][0])
    width = int(raw[1][0] - raw[0][0]) // max(1, int(dataset.shape[0]))
    if isinstance(rows, slice):
        return extents([(offset + rows.start * width, offset + rows.stop * width)])
    starts = offset + rows.astype(np.int64) * width
    return starts, starts + width


def metadata_extents(datasets: list[h5py.Dataset], size: int) -> Extents | None:
    """Every byte of a file of ``size`` bytes outside the raw data of ``datasets`` (all of
    the file's datasets): its HDF5 metadata. None when a dataset's layout is not mapped."""
    raws = [_raw_data(dataset) for dataset in datasets]
    if any(raw is None for raw in raws):
        return None
    starts, stops = join(extents([]), *(raw for raw in raws if raw is not None))
    order = np.argsort(starts, kind="stable")
    gaps: list[tuple[int, int]] = []
    position = 0
    for start, stop in zip(starts[order].tolist(), stops[order].tolist(), strict=True):
        if start > position:
            gaps.append((position, start))
        position = max(position, stop)
    if position < size:
        gaps.append((position, size))
    return extents(gaps)


class BlockReader:
    """buffer.hdf5 open as ``fd``, read by byte extents, verified block by block.

    Args:
        path: The file (for messages).
        fd: The file, open for reading (owned by the caller).
        expected: Its size and block digests from the manifest; None: nothing to verify.
    """

    def __init__(self, path: Path, fd: int, expected: Digests | None) -> None:
        self.path = path
        self._fd = fd
        self._expected = expected
        self._verified: set[int] = set()

    def verify(self, span: Extents | None, what: str) -> None:
        """Hash every block of the manifest that ``span`` touches (None: the whole file) and
        not yet verified, and compare it with the manifest.

        Args:
            span: The bytes about to be read.
            what: What is being read, for messages (``"leaf ['done']"``).

        Raises:
            CorruptCheckpointError: the file's size or a block's sha256 differs from the
                manifest (names buffer.hdf5, ``what`` and the block).
        """
        expected = self._expected
        if expected is None:
            return
        size = os.fstat(self._fd).st_size
        if size != expected.size:
            raise CorruptCheckpointError(
                self.path, f"{what}: size {size} bytes, manifest says {expected.size}"
            )
        block = expected.block_bytes or max(1, size)
        count = len(expected.sha256)
        if span is None:
            needed = np.arange(count)
        else:
            starts, stops = span
            keep = stops > starts
            first, last = starts[keep] // block, (stops[keep] - 1) // block
            # A difference array marks every block from first to last of each extent.
            marks = np.zeros(count + 1, dtype=np.int64)
            np.add.at(marks, np.clip(first, 0, count), 1)
            np.add.at(marks, np.clip(last + 1, 0, count), -1)
            needed = np.flatnonzero(np.cumsum(marks[:-1]) > 0)
        for index in needed.tolist():
            if index not in self._verified:
                self._check_block(index, block, size, expected.sha256[index], what)
                self._verified.add(index)

    def _check_block(self, index: int, block: int, size: int, digest: str, what: str) -> None:
        start, stop = index * block, min(size, (index + 1) * block)
        got, hashed = hash_range(self._fd, start, stop)
        if hashed != stop - start or got != digest:
            raise CorruptCheckpointError(
                self.path,
                f"{what}: sha256 of block {index} (bytes {start} to {stop}) does not match "
                "the manifest",
            )

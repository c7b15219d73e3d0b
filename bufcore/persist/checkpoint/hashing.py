"""sha256 of files: whole, or per fixed-size block on background threads.

Data model: :class:`Digests` is what a file must hash to: its size and one sha256 per fixed-size
block (or one for the whole file). A :class:`BlockHasher` hashes a file's blocks on a small pool
of threads while the caller fsyncs or reads it; :func:`mismatch` says how what was hashed
differs from what was expected.

:func:`seal_file` fsyncs a freshly written file while hashing it from the page cache, so sealing
costs about as much as the fsync alone.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bufcore.errors import CorruptCheckpointError

# Unit of reads when hashing a whole file or a file range.
_HASH_CHUNK = 8 << 20
# Threads hashing the blocks of buffer.hdf5 (this machine's two cores; bench row persist-engine).
HASH_THREADS = 2


@dataclass(frozen=True)
class Digests:
    """What a file must hash to: its size and the sha256 of each of its blocks.

    Attributes:
        size: Bytes in the file.
        block_bytes: Bytes per block (the last one may be shorter), or None when ``sha256`` is
            the one digest of the whole file.
        sha256: Hex sha256 of each block, in file order (without blocks: of the whole file).
    """

    size: int
    block_bytes: int | None
    sha256: tuple[str, ...]


class BlockHasher:
    """sha256 of a file per fixed-size block, hashed by background threads.

    Block ``k`` (``block_bytes`` each, the last one shorter) is read with ``pread`` and hashed
    on one of ``threads`` threads; hashlib releases the GIL, so the caller meanwhile fsyncs the
    file it just wrote (a save) or reads it through HDF5 (a load), and consecutive blocks are
    hashed on both cores at once. Without ``block_bytes`` the whole file is one digest.

    Why threads: sha256 (~1.8 GB/s on one core) is the slowest step of both a save and a load,
    slower than a cold read; hashing concurrently with the fsync or the reads is what keeps
    save and cold load near the disk's ceiling (bench row ``persist-engine``). Blocks (rather
    than one digest) also let a read of some rows verify only the blocks it touches
    (:mod:`bufcore.persist.checkpoint.verify`, ``tests/persist/test_block_reads.py``).

    Args:
        fd: The file, open for reading (a duplicate is kept until :meth:`close`).
        block_bytes: Bytes per block, or None for one digest of the whole file.
        threads: Hashing threads (one without ``block_bytes``).
    """

    def __init__(self, fd: int, block_bytes: int | None, threads: int = HASH_THREADS) -> None:
        self.block_bytes = block_bytes
        self._fd = os.dup(fd)
        self.size = os.fstat(self._fd).st_size
        if block_bytes is None:
            ranges: list[tuple[int, int | None]] = [(0, None)]
        else:
            ranges = [(start, start + block_bytes) for start in range(0, self.size, block_bytes)]
        self._pool = ThreadPoolExecutor(
            threads if block_bytes is not None else 1, thread_name_prefix="bufcore-sha256"
        )
        self._jobs = [self._pool.submit(hash_range, self._fd, *bounds) for bounds in ranges]

    def result(self) -> tuple[list[str], int]:
        """Hex sha256 of each block (one for the whole file without blocks) and the bytes
        hashed; closes the hasher.

        Raises:
            OSError: reading the file failed.
        """
        try:
            hashed = [job.result() for job in self._jobs]
        finally:
            self.close()
        return [digest for digest, _ in hashed], sum(size for _, size in hashed)

    def close(self) -> None:
        """Stop hashing (what is under way finishes) and close the file (idempotent)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def hash_fd(fd: int) -> tuple[str, int]:
    """sha256 and size of the whole file open as ``fd``, read from its start."""
    return hash_range(fd, 0, None)


def hash_range(fd: int, start: int, stop: int | None) -> tuple[str, int]:
    """sha256 of bytes ``[start, stop)`` of the file open as ``fd`` (``stop`` None: to its end),
    and how many bytes were hashed (fewer when the file ends first)."""
    size = os.fstat(fd).st_size if stop is None else stop
    # Sized to the range: zeroing 8 MiB takes ~4 ms, far longer than hashing a JSON file.
    buffer = memoryview(bytearray(max(1, min(_HASH_CHUNK, size - start + 1))))
    hasher = hashlib.sha256()
    position = start
    while stop is None or position < stop:
        want = len(buffer) if stop is None else min(len(buffer), stop - position)
        got = os.preadv(fd, [buffer[:want]], position)
        if got == 0:
            break
        hasher.update(buffer[:got])
        position += got
    return hasher.hexdigest(), position - start


def file_digest(path: Path) -> tuple[str, int]:
    """sha256 and size of ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return hash_fd(fd)
    finally:
        os.close(fd)


def mismatch(
    path: Path, expected: Digests, digests: list[str], size: int
) -> CorruptCheckpointError | None:
    """How a file of ``size`` bytes hashing to ``digests`` differs from ``expected``, if at all."""
    if size != expected.size:
        return CorruptCheckpointError(path, f"size {size} bytes, manifest says {expected.size}")
    if len(digests) != len(expected.sha256):
        return CorruptCheckpointError(
            path, f"{len(digests)} blocks hashed, manifest lists {len(expected.sha256)}"
        )
    block = expected.block_bytes
    for index, (digest, wanted) in enumerate(zip(digests, expected.sha256, strict=True)):
        if digest != wanted:
            if block is None:
                return CorruptCheckpointError(path, "sha256 does not match the manifest")
            stop = min(size, (index + 1) * block)
            return CorruptCheckpointError(
                path,
                f"sha256 of block {index} (bytes {index * block} to {stop}) does not match "
                "the manifest",
            )
    return None


def seal_file(path: Path, digest: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """fsync ``path`` and return its manifest entry; hashing and fsync run concurrently.

    The entry is the file's whole-file ``sha256`` and ``size``: hashing reads the freshly written
    pages from the page cache while the kernel writes them out, so sealing costs about as much as
    the fsync alone. ``digest``, when given, supplies the entry instead (buffer.hdf5's block
    digests, hashed by a :class:`BlockHasher` meanwhile); it is awaited during the fsync.

    Raises:
        OSError: the fsync failed (the file may not be on disk).
    """
    failure: list[OSError] = []

    def sync(fd: int) -> None:
        try:
            os.fsync(fd)
        except OSError as err:  # raised below, on the calling thread
            failure.append(err)

    fd = os.open(path, os.O_RDONLY)
    try:
        syncer = threading.Thread(target=sync, args=(fd,))
        syncer.start()
        try:
            if digest is not None:
                entry = digest()
            else:
                sha256, size = hash_fd(fd)
                entry = {"sha256": sha256, "size": size}
        finally:
            syncer.join()
    finally:
        os.close(fd)
    if failure:
        raise failure[0]
    return entry

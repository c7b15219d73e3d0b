"""sha256 of files and byte streams, per block and on background threads.

Data model: :class:`Digests` is what a file must hash to: its size and one sha256 per fixed-size
block (or one for the whole file). A :class:`StreamHasher` takes a byte stream in order, cut into
those blocks, and hashes them on a small pool of threads; :func:`mismatch` says how what was
hashed differs from what was expected.

Why blocks and threads: sha256 (~1.8 GB/s on one core) is the slowest step of both a save and a
load, slower than a cold sequential read, and one sha256 is strictly sequential. Blocks are
independent: block ``k`` goes to thread ``k % threads``, so once the producer is past a block
boundary the next block is hashed beside the one still being finished. hashlib releases the GIL
on large buffers, so the feeding thread packs, writes or reads the next piece meanwhile, and the
bytes are hashed from the memory they were written from or read into: a file is never read a
second time to be checked.

:func:`seal_file` fsyncs a freshly written file while hashing it from the page cache, so sealing
costs about as much as the fsync alone.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bufcore.errors import CorruptCheckpointError

# Unit of reads when hashing a whole file or a file range.
_HASH_CHUNK = 8 << 20


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


class _Pieces:
    """Pieces of one fed buffer still to be hashed; the last one done runs the callback."""

    __slots__ = ("done", "left", "lock")

    def __init__(self, left: int, done: Callable[[], None] | None) -> None:
        self.left = left
        self.done = done
        self.lock = threading.Lock()

    def finish_one(self) -> None:
        with self.lock:
            self.left -= 1
            last = self.left == 0
        if last and self.done is not None:
            self.done()


_Job = tuple["hashlib._Hash", memoryview, _Pieces]


class StreamHasher:
    """sha256 of a byte stream fed in order, per fixed-size block, hashed by background threads.

    With ``block_bytes`` the stream is cut into blocks of that many bytes (the last one shorter),
    each with its own sha256; block ``k`` goes to thread ``k % threads``, so consecutive blocks
    are hashed at the same time on different cores, each by one thread in stream order. A buffer
    fed across a block boundary is split there. Without ``block_bytes`` the whole stream is one
    block (one sha256 of everything, on one thread).

    hashlib releases the GIL on large buffers, so the feeding thread packs, writes or reads the
    next slot while these threads hash the previous ones: sha256 (~1.8 GB/s on one core) is the
    slowest step of both a save and a load, and this keeps it off their critical path.

    Args:
        block_bytes: Bytes per block, or None for one block of the whole stream.
        threads: Hashing threads (used only with ``block_bytes``).

    Raises:
        ValueError: ``block_bytes`` or ``threads`` is not positive.
    """

    def __init__(self, block_bytes: int | None = None, threads: int = 1) -> None:
        if (block_bytes is not None and block_bytes <= 0) or threads <= 0:
            raise ValueError(f"block_bytes {block_bytes} and threads {threads} must be positive")
        self.block_bytes = block_bytes
        count = threads if block_bytes is not None else 1
        self._queues: list[queue.SimpleQueue[_Job | None]] = [
            queue.SimpleQueue() for _ in range(count)
        ]
        # One sha256 per block, created by the feeding thread as the stream reaches the block.
        self._blocks: list[hashlib._Hash] = [] if block_bytes is not None else [hashlib.sha256()]
        self._size = 0
        self._error: BaseException | None = None
        self._closed = False
        self._threads = [
            threading.Thread(target=self._run, args=(jobs,), name="bufcore-sha256", daemon=True)
            for jobs in self._queues
        ]
        for thread in self._threads:
            thread.start()

    def feed(self, data: memoryview, done: Callable[[], None] | None = None) -> None:
        """Hash ``data`` after what was fed before; ``done()`` runs once ``data`` may change."""
        if self.block_bytes is None:
            self._size += data.nbytes
            self._queues[0].put((self._blocks[0], data, _Pieces(1, done)))
            return
        jobs: list[tuple[int, memoryview]] = []
        position = self._size
        while data.nbytes:
            block, into = divmod(position, self.block_bytes)
            if block == len(self._blocks):
                self._blocks.append(hashlib.sha256())
            take = min(data.nbytes, self.block_bytes - into)
            jobs.append((block, data[:take]))
            data = data[take:]
            position += take
        self._size = position
        if not jobs:
            if done is not None:
                done()
            return
        pieces = _Pieces(len(jobs), done)
        for block, piece in jobs:
            self._queues[block % len(self._queues)].put((self._blocks[block], piece, pieces))

    def _run(self, jobs: queue.SimpleQueue[_Job | None]) -> None:
        while (job := jobs.get()) is not None:
            sha256, data, pieces = job
            try:
                if self._error is None:
                    sha256.update(data)
            except BaseException as err:  # handed to the thread that asks for the result
                self._error = err
            finally:
                pieces.finish_one()

    def close(self) -> None:
        """Hash what was fed, then stop the threads (idempotent)."""
        if not self._closed:
            self._closed = True
            for jobs in self._queues:
                jobs.put(None)
        for thread in self._threads:
            thread.join()

    def result(self) -> tuple[list[str], int]:
        """Hex sha256 of each block (one for the whole stream without blocks) and the size.

        Closes the hasher.

        Raises:
            BaseException: what hashing raised.
        """
        self.close()
        if self._error is not None:
            raise self._error
        return [sha256.hexdigest() for sha256 in self._blocks], self._size


def hash_fd(fd: int) -> tuple[str, int]:
    """sha256 and size of the whole file open as ``fd``, read from its start."""
    # Sized to the file: zeroing an 8 MiB buffer takes ~4 ms, far longer than hashing a JSON file.
    buffer = memoryview(bytearray(min(_HASH_CHUNK, os.fstat(fd).st_size + 1)))
    return hash_range(fd, 0, None, buffer)


def hash_range(fd: int, start: int, stop: int | None, buffer: memoryview) -> tuple[str, int]:
    """sha256 of bytes ``[start, stop)`` of the file open as ``fd`` (``stop`` None: to its end),
    read through ``buffer``, and how many bytes were hashed (fewer when the file ends first)."""
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


def hash_file_range(fd: int, start: int, stop: int, hasher: StreamHasher) -> None:
    """Feed bytes ``[start, stop)`` of the file to ``hasher`` (HDF5 metadata: a few KiB)."""
    while start < stop:
        data = os.pread(fd, min(stop - start, _HASH_CHUNK), start)
        if not data:
            raise RuntimeError(f"file descriptor {fd}: ended at byte {start}, expected {stop}")
        hasher.feed(memoryview(data))
        start += len(data)


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
    digests, taken while the file was written); it is awaited during the fsync.

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

"""Byte streams between the page cache, threads and packed rows.

The fast checkpoint paths (:mod:`bufcore.checkpoint`) move a file's bytes between disk and a
buffer's rows without an intermediate copy of the whole file, and hash them on the way. This
module holds that machinery; it knows nothing of HDF5 or of the checkpoint layout, only of byte
ranges of a file and of the tensors they come from or go to.

Data model:

- A :class:`SlotRing` holds a few fixed-size byte buffers (slots), handed out by index and given
  back when every user is done with one. A producer fills a slot (packs rows into it, or reads
  file bytes into it), consumers use it, the last one frees it.
- A :class:`StreamHasher` takes slots (memoryviews) in stream order and hashes them on a small
  pool of background threads, calling a ``done`` callback once it no longer needs a slot. The
  stream is cut into fixed-size blocks with one sha256 each (or is one block, for files checked
  against a single whole-file sha256); a slot may straddle two blocks. :class:`Digests` is what
  a file must hash to.
- A save packs a block of strided rows into a slot (:func:`copy_tensor`), feeds it to the hasher,
  writes it at its file offset (:func:`pwrite_all`) and hints the kernel to start writing it out
  (:func:`start_writeback`).
- A load reads the file front to back into slots on a :class:`PayloadStream` thread; each chunk
  goes to the hasher and to the loader, which copies known byte regions straight into the rows
  they belong to (:func:`byte_rows`, :func:`copy_regions`).

Why it is built this way:

- sha256 (~1.8 GB/s on one core) is the slowest step of both a save and a load, and slower than
  a cold sequential read. hashlib releases the GIL on large buffers, so hashing slots on other
  threads while the feeding thread packs, writes or reads the next takes it off the critical
  path; and the bytes are hashed from the slot they were written from or read into, so the file
  is never read a second time.
- One sha256 is a strictly sequential computation, so one stream never uses more than one core.
  Blocks are independent: block ``k`` goes to thread ``k % threads``, and once the producer is
  past a block boundary the next block is hashed beside the one still being finished. The slots
  in flight (a load holds tens of MiB) are what lets the threads overlap; blocks of tens of MiB
  keep the per-block digest list short.
- Slots are small (a few MiB) and reused: a slot is packed, hashed and written while it is still
  in the last-level cache, instead of streaming a whole file's worth of copies through memory;
  and their number bounds how far a producer runs ahead of the hasher.
- Without writeback hints nothing reaches the disk before the final fsync (a checkpoint stays
  far below the kernel's dirty-page thresholds), so the disk would idle while rows are packed and
  hashed and the fsync would then pay for all of it. ``sync_file_range`` starts each slot's
  writeback as soon as it is written, without waiting for it.
- Copies between CPU tensors run on the calling thread (numpy, GIL released) rather than on
  torch's intra-op threads, which would fight the hashing threads for the same cores.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import queue
import threading
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bufcore.errors import CorruptCheckpointError

# Unit of reads when hashing a whole file or a file range.
_HASH_CHUNK = 8 << 20
_SYNC_FILE_RANGE_WRITE = 2


# --------------------------------------------------------------------------- hashing
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
    hasher = hashlib.sha256()
    # Sized to the file: zeroing an 8 MiB buffer takes ~4 ms, far longer than hashing a JSON file.
    buffer = bytearray(min(_HASH_CHUNK, os.fstat(fd).st_size + 1))
    view = memoryview(buffer)
    size = 0
    offset = 0
    while True:
        n = os.preadv(fd, [buffer], offset)
        if n == 0:
            break
        hasher.update(view[:n])
        size += n
        offset += n
    return hasher.hexdigest(), size


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


# -------------------------------------------------------------------- slots and rows
class SlotRing:
    """Reusable byte buffers handed between a producer and its consumers, by index."""

    def __init__(self, count: int, slot_bytes: int) -> None:
        self.slot_bytes = slot_bytes
        arrays = [np.empty(slot_bytes, dtype=np.uint8) for _ in range(count)]
        self.tensors = [torch.from_numpy(array) for array in arrays]
        self.views = [array.data.cast("B") for array in arrays]
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for slot in range(count):
            self._free.put(slot)

    def take(self) -> int:
        """A free slot; waits until one is given back."""
        return self._free.get()

    def give(self, slot: int) -> None:
        """Hand ``slot`` back; its bytes may be overwritten from now on."""
        self._free.put(slot)


def row_bytes(array: torch.Tensor) -> int:
    """Bytes of one row (every axis after the first) of ``array``."""
    return math.prod(array.shape[1:]) * array.element_size()


def copy_tensor(dest: torch.Tensor, src: torch.Tensor) -> None:
    """``dest.copy_(src)``, on the calling thread alone for CPU tensors.

    torch splits a large copy over its intra-op threads, which then fight the hashing thread for
    the same cores (measured: a save with 2 torch threads on 2 cores ran ~2x slower than with 1);
    numpy copies on the calling thread, with the GIL released.
    """
    if dest.device.type == "cpu" and src.device.type == "cpu":
        try:
            np.copyto(_as_numpy(dest), _as_numpy(src))
            return
        except TypeError:  # a dtype numpy lacks
            pass
    dest.copy_(src)


def _as_numpy(tensor: torch.Tensor) -> np.ndarray[Any, Any]:
    """A numpy view of a CPU tensor (bfloat16 as its int16 bits)."""
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.detach().numpy()


# --------------------------------------------------------------------------- writing
def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (``pwrite`` may write less than asked)."""
    while data:
        written = os.pwrite(fd, data, offset)
        data = data[written:]
        offset += written


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def _sync_file_range() -> Any:
    """libc's ``sync_file_range``, or None where there is none (it is Linux-only)."""
    function = getattr(_libc(), "sync_file_range", None)
    if function is not None:
        function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
        function.restype = ctypes.c_int
    return function


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Start writing ``[offset, offset + nbytes)`` to disk without waiting (a hint).

    Without it nothing reaches the disk before the fsync (far below the dirty-page thresholds),
    so the disk would idle while the rows are packed and hashed.
    """
    function = _sync_file_range()
    if function is not None:
        function(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)  # errors: the fsync will see them


# --------------------------------------------------------------------------- reading
class _Chunk:
    """One read slot on its way to the hasher and the loader; free again once both are done."""

    __slots__ = ("offset", "size", "slot", "users")

    def __init__(self, offset: int, size: int, slot: int, users: int) -> None:
        self.offset = offset
        self.size = size
        self.slot = slot
        self.users = users


class PayloadStream:
    """A file (a checkpoint's buffer.hdf5) read once, front to back, by a background thread.

    Every chunk goes to a :class:`StreamHasher` (when the manifest gives a checksum) and to the
    loader, which copies the datasets' bytes straight out of it (:meth:`chunks`). So the file
    comes from disk once, and sha256, the slowest step, starts at once and runs while the loader
    parses the HDF5 metadata and copies rows. A loader that does not take the chunks calls
    :meth:`detach`; from then on they are only hashed. Damage is reported by :meth:`finish`.

    Args:
        path: The file.
        expected: Its size and block digests to check it against, or None to read it without
            hashing.
        slots: Read slots; they hold what was read until the loader copied it out (and the
            hashing threads hashed it), so they also bound how far reading runs ahead.
        slot_bytes: Bytes of each slot (each read).
        first_read: Bytes of the first read, short so the metadata is there sooner.
        threads: Hashing threads, when ``expected`` has blocks.
    """

    def __init__(
        self,
        path: Path,
        expected: Digests | None,
        *,
        slots: int,
        slot_bytes: int,
        first_read: int,
        threads: int = 1,
    ) -> None:
        self.path = path
        self._expected = expected
        self._first_read = first_read
        self._error: CorruptCheckpointError | None = None
        self._lock = threading.Lock()
        self._consuming = True
        self._chunks: queue.SimpleQueue[_Chunk | None] = queue.SimpleQueue()
        self._started = threading.Event()
        self._crash: BaseException | None = None
        self._ring = SlotRing(slots, slot_bytes)
        self._hasher = StreamHasher(expected.block_bytes, threads) if expected is not None else None
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        listed = expected is not None
        missing = "file listed in the manifest is missing" if listed else "file is missing"
        try:
            self._fd = os.open(path, os.O_RDONLY)
            size = os.fstat(self._fd).st_size
        except FileNotFoundError:
            self._fail(missing)
            return
        except OSError as err:
            self._fail(f"cannot be read ({err})")
            return
        if expected is not None and size != expected.size:
            self._fail(f"size {size} bytes, manifest says {expected.size}")
            return
        self._thread = threading.Thread(
            target=self._read, args=(self._fd,), name="bufcore-read", daemon=True
        )
        self._thread.start()

    @property
    def consuming(self) -> bool:
        """Whether the loader still takes the chunks (:meth:`detach` not called yet)."""
        return self._consuming

    def _fail(self, problem: str) -> None:
        if self._error is None:
            self._error = CorruptCheckpointError(self.path, problem)
        self._chunks.put(None)
        self._started.set()

    def _read(self, fd: int) -> None:
        offset = 0
        try:
            while self._consuming or self._hasher is not None:
                slot = self._ring.take()
                # A short first read gets the metadata to h5py and the hashing started sooner.
                view = self._ring.views[slot][: self._first_read if offset == 0 else None]
                size = os.preadv(fd, [view], offset)
                with self._lock:
                    users = int(size > 0 and self._consuming)
                    chunk = _Chunk(offset, size, slot, users + int(self._hasher is not None))
                    if users:
                        self._chunks.put(chunk)
                if size == 0 or chunk.users == 0:
                    self._ring.give(slot)
                    if size == 0:
                        break
                    continue
                if self._hasher is not None:
                    data = self._ring.views[slot][:size]
                    self._hasher.feed(data, functools.partial(self._release, chunk))
                offset += size
                self._started.set()
        except OSError as err:
            self._fail(f"reading failed ({err})")
        except BaseException as err:  # not damage (MemoryError, ...): raised again by finish()
            self._crash = err
        finally:
            self._chunks.put(None)
            self._started.set()

    def _release(self, chunk: _Chunk) -> None:
        with self._lock:
            chunk.users -= 1
            free = chunk.users == 0
        if free:
            self._ring.give(chunk.slot)

    def wait_started(self) -> None:
        """Wait until the first chunk is read (or reading failed)."""
        self._started.wait()

    def chunks(self) -> Generator[tuple[int, torch.Tensor], None, None]:
        """``(file offset, bytes)`` of each chunk in file order; valid until the next is asked.

        Raises:
            CorruptCheckpointError: reading failed, or the size differs from the manifest.
        """
        while self._consuming:
            chunk = self._chunks.get()
            if chunk is None:
                break
            try:
                yield chunk.offset, self._ring.tensors[chunk.slot][: chunk.size]
            finally:
                self._release(chunk)
        if self._error is not None:
            raise self._error

    def detach(self) -> None:
        """Stop handing chunks to the loader (idempotent); they are only hashed from now on."""
        drained = []
        with self._lock:
            if not self._consuming:
                return
            self._consuming = False
            while True:
                try:
                    chunk = self._chunks.get_nowait()
                except queue.Empty:
                    break
                if chunk is not None:
                    drained.append(chunk)
        for chunk in drained:
            self._release(chunk)

    def finish(self) -> CorruptCheckpointError | None:
        """Read and hash the rest of the file and close it; the damage found, if any.

        Raises:
            BaseException: what the reading thread raised, other than an OSError (damage).
        """
        self.detach()
        if self._thread is not None:
            self._thread.join()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._hasher is not None:
            self._hasher.close()
        if self._crash is not None:
            raise self._crash
        if self._hasher is None or self._expected is None:
            return self._error
        digests, size = self._hasher.result()
        if self._error is not None:
            return self._error
        return _mismatch(self.path, self._expected, digests, size)


def _mismatch(
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


# ----------------------------------------------------------------- copying into rows
def byte_rows(dest: torch.Tensor, batch_dims: int) -> torch.Tensor | None:
    """``dest`` viewed as ``uint8 [slots, bytes per slot]``, or None where no such view exists."""
    try:
        slots = dest.view(-1, *dest.shape[batch_dims:])
        raw = slots.unsqueeze(-1).view(torch.uint8)
        return raw.view(raw.shape[0], -1)
    except RuntimeError:
        return None


def copy_regions(
    chunks: Generator[tuple[int, torch.Tensor], None, None],
    regions: list[tuple[int, int, torch.Tensor]],
    where: Path,
) -> None:
    """Copy the bytes of each region (sorted by offset) from the file's chunks into its rows."""
    pending = iter(regions)
    region = next(pending, None)
    with closing(chunks):  # releases the chunk it holds
        for start, data in chunks:
            end = start + data.numel()
            while region is not None and region[0] < end:
                offset, nbytes, rows = region
                low, high = max(start, offset), min(end, offset + nbytes)
                if low < high:
                    _copy_bytes(rows, low - offset, data[low - start : high - start])
                if offset + nbytes > end:
                    break
                region = next(pending, None)
            if region is None:
                return
    raise CorruptCheckpointError(where, "the file ended inside a dataset")


def _copy_bytes(rows: torch.Tensor, start: int, data: torch.Tensor) -> None:
    """Copy ``data`` into ``rows`` (``[n, width]`` bytes, read row by row) from byte ``start``."""
    width = rows.shape[1]
    row, column = divmod(start, width)
    done = 0
    if column:
        done = min(width - column, data.numel())
        copy_tensor(rows[row, column : column + done], data[:done])
        row += 1
    whole = (data.numel() - done) // width
    if whole:
        copy_tensor(rows[row : row + whole], data[done : done + whole * width].view(whole, width))
        row += whole
        done += whole * width
    if done < data.numel():
        copy_tensor(rows[row, : data.numel() - done], data[done:])

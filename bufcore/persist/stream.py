"""Byte streams between a file and a buffer's packed rows, through a few reusable slots.

Data model:

- A :class:`SlotRing` holds a few fixed-size byte buffers (*slots*), handed out by index and given
  back when every user is done with one. A producer fills a slot (packs rows into it, or reads
  file bytes into it), its consumers use it (the hasher, the loader), the last one frees it.
- A save packs a block of strided rows into a slot (:func:`copy_tensor`), hashes it, writes it at
  its file offset and starts its writeback (:mod:`bufcore.persist.hdf5` drives that).
- A load reads the file front to back into slots on a :class:`PayloadStream` thread; each chunk
  goes to the hasher and to the loader, which copies known byte regions straight into the rows
  they belong to (:func:`byte_rows`, :func:`copy_regions`).

Why it is built this way:

- Slots are small (a few MiB) and reused: a slot is packed, hashed and written while it is still
  in the last-level cache, instead of streaming a whole file's worth of copies through memory;
  and their number bounds how far a producer runs ahead of the hasher.
- Copies between CPU tensors run on the calling thread (numpy, GIL released) rather than on
  torch's intra-op threads, which would fight the hashing threads for the same cores.

This module knows nothing of HDF5 or of the checkpoint layout, only of byte ranges of a file and
of the tensors they come from or go to.
"""

from __future__ import annotations

import functools
import math
import os
import queue
import threading
from collections.abc import Generator
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.hashing import Digests, StreamHasher, mismatch


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
        path: The file (for messages).
        fd: The file, open for reading; the stream owns it and closes it in :meth:`finish`.
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
        fd: int,
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
        self._fd: int | None = fd
        self._thread: threading.Thread | None = None
        try:
            size = os.fstat(fd).st_size
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
        return mismatch(self.path, self._expected, digests, size)


# ----------------------------------------------------------------- copying into rows
def byte_rows(dest: torch.Tensor, batch_dims: int) -> torch.Tensor | None:
    """``dest`` viewed as ``uint8 [cells, bytes per cell]`` (a cell: one row of one env), or
    None where no such view exists."""
    try:
        cells = dest.view(-1, *dest.shape[batch_dims:])
        raw = cells.unsqueeze(-1).view(torch.uint8)
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

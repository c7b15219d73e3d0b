"""``MappedRows``: one matrix of a backing file, mapped, and how it is read and written.

One job: be the :class:`~bufcore.storage.memory.AllocatedRows` a file-backed ring holds (made by
:meth:`bufcore.persist.backing.BackingFile.allocate`): the mapping of its file, a descriptor of
that file for writes, and what the ring tells it about reads, writes and saves. It keeps its own
descriptor, so it writes to its own file even after a later allocation replaced that file at the
path.

**Out of core.** When the matrix is larger than half the machine's memory (or with
``out_of_core=True``) the page cache cannot hold it, and five measures keep sampling and
writing at the disk's pace rather than one page fault at a time, with bounded resident memory:

- ``MADV_RANDOM`` on the mapping: a fault reads its own page, not a large folio around it
  (random rows share nothing with their neighbours).
- :meth:`~MappedRows.will_read`: before a gather, ``MADV_WILLNEED`` on every page of the rows
  to read, so the kernel reads them all at once, with a deep queue, instead of one fault at a
  time.
- :attr:`~MappedRows.packed_writes`: writes come as packed rows and go to the file with
  ``pwrite`` (:meth:`~MappedRows.write`), never through the mapping, whose write faults would
  first read from disk every page about to be overwritten.
- :meth:`~MappedRows.will_scan`: a save reads every row in order, so until the next gather the
  mapping reads ahead and drops behind (``MADV_SEQUENTIAL``).
- :meth:`~MappedRows.accessed`: once the process's resident file pages (``/proc/self/statm``)
  have grown by ``RESIDENT_LIMIT`` since the allocation, ``MADV_DONTNEED`` drops the mapping's
  page-table entries. On a shared file mapping that drops no data (the pages stay in the page
  cache and the file); it keeps the process's RSS, which counts every mapped page, from
  growing to the size of the page cache.

Needed by (DESIGN rule 5): the out-of-core measures: the ``fill``, ``extend``, ``sample`` and
``peak RSS`` columns of ``python -m bench --only memmap`` at 6 M rows (README "Performance",
"Past RAM"); ``will_scan``: ``tests/persist/test_mapped_rows.py::test_a_save_reads_an_out_of_core_
ring_sequentially_then_gathers_go_back_to_random`` (a save of an out-of-core ring ran 6x slower
without it).
"""

from __future__ import annotations

import mmap
import os
import weakref
from pathlib import Path

import numpy as np
import torch

PAGE = mmap.PAGESIZE
# Out of core, the mapping's page-table entries are dropped once the process's resident file
# pages grew by this much (bench: RSS under 8 GB with a 28 GB ring).
RESIDENT_LIMIT = 2 << 30


class MappedRows:
    """One matrix of a backing file: its mapping, and a descriptor of its own file for
    ``pwrite`` (a :class:`~bufcore.storage.memory.AllocatedRows`).

    Args:
        path: The backing file's path (for messages).
        fd: A descriptor of this matrix's file, owned (closed when this object goes).
        mapping: The rows mapped, or None for a matrix of no bytes.
        offset: Where the rows start in the file (after its header).
        n_rows: Rows of the matrix.
        row_bytes: Bytes per row.
        out_of_core: Whether to read ahead, write packed and bound resident pages (see the
            module docstring).
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        mapping: mmap.mmap | None,
        offset: int,
        n_rows: int,
        row_bytes: int,
        out_of_core: bool,
    ) -> None:
        self._path = path
        self._fd = fd
        self._offset = offset
        weakref.finalize(self, os.close, fd)
        self._mapping = mapping
        self._row_bytes = row_bytes
        self._scanning = False
        self.packed_writes = out_of_core
        if mapping is None:
            self.matrix = torch.zeros((n_rows, row_bytes), dtype=torch.uint8)
            return
        if out_of_core:
            mapping.madvise(mmap.MADV_RANDOM)
        self._baseline = _resident_file_bytes()
        self.matrix = torch.from_numpy(
            np.frombuffer(mapping, dtype=np.uint8).reshape(n_rows, row_bytes)
        )

    def write(self, first: int, rows: np.ndarray) -> None:
        """Write packed ``rows`` as rows ``[first, first + len(rows))`` with ``pwrite`` (the
        mapping sees them at once: one page cache).

        Raises:
            OSError: the write failed (the message names the path); some rows may be written.
        """
        data = rows.data.cast("B")
        offset = self._offset + first * self._row_bytes
        try:
            while data:
                done = os.pwrite(self._fd, data, offset)
                data, offset = data[done:], offset + done
        except OSError as err:
            raise OSError(err.errno, f"backing file {self._path}: {err.strerror}") from err

    def will_read(self, rows: torch.Tensor) -> None:
        """Out of core: ask the kernel for every page of ``rows`` at once (``MADV_WILLNEED``
        on each run of adjacent pages), before the gather faults on them one by one."""
        mapping = self._mapping
        if not self.packed_writes or mapping is None or rows.numel() == 0:
            return
        if self._scanning:
            mapping.madvise(mmap.MADV_RANDOM)
            self._scanning = False
        width = self._row_bytes
        starts = np.unique(rows.numpy()) * width
        first, last = starts // PAGE, (starts + width - 1) // PAGE
        # Runs of pages: a row whose first page follows the previous row's last starts none.
        new = np.ones(len(first), dtype=bool)
        new[1:] = first[1:] > last[:-1] + 1
        ends = np.append(np.flatnonzero(new)[1:] - 1, len(first) - 1)
        for low, high in zip(first[new].tolist(), last[ends].tolist(), strict=True):
            mapping.madvise(mmap.MADV_WILLNEED, low * PAGE, (high - low + 1) * PAGE)

    def will_scan(self) -> None:
        """Out of core: read ahead and drop behind (``MADV_SEQUENTIAL``) until the next
        gather, for a save reading every row in order (one fault per page otherwise: a save
        ran 6x slower)."""
        mapping = self._mapping
        if self.packed_writes and mapping is not None and not self._scanning:
            mapping.madvise(mmap.MADV_SEQUENTIAL)
            self._scanning = True

    def accessed(self) -> None:
        """Out of core: drop the mapping's page-table entries once the process's resident
        file pages grew by ``RESIDENT_LIMIT`` (its data stays in the page cache and file)."""
        mapping = self._mapping
        if not self.packed_writes or mapping is None:
            return
        if _resident_file_bytes() - self._baseline > RESIDENT_LIMIT:
            mapping.madvise(mmap.MADV_DONTNEED)


def _resident_file_bytes() -> int:
    """Bytes of file pages the process has mapped and resident (``/proc/self/statm``'s third
    field); 0 where there is no such file."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[2]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0

"""Rows handed to a :class:`~bufcore.storage.memory.RowMemory` already packed, block by block.

An allocation that asks for its writes packed (:attr:`AllocatedRows.packed_writes`: a file
larger than the machine's memory, written with ``pwrite``) never has its matrix written through
the mapping: a write through a mapping faults every page in first, which for a file that does
not fit the page cache means reading from disk the old rows about to be overwritten, a page at
a time. :class:`PackedWriter` instead lays a batch (or a block of saved rows being restored) out
in a reused staging matrix exactly as the ring lays its rows out (same offsets, same padding),
and hands whole rows to :meth:`AllocatedRows.write`: no page of the matrix is faulted or read.

Needed by (DESIGN rule 5): the ``fill`` and ``extend`` columns of ``python -m bench --only
memmap`` at 6 M rows (a file-backed ring of 28 GB on a 24 GB machine), and the peak RSS of its
``open`` row (a checkpoint copied into a backing file through a 32 MB block).
"""

from __future__ import annotations

import torch

from bufcore.storage.batches import RowSource
from bufcore.storage.memory import (
    AllocatedRows,
    PackedRows,
    copy_rows,
    pack_leaves,
    packed_row_bytes,
)
from bufcore.tree import KeyPath, Spec

# The staging matrix holds about this many bytes (whole time rows, at least one).
PACK_BYTES = 32 << 20


class PackedWriter:
    """Writes rows into a memory that takes them packed (see the module docstring).

    Args:
        spec: The leaves the ring holds (present ones), as it packed them.
        envs: Envs per time row (1 for ``[time]`` rows).
        batch_dims: 1 for ``[time]`` rows, 2 for ``[time, env]`` rows.
        memory: Where the rows go: the ring's allocation.
    """

    def __init__(self, spec: Spec, envs: int, batch_dims: int, memory: AllocatedRows) -> None:
        self._spec = spec
        self._envs = envs
        self._batch_dims = batch_dims
        self._memory = memory
        self._block: PackedRows | None = None
        self._block_rows = 0

    def _staging(self, time_rows: int) -> tuple[PackedRows, dict[KeyPath, torch.Tensor]]:
        """A staging matrix of at least ``time_rows`` time rows (kept for the next write) and
        its typed views ``[time_rows, (env,) *shape]``."""
        if self._block is None or self._block_rows < time_rows:
            self._block = pack_leaves(
                self._spec, time_rows, self._envs, self._batch_dims, torch.device("cpu")
            )
            self._block_rows = time_rows
        lead = (time_rows,) if self._batch_dims == 1 else (time_rows, self._envs)
        views = {
            path: flat[: time_rows * self._envs].view(*lead, *self._spec[path].shape)
            for path, flat in self._block.flat_views.items()
        }
        return self._block, views

    def step(self, rows: int) -> int:
        """Time rows per block: about ``PACK_BYTES``, at most ``rows``, at least one."""
        width = self._envs * max(1, packed_row_bytes(self._spec))
        return max(1, min(rows, PACK_BYTES // width))

    def write(self, start: int, leaves: dict[KeyPath, torch.Tensor]) -> None:
        """Write time rows ``[start, start + n)`` from ``leaves`` (CPU tensors ``[n, (env,)
        ...]`` of the stored shapes, in any dtype that casts; not crossing the ring's end)."""
        rows = int(next(iter(leaves.values())).shape[0]) if leaves else 0
        step = self.step(rows)
        envs = self._envs
        for low in range(0, rows, step):
            high = min(rows, low + step)
            block, views = self._staging(step)
            for path, src in leaves.items():
                part = src[low:high]
                columns = block.columns
                if part.dtype == self._spec[path].dtype and columns is not None:
                    copy_rows(columns[path][: (high - low) * envs], part)
                else:
                    views[path][: high - low].copy_(part)
            self._memory.write((start + low) * envs, block.rows[: (high - low) * envs].numpy())

    def restore(self, source: RowSource, count: int) -> None:
        """Copy ``source``'s first ``count`` time rows into the memory, block by block."""
        step = self.step(count)
        envs = self._envs
        for low in range(0, count, step):
            high = min(count, low + step)
            block, views = self._staging(step)
            source.read_into({path: view[: high - low] for path, view in views.items()}, start=low)
            self._memory.write(low * envs, block.rows[: (high - low) * envs].numpy())

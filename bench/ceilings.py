"""The memory ceilings: what one contiguous array of the same rows allows.

:class:`ContiguousRows` stores whole transitions as rows of one ``uint8 [capacity, ROW_BYTES]``
matrix and behaves like a buffer, so the runner measures it exactly like the others:

- its ``extend`` is the block-write ceiling: one ``copy_`` of a packed ``[batch, ROW_BYTES]``
  block into the matrix (two at the ring's wrap, as for any buffer);
- its ``sample`` is the gather ceiling: ``torch.index_select(rows, 0, idx, out=preallocated)``
  with random indices drawn before timing (cycling through a fixed set), so it measures the
  gather alone.

The matrix comes from numpy (transparent huge pages, as bufcore's storage) and is filled by the
runner before anything is read: untouched pages would all map the kernel's zero page and make
gathers look cheaper than they are.
"""

from __future__ import annotations

import numpy as np
import torch

from bench.peers import Implementation
from bench.workload import ROW_BYTES, pack_rows

_INDEX_SETS = 64


class ContiguousRows:
    """Ring of packed rows in one contiguous matrix (see the module docstring).

    Args:
        capacity: Rows.
        batch_size: Rows per gather (the output is preallocated once).
        seed: Seed for the index sets.
    """

    def __init__(self, capacity: int, batch_size: int, seed: int = 0) -> None:
        self.capacity = capacity
        self.rows = torch.from_numpy(np.empty((capacity, ROW_BYTES), dtype=np.uint8))
        self.cursor = 0
        generator = torch.Generator().manual_seed(seed)
        self._indices = [
            torch.randint(capacity, (batch_size,), generator=generator) for _ in range(_INDEX_SETS)
        ]
        self._next = 0
        self._out = torch.empty((batch_size, ROW_BYTES), dtype=torch.uint8)

    def extend(self, data: torch.Tensor) -> None:
        n = data.shape[0]
        first = min(n, self.capacity - self.cursor)
        self.rows[self.cursor : self.cursor + first].copy_(data[:first])
        if n > first:
            self.rows[: n - first].copy_(data[first:])
        self.cursor = (self.cursor + n) % self.capacity

    def sample(self, batch_size: int) -> torch.Tensor:
        index = self._indices[self._next]
        self._next = (self._next + 1) % _INDEX_SETS
        return torch.index_select(self.rows, 0, index, out=self._out)


def ceiling_impl(batch_size: int) -> Implementation:
    """The contiguous-rows ceiling as an :class:`Implementation`."""
    return Implementation(
        "1 array",
        pack_rows,
        lambda capacity: ContiguousRows(capacity, batch_size),
        "",
    )

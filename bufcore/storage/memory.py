"""The raw memory of a ring: allocating its byte matrix, and telling what shares it.

Both exist so that a write never fails half-way: the allocation either succeeds whole or raises a
:class:`MemoryError` that says how much was asked for, and a source that shares memory with the
rows (a slice of the storage's own views) is copied before any row is overwritten.
"""

from __future__ import annotations

import numpy as np
import torch

from bufcore.errors import is_out_of_memory


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors on one device share memory.

    Compares the byte ranges of their whole storages, which is cheap (this runs for every leaf
    of every write) and exact enough: distinct live allocations never overlap, so the ranges
    meet only when both are views of one allocation, such as a slice of the rows or a numpy
    view of one.
    """
    if a.numel() == 0 or b.numel() == 0:
        return False
    a_storage, b_storage = a.untyped_storage(), b.untyped_storage()
    a_start, b_start = a_storage.data_ptr(), b_storage.data_ptr()
    return a_start < b_start + b_storage.nbytes() and b_start < a_start + a_storage.nbytes()


def zeros_rows(n_rows: int, row_bytes: int, device: torch.device, shape: str) -> torch.Tensor:
    """A zeroed ``uint8`` matrix ``[n_rows, row_bytes]``.

    Raises:
        MemoryError: it cannot be allocated; the message gives the bytes asked for and ``shape``.
    """
    try:
        if device.type == "cpu":
            # numpy's large allocations get transparent huge pages; first touch is much cheaper.
            return torch.from_numpy(np.zeros((n_rows, row_bytes), dtype=np.uint8))
        return torch.zeros((n_rows, row_bytes), dtype=torch.uint8, device=device)
    except (MemoryError, RuntimeError, ValueError) as err:
        # numpy raises MemoryError, or ValueError beyond the address space; torch raises
        # torch.OutOfMemoryError (a RuntimeError) or RuntimeError from its allocators.
        if isinstance(err, RuntimeError) and not is_out_of_memory(err):
            raise
        raise MemoryError(
            f"storage: cannot allocate {n_rows * row_bytes:,} bytes on {device} "
            f"({shape} per row); lower the capacity ({err})"
        ) from err

"""The raw memory of a ring: allocating its byte matrix, copying rows in, and what shares it.

Both exist so that a write never fails half-way: the allocation either succeeds whole or raises a
:class:`MemoryError` that says how much was asked for, and a source that shares memory with the
rows (a slice of the storage's own views) is copied before any row is overwritten.
"""

from __future__ import annotations

import numpy as np
import torch

from bufcore.errors import is_out_of_memory
from bufcore.tree import KeyPath, Spec


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


def byte_columns(
    rows: torch.Tensor, offsets: dict[KeyPath, int], spec: Spec
) -> dict[KeyPath, np.ndarray] | None:
    """numpy ``uint8`` views ``[n_rows, leaf bytes]`` of every leaf's column of CPU ``rows``.

    Writes go through them (:func:`copy_rows`); None off the CPU, where torch copies.
    """
    if rows.device.type != "cpu":
        return None
    matrix = rows.numpy()
    return {p: matrix[:, offsets[p] : offsets[p] + spec[p].nbytes] for p in spec}


def copy_rows(column: np.ndarray, src: torch.Tensor) -> None:
    """Copy ``src`` (CPU rows of one leaf, already of the stored dtype) into its byte column.

    Each row's span is moved with one ``memcpy`` (numpy's copy), which writes whole cache lines
    without reading them first; torch's element loop into strided rows reads every line it
    writes (``bench/`` measures both).
    """
    rows = column.shape[0]
    if rows and column.shape[1]:
        flat = src.reshape(-1).resolve_neg()  # bytes as read: a lazily negated view holds -x
        if flat.stride(0) != 1:  # also a "contiguous" tensor whose size-1 axes have odd strides
            flat = torch.empty_like(flat, memory_format=torch.contiguous_format).copy_(flat)
        np.copyto(column, flat.view(torch.uint8).numpy().reshape(rows, -1))

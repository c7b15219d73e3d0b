"""The raw memory of a ring: its byte matrix and the leaves packed in it, copying rows in, and
what shares it.

:func:`pack_leaves` lays leaves side by side in each row (widest dtype first, so no padding
between them; each row padded to an aligned width) and allocates the matrix. Allocation and
copies exist so that a write never fails half-way: the allocation either succeeds whole or
raises a :class:`MemoryError` that says how much was asked for, and a source that shares memory
with the rows (a slice of the storage's own views) is copied before any row is overwritten.

The matrix lives in the process's memory, or in a :class:`RowMemory` the ring is given: memory
that something below the buffers cannot make, such as a memory-mapped file
(:class:`bufcore.persist.backing.BackingFile`; this layer never opens a file). Such memory is
told which rows a gather is about to read and when an access is done, and may ask for writes as
packed rows rather than through the matrix (:mod:`bufcore.storage.packed`), so that a file
larger than the machine's memory reads ahead, never reads what a write replaces, and keeps the
process's resident pages bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from bufcore.errors import is_out_of_memory
from bufcore.tree import KeyPath, Spec, describe_spec

ROW_ALIGN = 16
# No device holds more than a 48-bit address space maps (256 TiB): larger storage is refused
# before anything is allocated (a hand-edited capacity of 10**15 would ask for petabytes).
MAX_STORAGE_BYTES = 2**48


def packed_row_bytes(spec: Spec) -> int:
    """Bytes of one row holding every leaf of ``spec``: a multiple of ``ROW_ALIGN`` and of the
    widest dtype, so rows stay aligned (0 for no leaves)."""
    align = max([ROW_ALIGN, *(leaf.dtype.itemsize for leaf in spec.values())])
    # Leaves are laid widest first, so their bytes add up without padding.
    return -(-sum(leaf.nbytes for leaf in spec.values()) // align) * align


def check_rows_size(spec: Spec, capacity: int, env_count: int | None, batch_dims: int) -> int:
    """Bytes of one row of ``spec``, once checked that ``capacity`` time rows (of ``env_count``
    envs) fit ``MAX_STORAGE_BYTES`` (nothing is allocated).

    Raises:
        ValueError: ``env_count`` does not fit ``batch_dims``, or more than
            ``MAX_STORAGE_BYTES`` (the message names the capacity and the leaves).
    """
    if (batch_dims == 2) != (env_count is not None):
        raise ValueError(
            f"env_count: expected {'an int' if batch_dims == 2 else 'None'} for "
            f"{batch_dims} batch axes, got {env_count!r}"
        )
    row_bytes = packed_row_bytes(spec)
    total = capacity * (env_count or 1) * row_bytes
    if total > MAX_STORAGE_BYTES:
        raise ValueError(
            f"capacity: {capacity} rows of {row_bytes} bytes ({describe_spec(spec)}"
            f"{f', {env_count} envs' if env_count else ''}) need {total} bytes, more than "
            f"any device holds ({MAX_STORAGE_BYTES})"
        )
    return row_bytes


class AllocatedRows(Protocol):
    """One matrix a :class:`RowMemory` allocated, and what the ring tells it. Rows are the
    matrix's rows: flat ``time * envs + env``."""

    @property
    def matrix(self) -> torch.Tensor:
        """The zeroed CPU ``uint8`` matrix ``[n_rows, row_bytes]``."""
        ...

    @property
    def packed_writes(self) -> bool:
        """Whether rows are to be written through :meth:`write` (packed) rather than copied
        into the matrix."""
        ...

    def write(self, first: int, rows: np.ndarray) -> None:
        """Store ``rows`` (C-contiguous ``uint8 [count, row_bytes]``, packed as the matrix)
        as rows ``[first, first + count)`` of the matrix.

        Raises:
            OSError: they could not be stored (some may be).
        """
        ...

    def will_read(self, rows: torch.Tensor) -> None:
        """A gather is about to read these rows (CPU int64, any order, repeats allowed)."""
        ...

    def will_scan(self) -> None:
        """Every row is about to be read in order (a save), until the next gather."""
        ...

    def accessed(self) -> None:
        """A gather, write or restore step is done."""
        ...


@runtime_checkable
class RowMemory(Protocol):
    """Memory a ring's byte matrix may live in instead of the process's own (a memory-mapped
    file)."""

    def allocate(self, n_rows: int, row_bytes: int) -> AllocatedRows:
        """A new zeroed matrix ``[n_rows, row_bytes]``; one allocated before stays valid
        while referenced.

        Raises:
            OSError: it cannot hold the rows (no space left, say); nothing was allocated.
            ValueError: it can no longer allocate (closed).
        """
        ...


@dataclass(frozen=True)
class PackedRows:
    """Leaves packed side by side in a ``uint8`` matrix ``[n_rows, row_bytes]``.

    Attributes:
        rows: The matrix.
        offsets: Byte offset of each leaf within a row.
        flat_views: Each leaf as a typed view ``[n_rows, *shape]`` of the matrix.
        columns: Each leaf's byte columns as numpy views (CPU only; see :func:`byte_columns`).
        allocated: The :class:`RowMemory` allocation holding the matrix, or None for the
            process's own memory.
    """

    rows: torch.Tensor
    offsets: dict[KeyPath, int]
    flat_views: dict[KeyPath, torch.Tensor]
    columns: dict[KeyPath, np.ndarray] | None
    allocated: AllocatedRows | None = None


def pack_leaves(
    spec: Spec,
    capacity: int,
    envs: int,
    batch_dims: int,
    device: torch.device,
    memory: RowMemory | None = None,
) -> PackedRows:
    """Allocate zeroed rows for ``capacity`` time rows of ``envs`` envs holding every leaf of
    ``spec`` (one row of the matrix per env of a time row), in ``memory`` when given.

    Raises:
        MemoryError: the rows cannot be allocated; the message gives the bytes and the shape.
        OSError: ``memory`` cannot hold them (see :meth:`RowMemory.allocate`).
    """
    n_rows = capacity * envs
    row_bytes = packed_row_bytes(spec)
    env_part = f" x {envs} envs" if batch_dims == 2 else ""
    # Widest dtypes first, so offsets need no padding between leaves.
    offsets: dict[KeyPath, int] = {}
    offset = 0
    for path in sorted(spec, key=lambda p: -spec[p].dtype.itemsize):
        offsets[path] = offset
        offset += spec[path].nbytes
    shape = f"{capacity} rows{env_part} x {row_bytes} bytes"
    allocated = None if memory is None else memory.allocate(n_rows, row_bytes)
    rows = zeros_rows(n_rows, row_bytes, device, shape) if allocated is None else allocated.matrix
    flat_views: dict[KeyPath, torch.Tensor] = {}
    for path, leaf in spec.items():
        if leaf.nbytes == 0:
            flat_views[path] = torch.zeros((n_rows, *leaf.shape), dtype=leaf.dtype, device=device)
        else:
            column = rows[:, offsets[path] : offsets[path] + leaf.nbytes].view(leaf.dtype)
            flat_views[path] = column.view(n_rows, *leaf.shape)
    return PackedRows(rows, offsets, flat_views, byte_columns(rows, offsets, spec), allocated)


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

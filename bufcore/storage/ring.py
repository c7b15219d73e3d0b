"""Pre-allocated ring storage with every leaf packed into one row-major byte matrix.

Data model: the storage holds ``capacity`` time rows, each with ``env_count`` env columns when it
has two batch axes (``[time, env]``; BFM-Zero's online layout) or one when it has one
(:attr:`RingStorage.envs` is that number either way). All leaves of one (time, env) cell live
side by side in a single row of a ``uint8`` matrix ``[capacity * envs, row_bytes]``, each at an
offset aligned to its dtype; the flat row of cell ``(t, e)`` is ``t * envs + e``. Every leaf is
also exposed as a typed, strided view ``[capacity, (env_count,) *shape]`` of that matrix.

Why one matrix: sampling gathers random rows, and the leaves of one row then share cache lines
and pages. One ``index_select`` per leaf over these packed rows runs about twice as fast as the
same gathers from separate per-leaf arrays, and writes are a strided copy per leaf.

The write cursor follows ``cursor = (cursor + n) % capacity``; the storage is full once a write
reaches the last row. A batch is validated completely (:mod:`bufcore.storage.batches`: keys,
shapes, dtypes and the values of narrowing casts) before :meth:`RingStorage.write` touches
anything, and the write stages what could still fail (the first allocation, device moves,
sources that share memory with the rows) before its first copy, so a bad batch never leaves the
storage half-written.

Each time row also counts how often it was written (:attr:`RingStorage.writes`, on the CPU,
kept across :meth:`RingStorage.clear`): a prioritized sampler's draw records the counts of the
rows it drew, and an update of their priorities skips the rows whose count has moved on since,
i.e. rows overwritten by newer data (DI-engine checks a unique id string per item instead).
Needed by ``tests/buffers/test_prioritized.py::test_updates_skip_rows_overwritten_since_they_
were_drawn`` and ``::test_updates_after_a_clear_change_nothing``.

Saved rows come back through :meth:`RingStorage.restore` from a :class:`RowSource` (a checkpoint
being read, or episodes being laid end to end), which copies them straight into the freshly
allocated rows; :meth:`RingStorage.rows` gives the filled rows to save.

A source may leave some leaves out (a checkpoint loaded with ``leaves=``): they keep their spec
but get no memory (:attr:`RingStorage.absent`), and every method that would read or write one
(views, gathers, writes, the rows to save) refuses with
:class:`~bufcore.errors.LeafNotLoadedError` before it changes anything.

File-backed rows: given a :class:`~bufcore.storage.memory.RowMemory` (a memory-mapped file made
by :mod:`bufcore.persist.backing`), the matrix lives there and everything above works on it
unchanged. The ring tells that memory which rows each gather reads; it restores saved rows in
blocks of ``RESTORE_BYTES`` (every leaf of a block before the next), so each page is written
once; and when the memory asks for packed writes (a file larger than the machine's memory),
writes and restores go through a :class:`~bufcore.storage.packed.PackedWriter` instead of the
matrix. Needed by: the file-backed rows of ``python -m bench --only memmap`` (README "Past RAM:
file-backed buffers").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from bufcore.checks import check_int
from bufcore.errors import LeafNotLoadedError
from bufcore.storage.batches import Batch, check_leaf, validate_batch
from bufcore.storage.batches import RowSource as RowSource
from bufcore.storage.leaves import STORABLE as STORABLE
from bufcore.storage.memory import MAX_STORAGE_BYTES as MAX_STORAGE_BYTES
from bufcore.storage.memory import (
    ROW_ALIGN,
    AllocatedRows,
    RowMemory,
    check_rows_size,
    copy_rows,
    overlaps,
    pack_leaves,
)
from bufcore.storage.outputs import OutputPool, check_out
from bufcore.storage.packed import PackedWriter
from bufcore.tree import (
    KeyPath,
    LeafSpec,
    Spec,
    describe_spec,
    format_key_path,
)

# A file-backed ring restores saved rows in blocks of about this many bytes (all leaves).
RESTORE_BYTES = 256 << 20


class RingStorage:
    """Ring of rows over one or two leading axes; see the module docstring for the layout.

    Args:
        capacity: Number of time rows.
        device: Where the rows live.
        batch_dims: 1 for ``[time]`` rows, 2 for ``[time, env]`` rows.
        memory: Where the byte matrix is allocated (a memory-mapped file, on the CPU); None
            for the process's own memory.

    Raises:
        TypeError: ``capacity`` or ``batch_dims`` is not an int.
        ValueError: ``capacity < 1``, ``batch_dims`` not 1 or 2, or ``memory`` off the CPU.
    """

    def __init__(
        self,
        capacity: int,
        *,
        device: torch.device,
        batch_dims: int = 1,
        memory: RowMemory | None = None,
    ) -> None:
        # Every stored row takes at least ROW_ALIGN bytes.
        self.capacity = check_int(
            capacity, "capacity", minimum=1, maximum=MAX_STORAGE_BYTES // ROW_ALIGN
        )
        batch_dims = check_int(batch_dims, "batch_dims", minimum=1, maximum=2)
        if memory is not None and device.type != "cpu":
            raise ValueError(f"memory: holds rows on the CPU, not on device {str(device)!r}")
        self.memory = memory
        self.device = device
        self.batch_dims = batch_dims
        self.cursor = 0
        self.is_full = False
        self.spec: Spec | None = None
        self.env_count: int | None = None
        # Leaves of the spec that have no memory (a partial load); see _loaded().
        self.absent: frozenset[KeyPath] = frozenset()
        self._rows: torch.Tensor | None = None
        self._offsets: dict[KeyPath, int] = {}
        self._views: dict[KeyPath, torch.Tensor] = {}
        self._flat_views: dict[KeyPath, torch.Tensor] = {}
        self._columns: dict[KeyPath, np.ndarray] | None = None
        self._packer: PackedWriter | None = None
        # The allocation of ``memory`` holding the rows (None in the process's own memory).
        self._allocated: AllocatedRows | None = None
        self._outputs = OutputPool(device)
        self._writes = np.empty(0, dtype=np.int64)
        # The count every row starts from when the rows are allocated (see follow()).
        self._write_base = 0

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        return self.capacity if self.is_full else self.cursor

    @property
    def allocated(self) -> bool:
        return self.spec is not None

    @property
    def envs(self) -> int:
        """Env columns per time row: ``env_count``, or 1 with a single batch axis."""
        return self.env_count or 1

    @property
    def views(self) -> dict[KeyPath, torch.Tensor]:
        """Live typed views ``[capacity, (env_count,) *shape]`` of every leaf (do not write).

        Raises:
            LeafNotLoadedError: a leaf was not loaded.
        """
        self._loaded(self.spec or {}, "viewing the rows")
        return self._views

    def view(self, path: KeyPath) -> torch.Tensor:
        """The live typed view of one leaf (see :attr:`views`).

        Raises:
            LeafNotLoadedError: that leaf was not loaded.
        """
        self._loaded([path], "viewing the rows")
        return self._views[path]

    @property
    def writes(self) -> torch.Tensor:
        """Live int64 ``[capacity]`` CPU tensor: each time row's write count, which moves on
        whenever the row may hold other data: a write adds 1, and a :meth:`restore` sets
        every row past every count the storage had before (1 in a fresh storage), so a count
        taken before never matches again. Empty before the first write. Read only."""
        return torch.from_numpy(self._writes)

    def highest_write_count(self) -> int:
        """The largest write count any row has had (0 before the first write)."""
        held = int(self._writes.max()) if len(self._writes) else 0
        return max(held, self._write_base)

    def follow(self, previous: RingStorage) -> None:
        """Take the place of ``previous`` in its buffer (a ``load_state_dict``): every write
        count, now and after a later allocation, moves past every count ``previous`` handed
        out, so an index drawn from it updates nothing here."""
        passed = previous.highest_write_count()
        self._write_base += passed
        self._writes += passed

    @property
    def nbytes(self) -> int:
        """Bytes of memory the rows take (the loaded leaves of every row, padded)."""
        return 0 if self._rows is None else self._rows.numel()

    def _loaded(self, paths: Iterable[KeyPath], action: str) -> None:
        """Refuse ``action`` on leaves that were not loaded: the one check every read and
        write of rows passes through.

        Raises:
            LeafNotLoadedError: names the first such leaf and ``action``.
        """
        if not self.absent:
            return  # a full buffer: nothing to look up on the sample/extend path
        for path in paths:
            if path in self.absent:
                raise LeafNotLoadedError(
                    path,
                    f"{action}: leaf {format_key_path(path)} was not loaded (the buffer was "
                    "loaded with leaves= that left it out); load the checkpoint with it among "
                    "leaves=, or without leaves=, to read or write it",
                )

    # ------------------------------------------------------------- validation
    def validate(self, data: Mapping[str, Any], *, argument: str = "data") -> Batch:
        """Check a nested batch against the spec (or infer one) without changing anything.

        See :func:`bufcore.storage.batches.validate_batch` (and its ``Raises``).
        """
        return validate_batch(data, self.spec, self.batch_dims, self.env_count, argument=argument)

    def check_leaf(self, value: Any, path: KeyPath, *, where: str) -> torch.Tensor:
        """One leaf as a tensor, checked against the spec of ``path`` (if fixed); see
        :func:`bufcore.storage.batches.check_leaf` (and its ``Raises``)."""
        leaf = None if self.spec is None else self.spec[path]
        return check_leaf(value, leaf, self.batch_dims, where=where)

    # ---------------------------------------------------------------- writing
    def write(self, batch: Batch) -> None:
        """Write a validated batch at the cursor; a batch over capacity keeps its last rows.

        Everything that can fail happens before the first row is written: the first batch's
        allocation, moving leaves from another device, and copying leaves that share memory
        with the rows (a slice of :attr:`views` would otherwise be overwritten while it is
        still being read).

        Raises:
            MemoryError: the first batch's rows cannot be allocated (nothing changes).
            OSError: the first batch's rows do not fit the storage's :attr:`memory`
                (nothing changes).
            LeafNotLoadedError: a leaf was not loaded (nothing changes).
        """
        n = batch.size
        if n == 0:
            return
        self._loaded(batch.leaves, "writing rows")
        if self.spec is None:
            self.allocate(
                {
                    p: LeafSpec(tuple(t.shape[self.batch_dims :]), t.dtype)
                    for p, t in batch.leaves.items()
                },
                batch.env_count,
            )
        cap = self.capacity
        kept = min(n, cap)
        start = (self.cursor + n - kept) % cap
        first = min(kept, cap - start)
        staged = {path: self._staged(src[n - kept :]) for path, src in batch.leaves.items()}
        if self._packer is not None:
            self._packer.write(start, {path: src[:first] for path, src in staged.items()})
            if kept > first:
                self._packer.write(0, {path: src[first:] for path, src in staged.items()})
        else:
            for path, src in staged.items():
                self._copy(path, start, src[:first])
                if kept > first:
                    self._copy(path, 0, src[first:])
        self._writes[start : start + first] += 1
        self._writes[: kept - first] += 1
        self.is_full = self.is_full or self.cursor + n >= cap
        self.cursor = (self.cursor + n) % cap
        if self._allocated is not None:
            self._allocated.accessed()

    def _copy(self, path: KeyPath, start: int, src: torch.Tensor) -> None:
        """Write ``src`` (time rows of one leaf) at time row ``start``."""
        leaf = self._views[path]
        # Byte columns exist on the CPU only, where _staged has put every source already.
        if src.dtype == leaf.dtype and self._columns is not None:
            envs = self.envs
            copy_rows(self._columns[path][start * envs : (start + src.shape[0]) * envs], src)
        else:
            leaf[start : start + src.shape[0]].copy_(src)

    def _staged(self, src: torch.Tensor) -> torch.Tensor:
        """``src`` on the storage device, and never sharing memory with the rows."""
        if src.device != self.device:
            return src.to(self.device)
        if self._rows is not None and overlaps(src, self._rows):
            return src.clone()
        return src

    def allocate(
        self, spec: Spec, env_count: int | None, *, absent: frozenset[KeyPath] = frozenset()
    ) -> None:
        """Fix the spec and allocate every row once (zeros), except for ``absent`` leaves.

        Atomic: the storage changes only once every row is allocated.

        Args:
            spec: Key path -> trailing shape and dtype of every leaf.
            env_count: Envs per time row for ``[time, env]`` rows, else None.
            absent: Leaves of ``spec`` that get no memory (not loaded): reading or writing
                them raises :class:`~bufcore.errors.LeafNotLoadedError`.

        Raises:
            ValueError: the storage is allocated already, ``env_count`` does not fit
                ``batch_dims`` (required for ``[time, env]`` rows, None for ``[time]`` rows),
                or the rows would take more than ``MAX_STORAGE_BYTES``.
            MemoryError: the rows cannot be allocated; the message gives the bytes asked for.
            OSError: the rows do not fit the storage's :attr:`memory`.
        """
        if self.spec is not None:
            raise ValueError("storage: allocated already; its spec is fixed")
        present = {path: leaf for path, leaf in spec.items() if path not in absent}
        self.check_size(present, env_count)
        envs = env_count or 1
        packed = pack_leaves(
            present, self.capacity, envs, self.batch_dims, self.device, self.memory
        )
        # numpy: a write adds in ~1 us
        writes = np.full(self.capacity, self._write_base, dtype=np.int64)
        lead = (self.capacity,) if self.batch_dims == 1 else (self.capacity, envs)
        self.spec = dict(spec)
        self.absent = frozenset(absent) & frozenset(spec)
        self.env_count = env_count
        self._rows = packed.rows
        self._writes = writes
        self._offsets = packed.offsets
        self._flat_views = packed.flat_views
        self._columns = packed.columns
        allocated = self._allocated = packed.allocated
        self._packer = (
            PackedWriter(present, envs, self.batch_dims, allocated)
            if allocated is not None and allocated.packed_writes
            else None
        )
        self._views = {
            p: flat.view(*lead, *present[p].shape) for p, flat in packed.flat_views.items()
        }

    def check_size(self, spec: Spec, env_count: int | None) -> int:
        """Bytes of one row of ``spec`` once checked that all rows fit; see
        :func:`bufcore.storage.memory.check_rows_size` (and its ``Raises``)."""
        return check_rows_size(spec, self.capacity, env_count, self.batch_dims)

    def restore(self, source: RowSource, *, cursor: int, is_full: bool) -> None:
        """Fill the storage with ``source``'s rows (physical order) and set the cursor.

        A fresh storage is allocated with the source's spec; one allocated already (a buffer
        whose spec is fixed at construction) must have that spec and is filled in place (laid
        out again first when the source leaves leaves out, so they take no memory). The rows
        are copied once, straight from the source into the storage (into a file-backed one
        in blocks of rows, every leaf of a block before the next).

        Raises:
            ValueError: the source's spec differs from the allocated one, its env count does
                not fit ``batch_dims``, or ``cursor``/``is_full`` do not describe ``count`` rows
                of this capacity.
        """
        count = source.count
        expected = self.capacity if is_full else cursor
        if not 0 <= cursor < self.capacity or count != expected:
            raise ValueError(
                f"cursor {cursor} and is_full {is_full} do not describe {count} stored rows of "
                f"capacity {self.capacity}"
            )
        absent = source.absent
        # Every row may change: its count must pass every count handed out before (an index
        # drawn before the restore must not update the rows it brings).
        restored_count = self.highest_write_count() + 1
        if self.spec is None:
            if source.spec:
                self.allocate(source.spec, source.env_count, absent=absent)
        elif source.spec and (source.spec != self.spec or source.env_count != self.env_count):
            raise ValueError(
                f"stored leaves ({describe_spec(source.spec)}) differ from this storage's "
                f"({describe_spec(self.spec)})"
            )
        elif absent != self.absent:
            # Allocated up front (a buffer whose spec is fixed at construction): lay the rows
            # out again without the leaves the source leaves out, so they take no memory.
            spec, self.spec = self.spec, None
            try:
                self.allocate(spec, self.env_count, absent=absent)
            except BaseException:
                self.spec = spec
                raise
        if self.spec is not None and count:
            # No autograd: a source that requires grad must not make the rows part of a graph.
            with torch.no_grad():
                self._read_rows(source, count)
        if self.spec is not None:
            self._writes[:] = restored_count
        self.cursor = cursor
        self.is_full = is_full

    def _read_rows(self, source: RowSource, count: int) -> None:
        """Copy ``source``'s ``count`` rows into the views: at once in memory; in blocks into
        a file-backed matrix, so each of its pages is written once and the memory can drop
        the pages done with (:meth:`AllocatedRows.accessed`); packed, when the memory asks."""
        allocated = self._allocated
        if allocated is None:
            source.read_into({path: view[:count] for path, view in self._views.items()})
            return
        if self._packer is not None:
            self._packer.restore(source, count)
            return
        row_bytes = 0 if self._rows is None else int(self._rows.shape[1])
        step = max(1, RESTORE_BYTES // max(1, row_bytes * self.envs))
        for start in range(0, count, step):
            stop = min(count, start + step)
            source.read_into(
                {path: view[start:stop] for path, view in self._views.items()}, start=start
            )
            allocated.accessed()

    def rows(self) -> dict[KeyPath, torch.Tensor]:
        """The filled rows ``[0, len)`` of every leaf, in physical order, as live views.

        Raises:
            LeafNotLoadedError: a leaf was not loaded (its rows are not here to save).
        """
        self._loaded(self.spec or {}, "saving the rows")
        if self._allocated is not None:
            self._allocated.will_scan()
        return {path: self._views[path][: len(self)] for path in self.spec or {}}

    def clear(self) -> None:
        """Empty the ring: no row is held and the next write starts at row 0. The spec and
        the memory stay (a later write must match the spec)."""
        self.cursor = 0
        self.is_full = False

    # ---------------------------------------------------------------- reading
    def gather(
        self,
        index: torch.Tensor,
        paths: Iterable[KeyPath] | None = None,
        *,
        out: list[torch.Tensor] | None = None,
    ) -> dict[KeyPath, torch.Tensor]:
        """Copy the rows at flat ``index`` (``time * env_count + env``) into contiguous tensors.

        Every output has shape ``[*index.shape, *leaf shape]``. One ``index_select`` per leaf
        reads from the packed rows: the leaves of a row share cache lines and pages, which is
        what makes this close to a single whole-row gather. Outputs go into ``out`` when given
        (checked by :meth:`check_out`), else into memory of the ring's
        :class:`~bufcore.storage.outputs.OutputPool`, reused once no caller references it.

        Args:
            index: Flat row indices, any shape.
            paths: The leaves to read (stored key paths, in output order); ``None`` for all.
            out: One tensor per leaf in ``paths`` order, as :meth:`check_out` returns them.

        Raises:
            ValueError: nothing was written yet.
            LeafNotLoadedError: a leaf to read was not loaded (checked before any is read).
        """
        if self.spec is None:
            raise ValueError("storage is empty: nothing was written yet")
        selected = list(self.spec if paths is None else paths)
        layout = self.output_layout(tuple(index.shape), selected)
        outputs = self._outputs.take(tuple(layout.values())) if out is None else out
        flat_index = index.reshape(-1)
        count = flat_index.numel()
        if self._allocated is not None:
            self._allocated.will_read(flat_index)
        for path, output in zip(selected, outputs, strict=True):
            flat_output = output.view(count, *self.spec[path].shape)
            torch.index_select(self._flat_views[path], 0, flat_index, out=flat_output)
        if self._allocated is not None:
            self._allocated.accessed()
        return dict(zip(selected, outputs, strict=True))

    def output_layout(
        self, index_shape: tuple[int, ...], paths: Iterable[KeyPath]
    ) -> dict[KeyPath, tuple[tuple[int, ...], torch.dtype]]:
        """Shape and dtype of what :meth:`gather` returns for an index of ``index_shape``.

        Raises:
            ValueError: nothing was written yet.
            LeafNotLoadedError: one of ``paths`` was not loaded.
        """
        if self.spec is None:
            raise ValueError("storage is empty: nothing was written yet")
        paths = list(paths)
        self._loaded(paths, "reading rows")
        return {p: ((*index_shape, *self.spec[p].shape), self.spec[p].dtype) for p in paths}

    def check_out(
        self,
        out: Mapping[KeyPath, Any],
        layout: Mapping[KeyPath, tuple[tuple[int, ...], torch.dtype]],
        *,
        argument: str = "out",
    ) -> list[torch.Tensor]:
        """Caller-given outputs (flattened), checked against ``layout`` (what the gathers into
        them will write, from :meth:`output_layout`); nothing is written.

        Raises:
            ValueError: keys differ, or a tensor has a wrong shape or device, is not
                contiguous, requires grad, is an inference tensor outside inference mode, or
                shares memory with the rows or another output.
            TypeError: a leaf is not a tensor or has another dtype.
        """
        return check_out(out, layout, device=self.device, rows=self._rows, argument=argument)

    def chronological_time_index(self) -> torch.Tensor:
        """Physical time rows from oldest to newest."""
        order = torch.arange(len(self), device=self.device)
        if self.is_full:
            order = (order + self.cursor) % self.capacity
        return order

    def flat_index(self, time_index: torch.Tensor) -> torch.Tensor:
        """Flat rows of every env of the given time rows: ``[len, env_count]`` (or ``[len]``)."""
        if self.batch_dims == 1:
            return time_index
        envs = torch.arange(self.envs, device=time_index.device)
        return time_index[:, None] * self.envs + envs

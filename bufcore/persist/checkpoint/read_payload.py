"""Reading ``buffer.hdf5`` back: its leaves, and their rows copied into a buffer's storage.

The layout is :mod:`bufcore.persist.checkpoint.format`'s. :class:`PayloadReader` reads each
leaf through h5py, block by block (``read_direct`` into a contiguous block, copied into the
storage's strided view; HDF5 converts another byte order, and reads chunked or compressed
datasets, as BFM-Zero's own files may hold). Checkpoints written by BFM-Zero have no manifest:
their spec is inferred from the datasets. A lone ``buffer.hdf5`` (``DictBuffer.load_hdf5``,
:mod:`bufcore.persist.hdf5_file`) is read by the same reader.

Verification: a full load has a :class:`~bufcore.persist.checkpoint.verify.PayloadStream` hash
the whole file meanwhile. An opening that does not (a read of some leaves or rows) verifies,
through a :class:`~bufcore.persist.checkpoint.verify.BlockReader`, the manifest blocks the read
touches first.

Needed by (DESIGN rule 5): the block-by-block copy into strided views (no second copy of the
rows in memory): the cold-load row of ``python -m bench --only persist-engine``; the inferred
spec of a manifest-less directory: ``tests/fault/test_corruption.py::
test_the_undamaged_bfm_zero_checkpoint_loads``; the dtype and shape checks against the manifest:
``tests/fault/test_untrusted_files.py::test_a_dataset_whose_dtype_differs_from_the_manifest_is_refused``
and ``tests/fault/test_hostile_checkpoints.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import h5py
import numpy as np
import torch

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.checkpoint.format import BLOCK_BYTES, numpy_dtype, storage_dtype
from bufcore.persist.checkpoint.hashing import Digests
from bufcore.persist.checkpoint.verify import (
    BlockReader,
    Extents,
    PayloadStream,
    extents,
    join,
    metadata_extents,
    read_extents,
)
from bufcore.persist.hdf5_guard import H5_FAILURES, damage_reported, local_members
from bufcore.tree import (
    KeyPath,
    LeafSpec,
    Spec,
    format_key_path,
    leaf_holding_another,
    split_key_name,
)

# An index read spanning at most this many times the rows asked for reads the whole span in one
# hyperslab (fast) rather than a point selection of each row (h5py is slow on long lists).
_DENSE_SPAN = 4

Rows = slice | np.ndarray


class PayloadReader:
    """buffer.hdf5 of a checkpoint being loaded: its leaves, and their rows copied out once.

    The file is read through ``fd`` alone, never reopened by path: a writer that swaps in a new
    checkpoint meanwhile cannot mix its rows into this load (:mod:`bufcore.persist.snapshot`).

    Args:
        path: The file (for messages).
        fd: The file, open for reading; the reader owns it and closes it in :meth:`close`.
        stream: The stream hashing the whole file meanwhile, or None: then each read first
            verifies the blocks it touches against ``expected``
            (:class:`~bufcore.persist.checkpoint.verify.BlockReader`).
        expected: What the file must hash to (from the manifest), or None without one.
    """

    def __init__(
        self, path: Path, fd: int, stream: PayloadStream | None, expected: Digests | None
    ) -> None:
        self.path = path
        self._fd = fd
        self._stream = stream
        self._blocks = BlockReader(path, fd, expected)
        self._expected = expected
        self._metadata: Extents | None = None
        self._h5: h5py.File | None = None
        self._handle: BinaryIO | None = None
        self._names: dict[KeyPath, str] = {}
        self._batch_dims = 1

    def stat(self) -> os.stat_result:
        """The open buffer.hdf5's ``fstat`` (the file opened, even if the path was replaced)."""
        return os.fstat(self._fd)

    def _file(self) -> h5py.File:
        if self._h5 is None:
            handle = os.fdopen(os.dup(self._fd), "rb")
            try:
                self._h5 = h5py.File(handle, "r")
            except H5_FAILURES as err:
                handle.close()
                raise CorruptCheckpointError(
                    self.path, f"not a readable HDF5 file ({err})"
                ) from err
            self._handle = handle
        return self._h5

    def close(self) -> None:
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def leaves(
        self, listed: tuple[Spec, dict[KeyPath, str]] | None, separator: str, batch_dims: int
    ) -> tuple[Spec, int | None, int]:
        """The spec, env count and row count of the stored leaves.

        Args:
            listed: The spec and dataset names the manifest lists, or None to infer them from
                the datasets (splitting their names on ``separator``), which is how BFM-Zero's
                own checkpoints are read.
            separator: The nested key separator.
            batch_dims: Leading batch axes of every dataset.

        Raises:
            CorruptCheckpointError: datasets disagree with the manifest or with each other.
        """
        h5 = self._file()
        members = local_members(h5, self.path, CorruptCheckpointError)
        datasets = {name: obj for name, obj in members.items() if isinstance(obj, h5py.Dataset)}
        groups = [name for name, obj in members.items() if not isinstance(obj, h5py.Dataset)]
        if groups:
            raise CorruptCheckpointError(
                self.path, f"unexpected groups {groups}; expected datasets"
            )
        self._batch_dims = batch_dims
        if listed is not None:
            spec, self._names = dict(listed[0]), dict(listed[1])
            unknown = sorted(set(datasets) - set(self._names.values()))
            if unknown:
                raise CorruptCheckpointError(
                    self.path, f"datasets {unknown} are not in the manifest"
                )
        else:
            spec, self._names = self._infer(datasets, separator, batch_dims)
        if nested := leaf_holding_another(spec):
            raise CorruptCheckpointError(
                self.path,
                f"leaf {format_key_path(nested[0])} is also a group holding "
                f"{format_key_path(nested[1])}; key paths cannot nest into a leaf",
            )
        lead_shapes = set()
        for path, leaf in spec.items():
            name = self._names[path]
            if name not in datasets:
                raise CorruptCheckpointError(self.path, f"dataset {name!r} is missing")
            shape = tuple(datasets[name].shape)
            stored = datasets[name].dtype
            if stored.kind not in "biuf" or stored.newbyteorder("=") != numpy_dtype(leaf.dtype):
                raise CorruptCheckpointError(
                    self.path,
                    f"dataset {name!r} has dtype {stored}, expected {numpy_dtype(leaf.dtype)}",
                )
            if len(shape) != batch_dims + len(leaf.shape) or shape[batch_dims:] != leaf.shape:
                raise CorruptCheckpointError(
                    self.path,
                    f"dataset {name!r} has shape {shape}, expected trailing {leaf.shape}",
                )
            lead_shapes.add(shape[:batch_dims])
        if len(lead_shapes) > 1:
            raise CorruptCheckpointError(
                self.path, f"datasets disagree on their leading axes: {sorted(lead_shapes)}"
            )
        lead = lead_shapes.pop() if lead_shapes else (0,) * batch_dims
        env_count = int(lead[1]) if batch_dims == 2 and spec else None
        return spec, env_count, int(lead[0])

    def _infer(
        self, datasets: dict[str, h5py.Dataset], separator: str, batch_dims: int
    ) -> tuple[Spec, dict[KeyPath, str]]:
        spec: Spec = {}
        names: dict[KeyPath, str] = {}
        for name, dataset in datasets.items():
            try:
                # Stored byte order is HDF5's business: rows are read in native order.
                native = dataset.dtype.newbyteorder("=")
                dtype = torch.from_numpy(np.empty(0, dtype=native)).dtype
            except TypeError as err:
                raise CorruptCheckpointError(
                    self.path, f"dataset {name!r} has dtype {dataset.dtype}, not a numeric one"
                ) from err
            if dataset.ndim < batch_dims:
                raise CorruptCheckpointError(
                    self.path,
                    f"dataset {name!r} has shape {dataset.shape}, expected at least "
                    f"{batch_dims} leading axes",
                )
            path = split_key_name(name, separator)
            spec[path] = LeafSpec(tuple(dataset.shape[batch_dims:]), dtype)
            names[path] = name
        return spec, names

    def _span(self, dataset: h5py.Dataset | None, rows: Rows | None) -> Extents | None:
        """The bytes reading ``rows`` of ``dataset`` touches (no dataset: none), its HDF5
        metadata included (None: the whole file, for a layout that cannot be mapped)."""
        if self._metadata is None:
            h5 = self._file()
            datasets = [h5[name] for name in self._names.values()]
            size = os.fstat(self._fd).st_size
            self._metadata = metadata_extents(datasets, size)
        data = extents([]) if dataset is None else read_extents(dataset, rows)
        if self._metadata is None or data is None:
            return None
        return join(self._metadata, data)

    def verify_metadata(self, what: str = "HDF5 metadata") -> None:
        """Hash the manifest blocks the HDF5 metadata lies in (once per opening), for a read
        that does not stream the whole file: the spec and row count came from it.

        Raises:
            CorruptCheckpointError: a block differs from the manifest (names ``what``).
        """
        with damage_reported(self.path, CorruptCheckpointError):
            self._blocks.verify(self._span(None, None), what)

    def read_rows(self, path: KeyPath, selection: Rows) -> np.ndarray:
        """Rows of leaf ``path`` (one :meth:`leaves` checked) at a step-1 slice or at in-range
        indices, in native byte order, once the blocks they lie in are verified.

        Raises:
            CorruptCheckpointError: a block differs from the manifest (names the leaf), or
                HDF5 fails reading.
        """
        with damage_reported(self.path, CorruptCheckpointError):
            dataset = self._file()[self._names[path]]
            unique = None
            if not isinstance(selection, slice):
                unique = np.unique(selection)
            self._blocks.verify(
                self._span(dataset, selection if unique is None else unique),
                f"leaf {format_key_path(path)}",
            )
            return _read_rows(dataset, selection)

    def read_leaves(self, dests: dict[KeyPath, torch.Tensor], *, start: int = 0) -> None:
        """Copy rows ``[start, start + len(dest))`` of every leaf in ``dests`` into it (any
        device, may be strided views).

        Without a stream (an opening for some leaves), the manifest blocks these rows (and
        the HDF5 metadata) lie in are verified first (the metadata's even when no rows are
        read: the spec came from it); with one, the whole file is being hashed meanwhile.

        Raises:
            CorruptCheckpointError: HDF5 fails reading, or (without a stream) a block the
                leaves lie in differs from the manifest (names the leaf).
        """
        h5 = self._file()
        if self._stream is None:
            named = ", ".join(format_key_path(key) for key in dests)
            what = {0: "HDF5 metadata", 1: f"leaf {named}"}.get(len(dests), f"leaves {named}")
            self.verify_metadata(what)
            for key, dest in dests.items():
                rows = slice(start, start + len(dest))
                self._blocks.verify(
                    self._span(h5[self._names[key]], rows), f"leaf {format_key_path(key)}"
                )
        for key, dest in dests.items():
            self._read_into(key, dest, start)

    def _read_into(self, path: KeyPath, dest: torch.Tensor, first: int) -> None:
        """Copy rows ``[first, first + len(dest))`` of leaf ``path`` into ``dest`` through
        h5py, block by block."""
        name = self._names[path]
        if dest.numel() == 0:
            return
        stored = storage_dtype(dest.dtype)
        target = dest.view(stored) if stored != dest.dtype else dest
        with damage_reported(self.path, CorruptCheckpointError):
            dataset = self._file()[name]
            rows = len(target)
            width = int(np.prod(dataset.shape[1:], dtype=np.int64)) * dataset.dtype.itemsize
            step = max(1, min(rows, BLOCK_BYTES // max(1, width)))
            # HDF5 converts the stored byte order to the block's native one while reading.
            block = np.empty((step, *dataset.shape[1:]), dtype=dataset.dtype.newbyteorder("="))
            for start in range(0, rows, step):
                stop = min(rows, start + step)
                part = block[: stop - start]
                source = np.s_[first + start : first + stop]
                dataset.read_direct(part, source_sel=source, dest_sel=np.s_[:])
                if target.device.type == "cpu":
                    # numpy copies on this thread; torch's intra-op threads would compete
                    # with the hashing threads for the same cores.
                    np.copyto(target[start:stop].numpy(), part)
                else:
                    target[start:stop].copy_(torch.from_numpy(part))


def _read_rows(dataset: h5py.Dataset, selection: Rows) -> np.ndarray:
    """The rows of ``dataset`` at a step-1 slice or at in-range indices, in native order."""
    native = dataset.dtype.newbyteorder("=")
    trailing = tuple(dataset.shape[1:])
    if isinstance(selection, slice):
        out = np.empty((selection.stop - selection.start, *trailing), dtype=native)
        if len(out):
            dataset.read_direct(out, source_sel=np.s_[selection], dest_sel=np.s_[:])
        return out
    if len(selection) == 0:
        return np.empty((0, *trailing), dtype=native)
    # h5py reads increasing, distinct indices: read each row once, then scatter back.
    unique, inverse = np.unique(selection, return_inverse=True)
    low, high = int(unique[0]), int(unique[-1]) + 1
    if high - low <= _DENSE_SPAN * len(unique):
        picked = _read_rows(dataset, slice(low, high))[unique - low]
    else:
        picked = np.asarray(dataset[unique], dtype=native)
    scattered: np.ndarray = picked[inverse.reshape(-1)]
    return scattered

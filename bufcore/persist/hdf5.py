"""``buffer.hdf5``: the rows of a checkpoint, streamed to and from each dataset's extent.

Layout: one contiguous, uncompressed dataset per leaf, named by its key path joined with the
nested key separator, shape ``[rows, (env,) *trailing]``; bfloat16 is stored as its int16 bits
(numpy, and so h5py, has no bfloat16). This layout is what BFM-Zero writes and reads.

Saving (:func:`write_payload`): HDF5 writes only the metadata; every dataset is created and
allocated, the file closed, and then the rows go straight to each dataset's contiguous extent
with ``pwrite``, packed slot by slot (:mod:`bufcore.persist.stream`). So the whole file is known
when its first data byte is written, and its blocks are hashed front to back by background
threads while the rows are still being packed and written, instead of re-reading the file
afterwards. Writeback starts slot by slot, so the fsync that follows has little left.

Loading (:class:`PayloadReader`): the file is read once, front to back, by a
:class:`~bufcore.persist.stream.PayloadStream` that hashes every chunk, and the loader copies each
dataset's bytes from those chunks straight into the buffer's rows. A dataset stored otherwise
(chunked, compressed, another byte order) is read through h5py instead.

The tunables below are read at call time, so tests can shrink them.
"""

from __future__ import annotations

import functools
import itertools
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.hashing import Digests, StreamHasher, hash_file_range
from bufcore.persist.stream import (
    PayloadStream,
    SlotRing,
    byte_rows,
    copy_regions,
    copy_tensor,
    row_bytes,
)
from bufcore.persist.syscalls import pwrite_all, start_writeback
from bufcore.tree import KeyPath, LeafSpec, Spec, split_key_name

# Rows read through h5py (datasets not stored as one native extent) move in blocks of this size.
_BLOCK_BYTES = 64 << 20
# Saves and loads move buffer.hdf5 through a few reusable slots of this size: small enough to stay
# in the last-level cache between packing, writing and hashing one, large enough that the
# per-slot Python overhead is negligible.
_SLOT_BYTES = 4 << 20
_SAVE_SLOTS = 4
# A load starts reading (and hashing) before the loader knows where the datasets are; the ring
# holds what was read meanwhile (the first few milliseconds) until the loader copies it out.
_LOAD_SLOTS = 8
_FIRST_READ_BYTES = 256 << 10
# buffer.hdf5 is hashed as blocks of this many bytes (a power of two), one sha256 each, so that
# _HASH_THREADS threads hash consecutive blocks at once: one sha256 stream (~1.8 GB/s) is slower
# than a cold read. Small enough that the slots a load holds in flight (_LOAD_SLOTS x
# _SLOT_BYTES) reach into the next block while the previous one is still being hashed; large
# enough that the manifest lists only ~30 digests per GB. Blocks need not line up with slots.
_HASH_BLOCK_BYTES = 32 << 20
_HASH_THREADS = 2


def check_hdf5_name(name: str, where: str) -> None:
    """Refuse a name HDF5 cannot give a dataset or group: empty, ``.``, or containing ``/``
    (HDF5 reads it as a path of groups).

    Raises:
        ValueError: such a name; the message starts with ``where``.
    """
    if name in ("", ".") or "/" in name:
        raise ValueError(
            f"{where} {name!r} cannot name an HDF5 dataset or group (empty, '.', or containing '/')"
        )


def storage_dtype(dtype: torch.dtype) -> torch.dtype:
    # numpy (and so HDF5 via h5py) has no bfloat16: store its bits as int16.
    return torch.int16 if dtype == torch.bfloat16 else dtype


def numpy_dtype(dtype: torch.dtype) -> np.dtype[Any]:
    """The numpy dtype a leaf of ``dtype`` is stored as."""
    return torch.empty(0, dtype=storage_dtype(dtype)).numpy().dtype


def write_payload(
    path: Path, spec: Spec, arrays: dict[KeyPath, torch.Tensor], names: dict[KeyPath, str]
) -> StreamHasher:
    """Write buffer.hdf5 (not fsynced); the hasher of its bytes, possibly still running.

    Args:
        path: The file to create.
        spec: Key path -> trailing shape and dtype of every leaf.
        arrays: Key path -> its rows ``[rows, (env,) *shape]`` (any device, may be strided).
        names: Key path -> dataset name.

    The caller closes the returned hasher (its ``result()`` does), also when it fails.
    """
    regions = _create_datasets(path, spec, arrays, names)
    fd = os.open(path, os.O_RDWR)
    hasher = StreamHasher(_HASH_BLOCK_BYTES, _HASH_THREADS)
    try:
        size = os.fstat(fd).st_size
        if regions and regions[-1][0] + regions[-1][1] > size:
            raise RuntimeError(f"{path}: HDF5 allocated datasets past the end of the file")
        widest = max((row_bytes(arrays[key]) for _, _, key in regions), default=0)
        ring = SlotRing(_SAVE_SLOTS, max(_SLOT_BYTES, widest))
        position = 0
        for offset, nbytes, key in regions:
            hash_file_range(fd, position, offset, hasher)  # HDF5 metadata before this dataset
            _write_dataset(fd, offset, arrays[key], ring, hasher)
            position = offset + nbytes
        hash_file_range(fd, position, size, hasher)
    except BaseException:
        hasher.close()
        raise
    finally:
        os.close(fd)
    return hasher


def _create_datasets(
    path: Path, spec: Spec, arrays: dict[KeyPath, torch.Tensor], names: dict[KeyPath, str]
) -> list[tuple[int, int, KeyPath]]:
    """Create buffer.hdf5 with every dataset allocated but its rows not yet written.

    Returns ``(file offset, bytes, key path)`` of every non-empty dataset, in file order. All
    datasets are created before any is allocated, so the HDF5 metadata sits at the front of the
    file and a loader's metadata reads come from the first bytes it reads anyway.
    """
    created: list[tuple[KeyPath, h5py.Dataset]] = []
    regions: list[tuple[int, int, KeyPath]] = []
    with h5py.File(path, "w", libver="earliest") as h5:
        for key, leaf in spec.items():
            shape = tuple(arrays[key].shape)
            dataset = h5.create_dataset(names[key], shape=shape, dtype=numpy_dtype(leaf.dtype))
            created.append((key, dataset))
        for key, dataset in created:
            nbytes = int(dataset.size) * dataset.dtype.itemsize
            if nbytes == 0:
                continue
            # Writing one element makes HDF5 allocate the whole contiguous extent; with no
            # user-defined fill value it writes nothing else there. The rows follow directly.
            dataset[(0,) * dataset.ndim] = np.zeros((), dataset.dtype)
            offset = dataset.id.get_offset()
            if offset is None or dataset.id.get_storage_size() != nbytes:
                raise RuntimeError(f"{path}: HDF5 did not allocate {names[key]!r} contiguously")
            regions.append((int(offset), nbytes, key))
    regions.sort()
    for (offset, nbytes, key), (following, _, _) in itertools.pairwise(regions):
        if offset + nbytes > following:
            raise RuntimeError(f"{path}: HDF5 allocated {names[key]!r} overlapping another dataset")
    return regions


def _write_dataset(
    fd: int, offset: int, array: torch.Tensor, ring: SlotRing, hasher: StreamHasher
) -> None:
    """Write the rows of ``array`` as the bytes of its dataset at ``offset``, and hash them.

    Each block of rows is packed into a free slot (this de-interleaves the strided leaf view),
    handed to the hasher, written with ``pwrite``, and its writeback started; the slot is free
    again once hashed. bfloat16 is written as its bits, which is what its int16 dataset holds.
    """
    width = row_bytes(array)
    step = max(1, ring.slot_bytes // width)
    for start in range(0, array.shape[0], step):
        block = array[start : start + step].detach()
        nbytes = block.shape[0] * width
        slot = ring.take()
        copy_tensor(ring.tensors[slot][:nbytes].view(block.dtype).view(block.shape), block)
        data = ring.views[slot][:nbytes]
        hasher.feed(data, functools.partial(ring.give, slot))
        pwrite_all(fd, data, offset)
        start_writeback(fd, offset, nbytes)
        offset += nbytes


def block_entry(hasher: StreamHasher) -> dict[str, Any]:
    """The manifest entry of buffer.hdf5 from the hasher of its bytes (waits for it)."""
    digests, size = hasher.result()
    return {"size": size, "block_bytes": hasher.block_bytes, "sha256_blocks": digests}


def payload_stream(path: Path, expected: Digests | None) -> PayloadStream:
    """Start reading (and, with ``expected``, hashing) buffer.hdf5 through this module's slots."""
    return PayloadStream(
        path,
        expected,
        slots=_LOAD_SLOTS,
        slot_bytes=_SLOT_BYTES,
        first_read=_FIRST_READ_BYTES,
        threads=_HASH_THREADS,
    )


class PayloadReader:
    """buffer.hdf5 of a checkpoint being loaded: its leaves, and their rows copied out once.

    Args:
        path: The file.
        stream: The stream already reading (and hashing) it, or None (no manifest): then a
            stream without hashing is started when the rows are read.
    """

    def __init__(self, path: Path, stream: PayloadStream | None) -> None:
        self.path = path
        self._stream = stream
        self._h5: h5py.File | None = None
        self._names: dict[KeyPath, str] = {}
        self._batch_dims = 1

    def _file(self) -> h5py.File:
        if self._h5 is None:
            if self._stream is not None:
                # The metadata sits in the first chunk read; h5py then reads it from memory
                # rather than waiting on the disk with the GIL held, which would stall hashing.
                self._stream.wait_started()
            if not self.path.exists():
                raise CorruptCheckpointError(self.path, "file is missing")
            try:
                self._h5 = h5py.File(self.path, "r")
            except OSError as err:
                raise CorruptCheckpointError(
                    self.path, f"not a readable HDF5 file ({err})"
                ) from err
        return self._h5

    def close(self) -> None:
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None

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
        datasets = {name: obj for name, obj in h5.items() if isinstance(obj, h5py.Dataset)}
        groups = [name for name, obj in h5.items() if not isinstance(obj, h5py.Dataset)]
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
        lead_shapes = set()
        for path, leaf in spec.items():
            name = self._names[path]
            if name not in datasets:
                raise CorruptCheckpointError(self.path, f"dataset {name!r} is missing")
            shape = tuple(datasets[name].shape)
            if shape[batch_dims:] != leaf.shape:
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

    def read_leaves(self, dests: dict[KeyPath, torch.Tensor]) -> None:
        """Copy the rows of every leaf in ``dests`` into it (any device, may be strided views).

        The file is read once, front to back, and each dataset's bytes go from the chunks read
        straight into its destination (hashed on the way when the stream has a manifest). A
        dataset stored otherwise than as one contiguous run of the native bytes (chunked,
        compressed, another byte order) is read through HDF5 instead.

        Raises:
            CorruptCheckpointError: reading failed, or datasets lie outside the file.
        """
        h5 = self._file()
        regions: list[tuple[int, int, torch.Tensor]] = []
        others: list[KeyPath] = []
        for key, dest in dests.items():
            dataset = h5[self._names[key]]
            if dest.numel() == 0 and tuple(dataset.shape) == tuple(dest.shape):
                continue
            region = _raw_region(dataset, dest, self._batch_dims)
            if region is None:
                others.append(key)
            else:
                regions.append(region)
        regions.sort(key=lambda region: region[0])
        size = self.path.stat().st_size
        for (offset, nbytes, _), (following, _, _) in itertools.pairwise(regions):
            if offset + nbytes > following:
                raise CorruptCheckpointError(self.path, "datasets overlap")
        if regions and regions[-1][0] + regions[-1][1] > size:
            raise CorruptCheckpointError(
                self.path, f"datasets reach past the end ({size} bytes)"
            )
        stream = self._stream
        if regions:
            owned = stream is None or not stream.consuming
            if stream is None or owned:
                # No manifest, or _read_through detached the stream: it cannot be rewound.
                stream = payload_stream(self.path, None)
            try:
                copy_regions(stream.chunks(), regions, self.path)
            except BaseException:
                if owned:
                    stream.finish()
                raise
            finally:
                stream.detach()  # the hashing goes on alone
            if owned and (damage := stream.finish()) is not None:
                raise damage
        elif stream is not None:
            stream.detach()
        for key in others:
            self._read_through(key, dests[key])

    def _read_through(self, path: KeyPath, dest: torch.Tensor) -> None:
        """Copy the rows of leaf ``path`` into ``dest`` through h5py (any layout, byte order)."""
        if self._stream is not None:
            self._stream.detach()  # this reads through HDF5; the stream only hashes from now on
        name = self._names[path]
        dataset = self._file()[name]
        rows = dataset.shape[0]
        width = max(1, int(np.prod(dataset.shape[1:], dtype=np.int64)) * dataset.dtype.itemsize)
        step = max(1, min(rows, _BLOCK_BYTES // width))
        # HDF5 converts the stored byte order to the block's native one while reading.
        block = np.empty((step, *dataset.shape[1:]), dtype=dataset.dtype.newbyteorder("="))
        stored = storage_dtype(dest.dtype)
        target = dest.view(stored) if stored != dest.dtype else dest
        try:
            for start in range(0, rows, step):
                stop = min(rows, start + step)
                dataset.read_direct(
                    block, source_sel=np.s_[start:stop], dest_sel=np.s_[: stop - start]
                )
                target[start:stop].copy_(torch.from_numpy(block[: stop - start]))
        except OSError as err:
            raise CorruptCheckpointError(
                self.path, f"reading {name!r} failed ({err})"
            ) from err


def _raw_region(
    dataset: h5py.Dataset, dest: torch.Tensor, batch_dims: int
) -> tuple[int, int, torch.Tensor] | None:
    """``(file offset, bytes, dest as byte rows)`` to copy ``dataset`` from the raw file.

    None when the dataset must be read through HDF5: a layout other than one contiguous
    unfiltered extent, a file type other than the native one of ``dest``'s dtype, or a shape or
    strides of ``dest`` that do not allow the copy.
    """
    if tuple(dataset.shape) != tuple(dest.shape):
        return None
    plist = dataset.id.get_create_plist()
    if (
        plist.get_layout() != h5py.h5d.CONTIGUOUS
        or plist.get_nfilters() != 0
        or plist.get_external_count() != 0
    ):
        return None
    if dataset.id.get_type() != h5py.h5t.py_create(numpy_dtype(dest.dtype)):
        return None
    offset = dataset.id.get_offset()
    nbytes = dest.numel() * dest.element_size()
    if offset is None or dataset.id.get_storage_size() != nbytes:
        return None
    rows = byte_rows(dest, batch_dims)
    return None if rows is None else (int(offset), nbytes, rows)

"""``buffer.hdf5``: its layout, and the rows of a checkpoint streamed into each dataset's extent.

Layout: one contiguous, uncompressed dataset per leaf, named by its key path joined with the
nested key separator, shape ``[rows, (env,) *trailing]``; bfloat16 is stored as its int16 bits
(numpy, and so h5py, has no bfloat16). This layout is what BFM-Zero writes and reads.

Saving (:func:`write_payload`): HDF5 writes only the metadata; every dataset is created and
allocated, the file closed, and then the rows go straight to each dataset's contiguous extent
with ``pwrite``, packed slot by slot (:mod:`bufcore.persist.stream`). So the whole file is known
when its first data byte is written, and its blocks are hashed front to back by background
threads while the rows are still being packed and written, instead of re-reading the file
afterwards. Writeback starts slot by slot, so the fsync that follows has little left.

Loading (:mod:`bufcore.persist.hdf5_read`): the file is read once, front to back, by a
:class:`~bufcore.persist.stream.PayloadStream` (:func:`payload_stream`) that hashes every chunk,
and the loader copies each dataset's bytes from those chunks straight into the buffer's rows. A
read of some leaves or rows reads only their bytes and hashes only the blocks they lie in
(:mod:`bufcore.persist.blocks`), which is why the manifest lists a digest per block.

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

from bufcore.persist.hashing import Digests, StreamHasher, hash_file_range
from bufcore.persist.stream import PayloadStream, SlotRing, copy_tensor, row_bytes
from bufcore.persist.syscalls import pwrite_all, start_writeback
from bufcore.tree import KeyPath, Spec

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


def payload_stream(path: Path, fd: int, expected: Digests | None) -> PayloadStream:
    """Start reading (and, with ``expected``, hashing) buffer.hdf5, open as ``fd`` (which the
    stream then owns), through this module's slots."""
    return PayloadStream(
        path,
        fd,
        expected,
        slots=_LOAD_SLOTS,
        slot_bytes=_SLOT_BYTES,
        first_read=_FIRST_READ_BYTES,
        threads=_HASH_THREADS,
    )

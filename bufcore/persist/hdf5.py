"""``buffer.hdf5``: its layout, and a checkpoint's rows written into it.

Layout: one contiguous, uncompressed dataset per leaf, named by its key path joined with the
nested key separator, shape ``[rows, (env,) *trailing]``; bfloat16 is stored as its int16 bits
(numpy, and so h5py, has no bfloat16). This layout is what BFM-Zero writes and reads. Every
dataset is created before any is written, so the HDF5 metadata sits at the front of the file.

Saving (:func:`write_payload`): h5py writes each leaf block by block (``write_direct`` of a
contiguous copy of the rows: the storage's leaves are strided views of packed rows); then a
:class:`~bufcore.persist.hashing.BlockHasher` hashes the file's blocks from the page cache while
:func:`~bufcore.persist.hashing.seal_file` fsyncs it. Loading: :mod:`bufcore.persist.hdf5_read`,
with the whole file hashed meanwhile by a :class:`~bufcore.persist.stream.PayloadStream`
(:func:`payload_stream`). A read of some leaves or rows hashes only the blocks it touches
(:mod:`bufcore.persist.blocks`), which is why the manifest lists a digest per block.

bufcore's earlier engine packed rows into reusable slots, wrote them with ``pwrite`` at the
datasets' offsets and hashed them as it went; it saved no faster than this (bench row
``persist-engine``), so it went.

The tunables below are read at call time, so tests can shrink them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from bufcore.persist.hashing import BlockHasher, Digests
from bufcore.persist.stream import PayloadStream
from bufcore.tree import KeyPath, Spec

# Rows move between the storage and h5py in contiguous blocks of about this many bytes.
BLOCK_BYTES = 64 << 20
# buffer.hdf5 is hashed as blocks of this many bytes (a power of two), one sha256 each, so that
# threads hash consecutive blocks at once and a read of some rows hashes only its blocks;
# the manifest lists ~30 digests per GB.
_HASH_BLOCK_BYTES = 32 << 20


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
) -> BlockHasher:
    """Write buffer.hdf5 (not fsynced); the hasher of its blocks, running in the background.

    Args:
        path: The file to create.
        spec: Key path -> trailing shape and dtype of every leaf.
        arrays: Key path -> its rows ``[rows, (env,) *shape]`` (any device, may be strided).
        names: Key path -> dataset name.

    The caller closes the returned hasher (its ``result()`` does), also when it fails.
    """
    with h5py.File(path, "w", libver="earliest") as h5:
        created = [
            (key, h5.create_dataset(names[key], shape=tuple(arrays[key].shape),
                                    dtype=numpy_dtype(leaf.dtype)))
            for key, leaf in spec.items()
        ]
        for key, dataset in created:
            _write_rows(dataset, arrays[key])
    fd = os.open(path, os.O_RDONLY)
    try:
        return BlockHasher(fd, _HASH_BLOCK_BYTES)
    finally:
        os.close(fd)


def _write_rows(dataset: h5py.Dataset, array: torch.Tensor) -> None:
    """Write ``array``'s rows into ``dataset`` in contiguous blocks (bfloat16 as its bits)."""
    if dataset.size == 0:
        return
    stored = storage_dtype(array.dtype)
    width = max(1, dataset.size // dataset.shape[0] * dataset.dtype.itemsize)
    step = max(1, BLOCK_BYTES // width)
    for start in range(0, array.shape[0], step):
        block = array[start : start + step].detach()
        if stored != block.dtype:
            block = block.view(stored)
        data = np.ascontiguousarray(block.cpu().numpy())
        dataset.write_direct(data, dest_sel=np.s_[start : start + len(data)])


def block_entry(hasher: BlockHasher) -> dict[str, Any]:
    """The manifest entry of buffer.hdf5 from the hasher of its blocks (waits for it)."""
    digests, size = hasher.result()
    return {"size": size, "block_bytes": hasher.block_bytes, "sha256_blocks": digests}


def payload_stream(path: Path, fd: int, expected: Digests | None) -> PayloadStream:
    """Start hashing buffer.hdf5, open as ``fd`` (which the stream then owns), against
    ``expected`` (None: nothing to check)."""
    return PayloadStream(path, fd, expected)

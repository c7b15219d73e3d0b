"""Writing a dict-family checkpoint: a buffer's saved state published as one directory.

The layout is :mod:`bufcore.persist.checkpoint.format`'s (``config.json``, ``buffer.hdf5``,
``state.json``, ``manifest.json``). Buffers never open files: a save hands
:func:`save_checkpoint` a buffer's ``state_dict()`` (a :class:`BufferCheckpoint`: plain
JSON-ready config and state plus the row tensors). The files are written into a staging
directory, sealed (fsynced, checksummed into the manifest) and published atomically
(:func:`bufcore.persist.atomic.publish_directory`).

The rows (:func:`write_payload`): h5py writes them block by block of rows, every leaf of a block
before the next (``write_direct`` of a contiguous copy: the storage's leaves are strided views
of packed rows, so a block's rows are read from the ring once, not once per leaf, which matters
when the ring is a file larger than memory); then a
:class:`~bufcore.persist.checkpoint.hashing.BlockHasher` hashes the file's blocks from the page
cache while :func:`~bufcore.persist.checkpoint.hashing.seal_file` fsyncs it. The manifest lists
a digest per block so that a read of some leaves or rows hashes only the blocks it touches
(:mod:`bufcore.persist.checkpoint.verify`).

bufcore's earlier engine packed rows into reusable slots, wrote them with ``pwrite`` at the
datasets' offsets and hashed them as it went; it saved no faster than this (bench row
``persist-engine``), so it went.

The tunables (``_HASH_BLOCK_BYTES`` here, ``BLOCK_BYTES`` of the format) are read at call time,
so tests can shrink them.

Needed by (DESIGN rule 5): staging, sealing and one publish: ``tests/fault/test_crash_safety.py``
(README Guarantees: old or new checkpoint at any moment of death); hashing the page cache while
fsync runs: the save row of ``python -m bench --only persist-engine`` (0.94x of the disk's
write+fsync ceiling).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from bufcore.persist.atomic import publish_directory
from bufcore.persist.checkpoint.format import (
    BLOCK_BYTES,
    CONFIG,
    MANIFEST,
    PAYLOAD,
    STATE,
    build_manifest,
    numpy_dtype,
    replaceable_checkpoint,
    storage_dtype,
)
from bufcore.persist.checkpoint.hashing import BlockHasher, seal_file
from bufcore.persist.hdf5_guard import check_hdf5_name
from bufcore.tree import KeyPath, LeafSpec, Spec, format_key_path, join_key_path

# buffer.hdf5 is hashed as blocks of this many bytes (a power of two), one sha256 each, so that
# threads hash consecutive blocks at once and a read of some rows hashes only its blocks;
# the manifest lists ~30 digests per GB.
_HASH_BLOCK_BYTES = 32 << 20


@dataclass(frozen=True)
class BufferCheckpoint:
    """What a dict-family buffer saves: plain data plus its rows.

    Attributes:
        target: ``__target__`` for config.json (the class's canonical name).
        config: The remaining config.json fields, ``_idx`` and ``_is_full`` included.
        separator: Nested key separator used to name datasets.
        batch_dims: Leading batch axes of every dataset (1: ``[rows]``, 2: ``[rows, env]``).
        spec: Key path -> trailing shape and dtype.
        arrays: Key path -> rows to save (``[rows, (env,) *shape]``; any device, may be strided).
        state: JSON-ready bufcore-only state.
    """

    target: str
    config: dict[str, Any]
    separator: str
    batch_dims: int
    spec: Spec
    arrays: dict[KeyPath, torch.Tensor]
    state: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_state(cls, state: Mapping[str, Any]) -> BufferCheckpoint:
        """What a buffer's ``state_dict()`` writes (the spec is read off its rows)."""
        dims = int(state["batch_dims"])
        rows: dict[KeyPath, torch.Tensor] = dict(state["rows"])
        return cls(
            target=state["target"],
            config=state["config"],
            separator=state["nested_key_separator"],
            batch_dims=dims,
            spec={p: LeafSpec(tuple(t.shape[dims:]), t.dtype) for p, t in rows.items()},
            arrays=rows,
            state=state["state"],
        )


def save_checkpoint(
    path: str | os.PathLike[str], state: Mapping[str, Any], *, replace: bool = True
) -> None:
    """Write a buffer's ``state_dict()`` as a directory at ``path``, atomically.

    Args:
        path: The checkpoint directory.
        state: What to write: a buffer's ``state_dict()`` (``target``, ``config``, ``state``,
            ``nested_key_separator``, ``batch_dims`` and ``rows``, key path -> tensor).
        replace: False: create only; anything at ``path`` is an error, checked atomically
            with the final rename (:func:`bufcore.persist.atomic.publish_directory`).

    Raises:
        ValueError: ``path`` is empty, or a key contains the nested key separator or '/'
            (checked before any file is touched).
        FileExistsError: ``path`` exists and is not a checkpoint directory; with
            ``replace=False``, anything exists at ``path``.
        TypeError: ``replace`` is not a bool (checked before any file is touched).
    """
    checkpoint = BufferCheckpoint.of_state(state)
    names = {p: join_key_path(p, checkpoint.separator) for p in checkpoint.spec}
    for key_path, name in names.items():
        check_hdf5_name(name, f"key {format_key_path(key_path)}: dataset name")
    publish_directory(
        path,
        lambda staging: _write_files(staging, checkpoint, names),
        replaceable=replaceable_checkpoint,
        kind="checkpoint directory",
        replace=replace,
    )


def _write_files(staging: Path, checkpoint: BufferCheckpoint, names: dict[KeyPath, str]) -> None:
    first = next(iter(checkpoint.arrays.values()), None)
    rows = 0 if first is None else int(first.shape[0])
    env_count = int(first.shape[1]) if first is not None and checkpoint.batch_dims == 2 else None
    hasher = write_payload(staging / PAYLOAD, checkpoint.spec, checkpoint.arrays, names)
    try:
        config = {**checkpoint.config, "__target__": checkpoint.target}
        _write_json(staging / CONFIG, config, indent=4)
        _write_json(staging / STATE, checkpoint.state)
        # The payload's last slots are still being hashed; its fsync runs meanwhile.
        files = {PAYLOAD: seal_file(staging / PAYLOAD, lambda: block_entry(hasher))}
    finally:
        hasher.close()
    files.update({name: seal_file(staging / name) for name in (CONFIG, STATE)})
    manifest = build_manifest(
        names=names,
        target=checkpoint.target,
        separator=checkpoint.separator,
        batch_dims=checkpoint.batch_dims,
        env_count=env_count,
        rows=rows,
        spec=checkpoint.spec,
        files=files,
    )
    _write_json(staging / MANIFEST, manifest, indent=2)
    seal_file(staging / MANIFEST)


def _write_json(path: Path, data: Any, *, indent: int | None = None) -> None:
    """Write ``data`` as strict JSON.

    Raises:
        ValueError: ``data`` holds a NaN or infinite float: Python would write a ``NaN`` token,
            which strict JSON readers refuse (bufcore's saved state is finite, so this is a bug
            to report, not to write).
    """
    try:
        text = json.dumps(data, indent=indent, allow_nan=False)
    except ValueError as err:
        raise ValueError(f"{path.name}: {err}; JSON has no NaN or infinity") from err
    path.write_text(text + "\n", encoding="utf-8")


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
        rows = max((int(arrays[key].shape[0]) for key in spec), default=0)
        # Bytes of one time row across every leaf: blocks of rows hold about BLOCK_BYTES.
        width = sum(d.size // max(1, rows) * d.dtype.itemsize for _, d in created)
        step = max(1, BLOCK_BYTES // max(1, width))
        for start in range(0, rows, step):
            for key, dataset in created:
                _write_rows(dataset, arrays[key], start, min(rows, start + step))
    fd = os.open(path, os.O_RDONLY)
    try:
        return BlockHasher(fd, _HASH_BLOCK_BYTES)
    finally:
        os.close(fd)


def _write_rows(dataset: h5py.Dataset, array: torch.Tensor, start: int, stop: int) -> None:
    """Write ``array``'s rows ``[start, stop)`` into ``dataset`` as one contiguous block
    (bfloat16 as its bits)."""
    if dataset.size == 0:
        return
    block = array[start:stop].detach()
    stored = storage_dtype(array.dtype)
    if stored != block.dtype:
        block = block.view(stored)
    data = np.ascontiguousarray(block.cpu().numpy())
    dataset.write_direct(data, dest_sel=np.s_[start:stop])


def block_entry(hasher: BlockHasher) -> dict[str, Any]:
    """The manifest entry of buffer.hdf5 from the hasher of its blocks (waits for it)."""
    digests, size = hasher.result()
    return {"size": size, "block_bytes": hasher.block_bytes, "sha256_blocks": digests}

"""Dict-family checkpoints: a buffer's saved state as a directory, and the way back.

A checkpoint is a directory (DESIGN §3):

- ``config.json``: the BFM-Zero fields (constructor fields, ``_idx``, ``_is_full``,
  ``__target__``), so BFM-Zero's own loader can read what bufcore writes and vice versa.
- ``buffer.hdf5``: the rows, one dataset per leaf (:mod:`bufcore.persist.hdf5`).
- ``state.json``: bufcore-only state (generator state, priorities, ...), which BFM-Zero ignores.
- ``manifest.json``: what the others must be (:mod:`bufcore.persist.manifest`).

Buffers never open files. A save hands :func:`save_checkpoint` a :class:`BufferCheckpoint`:
plain JSON-ready config and state plus the row tensors. A load (:func:`load_checkpoint`) opens
the directory, verifies every small file before parsing it, starts streaming and hashing
``buffer.hdf5``, and hands the buffer class an :class:`OpenedCheckpoint`: the parsed config and
state, and a :class:`~bufcore.storage.ring.RowSource` that copies the rows straight into the
buffer's freshly allocated storage. Every checksum is verified before the buffer is returned.
A :class:`~bufcore.errors.StateError` the buffer raises about its saved state becomes a
:class:`~bufcore.errors.CorruptCheckpointError` naming the file that part came from.

Publishing is atomic (:func:`bufcore.persist.atomic.publish_directory`); nothing is unpickled.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from bufcore.errors import CorruptCheckpointError, StateError, StatePart
from bufcore.persist.atomic import publish_directory
from bufcore.persist.hashing import seal_file
from bufcore.persist.hdf5 import block_entry, check_hdf5_name, payload_stream, write_payload
from bufcore.persist.hdf5_read import PayloadReader
from bufcore.persist.manifest import (
    CONFIG,
    MANIFEST,
    PAYLOAD,
    STATE,
    build_manifest,
    check_manifest,
    manifest_spec,
    payload_digests,
    read_json,
    verify_file,
)
from bufcore.persist.stream import PayloadStream
from bufcore.tree import KeyPath, Spec, format_key_path, join_key_path

T = TypeVar("T")

# Where each part of a buffer's saved state lives.
_FILE_OF: dict[StatePart, str] = {"config": CONFIG, "state": STATE, "rows": PAYLOAD}


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


def save_checkpoint(path: str | os.PathLike[str], checkpoint: BufferCheckpoint) -> None:
    """Write ``checkpoint`` as a directory at ``path``, atomically.

    Raises:
        ValueError: a key contains the nested key separator or '/' (checked before any file is
            touched).
        FileExistsError: ``path`` exists and is not a checkpoint directory.
    """
    names = {p: join_key_path(p, checkpoint.separator) for p in checkpoint.spec}
    for key_path, name in names.items():
        check_hdf5_name(name, f"key {format_key_path(key_path)}: dataset name")
    publish_directory(
        path,
        lambda staging: _write_files(staging, checkpoint, names),
        replaceable=_replaceable,
        kind="checkpoint directory",
    )


def _replaceable(path: Path) -> bool:
    """Whether a save may replace the directory at ``path``: a checkpoint, or empty."""
    return (path / CONFIG).exists() or (path / MANIFEST).exists() or not any(path.iterdir())


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
    path.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")


class CheckpointRows:
    """The rows of an open checkpoint, as a :class:`~bufcore.storage.ring.RowSource`.

    Attributes:
        spec: Key path -> trailing shape and dtype of every stored leaf.
        env_count: Envs per time row for ``[time, env]`` rows, else None.
        count: Time rows stored.
    """

    def __init__(self, reader: PayloadReader, spec: Spec, env_count: int | None, count: int):
        self._reader = reader
        self.spec = spec
        self.env_count = env_count
        self.count = count

    def read_into(self, dests: dict[KeyPath, torch.Tensor]) -> None:
        """Copy every leaf's rows into ``dests`` (the file is read once, front to back)."""
        self._reader.read_leaves(dests)


class OpenedCheckpoint:
    """A checkpoint directory open for loading: verified, parsed JSON and the stored rows.

    Attributes:
        path: The checkpoint directory.
        config: config.json without ``__target__``.
        target: config.json's ``__target__``.
        state: state.json, or ``{}`` for checkpoints written by BFM-Zero.
        manifest: manifest.json, or None for checkpoints written by BFM-Zero.
    """

    def __init__(
        self,
        path: Path,
        config: dict[str, Any],
        state: dict[str, Any],
        manifest: dict[str, Any] | None,
        reader: PayloadReader,
    ) -> None:
        target = config.get("__target__")
        if not isinstance(target, str):
            raise CorruptCheckpointError(
                path / CONFIG, f"'__target__' must be a str, got {target!r}"
            )
        self.path = path
        self.target = target
        self.config = {k: v for k, v in config.items() if k != "__target__"}
        self.state = state
        self.manifest = manifest
        self._reader = reader

    def row_source(self, separator: str, batch_dims: int) -> CheckpointRows:
        """The stored rows, for a buffer with this separator and number of batch axes.

        Raises:
            CorruptCheckpointError: the datasets disagree with the manifest or each other.
        """
        listed = None if self.manifest is None else manifest_spec(self.path, self.manifest)
        spec, env_count, count = self._reader.leaves(listed, separator, batch_dims)
        return CheckpointRows(self._reader, spec, env_count, count)


@contextmanager
def open_checkpoint(path: str | os.PathLike[str]) -> Iterator[OpenedCheckpoint]:
    """Open a checkpoint directory for loading, verifying it against its manifest.

    The small JSON files are verified before anything is parsed, and the manifest entry of
    ``buffer.hdf5`` is checked for consistency (block size, block count); ``buffer.hdf5`` is then
    read once by a background thread while hashing threads hash its blocks and the caller copies
    rows out of the same chunks, and a mismatch is raised when the block exits (so a damaged file
    never yields a buffer, and hashing overlaps the read).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file is missing, malformed, or differs from the manifest.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"path: no checkpoint directory at {root}")
    manifest: dict[str, Any] | None = None
    stream: PayloadStream | None = None
    if (root / MANIFEST).exists():
        manifest = read_json(root / MANIFEST)
        check_manifest(root, manifest)
        for name, expected in manifest["files"].items():
            if name != PAYLOAD:
                verify_file(root / name, expected)
        stream = payload_stream(root / PAYLOAD, payload_digests(root / PAYLOAD, manifest))
    reader = PayloadReader(root / PAYLOAD, stream)
    try:
        try:
            config = read_json(root / CONFIG)
            state = read_json(root / STATE) if (root / STATE).exists() else {}
            written_by_bufcore = (root / STATE).exists() or str(
                config.get("__target__")
            ).startswith("bufcore.")
            if manifest is None and written_by_bufcore:
                # BFM-Zero writes neither state.json nor bufcore targets; bufcore always writes
                # a manifest, so without it nothing could be verified.
                raise CorruptCheckpointError(
                    root / MANIFEST, "file is missing; bufcore checkpoints always have one"
                )
            yield OpenedCheckpoint(root, config, state, manifest, reader)
        finally:
            reader.close()
    except BaseException:
        if stream is not None and (damage := stream.finish()) is not None:
            raise damage from None
        raise
    if stream is not None and (damage := stream.finish()) is not None:
        raise damage


def load_checkpoint(path: str | os.PathLike[str], build: Callable[[OpenedCheckpoint], T]) -> T:
    """``build(opened)`` on the checkpoint at ``path``, once every checksum held.

    ``build`` turns the saved state into a buffer; a :class:`~bufcore.errors.StateError` it
    raises is reported as a :class:`~bufcore.errors.CorruptCheckpointError` naming the file of
    that part (config.json, state.json or buffer.hdf5).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file is damaged, malformed or inconsistent.
    """
    with open_checkpoint(path) as opened:
        try:
            return build(opened)
        except StateError as err:
            raise CorruptCheckpointError(opened.path / _FILE_OF[err.part], str(err)) from err

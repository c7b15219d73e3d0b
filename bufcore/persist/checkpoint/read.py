"""Reading a dict-family checkpoint: its directory opened, verified and handed out as saved state.

Buffers never open files. A load (:func:`open_checkpoint`) opens the directory, verifies every
small file before parsing it, starts hashing ``buffer.hdf5`` on background threads
(:class:`~bufcore.persist.checkpoint.verify.PayloadStream`), and yields an
:class:`OpenedCheckpoint`: a saved state (target, config, state) whose rows
(:class:`CheckpointRows`, a :class:`~bufcore.storage.ring.RowSource`) are copied straight into
the buffer's freshly allocated storage when the buffer asks for them
(:mod:`bufcore.persist.checkpoint.read_payload`). Every checksum is verified before the buffer
is returned. A load of some leaves (``leaves=``, :meth:`CheckpointRows.only`) does not hash the
whole file: it reads those leaves' bytes alone and verifies the blocks they lie in
(:class:`~bufcore.persist.checkpoint.verify.BlockReader`); a single-leaf read
(``bufcore.inspect.read_leaf``) is the same mechanism with one leaf and some rows
(:meth:`CheckpointRows.read_rows`). A :class:`~bufcore.errors.StateError` raised while the
checkpoint is open (the buffer's parser refusing a field) becomes a
:class:`~bufcore.errors.CorruptCheckpointError` naming the file that part came from.

Nothing is unpickled.

Needed by (DESIGN rule 5): verification before a buffer is returned:
``tests/fault/test_corruption.py`` (README Guarantees: every load is verified); hashing on
background threads while the rows are copied: the cold-load row of ``python -m bench --only
persist-engine`` (0.98x of the disk's read ceiling); per-leaf opening: ``tests/buffers/
test_partial_load.py`` and ``tests/runs/test_leaf_read.py::test_only_the_named_dataset_is_read``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from bufcore.errors import CorruptCheckpointError, StateError, StatePart
from bufcore.fields import Field
from bufcore.persist.checkpoint.format import (
    CONFIG,
    MANIFEST,
    PAYLOAD,
    STATE,
    check_manifest,
    manifest_spec,
    parse_json,
    payload_digests,
)
from bufcore.persist.checkpoint.hashing import Digests
from bufcore.persist.checkpoint.read_payload import PayloadReader
from bufcore.persist.checkpoint.verify import PayloadStream, verify_bytes
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.tree import KeyPath, Spec

T = TypeVar("T")

# Where each part of a buffer's saved state lives.
_FILE_OF: dict[StatePart, str] = {"config": CONFIG, "state": STATE, "rows": PAYLOAD}
_LISTED_MISSING = "file listed in the manifest is missing"
# Opening starts over when a save swapped the directory meanwhile; a path replaced this often
# while one load opens it is reported as it is.
_ATTEMPTS = 5


class CheckpointRows:
    """The rows of an open checkpoint, as a :class:`~bufcore.storage.ring.RowSource`.

    Attributes:
        spec: Key path -> trailing shape and dtype of every stored leaf.
        env_count: Envs per time row for ``[time, env]`` rows, else None.
        count: Time rows stored.
        absent: Stored leaves left out of the load (:meth:`only`).
    """

    def __init__(
        self,
        reader: PayloadReader,
        spec: Spec,
        env_count: int | None,
        count: int,
        absent: frozenset[KeyPath] = frozenset(),
    ) -> None:
        self._reader = reader
        self.spec = spec
        self.env_count = env_count
        self.count = count
        self.absent = absent

    def only(self, paths: frozenset[KeyPath]) -> CheckpointRows:
        """These rows with every stored leaf not in ``paths`` left out (a load with
        ``leaves=``): their bytes are then never read."""
        absent = frozenset(self.spec) - paths
        return CheckpointRows(self._reader, self.spec, self.env_count, self.count, absent)

    def read_into(self, dests: dict[KeyPath, torch.Tensor], *, start: int = 0) -> None:
        """Copy rows ``[start, start + len(dest))`` of every leaf in ``dests`` into it: a
        whole load reads the file once, front to back; a load of some leaves reads their bytes
        alone, verified block by block.

        Raises:
            CorruptCheckpointError: the bytes differ from the manifest or cannot be read.
        """
        self._reader.read_leaves(dests, start=start)

    def read_rows(self, path: KeyPath, selection: slice | np.ndarray) -> np.ndarray:
        """Some rows of the stored leaf ``path`` alone (a step-1 slice or in-range indices),
        once the manifest blocks they lie in are verified.

        Raises:
            CorruptCheckpointError: a block differs from the manifest (names buffer.hdf5 and
                the leaf), or HDF5 fails reading.
        """
        return self._reader.read_rows(path, selection)


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

    @property
    def file_stamp(self) -> str | None:
        """For a checkpoint without a manifest (BFM-Zero's): sha256 of its config and of
        buffer.hdf5's size and modification time, which a rewrite of either changes (the
        checkpoint's identity without hashing its rows); None with a manifest, whose checksum
        says more."""
        if self.manifest is not None:
            return None
        stat = self._reader.stat()
        text = json.dumps({"config": {"__target__": self.target, **self.config},
                           "size": stat.st_size, "mtime_ns": stat.st_mtime_ns},
                          sort_keys=True, default=str)
        return "stat:" + hashlib.sha256(text.encode()).hexdigest()

    @property
    def where(self) -> str:
        """The checkpoint directory, as messages name it."""
        return str(self.path)

    def verify_metadata(self) -> None:
        """Hash the blocks of buffer.hdf5 its HDF5 metadata lies in, unless done already: an
        opening that does not stream the file (``hash_payload=False``) and reads no rows (a
        checkpoint without any) verifies nothing else of it.

        Raises:
            CorruptCheckpointError: a block differs from the manifest (names buffer.hdf5).
        """
        self._reader.verify_metadata()

    def row_source(self, separator: str, batch_dims: int) -> CheckpointRows:
        """The stored rows, for a buffer with this separator and number of batch axes.

        Raises:
            CorruptCheckpointError: the datasets disagree with the manifest or each other.
        """
        manifest = self.manifest
        if manifest is None:
            spec, env_count, count = self._reader.leaves(None, separator, batch_dims)
            return CheckpointRows(self._reader, spec, env_count, count)
        where = self.path / MANIFEST
        if manifest["nested_key_separator"] != separator or manifest["batch_dims"] != batch_dims:
            raise CorruptCheckpointError(
                where,
                f"nested_key_separator {manifest['nested_key_separator']!r} and batch_dims "
                f"{manifest['batch_dims']} differ from the buffer's ({separator!r}, {batch_dims})",
            )
        listed = manifest_spec(self.path, manifest)
        spec, env_count, count = self._reader.leaves(listed, separator, batch_dims)
        if count != manifest["rows"] or (spec and env_count != manifest["env_count"]):
            raise CorruptCheckpointError(
                where,
                f"rows {manifest['rows']} and env_count {manifest['env_count']} differ from "
                f"buffer.hdf5's ({count}, {env_count})",
            )
        return CheckpointRows(self._reader, spec, env_count, count)


def saved_ring_position(config: Field, count: int, capacity: int) -> tuple[int, bool]:
    """The cursor and fullness config.json records for ``count`` stored rows of ``capacity``.

    Old BFM-Zero configs lack ``_idx`` and ``_is_full``: they are derived from the row count,
    as BFM-Zero does.

    Raises:
        StateError: they are malformed or do not describe ``count`` rows (names the field).
    """
    saved_idx = config.optional("_idx", None)
    saved_full = config.optional("_is_full", None)
    if saved_idx.value is None or saved_full.value is None:
        if count > capacity:
            raise config.key("capacity").error(
                f"{count} stored rows exceed the capacity {capacity}"
            )
        return count % capacity, count == capacity
    cursor = saved_idx.integer(minimum=0, maximum=capacity - 1)
    is_full = saved_full.flag()
    held = capacity if is_full else cursor
    if count != held:
        raise saved_idx.error(
            f"{cursor} with _is_full {is_full} means {held} rows, but buffer.hdf5 holds {count}"
        )
    return cursor, is_full


@contextmanager
def open_checkpoint(
    path: str | os.PathLike[str], *, hash_payload: bool = True
) -> Iterator[OpenedCheckpoint]:
    """Open a checkpoint directory for loading, verifying it against its manifest.

    Every file is read through one handle of the directory (:mod:`bufcore.persist.snapshot`),
    so what a load returns comes from one checkpoint even while a save of the same path swaps
    another in; a file that vanished because of such a swap starts the opening over. The small
    JSON files are verified before anything is parsed, and the manifest entry of
    ``buffer.hdf5`` is checked for consistency (block size, block count); hashing threads then
    hash its blocks while the caller reads rows through HDF5, and a mismatch is raised when the
    block exits (so a damaged file never yields a buffer, and hashing overlaps the read).

    Args:
        path: The checkpoint directory.
        hash_payload: False does not hash all of buffer.hdf5: only its metadata is read up front,
            for summaries (``bufcore inspect``) and reads of some leaves or rows
            (``read_leaf``, loads with ``leaves=``); rows read from such an opening are
            verified block by block (:mod:`bufcore.persist.checkpoint.verify`): the manifest
            blocks they and the HDF5 metadata lie in, not the others.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file is missing, malformed, or differs from the manifest; or
            the block raised a :class:`~bufcore.errors.StateError` (reported as the file of its
            part: config.json, state.json or buffer.hdf5).
    """
    root = Path(path)
    for attempt in itertools.count(1):
        with CheckpointSnapshot(root) as snapshot:
            try:
                files = _open_files(snapshot, hash_payload)
                break
            except CorruptCheckpointError:
                if attempt < _ATTEMPTS and snapshot.swapped():
                    continue  # a save replaced the directory while it was being opened
                raise
    manifest, config, state, stream, reader = files
    try:
        try:
            yield OpenedCheckpoint(root, config, state, manifest, reader)
        except StateError as err:
            raise CorruptCheckpointError(root / _FILE_OF[err.part], str(err)) from err
        finally:
            reader.close()
    except BaseException:
        if stream is not None and (damage := stream.finish()) is not None:
            raise damage from None
        raise
    if stream is not None and (damage := stream.finish()) is not None:
        raise damage


_Files = tuple[
    dict[str, Any] | None, dict[str, Any], dict[str, Any], PayloadStream | None, PayloadReader
]


def _open_files(snapshot: CheckpointSnapshot, hash_payload: bool) -> _Files:
    """Read and verify the small files and open buffer.hdf5 (streamed and hashed when
    ``hash_payload``), all through ``snapshot``."""
    root = snapshot.path
    manifest: dict[str, Any] | None = None
    digests: Digests | None = None
    texts: dict[str, bytes] = {}
    if snapshot.has(MANIFEST):
        manifest = parse_json(snapshot.read(MANIFEST), root / MANIFEST)
        check_manifest(root, manifest)
        for name, expected in manifest["files"].items():
            if name != PAYLOAD:
                texts[name] = snapshot.read(name, missing=_LISTED_MISSING)
                verify_bytes(root / name, texts[name], expected)
        digests = payload_digests(root / PAYLOAD, manifest)
    else:
        texts[CONFIG] = snapshot.read(CONFIG)
        if snapshot.has(STATE):
            texts[STATE] = snapshot.read(STATE)
    config = parse_json(texts[CONFIG], root / CONFIG)
    state = parse_json(texts[STATE], root / STATE) if STATE in texts else {}
    bufcore_target = str(config.get("__target__")).startswith("bufcore.")
    if manifest is None and (STATE in texts or bufcore_target):
        # BFM-Zero writes neither state.json nor bufcore targets; bufcore always writes a
        # manifest, so without it nothing could be verified.
        raise CorruptCheckpointError(
            root / MANIFEST, "file is missing; bufcore checkpoints always have one"
        )
    if manifest is not None and config.get("__target__") != manifest["target"]:
        raise CorruptCheckpointError(
            root / CONFIG,
            f"__target__ {config.get('__target__')!r:.80} differs from the manifest's "
            f"{manifest['target']!r}",
        )
    payload = snapshot.open(PAYLOAD, missing=_LISTED_MISSING if manifest else "file is missing")
    stream = None
    try:
        if digests is not None and hash_payload:
            stream = PayloadStream(root / PAYLOAD, os.dup(payload), digests)
    except BaseException:
        os.close(payload)
        raise
    return manifest, config, state, stream, PayloadReader(root / PAYLOAD, payload, stream, digests)


def load_checkpoint(
    path: str | os.PathLike[str],
    build: Callable[[OpenedCheckpoint], T],
    *,
    hash_payload: bool = True,
) -> T:
    """``build(opened)`` on the checkpoint at ``path``, once every checksum held.

    ``build`` turns the saved state into a summary; a :class:`~bufcore.errors.StateError` it
    raises is reported as :func:`open_checkpoint` says. ``hash_payload`` is
    :func:`open_checkpoint`'s.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file is damaged, malformed or inconsistent.
    """
    with open_checkpoint(path, hash_payload=hash_payload) as opened:
        return build(opened)


# A buffer's config.json is a few KB; one this large is no config a buffer wrote.
_PEEK_BYTES = 1 << 20


def holds_buffer_config(path: str | os.PathLike[str]) -> bool:
    """Whether the directory's config.json could be a buffer checkpoint's (DESIGN §3).

    BFM-Zero writes other ``config.json`` files too (the workspace's in its work directory, the
    agent's in ``checkpoint/``). Only a JSON object naming no ``__target__`` is someone else's
    config: a config.json that cannot be read or parsed is left to the loader, whose error
    names the damage, so damage never hides a checkpoint. Like a load, it reads through the
    directory handle (no link followed, a FIFO refused) and at most ~1 MiB, because discovery
    runs it on directories nobody vetted: needed by
    ``tests/test_inspect.py::test_a_fifo_as_config_json_is_taken_as_damage_without_blocking``.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
    """
    with CheckpointSnapshot(Path(path)) as snapshot:
        where = snapshot.path / CONFIG
        try:
            fd = snapshot.open(CONFIG)
        except CorruptCheckpointError:
            return True
        try:
            data = b""
            while len(data) <= _PEEK_BYTES and (chunk := os.read(fd, _PEEK_BYTES)):
                data += chunk
        except OSError:
            return True
        finally:
            os.close(fd)
    if len(data) > _PEEK_BYTES:
        return True
    try:
        config = parse_json(data, where)
    except CorruptCheckpointError:
        return True
    return "__target__" in config

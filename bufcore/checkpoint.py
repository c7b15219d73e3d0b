"""Every byte bufcore puts on disk for dict-family buffers, and the way back.

A checkpoint is a directory (DESIGN §3):

- ``config.json``: the BFM-Zero fields (dataclass fields, ``_idx``, ``_is_full``, ``__target__``),
  so BFM-Zero's own loader can read what bufcore writes and vice versa.
- ``buffer.hdf5``: one contiguous, uncompressed dataset per leaf, named by its key path joined
  with the nested key separator at every depth; rows ``[0, len)`` in physical order.
- ``state.json``: bufcore-only state (generator state, priorities, ...), which BFM-Zero ignores.
- ``manifest.json``: format name and version, the spec, sha256 and size of every other file, and
  a checksum of the manifest itself.

Publishing is atomic: files are written into a sibling staging directory, fsynced, and the
staging directory is swapped with the destination by ``renameat2(RENAME_EXCHANGE)`` (or renamed
into place when there is none), so a reader sees the old or the new checkpoint, never a mix.

Loading verifies the manifest when there is one and never unpickles anything. Buffers do not open
files: they hand a :class:`Payload` to :func:`save_payload` and read from a
:class:`CheckpointReader` in their ``_from_checkpoint`` class method.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import h5py
import numpy as np
import torch

from bufcore.errors import CorruptCheckpointError
from bufcore.storage import RingStorage
from bufcore.tree import (
    KeyPath,
    LeafSpec,
    Spec,
    dtype_from_name,
    format_key_path,
    join_key_path,
    spec_to_json,
    split_key_name,
)

FORMAT_NAME = "bufcore.dict-buffer"
FORMAT_VERSION = 1
CONFIG = "config.json"
PAYLOAD = "buffer.hdf5"
STATE = "state.json"
MANIFEST = "manifest.json"
_BLOCK_BYTES = 64 << 20
_HASH_CHUNK = 8 << 20


# --------------------------------------------------------------------------- payload
@dataclass(frozen=True)
class Payload:
    """What a dict-family buffer saves.

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


def save_payload(path: str | os.PathLike[str], payload: Payload) -> None:
    """Write ``payload`` as a checkpoint directory at ``path``, atomically.

    Raises:
        ValueError: a key contains the nested key separator (checked before any file is touched).
        FileExistsError: ``path`` exists and is not a checkpoint directory.
    """
    names = {p: join_key_path(p, payload.separator) for p in payload.spec}
    for key_path, name in names.items():
        if "/" in name:
            raise ValueError(
                f"key {format_key_path(key_path)} contains '/', which HDF5 reads as a group path"
            )
    publish_directory(Path(path), lambda staging: _write_files(staging, payload, names))


def _write_files(staging: Path, payload: Payload, names: dict[KeyPath, str]) -> None:
    rows = next(iter(payload.arrays.values())).shape[0] if payload.arrays else 0
    env_count = (
        int(next(iter(payload.arrays.values())).shape[1])
        if payload.arrays and payload.batch_dims == 2
        else None
    )
    with h5py.File(staging / PAYLOAD, "w", libver="earliest") as h5:
        for path, leaf in payload.spec.items():
            _write_dataset(h5, names[path], payload.arrays[path], leaf)
    config = {**payload.config, "__target__": payload.target}
    _write_json(staging / CONFIG, config, indent=4)
    _write_json(staging / STATE, payload.state)
    files = {name: seal_file(staging / name) for name in (PAYLOAD, CONFIG, STATE)}
    manifest = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "target": payload.target,
        "nested_key_separator": payload.separator,
        "batch_dims": payload.batch_dims,
        "env_count": env_count,
        "rows": rows,
        "spec": spec_to_json(payload.spec, payload.separator),
        "files": files,
    }
    manifest["checksum"] = _manifest_checksum(manifest)
    _write_json(staging / MANIFEST, manifest, indent=2)
    seal_file(staging / MANIFEST)


def _storage_dtype(dtype: torch.dtype) -> torch.dtype:
    # numpy (and so HDF5 via h5py) has no bfloat16: store its bits as int16.
    return torch.int16 if dtype == torch.bfloat16 else dtype


def _write_dataset(h5: h5py.File, name: str, array: torch.Tensor, leaf: LeafSpec) -> None:
    stored = _storage_dtype(leaf.dtype)
    numpy_dtype = torch.empty(0, dtype=stored).numpy().dtype
    dataset = h5.create_dataset(name, shape=tuple(array.shape), dtype=numpy_dtype)
    row_bytes = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * leaf.dtype.itemsize)
    step = max(1, _BLOCK_BYTES // row_bytes)
    for start in range(0, array.shape[0], step):
        block = array[start : start + step]
        if stored != leaf.dtype:
            block = block.view(stored)
        dataset[start : start + block.shape[0]] = block.detach().cpu().contiguous().numpy()


def _write_json(path: Path, data: Any, *, indent: int | None = None) -> None:
    path.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")


def _manifest_checksum(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(canonical).hexdigest()


# ----------------------------------------------------------------- hashing and fsync
def seal_file(path: Path) -> dict[str, Any]:
    """fsync ``path`` and return its sha256 and size; the two run concurrently.

    Hashing reads the freshly written pages from the page cache while the kernel writes them out,
    so sealing costs about as much as the fsync alone.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        syncer = threading.Thread(target=os.fsync, args=(fd,))
        syncer.start()
        try:
            digest, size = _hash_fd(fd)
        finally:
            syncer.join()
    finally:
        os.close(fd)
    return {"sha256": digest, "size": size}


def _hash_fd(fd: int) -> tuple[str, int]:
    hasher = hashlib.sha256()
    buffer = bytearray(_HASH_CHUNK)
    view = memoryview(buffer)
    size = 0
    offset = 0
    while True:
        n = os.preadv(fd, [buffer], offset)
        if n == 0:
            break
        hasher.update(view[:n])
        size += n
        offset += n
    return hasher.hexdigest(), size


def file_digest(path: Path) -> tuple[str, int]:
    """sha256 and size of ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return _hash_fd(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ atomic publish
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_STAGING = re.compile(r"^\.(?P<name>.+)\.(?:staging|old)-(?P<pid>\d+)-")


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with renameat2; False where the system cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _looks_like_checkpoint(path: Path) -> bool:
    return (path / CONFIG).exists() or (path / MANIFEST).exists() or not any(path.iterdir())


def _remove_stale_staging(parent: Path, name: str) -> None:
    """Remove staging leftovers of this checkpoint name whose writer process is gone."""
    for entry in parent.iterdir():
        match = _STAGING.match(entry.name)
        if not match or match["name"] != name:
            continue
        pid = int(match["pid"])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except PermissionError:
            continue


def publish_directory(path: Path, write: Callable[[Path], None]) -> None:
    """Run ``write(staging)`` in a sibling directory, then put it at ``path`` atomically.

    Raises:
        FileExistsError: ``path`` is a file, or a non-empty directory that is not a checkpoint
            (refusing protects user data from being swapped out and deleted).
    """
    path = path.absolute()
    parent = path.parent
    if path.exists() and (not path.is_dir() or not _looks_like_checkpoint(path)):
        raise FileExistsError(
            f"path: {path} exists and is not a checkpoint directory; refusing to replace it"
        )
    parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(parent, path.name)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.staging-{os.getpid()}-", dir=parent))
    try:
        # mkdtemp makes the directory private (0700); a checkpoint gets the usual umask mode.
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
        write(staging)
        _fsync_dir(staging)
        if not path.exists():
            os.rename(staging, path)
        elif not _exchange(staging, path):
            # No atomic exchange here: move the old one aside first (a brief window without path).
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-{os.getpid()}-", dir=parent))
            os.rename(path, old / "checkpoint")
            os.rename(staging, path)
            shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(parent)
    finally:
        # After an exchange the staging name holds the previous checkpoint.
        shutil.rmtree(staging, ignore_errors=True)


# ----------------------------------------------------------------------- reading
class CheckpointReader:
    """An open checkpoint directory: parsed JSON files and lazy access to the datasets.

    Attributes:
        path: The checkpoint directory.
        config: config.json, ``__target__`` included.
        target: ``config["__target__"]``.
        state: state.json, or ``{}`` for checkpoints written by BFM-Zero.
        manifest: manifest.json, or None for checkpoints written by BFM-Zero.
    """

    def __init__(
        self,
        path: Path,
        config: dict[str, Any],
        state: dict[str, Any],
        manifest: dict[str, Any] | None,
    ) -> None:
        self.path = path
        self.config = config
        self.state = state
        self.manifest = manifest
        target = config.get("__target__")
        if not isinstance(target, str):
            raise CorruptCheckpointError(
                path / CONFIG, f"'__target__' must be a str, got {target!r}"
            )
        self.target = target
        self._h5: h5py.File | None = None

    def _file(self) -> h5py.File:
        if self._h5 is None:
            payload = self.path / PAYLOAD
            if not payload.exists():
                raise CorruptCheckpointError(payload, "file is missing")
            try:
                self._h5 = h5py.File(payload, "r")
            except OSError as err:
                raise CorruptCheckpointError(payload, f"not a readable HDF5 file ({err})") from err
        return self._h5

    def close(self) -> None:
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None

    def leaves(self, separator: str, batch_dims: int) -> tuple[Spec, int | None, int]:
        """The spec, env count and row count of the stored leaves.

        From the manifest when there is one, otherwise inferred from the datasets (splitting
        their names on ``separator``), which is how BFM-Zero's own checkpoints are read.

        Raises:
            CorruptCheckpointError: datasets disagree with the manifest or with each other.
        """
        payload = self.path / PAYLOAD
        h5 = self._file()
        datasets = {name: obj for name, obj in h5.items() if isinstance(obj, h5py.Dataset)}
        groups = [name for name, obj in h5.items() if not isinstance(obj, h5py.Dataset)]
        if groups:
            raise CorruptCheckpointError(payload, f"unexpected groups {groups}; expected datasets")
        self._names: dict[KeyPath, str] = {}
        spec: Spec = {}
        if self.manifest is not None:
            for entry in self.manifest["spec"]:
                path = tuple(entry["key_path"])
                spec[path] = LeafSpec(tuple(entry["shape"]), dtype_from_name(entry["dtype"]))
                self._names[path] = entry["name"]
            unknown = sorted(set(datasets) - set(self._names.values()))
            if unknown:
                raise CorruptCheckpointError(payload, f"datasets {unknown} are not in the manifest")
        else:
            for name, dataset in datasets.items():
                path = split_key_name(name, separator)
                try:
                    dtype = torch.from_numpy(np.empty(0, dtype=dataset.dtype)).dtype
                except TypeError as err:
                    raise CorruptCheckpointError(
                        payload, f"dataset {name!r} has dtype {dataset.dtype}, not a numeric one"
                    ) from err
                if dataset.ndim < batch_dims:
                    raise CorruptCheckpointError(
                        payload,
                        f"dataset {name!r} has shape {dataset.shape}, expected at least "
                        f"{batch_dims} leading axes",
                    )
                spec[path] = LeafSpec(tuple(dataset.shape[batch_dims:]), dtype)
                self._names[path] = name
        lead_shapes = set()
        for path, leaf in spec.items():
            name = self._names[path]
            if name not in datasets:
                raise CorruptCheckpointError(payload, f"dataset {name!r} is missing")
            shape = tuple(datasets[name].shape)
            if shape[batch_dims:] != leaf.shape:
                raise CorruptCheckpointError(
                    payload, f"dataset {name!r} has shape {shape}, expected trailing {leaf.shape}"
                )
            lead_shapes.add(shape[:batch_dims])
        if len(lead_shapes) > 1:
            raise CorruptCheckpointError(
                payload, f"datasets disagree on their leading axes: {sorted(lead_shapes)}"
            )
        lead = lead_shapes.pop() if lead_shapes else (0,) * batch_dims
        env_count = int(lead[1]) if batch_dims == 2 and spec else None
        return spec, env_count, int(lead[0])

    def read_into(self, path: KeyPath, dest: torch.Tensor) -> None:
        """Copy the rows of leaf ``path`` into ``dest`` (any device, may be a strided view)."""
        name = self._names[path]
        dataset = self._file()[name]
        rows = dataset.shape[0]
        row_bytes = max(1, int(np.prod(dataset.shape[1:], dtype=np.int64)) * dataset.dtype.itemsize)
        step = max(1, min(rows, _BLOCK_BYTES // row_bytes))
        block = np.empty((step, *dataset.shape[1:]), dtype=dataset.dtype)
        stored = _storage_dtype(dest.dtype)
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
                self.path / PAYLOAD, f"reading {name!r} failed ({err})"
            ) from err


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise CorruptCheckpointError(path, "file is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptCheckpointError(path, f"not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise CorruptCheckpointError(path, f"expected a JSON object, got {type(data).__name__}")
    return data


def _check_manifest(path: Path, manifest: dict[str, Any]) -> None:
    where = path / MANIFEST
    if manifest.get("checksum") != _manifest_checksum(manifest):
        raise CorruptCheckpointError(where, "its checksum does not match its content")
    if manifest.get("format") != FORMAT_NAME:
        raise CorruptCheckpointError(where, f"unknown format {manifest.get('format')!r}")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CorruptCheckpointError(
            where, f"format_version {version!r}; this bufcore reads up to {FORMAT_VERSION}"
        )
    files = manifest.get("files")
    if not isinstance(files, dict) or CONFIG not in files or PAYLOAD not in files:
        raise CorruptCheckpointError(where, f"'files' must list {CONFIG} and {PAYLOAD}")


def _verify(path: Path, expected: dict[str, Any]) -> None:
    if not path.exists():
        raise CorruptCheckpointError(path, "file listed in the manifest is missing")
    digest, size = file_digest(path)
    if size != expected.get("size"):
        raise CorruptCheckpointError(
            path, f"size {size} bytes, manifest says {expected.get('size')}"
        )
    if digest != expected.get("sha256"):
        raise CorruptCheckpointError(path, "sha256 does not match the manifest")


@contextmanager
def open_checkpoint(path: str | os.PathLike[str]) -> Iterator[CheckpointReader]:
    """Open a checkpoint directory for reading, verifying it against its manifest.

    The small JSON files are verified before anything is parsed; ``buffer.hdf5`` is hashed in a
    background thread while the caller reads it, and a mismatch is raised when the block exits
    (so a damaged file never yields a buffer, and hashing overlaps the read).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file is missing, malformed, or differs from the manifest.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"path: no checkpoint directory at {root}")
    manifest: dict[str, Any] | None = None
    hash_result: list[BaseException | None] = []
    hasher: threading.Thread | None = None
    if (root / MANIFEST).exists():
        manifest = _read_json(root / MANIFEST)
        _check_manifest(root, manifest)
        files: dict[str, Any] = manifest["files"]
        for name, expected in files.items():
            if name != PAYLOAD:
                _verify(root / name, expected)

        def verify_payload() -> None:
            try:
                _verify(root / PAYLOAD, files[PAYLOAD])
                hash_result.append(None)
            except BaseException as err:  # handed to the reading thread
                hash_result.append(err)

        hasher = threading.Thread(target=verify_payload)
        hasher.start()
    try:
        config = _read_json(root / CONFIG)
        state = _read_json(root / STATE) if (root / STATE).exists() else {}
        written_by_bufcore = (root / STATE).exists() or str(config.get("__target__")).startswith(
            "bufcore."
        )
        if manifest is None and written_by_bufcore:
            # BFM-Zero writes neither state.json nor bufcore targets; bufcore always writes a
            # manifest, so without it nothing could be verified.
            raise CorruptCheckpointError(
                root / MANIFEST, "file is missing; bufcore checkpoints always have one"
            )
        reader = CheckpointReader(root, config, state, manifest)
        try:
            yield reader
        finally:
            reader.close()
    except BaseException:
        if hasher is not None:
            hasher.join()
            if hash_result and hash_result[0] is not None:
                raise hash_result[0] from None
        raise
    if hasher is not None:
        hasher.join()
        if hash_result and hash_result[0] is not None:
            raise hash_result[0]


# ------------------------------------------------------------------ target registry
class Checkpointable(Protocol):
    """A buffer class that can be rebuilt from an open checkpoint."""

    @classmethod
    def _from_checkpoint(
        cls, reader: CheckpointReader, device: str | torch.device | None
    ) -> Any: ...


C = TypeVar("C", bound=type)
_TARGETS: dict[str, type] = {}


def register_target(*names: str) -> Callable[[C], C]:
    """Class decorator: ``__target__`` names that load as this class; the first is canonical."""

    def register(cls: C) -> C:
        for name in names:
            _TARGETS[name] = cls
        cls._checkpoint_target = names[0]  # type: ignore[attr-defined]
        return cls

    return register


def resolve_target(target: str, *, where: Path) -> type:
    """The class registered for ``target``, also matching a known class name under a new module.

    Raises:
        ValueError: nothing is registered under that name; the message lists the known ones.
    """
    if target in _TARGETS:
        return _TARGETS[target]
    by_class = {name.rsplit(".", 1)[-1]: cls for name, cls in _TARGETS.items()}
    short = target.rsplit(".", 1)[-1]
    if short in by_class:
        return by_class[short]
    known = ", ".join(sorted(_TARGETS))
    raise ValueError(f"{where}: unknown __target__ {target!r}; known targets: {known}")


def load_checkpoint(
    path: str | os.PathLike[str],
    device: str | torch.device | None = None,
    *,
    expected: type | None = None,
) -> Any:
    """Load whichever buffer ``path`` holds (``expected``: require that class or a subclass).

    Raises:
        ValueError: unknown ``__target__``, or a checkpoint of another class than ``expected``.
        CorruptCheckpointError: see :func:`open_checkpoint`.
    """
    with open_checkpoint(path) as reader:
        cls = resolve_target(reader.target, where=reader.path / CONFIG)
        if expected is not None and not issubclass(cls, expected):
            raise ValueError(
                f"{reader.path}: holds a {cls.__name__} (__target__ {reader.target!r}), "
                f"not a {expected.__name__}; use bufcore.load_buffer to load any kind"
            )
        return cls._from_checkpoint(reader, device)  # type: ignore[attr-defined]


def load_buffer(path: str | os.PathLike[str], device: str | torch.device | None = None) -> Any:
    """Load any bufcore or BFM-Zero buffer checkpoint, dispatching on ``__target__``.

    Args:
        path: The checkpoint directory.
        device: Where to put the tensors; ``None`` keeps the device recorded in config.json.

    Raises:
        ValueError: unknown ``__target__`` (the message lists the known ones).
        CorruptCheckpointError: a file is damaged or differs from the manifest.
        FileNotFoundError: ``path`` is not a directory.
    """
    return load_checkpoint(path, device)


def restore_storage(
    reader: CheckpointReader,
    storage: RingStorage,
    *,
    separator: str,
    cursor: int | None,
    is_full: bool | None,
) -> None:
    """Fill a fresh ``storage`` from the checkpoint's datasets and set its cursor.

    ``cursor``/``is_full`` are config.json's ``_idx``/``_is_full``; old BFM-Zero configs lack
    them, and they are then derived from the row count as BFM-Zero does.

    Raises:
        CorruptCheckpointError: rows, cursor and capacity disagree.
    """
    where = reader.path / CONFIG
    spec, env_count, rows = reader.leaves(separator, storage.batch_dims)
    capacity = storage.capacity
    if rows > capacity:
        raise CorruptCheckpointError(where, f"{rows} stored rows exceed capacity {capacity}")
    if cursor is None or is_full is None:
        cursor, is_full = rows % capacity, rows == capacity
    if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < capacity:
        raise CorruptCheckpointError(
            where, f"_idx must be an int in [0, {capacity}), got {cursor!r}"
        )
    if not isinstance(is_full, bool):
        raise CorruptCheckpointError(where, f"_is_full must be a bool, got {is_full!r}")
    expected_rows = capacity if is_full else cursor
    if rows != expected_rows:
        raise CorruptCheckpointError(
            where,
            f"_idx={cursor} and _is_full={is_full} mean {expected_rows} rows, "
            f"but {PAYLOAD} holds {rows}",
        )
    if spec:
        storage.allocate(spec, env_count)
        for path in spec:
            reader.read_into(path, storage.views[path][:rows])
    storage.restore(cursor=cursor, is_full=is_full)


def storage_arrays(storage: RingStorage) -> dict[KeyPath, torch.Tensor]:
    """The rows ``[0, len)`` of every leaf, in physical order, as views."""
    return {path: view[: len(storage)] for path, view in storage.views.items()}


def config_value(
    config: dict[str, Any], key: str, kind: type | tuple[type, ...], *, where: Path
) -> Any:
    """``config[key]`` checked to be of ``kind``.

    Raises:
        CorruptCheckpointError: the field is missing or of another type.
    """
    if key not in config:
        raise CorruptCheckpointError(where, f"field {key!r} is missing")
    value = config[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise CorruptCheckpointError(where, f"field {key!r} has the wrong type: {value!r}")
    return value

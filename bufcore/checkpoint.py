"""Every byte bufcore puts on disk for dict-family buffers, and the way back.

A checkpoint is a directory (DESIGN §3):

- ``config.json``: the BFM-Zero fields (dataclass fields, ``_idx``, ``_is_full``, ``__target__``),
  so BFM-Zero's own loader can read what bufcore writes and vice versa.
- ``buffer.hdf5``: one contiguous, uncompressed dataset per leaf, named by its key path joined
  with the nested key separator at every depth; rows ``[0, len)`` in physical order.
- ``state.json``: bufcore-only state (generator state, priorities, ...), which BFM-Zero ignores.
- ``manifest.json``: format name and version, the spec, the size and checksums of every other
  file, and a checksum of the manifest itself (over every other field). ``buffer.hdf5`` is listed
  as ``{"size", "block_bytes", "sha256_blocks"}``: one sha256 per ``block_bytes`` block (a power
  of two; the last block may be shorter), so that several threads can hash it at once; the small
  JSON files with one whole-file ``"sha256"``. Manifests of ``format_version`` 1 list one
  whole-file ``"sha256"`` for ``buffer.hdf5`` too; they still load and are verified as such.

Publishing is atomic: files are written into a sibling staging directory, fsynced, and the
staging directory is swapped with the destination by ``renameat2(RENAME_EXCHANGE)`` (or renamed
into place when there is none), so a reader sees the old or the new checkpoint, never a mix.

Both directions stream ``buffer.hdf5`` through a few reusable slots, with the block digests
computed by a small pool of hashing threads from the same slots (consecutive blocks on different
cores: one sha256 stream is slower than the disk): a save packs the strided rows and writes them
straight into the datasets' extents after HDF5 wrote the metadata (:func:`_write_payload`); a
load reads the file once, front to back, copying the datasets' bytes into the rows
(:class:`~bufcore.bytestream.PayloadStream`). Slot and block boundaries are independent. The
byte-stream machinery (slots, the hashing threads, writeback hints, copies into packed rows) lives
in :mod:`bufcore.bytestream`; this module decides what goes where in the file.

Loading verifies the manifest when there is one and never unpickles anything. Buffers do not open
files: they hand a :class:`Payload` to :func:`save_payload` and read from a
:class:`CheckpointReader` in their ``_from_checkpoint`` class method.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import itertools
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
from typing import Any, TypeGuard, TypeVar

import h5py
import numpy as np
import torch

from bufcore.bytestream import (
    Digests,
    PayloadStream,
    SlotRing,
    StreamHasher,
    byte_rows,
    copy_regions,
    copy_tensor,
    file_digest,
    hash_fd,
    hash_file_range,
    pwrite_all,
    row_bytes,
    start_writeback,
)
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
# 2: buffer.hdf5 is checked per block (``block_bytes``, ``sha256_blocks``); 1: one whole-file
# sha256, still read.
FORMAT_VERSION = 2
CONFIG = "config.json"
PAYLOAD = "buffer.hdf5"
STATE = "state.json"
MANIFEST = "manifest.json"
_BLOCK_BYTES = 64 << 20
# Saves and loads move buffer.hdf5 through a few reusable slots of this size: small enough to stay
# in the last-level cache between packing, writing and hashing one, large enough that the
# per-slot Python overhead is negligible. Read at call time, so tests can shrink them.
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
# Both are read at call time, so tests can shrink them.
_HASH_BLOCK_BYTES = 32 << 20
_HASH_THREADS = 2


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
    hasher = _write_payload(staging / PAYLOAD, payload, names)
    try:
        config = {**payload.config, "__target__": payload.target}
        _write_json(staging / CONFIG, config, indent=4)
        _write_json(staging / STATE, payload.state)
        # The payload's last slots are still being hashed; its fsync runs meanwhile.
        files = {PAYLOAD: seal_file(staging / PAYLOAD, functools.partial(_block_entry, hasher))}
    finally:
        hasher.close()
    files.update({name: seal_file(staging / name) for name in (CONFIG, STATE)})
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


def _block_entry(hasher: StreamHasher) -> dict[str, Any]:
    """The manifest entry of buffer.hdf5 from the hasher of its bytes (waits for it)."""
    digests, size = hasher.result()
    return {"size": size, "block_bytes": hasher.block_bytes, "sha256_blocks": digests}


def _storage_dtype(dtype: torch.dtype) -> torch.dtype:
    # numpy (and so HDF5 via h5py) has no bfloat16: store its bits as int16.
    return torch.int16 if dtype == torch.bfloat16 else dtype


def _numpy_dtype(dtype: torch.dtype) -> np.dtype[Any]:
    """The numpy dtype a leaf of ``dtype`` is stored as."""
    return torch.empty(0, dtype=_storage_dtype(dtype)).numpy().dtype


def _write_payload(path: Path, payload: Payload, names: dict[KeyPath, str]) -> StreamHasher:
    """Write buffer.hdf5 (not fsynced); the hasher of its bytes, possibly still running.

    HDF5 writes only the metadata: every dataset is created and allocated, the file closed, and
    then the rows go straight to each dataset's contiguous extent with ``pwrite``. So the whole
    file is known when its first data byte is written, and its blocks are hashed front to back by
    background threads while the rows are still being packed and written, instead of re-reading
    the file afterwards. Writeback starts slot by slot, so the fsync that follows has little left.
    """
    regions = _create_datasets(path, payload, names)
    fd = os.open(path, os.O_RDWR)
    hasher = StreamHasher(_HASH_BLOCK_BYTES, _HASH_THREADS)
    try:
        size = os.fstat(fd).st_size
        if regions and regions[-1][0] + regions[-1][1] > size:
            raise RuntimeError(f"{path}: HDF5 allocated datasets past the end of the file")
        widest = max((row_bytes(payload.arrays[key]) for _, _, key in regions), default=0)
        ring = SlotRing(_SAVE_SLOTS, max(_SLOT_BYTES, widest))
        position = 0
        for offset, nbytes, key in regions:
            hash_file_range(fd, position, offset, hasher)  # HDF5 metadata before this dataset
            _write_dataset(fd, offset, payload.arrays[key], ring, hasher)
            position = offset + nbytes
        hash_file_range(fd, position, size, hasher)
    except BaseException:
        hasher.close()
        raise
    finally:
        os.close(fd)
    return hasher


def _create_datasets(
    path: Path, payload: Payload, names: dict[KeyPath, str]
) -> list[tuple[int, int, KeyPath]]:
    """Create buffer.hdf5 with every dataset allocated but its rows not yet written.

    Returns ``(file offset, bytes, key path)`` of every non-empty dataset, in file order. All
    datasets are created before any is allocated, so the HDF5 metadata sits at the front of the
    file and a loader's metadata reads come from the first bytes it reads anyway.
    """
    created: list[tuple[KeyPath, h5py.Dataset]] = []
    regions: list[tuple[int, int, KeyPath]] = []
    with h5py.File(path, "w", libver="earliest") as h5:
        for key, leaf in payload.spec.items():
            shape = tuple(payload.arrays[key].shape)
            dataset = h5.create_dataset(names[key], shape=shape, dtype=_numpy_dtype(leaf.dtype))
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


def _write_json(path: Path, data: Any, *, indent: int | None = None) -> None:
    path.write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")


def _manifest_checksum(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(canonical).hexdigest()


# ----------------------------------------------------------------- hashing and fsync
def seal_file(path: Path, digest: Callable[[], dict[str, Any]] | None = None) -> dict[str, Any]:
    """fsync ``path`` and return its manifest entry; hashing and fsync run concurrently.

    The entry is the file's whole-file ``sha256`` and ``size``: hashing reads the freshly written
    pages from the page cache while the kernel writes them out, so sealing costs about as much as
    the fsync alone. ``digest``, when given, supplies the entry instead (buffer.hdf5's block
    digests, taken while the file was written); it is awaited during the fsync.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        syncer = threading.Thread(target=os.fsync, args=(fd,))
        syncer.start()
        try:
            if digest is not None:
                entry = digest()
            else:
                sha256, size = hash_fd(fd)
                entry = {"sha256": sha256, "size": size}
        finally:
            syncer.join()
    finally:
        os.close(fd)
    return entry


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
        self._names: dict[KeyPath, str] = {}
        self._batch_dims = 1
        # Set by open_checkpoint when there is a manifest: reads (and hashes) buffer.hdf5 already.
        self._stream: PayloadStream | None = None

    def _file(self) -> h5py.File:
        if self._h5 is None:
            if self._stream is not None:
                # The metadata sits in the first chunk read; h5py then reads it from memory rather
                # than waiting on the disk with the GIL held, which would stall the hashing.
                self._stream.wait_started()
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
        self._names = {}
        self._batch_dims = batch_dims
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
                    # Stored byte order is HDF5's business: rows are read in native order.
                    native = dataset.dtype.newbyteorder("=")
                    dtype = torch.from_numpy(np.empty(0, dtype=native)).dtype
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

    def read_leaves(self, dests: dict[KeyPath, torch.Tensor]) -> None:
        """Copy the rows of every leaf in ``dests`` into it (any device, may be strided views).

        buffer.hdf5 is read once, front to back, and each dataset's bytes go from the chunks read
        straight into its destination; with a manifest, the same chunks are hashed (see
        :func:`open_checkpoint`). A dataset stored otherwise than as one contiguous run of the
        native bytes (chunked, compressed, another byte order) is read through HDF5 instead.

        Raises:
            CorruptCheckpointError: reading failed, or datasets lie outside the file.
        """
        payload = self.path / PAYLOAD
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
        size = payload.stat().st_size
        for (offset, nbytes, _), (following, _, _) in itertools.pairwise(regions):
            if offset + nbytes > following:
                raise CorruptCheckpointError(payload, "datasets overlap")
        if regions and regions[-1][0] + regions[-1][1] > size:
            raise CorruptCheckpointError(payload, f"datasets reach past the end ({size} bytes)")
        stream = self._stream
        if regions:
            owned = stream is None or not stream.consuming
            if stream is None or not stream.consuming:
                # No manifest, or read_into detached the stream already: it cannot be rewound.
                stream = _payload_stream(payload, None)
            try:
                copy_regions(stream.chunks(), regions, payload)
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
            self.read_into(key, dests[key])

    def read_into(self, path: KeyPath, dest: torch.Tensor) -> None:
        """Copy the rows of leaf ``path`` into ``dest`` (any device, may be a strided view)."""
        if self._stream is not None:
            self._stream.detach()  # this reads through HDF5; the stream only hashes from now on
        name = self._names[path]
        dataset = self._file()[name]
        rows = dataset.shape[0]
        width = max(1, int(np.prod(dataset.shape[1:], dtype=np.int64)) * dataset.dtype.itemsize)
        step = max(1, min(rows, _BLOCK_BYTES // width))
        # HDF5 converts the stored byte order to the block's native one while reading.
        block = np.empty((step, *dataset.shape[1:]), dtype=dataset.dtype.newbyteorder("="))
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
    if dataset.id.get_type() != h5py.h5t.py_create(_numpy_dtype(dest.dtype)):
        return None
    offset = dataset.id.get_offset()
    nbytes = dest.numel() * dest.element_size()
    if offset is None or dataset.id.get_storage_size() != nbytes:
        return None
    rows = byte_rows(dest, batch_dims)
    return None if rows is None else (int(offset), nbytes, rows)


def _payload_stream(path: Path, expected: Digests | None) -> PayloadStream:
    """Start reading (and, with ``expected``, hashing) buffer.hdf5 through this module's slots."""
    return PayloadStream(
        path,
        expected,
        slots=_LOAD_SLOTS,
        slot_bytes=_SLOT_BYTES,
        first_read=_FIRST_READ_BYTES,
        threads=_HASH_THREADS,
    )


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


def _is_count(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is an int >= 0 (JSON's true/false are not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _payload_digests(path: Path, manifest: dict[str, Any]) -> Digests:
    """What buffer.hdf5 at ``path`` must hash to, from a checked manifest of any version.

    Version 1 lists one whole-file ``sha256``; later versions ``block_bytes`` (a power of two)
    and ``sha256_blocks``, one digest per block, as many as the size needs.

    Raises:
        CorruptCheckpointError: the entry is malformed (named after buffer.hdf5, whose checks it
            would otherwise skip).
    """
    entry = manifest["files"][PAYLOAD]
    if not isinstance(entry, dict):
        raise CorruptCheckpointError(path, f"manifest entry is not an object: {entry!r}")
    size = entry.get("size")
    if not _is_count(size):
        raise CorruptCheckpointError(path, f"manifest size must be an int >= 0, got {size!r}")
    if manifest["format_version"] < 2:
        digest = entry.get("sha256")
        if not isinstance(digest, str):
            raise CorruptCheckpointError(path, f"manifest sha256 must be a str, got {digest!r}")
        return Digests(size, None, (digest,))
    block = entry.get("block_bytes")
    if not _is_count(block) or block < 1 or block & (block - 1):
        raise CorruptCheckpointError(
            path, f"manifest block_bytes must be a power of two, got {block!r}"
        )
    blocks = entry.get("sha256_blocks")
    if not isinstance(blocks, list) or not all(isinstance(d, str) for d in blocks):
        raise CorruptCheckpointError(path, "manifest sha256_blocks must be a list of str")
    if len(blocks) != -(-size // block):
        raise CorruptCheckpointError(
            path,
            f"manifest lists {len(blocks)} blocks of {block} bytes for {size} bytes "
            f"(expected {-(-size // block)})",
        )
    return Digests(size, block, tuple(blocks))


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

    The small JSON files are verified before anything is parsed, and the manifest entry of
    ``buffer.hdf5`` is checked for consistency (block size, block count); ``buffer.hdf5`` is then
    read once by a background thread while hashing threads hash its blocks and the caller copies
    rows out of the same chunks (:meth:`CheckpointReader.read_leaves`), and a mismatch is raised
    when the block exits (so a damaged file never yields a buffer, and hashing overlaps the read).

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
        manifest = _read_json(root / MANIFEST)
        _check_manifest(root, manifest)
        files: dict[str, Any] = manifest["files"]
        for name, expected in files.items():
            if name != PAYLOAD:
                _verify(root / name, expected)
        stream = _payload_stream(root / PAYLOAD, _payload_digests(root / PAYLOAD, manifest))
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
        reader._stream = stream
        try:
            yield reader
        finally:
            reader.close()
    except BaseException:
        if stream is not None and (damage := stream.finish()) is not None:
            raise damage from None
        raise
    if stream is not None and (damage := stream.finish()) is not None:
        raise damage


# ------------------------------------------------------------------ target registry
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


L = TypeVar("L", bound="Loadable")


class Loadable:
    """Gives a buffer class ``load``: its own checkpoints (or a subclass's), nothing else."""

    @classmethod
    def load(
        cls: type[L], path: str | os.PathLike[str], device: str | torch.device | None = None
    ) -> L:
        """Load a checkpoint of this class (dict buffers: also one written by BFM-Zero).

        Args:
            path: The checkpoint directory.
            device: Where to put the tensors; ``None`` keeps config.json's device.

        Raises:
            ValueError: the checkpoint holds another kind of buffer.
            CorruptCheckpointError: a file is damaged or inconsistent.
        """
        loaded: L = load_checkpoint(path, device, expected=cls)
        return loaded


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
        reader.read_leaves({path: storage.views[path][:rows] for path in spec})
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

"""What a checkpoint directory contains and what its manifest must say, and the checks against it.

``buffer.hdf5``'s layout: one contiguous, uncompressed dataset per leaf, named by its key path
joined with the nested key separator, shape ``[rows, (env,) *trailing]``; bfloat16 is stored as
its int16 bits (numpy, and so h5py, has no bfloat16: :func:`storage_dtype`). This layout is what
BFM-Zero writes and reads. Every dataset is created before any is written, so the HDF5 metadata
sits at the front of the file.

``manifest.json`` lists the format name and version, the buffer's target, separator, batch
axes, env count, row count and spec (one entry per leaf: key path, dataset name, trailing shape,
dtype), the size and checksums of every other file, and a checksum of itself (sha256 over every
other field, canonical JSON). ``buffer.hdf5`` is listed as ``{"size", "block_bytes",
"sha256_blocks"}``: one sha256 per ``block_bytes`` block (a power of two; the last block may be
shorter), so that several threads can hash it at once; the small JSON files with one whole-file
``"sha256"``. Manifests of ``format_version`` 1 list one whole-file ``"sha256"`` for
``buffer.hdf5`` too; they still load and are verified as such.

:func:`replaceable_checkpoint` tells a checkpoint directory (which a save may replace) from any
other. The manifest is checked here (:func:`check_manifest`) before anything else is parsed;
the files are then verified against it by :mod:`bufcore.persist.checkpoint.verify`: the small
JSON files whole, ``buffer.hdf5`` while it streams or block by block, against
:func:`payload_digests`.

Needed by (DESIGN rule 5): the manifest and its self-checksum: ``tests/fault/
test_hostile_checkpoints.py`` (a hand-edited, re-sealed checkpoint is named) and
``tests/fault/test_corruption.py``; per-block digests: ``tests/persist/test_block_reads.py::
test_read_leaf_hashes_only_the_blocks_its_rows_and_the_metadata_lie_in``;
:func:`replaceable_checkpoint`: ``tests/persist/test_replace.py``; the fixed layout (what
BFM-Zero reads): ``tests/persist/test_old_checkpoints.py::
test_an_old_checkpoint_saved_again_is_byte_identical``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import torch

from bufcore.checks import check_int
from bufcore.errors import CorruptCheckpointError
from bufcore.persist.checkpoint.hashing import Digests
from bufcore.storage.ring import MAX_STORAGE_BYTES, STORABLE
from bufcore.tree import KeyPath, LeafSpec, Spec, dtype_from_name, dtype_name, join_key_path

FORMAT_NAME = "bufcore.dict-buffer"
# 2: buffer.hdf5 is checked per block (``block_bytes``, ``sha256_blocks``); 1: one whole-file
# sha256, still read.
FORMAT_VERSION = 2
CONFIG = "config.json"
PAYLOAD = "buffer.hdf5"
STATE = "state.json"
MANIFEST = "manifest.json"
# More axes than any leaf has; bounds what a hand-edited manifest can ask for.
_MAX_AXES = 32
# Deeper than any file bufcore writes (4 levels); anything deeper is refused when parsed, so no
# later recursion (a checksum, an error message's repr) can exhaust the stack.
MAX_JSON_DEPTH = 32
# Rows move between the storage and h5py in contiguous blocks of about this many bytes (a save's
# writes and a load's reads alike).
BLOCK_BYTES = 64 << 20


def storage_dtype(dtype: torch.dtype) -> torch.dtype:
    # numpy (and so HDF5 via h5py) has no bfloat16: store its bits as int16.
    return torch.int16 if dtype == torch.bfloat16 else dtype


def numpy_dtype(dtype: torch.dtype) -> np.dtype[Any]:
    """The numpy dtype a leaf of ``dtype`` is stored as."""
    return torch.empty(0, dtype=storage_dtype(dtype)).numpy().dtype


def build_manifest(
    *,
    names: dict[KeyPath, str],
    target: str,
    separator: str,
    batch_dims: int,
    env_count: int | None,
    rows: int,
    spec: Spec,
    files: dict[str, Any],
) -> dict[str, Any]:
    """The manifest of a checkpoint whose files have the given entries, checksum included.

    ``names`` gives each leaf's dataset name (its key path joined with ``separator``).
    """
    manifest: dict[str, Any] = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "target": target,
        "nested_key_separator": separator,
        "batch_dims": batch_dims,
        "env_count": env_count,
        "rows": rows,
        "spec": [
            {
                "key_path": list(path),
                "name": names[path],
                "shape": list(leaf.shape),
                "dtype": dtype_name(leaf.dtype),
            }
            for path, leaf in spec.items()
        ],
        "files": files,
    }
    manifest["checksum"] = manifest_checksum(manifest)
    return manifest


def manifest_spec(root: Path, manifest: dict[str, Any]) -> tuple[Spec, dict[KeyPath, str]]:
    """The spec the checked manifest of checkpoint ``root`` lists, and each leaf's dataset.

    Each entry needs a non-empty list of str as its key path, the dataset name that path joins
    to, a shape of ints >= 0 and a storable dtype; key paths and names may appear once each.

    Raises:
        CorruptCheckpointError: an entry is malformed (names manifest.json and the entry).
    """
    where = root / MANIFEST
    separator = manifest["nested_key_separator"]
    spec: Spec = {}
    names: dict[KeyPath, str] = {}
    for number, entry in enumerate(manifest["spec"]):
        try:
            if not isinstance(entry, dict):
                raise TypeError(f"expected an object, got {type(entry).__name__}")
            path = entry.get("key_path")
            if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
                raise TypeError(f"key_path must be a non-empty list of str, got {path!r:.80}")
            key_path = tuple(path)
            if entry.get("name") != join_key_path(key_path, separator):
                raise ValueError(
                    f"name must be {join_key_path(key_path, separator)!r}, got "
                    f"{entry.get('name')!r:.80}"
                )
            shape = entry.get("shape")
            if not isinstance(shape, list) or len(shape) > _MAX_AXES:
                raise TypeError(f"shape must be a list of at most {_MAX_AXES} ints")
            dims = tuple(check_int(n, "shape", minimum=0) for n in shape)
            dtype = entry.get("dtype")
            if not isinstance(dtype, str) or dtype_from_name(dtype) not in STORABLE:
                raise ValueError(f"dtype must name a storable dtype, got {dtype!r:.80}")
            if (row := LeafSpec(dims, dtype_from_name(dtype)).nbytes) > MAX_STORAGE_BYTES:
                raise ValueError(
                    f"shape {list(dims)} takes {row} bytes per row, more than any device holds"
                )
            if key_path in spec or entry["name"] in names.values():
                raise ValueError(f"key path {list(key_path)} is listed twice")
        except (TypeError, ValueError) as err:
            raise CorruptCheckpointError(where, f"spec[{number}]: {err}") from err
        spec[key_path] = LeafSpec(dims, dtype_from_name(dtype))
        names[key_path] = entry["name"]
    return spec, names


def manifest_checksum(manifest: dict[str, Any]) -> str:
    """sha256 of every field but ``checksum``, as canonical JSON."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(canonical).hexdigest()


def parse_json(data: bytes, path: Path) -> dict[str, Any]:
    """The JSON object in ``data``, the content of the file ``path``.

    Raises:
        CorruptCheckpointError: not UTF-8 JSON (an int of more digits than Python converts
            included), nested more than ``MAX_JSON_DEPTH`` levels, or not an object.
    """
    try:
        parsed = json.loads(data.decode("utf-8"))
    except ValueError as err:
        # UnicodeDecodeError, JSONDecodeError, and an int beyond sys.get_int_max_str_digits().
        raise CorruptCheckpointError(path, f"not valid JSON ({err})") from err
    except RecursionError:
        raise CorruptCheckpointError(path, "JSON nested too deeply") from None
    if not isinstance(parsed, dict):
        raise CorruptCheckpointError(
            path, f"expected a JSON object, got {type(parsed).__name__}"
        )
    if _depth(parsed) > MAX_JSON_DEPTH:
        raise CorruptCheckpointError(
            path, f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)"
        )
    return parsed


def _depth(value: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), found without recursion."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth) for child in children)
    return deepest


def check_manifest(root: Path, manifest: dict[str, Any]) -> None:
    """Check the manifest of checkpoint ``root``: checksum, format, version, fields and files.

    Every field a load uses is checked for its type and range here, before anything else is
    read; the file list may name only the checkpoint's own files.

    Raises:
        CorruptCheckpointError: any of them is wrong (names manifest.json and the field).
    """
    where = root / MANIFEST
    if manifest.get("checksum") != manifest_checksum(manifest):
        raise CorruptCheckpointError(where, "its checksum does not match its content")
    if manifest.get("format") != FORMAT_NAME:
        raise CorruptCheckpointError(where, f"unknown format {manifest.get('format')!r}")
    version = manifest.get("format_version")
    if not _is_int(version) or version < 1:
        raise CorruptCheckpointError(
            where, f"format_version must be an int >= 1, got {version!r:.80}"
        )
    if version > FORMAT_VERSION:
        raise CorruptCheckpointError(
            where, f"format_version {version!r}; this bufcore reads up to {FORMAT_VERSION}"
        )
    _check_fields(where, manifest)
    files = manifest.get("files")
    if not isinstance(files, dict) or CONFIG not in files or PAYLOAD not in files:
        raise CorruptCheckpointError(where, f"'files' must list {CONFIG} and {PAYLOAD}")
    for name, entry in files.items():
        if name not in (CONFIG, STATE, PAYLOAD):
            raise CorruptCheckpointError(
                where, f"'files' lists {name!r:.80}; a checkpoint holds only {CONFIG}, "
                f"{STATE} and {PAYLOAD}"
            )
        if not isinstance(entry, dict):
            raise CorruptCheckpointError(where, f"files[{name!r}] must be an object")
        if name != PAYLOAD:
            _check_small_entry(where, name, entry)


def _check_fields(where: Path, manifest: dict[str, Any]) -> None:
    """The type and range of every field a load uses besides ``files``."""

    def bad(field: str, expected: str) -> CorruptCheckpointError:
        got = manifest.get(field, "nothing")
        return CorruptCheckpointError(where, f"{field!r} must be {expected}, got {got!r:.80}")

    if not isinstance(manifest.get("target"), str):
        raise bad("target", "a str")
    separator = manifest.get("nested_key_separator")
    if not isinstance(separator, str) or not separator:
        raise bad("nested_key_separator", "a non-empty str")
    batch_dims = manifest.get("batch_dims")
    if not _is_int(batch_dims) or batch_dims not in (1, 2):
        raise bad("batch_dims", "1 or 2")
    env_count = manifest.get("env_count")
    if "env_count" not in manifest:
        raise bad("env_count", "present (null for [time] rows)")
    if manifest["batch_dims"] == 2:
        # A [time, env] buffer never written has no leaves, so no env count yet (DESIGN §2.6).
        never_written = env_count is None and manifest.get("spec") == []
        if not never_written and (not _is_int(env_count) or env_count < 0):
            raise bad("env_count", "an int >= 0 for [time, env] rows (null without leaves)")
    elif env_count is not None:
        raise bad("env_count", "null for [time] rows")
    if not _is_int(manifest.get("rows")) or manifest["rows"] < 0:
        raise bad("rows", "an int >= 0")
    if not isinstance(manifest.get("spec"), list):
        raise bad("spec", "a list of leaf entries")


def _check_small_entry(where: Path, name: str, entry: dict[str, Any]) -> None:
    size = entry.get("size")
    if not _is_int(size) or size < 0:
        raise CorruptCheckpointError(
            where, f"files[{name!r}]['size'] must be an int >= 0, got {size!r:.80}"
        )
    digest = entry.get("sha256")
    if not isinstance(digest, str):
        raise CorruptCheckpointError(
            where, f"files[{name!r}]['sha256'] must be a str, got {digest!r:.80}"
        )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def payload_digests(path: Path, manifest: dict[str, Any]) -> Digests:
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
    try:
        size = check_int(entry.get("size"), "manifest size", minimum=0)
    except (TypeError, ValueError) as err:
        raise CorruptCheckpointError(path, str(err)) from err
    if manifest["format_version"] < 2:
        digest = entry.get("sha256")
        if not isinstance(digest, str):
            raise CorruptCheckpointError(path, f"manifest sha256 must be a str, got {digest!r}")
        return Digests(size, None, (digest,))
    block = entry.get("block_bytes")
    if not _is_int(block) or block < 1 or block & (block - 1):
        raise CorruptCheckpointError(
            path, f"manifest block_bytes: expected a power of two, got {block!r:.80}"
        )
    blocks = entry.get("sha256_blocks")
    if not isinstance(blocks, list) or not all(isinstance(d, str) for d in blocks):
        raise CorruptCheckpointError(path, "manifest sha256_blocks must be a list of str")
    if len(blocks) != -(-size // block):
        raise CorruptCheckpointError(
            path,
            f"manifest sha256_blocks lists {len(blocks)} blocks of block_bytes {block} for size "
            f"{size} bytes (expected {-(-size // block)})",
        )
    return Digests(size, block, tuple(blocks))


def replaceable_checkpoint(path: Path) -> bool:
    """Whether a save may replace (and delete) the directory at ``path``.

    Only an empty directory, a bufcore checkpoint (a manifest whose checksum holds, and no
    entry but the files it lists) or a BFM-Zero buffer directory (``config.json`` naming a
    ``__target__``, and ``buffer.hdf5``, nothing else) may be: anything else may hold a user's
    files, such as an experiment directory with its own ``config.json``.
    """
    entries = {entry.name: entry for entry in path.iterdir()}
    if not entries:
        return True
    if any(entry.is_symlink() or not entry.is_file() for entry in entries.values()):
        return False
    try:
        if MANIFEST in entries:
            manifest = parse_json(entries[MANIFEST].read_bytes(), entries[MANIFEST])
            check_manifest(path, manifest)
            return set(entries) == {MANIFEST, *manifest["files"]}
        if set(entries) != {CONFIG, PAYLOAD}:
            return False
        config = parse_json(entries[CONFIG].read_bytes(), entries[CONFIG])
    except (CorruptCheckpointError, OSError):
        return False
    return isinstance(config.get("__target__"), str)

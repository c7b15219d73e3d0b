"""``manifest.json``: what a checkpoint directory must contain, and the checks against it.

The manifest lists the format name and version, the buffer's target, separator, batch axes, env
count, row count and spec (one entry per leaf: key path, dataset name, trailing shape, dtype),
the size and checksums of every other file, and a checksum of itself (sha256 over every other
field, canonical JSON). ``buffer.hdf5`` is listed as ``{"size", "block_bytes",
"sha256_blocks"}``: one sha256 per ``block_bytes`` block (a power of two; the last block may be
shorter), so that several threads can hash it at once; the small JSON files with one whole-file
``"sha256"``. Manifests of ``format_version`` 1 list one whole-file ``"sha256"`` for
``buffer.hdf5`` too; they still load and are verified as such.

The small JSON files are verified here before anything parses them; ``buffer.hdf5`` is verified
while it streams (:class:`bufcore.persist.stream.PayloadStream`) against :func:`payload_digests`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from bufcore.checks import check_int
from bufcore.errors import CorruptCheckpointError
from bufcore.persist.hashing import Digests, file_digest
from bufcore.tree import KeyPath, LeafSpec, Spec, dtype_from_name, dtype_name

FORMAT_NAME = "bufcore.dict-buffer"
# 2: buffer.hdf5 is checked per block (``block_bytes``, ``sha256_blocks``); 1: one whole-file
# sha256, still read.
FORMAT_VERSION = 2
CONFIG = "config.json"
PAYLOAD = "buffer.hdf5"
STATE = "state.json"
MANIFEST = "manifest.json"


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

    Raises:
        CorruptCheckpointError: an entry is malformed (names manifest.json).
    """
    spec: Spec = {}
    names: dict[KeyPath, str] = {}
    for entry in manifest.get("spec", []):
        try:
            path = tuple(entry["key_path"])
            shape = tuple(check_int(n, "shape", minimum=0) for n in entry["shape"])
            spec[path] = LeafSpec(shape, dtype_from_name(entry["dtype"]))
            names[path] = str(entry["name"])
        except (KeyError, TypeError, ValueError) as err:
            raise CorruptCheckpointError(
                root / MANIFEST, f"malformed spec entry {entry!r:.120} ({err})"
            ) from err
    return spec, names


def manifest_checksum(manifest: dict[str, Any]) -> str:
    """sha256 of every field but ``checksum``, as canonical JSON."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(canonical).hexdigest()


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file that must hold an object.

    Raises:
        CorruptCheckpointError: the file is missing, not JSON, or not an object.
    """
    if not path.exists():
        raise CorruptCheckpointError(path, "file is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptCheckpointError(path, f"not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise CorruptCheckpointError(path, f"expected a JSON object, got {type(data).__name__}")
    return data


def check_manifest(root: Path, manifest: dict[str, Any]) -> None:
    """Check the manifest of checkpoint ``root``: its checksum, format, version and file list.

    Raises:
        CorruptCheckpointError: any of them is wrong (names manifest.json).
    """
    where = root / MANIFEST
    if manifest.get("checksum") != manifest_checksum(manifest):
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
    if not isinstance(block, int) or isinstance(block, bool) or block < 1 or block & (block - 1):
        raise CorruptCheckpointError(
            path, f"manifest block_bytes: expected a power of two, got {block!r}"
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


def verify_file(path: Path, expected: dict[str, Any]) -> None:
    """Check a small file against its manifest entry (``size`` and whole-file ``sha256``).

    Raises:
        CorruptCheckpointError: the file is missing or differs.
    """
    if not path.exists():
        raise CorruptCheckpointError(path, "file listed in the manifest is missing")
    digest, size = file_digest(path)
    if size != expected.get("size"):
        raise CorruptCheckpointError(
            path, f"size {size} bytes, manifest says {expected.get('size')}"
        )
    if digest != expected.get("sha256"):
        raise CorruptCheckpointError(path, "sha256 does not match the manifest")

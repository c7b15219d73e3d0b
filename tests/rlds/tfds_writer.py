"""A tiny writer of TFDS-style RLDS files for the tests, independent of bufcore's reader.

Its CRC-32C is the bitwise definition (not bufcore's lane-parallel one) and its protobuf encoder
is written from the wire format, so a test that reads these files back checks bufcore's reader
against a second implementation. ``tfds_example`` lays an episode out as TFDS does: every step
feature flattened over the steps under ``steps/<path>``, ints and bools as int64 lists, floats as
float lists (packed), episode metadata under its own keys.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _table()


def crc32c_reference(data: bytes) -> int:
    """CRC-32C by its definition (a table built bit by bit)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
    crc = crc32c_reference(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(record: bytes) -> bytes:
    """One TFRecord record: length, its masked CRC, the data, its masked CRC."""
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", masked(length)) + record + struct.pack("<I", masked(record))


# ------------------------------------------------------------------------------- protobuf
def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def feature(values: Any) -> bytes:
    """A ``Feature``: bytes -> bytes_list, floats -> packed float_list, else packed int64_list."""
    if isinstance(values, bytes | str):
        values = [values]
    if isinstance(values, list) and values and isinstance(values[0], bytes | str):
        items = b"".join(
            field(1, v.encode() if isinstance(v, str) else v) for v in values
        )
        return field(1, items)
    array = np.asarray(values).reshape(-1)
    if array.dtype.kind == "f":
        return field(2, field(1, array.astype("<f4").tobytes()))
    return field(3, field(1, b"".join(varint(int(v)) for v in array)))


def features(named: Mapping[str, Any]) -> bytes:
    """A ``Features`` message (a map of name -> Feature)."""
    return b"".join(field(1, field(1, k.encode()) + field(2, feature(v))) for k, v in named.items())


def example(named: Mapping[str, Any]) -> bytes:
    return field(1, features(named))


def sequence_example(context: Mapping[str, Any], lists: Mapping[str, Sequence[Any]]) -> bytes:
    entries = b"".join(
        field(1, field(1, k.encode()) + field(2, b"".join(field(1, feature(v)) for v in steps)))
        for k, steps in lists.items()
    )
    return field(1, features(context)) + field(2, entries)


# ------------------------------------------------------------------------------- TFDS layout
def flat_keys(tree: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}/{key}" if prefix else key
        if isinstance(value, Mapping):
            out.update(flat_keys(value, name))
        else:
            out[name] = value
    return out


def tfds_example(steps: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> bytes:
    """An episode as TFDS writes it: ``steps/<path>`` features flattened over the steps."""
    named = flat_keys(steps, "steps")
    named.update(flat_keys({"episode_metadata": metadata} if metadata else {}, ""))
    return example(named)


def _declaration(value: Any) -> dict[str, Any]:
    if isinstance(value, list | bytes):
        return {"pythonClassName": "tensorflow_datasets.core.features.text_feature.Text",
                "text": {}}
    array = np.asarray(value)
    return {
        "pythonClassName": "tensorflow_datasets.core.features.tensor_feature.Tensor",
        "tensor": {
            "shape": {"dimensions": [str(d) for d in array.shape[1:]]} if array.ndim > 1 else {},
            "dtype": array.dtype.name,
            "encoding": "none",
        },
    }


def _features_dict(tree: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
        "featuresDict": {
            "features": {
                k: _features_dict(v) if isinstance(v, Mapping) else _declaration(v)
                for k, v in tree.items()
            }
        },
    }


def features_json(steps: Mapping[str, Any]) -> dict[str, Any]:
    """``features.json`` for episodes whose (stacked) steps look like ``steps``."""
    return {
        "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
        "featuresDict": {
            "features": {
                "steps": {
                    "pythonClassName": "tensorflow_datasets.core.features.dataset_feature.Dataset",
                    "sequence": {"feature": _features_dict(steps), "length": "-1"},
                }
            }
        },
    }


def write_dataset(
    folder: Path,
    episodes: Sequence[Mapping[str, Any]],
    *,
    shards: int = 2,
    name: str = "demo",
    split: str = "train",
    declare: bool = True,
) -> list[Path]:
    """Write ``episodes`` (dicts of stacked step arrays) as a TFDS directory: the episodes dealt
    in order over ``shards`` files, and ``features.json`` when ``declare``."""
    folder.mkdir(parents=True, exist_ok=True)
    per_shard = -(-len(episodes) // shards)
    paths = []
    for shard in range(shards):
        path = folder / f"{name}-{split}.tfrecord-{shard:05d}-of-{shards:05d}"
        chunk = episodes[shard * per_shard : (shard + 1) * per_shard]
        path.write_bytes(b"".join(frame(tfds_example(steps)) for steps in chunk))
        paths.append(path)
    if declare:
        (folder / "features.json").write_text(json.dumps(features_json(episodes[0])))
    return paths

"""``tf.train.Example`` and ``SequenceExample`` protos decoded without protobuf or TensorFlow.

The schema (tensorflow/core/example/{example,feature}.proto) is small and fixed::

    Example         { Features features = 1; }
    SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
    Features        { map<string, Feature> feature = 1; }
    FeatureLists    { map<string, FeatureList> feature_list = 1; }
    FeatureList     { repeated Feature feature = 1; }
    Feature         { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                   Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }   FloatList { repeated float value = 1; }
    Int64List { repeated int64 value = 1; }

so this decoder walks exactly those messages (no recursion a file could deepen). It follows
the protobuf wire rules a writer may use: packed and unpacked repeated numbers, fields in any
order, unknown fields skipped, a repeated message field merged, the last member of a oneof
winning. Packed floats are read with one ``np.frombuffer`` and packed int64 varints decoded
with numpy in bulk, so large features cost no Python loop per value. Every length is checked
against its enclosing message before it is used; damaged bytes raise :class:`ProtoError` (a
``ValueError``) saying what and where, which the file reader reports as a corrupt file.

Needed by: ``tests/rlds/test_example_proto.py`` (decodes what the protobuf library encodes,
packed and unpacked; refuses truncated and malformed bytes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
FeatureValue = Array | list[bytes]
"""A feature's values: a 1-D float32 or int64 array, or a list of byte strings."""

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
_MAX_VARINT_BYTES = 10
_MASK64 = (1 << 64) - 1


class ProtoError(ValueError):
    """Bytes that are not a well-formed Example or SequenceExample."""


@dataclass(frozen=True)
class ParsedExample:
    """A decoded record.

    Attributes:
        features: An Example's features, or a SequenceExample's context: name -> values.
        feature_lists: A SequenceExample's feature lists (name -> one value list per step);
            None for an Example.
    """

    features: dict[str, FeatureValue]
    feature_lists: dict[str, list[FeatureValue]] | None


def parse_example(data: bytes) -> ParsedExample:
    """Decode a serialized ``Example`` or ``SequenceExample`` (told apart by field 2, the
    feature lists, which only a ``SequenceExample`` has).

    Raises:
        ProtoError: the bytes are truncated or malformed (naming the message and field).
    """
    view = memoryview(data)
    features: dict[str, FeatureValue] = {}
    feature_lists: dict[str, list[FeatureValue]] | None = None
    for field, wire, start, end in _fields(view, 0, len(view), "Example"):
        if field == 1:
            _expect(wire, _LENGTH, "Example.features")
            _map(view, start, end, "Features", _feature, features)
        elif field == 2:
            _expect(wire, _LENGTH, "SequenceExample.feature_lists")
            feature_lists = {} if feature_lists is None else feature_lists
            _map(view, start, end, "FeatureLists", _feature_list, feature_lists)
    return ParsedExample(features, feature_lists)


def _fields(
    view: memoryview, start: int, end: int, message: str
) -> Iterator[tuple[int, int, int, int]]:
    """``(field, wire type, a, b)`` for each field of the message in ``view[start:end]``: a
    varint's value in ``a``, else the bounds ``[a, b)`` of its bytes.

    Raises:
        ProtoError: a truncated field, field number 0, or a group (wire types 3 and 4).
    """
    position = start
    while position < end:
        key, position = _varint(view, position, end, message)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise ProtoError(f"{message}: field number 0 at byte {position}")
        if wire == _VARINT:
            value, position = _varint(view, position, end, message)
            yield field, wire, value, 0
            continue
        if wire == _LENGTH:
            size, position = _varint(view, position, end, message)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
        else:
            raise ProtoError(f"{message}: field {field} has wire type {wire} (groups are not used)")
        if position + size > end:
            raise ProtoError(
                f"{message}: field {field} needs {size} bytes at byte {position}, but the "
                f"message ends at byte {end}"
            )
        yield field, wire, position, position + size
        position += size


def _varint(view: memoryview, position: int, end: int, message: str) -> tuple[int, int]:
    """The varint at ``position`` and the position after it.

    Raises:
        ProtoError: truncated, or longer than 10 bytes.
    """
    value = 0
    for index in range(_MAX_VARINT_BYTES):
        if position >= end:
            raise ProtoError(f"{message}: a varint is truncated at byte {position}")
        byte = view[position]
        position += 1
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return value & _MASK64, position
    raise ProtoError(f"{message}: a varint is longer than {_MAX_VARINT_BYTES} bytes")


def _expect(wire: int, expected: int, where: str) -> None:
    if wire != expected:
        raise ProtoError(f"{where}: wire type {wire}, expected {expected}")


def _map(
    view: memoryview,
    start: int,
    end: int,
    message: str,
    parse_value: Callable[[memoryview, int, int], Any],
    into: dict[str, Any],
) -> None:
    """Add the entries of a ``map<string, V>`` field 1 of ``message`` to ``into`` (a later
    entry for the same key wins, as protobuf merges maps)."""
    for field, wire, entry_start, entry_end in _fields(view, start, end, message):
        if field != 1:
            continue
        _expect(wire, _LENGTH, f"{message} entry")
        key = ""
        value = None
        for part, part_wire, a, b in _fields(view, entry_start, entry_end, f"{message} entry"):
            if part == 1:
                _expect(part_wire, _LENGTH, f"{message} key")
                try:
                    key = bytes(view[a:b]).decode("utf-8")
                except UnicodeDecodeError as err:
                    raise ProtoError(f"{message}: a key is not UTF-8 ({err})") from None
            elif part == 2:
                _expect(part_wire, _LENGTH, f"{message}[{key!r}]")
                value = parse_value(view, a, b)
        into[key] = parse_value(view, 0, 0) if value is None else value


def _feature_list(view: memoryview, start: int, end: int) -> list[FeatureValue]:
    """A ``FeatureList``: one feature per step."""
    steps = []
    for field, wire, a, b in _fields(view, start, end, "FeatureList"):
        if field == 1:
            _expect(wire, _LENGTH, "FeatureList.feature")
            steps.append(_feature(view, a, b))
    return steps


def _feature(view: memoryview, start: int, end: int) -> FeatureValue:
    """A ``Feature``'s values; one with no kind set is an empty float list."""
    value: FeatureValue = np.empty(0, dtype=np.float32)
    for field, wire, a, b in _fields(view, start, end, "Feature"):
        if field == 1:
            _expect(wire, _LENGTH, "Feature.bytes_list")
            value = _bytes_list(view, a, b)
        elif field == 2:
            _expect(wire, _LENGTH, "Feature.float_list")
            value = _numbers(view, a, b, "FloatList", _FIXED32, _floats)
        elif field == 3:
            _expect(wire, _LENGTH, "Feature.int64_list")
            value = _numbers(view, a, b, "Int64List", _VARINT, _varints)
    return value


def _bytes_list(view: memoryview, start: int, end: int) -> list[bytes]:
    values = []
    for field, wire, a, b in _fields(view, start, end, "BytesList"):
        if field == 1:
            _expect(wire, _LENGTH, "BytesList.value")
            values.append(bytes(view[a:b]))
    return values


def _numbers(
    view: memoryview,
    start: int,
    end: int,
    message: str,
    single: int,
    packed: Callable[[memoryview, str], Array],
) -> Array:
    """The repeated numbers of field 1, packed (length-delimited runs) or one per field."""
    parts: list[Array] = []
    singles: list[int] = []  # unpacked values in a row, as raw ints (bits or varints)
    for field, wire, a, b in _fields(view, start, end, message):
        if field != 1:
            continue
        if wire == _LENGTH:
            if singles:
                parts.append(_from_singles(singles, single))
                singles = []
            parts.append(packed(view[a:b], message))
        elif wire == single:
            singles.append(a if single == _VARINT else int.from_bytes(view[a:b], "little"))
        else:
            raise ProtoError(f"{message}.value: wire type {wire}, expected {single} or 2")
    if singles:
        parts.append(_from_singles(singles, single))
    dtype = np.float32 if single == _FIXED32 else np.int64
    return np.concatenate(parts) if parts else np.empty(0, dtype=dtype)


def _from_singles(values: list[int], single: int) -> Array:
    raw = np.array(values, dtype=np.uint32 if single == _FIXED32 else np.uint64)
    return raw.view(np.float32 if single == _FIXED32 else np.int64)


def _floats(chunk: memoryview, message: str) -> Array:
    """Packed little-endian float32 values."""
    if len(chunk) % 4:
        raise ProtoError(f"{message}: packed floats of {len(chunk)} bytes, not a multiple of 4")
    return np.frombuffer(chunk, dtype="<f4").astype(np.float32)


def _varints(chunk: memoryview, message: str) -> Array:
    """Packed varints as int64 (two's complement, as protobuf encodes negative int64)."""
    raw = np.frombuffer(chunk, dtype=np.uint8)
    if len(raw) == 0:
        return np.empty(0, dtype=np.int64)
    ends = np.flatnonzero(raw < 0x80)
    if len(ends) == 0 or ends[-1] != len(raw) - 1:
        raise ProtoError(f"{message}: packed varints end inside a varint")
    starts = np.concatenate([[0], ends[:-1] + 1])
    lengths = ends - starts + 1
    if int(lengths.max()) > _MAX_VARINT_BYTES:
        raise ProtoError(f"{message}: a varint is longer than {_MAX_VARINT_BYTES} bytes")
    shifts = (np.arange(len(raw)) - np.repeat(starts, lengths)) * 7
    parts = (raw & 0x7F).astype(np.uint64) << shifts.astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)

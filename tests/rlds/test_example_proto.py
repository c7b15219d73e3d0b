"""The Example / SequenceExample decoder against what the protobuf library itself encodes
(packed and unpacked numbers), and its refusal of truncated or malformed bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

from bufcore.persist.example_proto import ProtoError, parse_example
from tests.rlds.tfds_writer import example, field, varint

Fd = descriptor_pb2.FieldDescriptorProto


def messages(packed: bool) -> dict[str, Any]:
    """TensorFlow's example.proto built at run time (in a private pool, so it cannot clash with
    a TensorFlow install), its number lists packed or not."""
    package = "packed" if packed else "unpacked"
    file = descriptor_pb2.FileDescriptorProto(
        name=f"bufcore_test_{package}.proto", package=package, syntax="proto3"
    )

    def add(message: Any, name: str, number: int, kind: int, *, repeated: bool = False,
            type_name: str = "", oneof: int | None = None) -> None:
        spec = message.field.add(
            name=name, number=number, type=kind,
            label=Fd.LABEL_REPEATED if repeated else Fd.LABEL_OPTIONAL,
        )
        if type_name:
            spec.type_name = f".{package}.{type_name}"
        if kind in (Fd.TYPE_FLOAT, Fd.TYPE_INT64):
            spec.options.packed = packed
        if oneof is not None:
            spec.oneof_index = oneof

    add(file.message_type.add(name="BytesList"), "value", 1, Fd.TYPE_BYTES, repeated=True)
    add(file.message_type.add(name="FloatList"), "value", 1, Fd.TYPE_FLOAT, repeated=True)
    add(file.message_type.add(name="Int64List"), "value", 1, Fd.TYPE_INT64, repeated=True)
    feature_type = file.message_type.add(name="Feature")
    feature_type.oneof_decl.add(name="kind")
    for number, name in enumerate(("BytesList", "FloatList", "Int64List"), start=1):
        snake = {"BytesList": "bytes_list", "FloatList": "float_list", "Int64List": "int64_list"}
        add(feature_type, snake[name], number, Fd.TYPE_MESSAGE, type_name=name, oneof=0)
    for outer, entry, value_type, field_name in (
        ("Features", "FeatureEntry", "Feature", "feature"),
        ("FeatureLists", "FeatureListEntry", "FeatureList", "feature_list"),
    ):
        if outer == "FeatureLists":
            add(file.message_type.add(name="FeatureList"), "feature", 1, Fd.TYPE_MESSAGE,
                repeated=True, type_name="Feature")
        message = file.message_type.add(name=outer)
        nested = message.nested_type.add(name=entry)
        nested.options.map_entry = True
        add(nested, "key", 1, Fd.TYPE_STRING)
        add(nested, "value", 2, Fd.TYPE_MESSAGE, type_name=value_type)
        add(message, field_name, 1, Fd.TYPE_MESSAGE, repeated=True, type_name=f"{outer}.{entry}")
    add(file.message_type.add(name="Example"), "features", 1, Fd.TYPE_MESSAGE,
        type_name="Features")
    sequence = file.message_type.add(name="SequenceExample")
    add(sequence, "context", 1, Fd.TYPE_MESSAGE, type_name="Features")
    add(sequence, "feature_lists", 2, Fd.TYPE_MESSAGE, type_name="FeatureLists")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
        for name in ("Example", "SequenceExample")
    }


@pytest.mark.parametrize("packed", [True, False])
def test_an_example_encoded_by_protobuf_decodes_to_its_values(packed: bool) -> None:
    message = messages(packed)["Example"]()
    floats = [1.5, -2.25, 3e38, 0.0]
    ints = [0, 1, -1, 2**62, -(2**63), 127, 128, 300]
    message.features.feature["steps/observation"].float_list.value.extend(floats)
    message.features.feature["steps/is_first"].int64_list.value.extend(ints)
    message.features.feature["episode_metadata/name"].bytes_list.value.extend([b"ab", b""])
    parsed = parse_example(message.SerializeToString())
    assert parsed.feature_lists is None
    names = ["episode_metadata/name", "steps/is_first", "steps/observation"]
    assert sorted(parsed.features) == names
    assert parsed.features["steps/observation"].dtype == np.float32
    np.testing.assert_array_equal(parsed.features["steps/observation"], np.float32(floats))
    np.testing.assert_array_equal(parsed.features["steps/is_first"], np.int64(ints))
    assert parsed.features["episode_metadata/name"] == [b"ab", b""]


@pytest.mark.parametrize("packed", [True, False])
def test_a_sequence_example_decodes_to_one_value_list_per_step(packed: bool) -> None:
    message = messages(packed)["SequenceExample"]()
    message.context.feature["episode_id"].int64_list.value.append(7)
    observation = message.feature_lists.feature_list["observation"]
    for step in range(3):
        observation.feature.add().float_list.value.extend([step, step + 0.5])
    parsed = parse_example(message.SerializeToString())
    np.testing.assert_array_equal(parsed.features["episode_id"], [7])
    assert parsed.feature_lists is not None
    steps = parsed.feature_lists["observation"]
    np.testing.assert_array_equal(np.stack(steps), [[0, 0.5], [1, 1.5], [2, 2.5]])  # type: ignore[arg-type]


def test_the_decoded_arrays_are_writable_copies() -> None:
    parsed = parse_example(example({"x": np.float32([1, 2])}))
    values = parsed.features["x"]
    assert isinstance(values, np.ndarray) and values.flags.writeable


def test_an_empty_example_has_no_features() -> None:
    assert parse_example(b"").features == {}


def test_unknown_fields_are_skipped() -> None:
    unknown = varint(9 << 3 | 0) + varint(5) + varint(10 << 3 | 5) + b"\0\0\0\0"
    parsed = parse_example(unknown + example({"x": np.int64([3])}))
    np.testing.assert_array_equal(parsed.features["x"], [3])


def test_a_key_given_twice_keeps_the_last_value_as_protobuf_merges_maps() -> None:
    parsed = parse_example(example({"x": np.int64([1])}) + example({"x": np.int64([2])}))
    np.testing.assert_array_equal(parsed.features["x"], [2])


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (example({"x": np.float32([1, 2])})[:-3], "needs .* bytes at byte"),
        (varint(1 << 3 | 2) + varint(2**40), "needs 1099511627776 bytes"),
        (b"\x80" * 11, "varint is longer than 10 bytes"),
        (b"\x80", "varint is truncated"),
        (varint(1 << 3 | 3), "wire type 3"),
        (varint(0 << 3 | 0) + b"\x00", "field number 0"),
        (varint(1 << 3 | 0) + varint(1), "Example.features: wire type 0, expected 2"),
        (field(1, field(1, field(1, b"\xff\xfe") + field(2, b""))), "a key is not UTF-8"),
        (field(1, field(1, field(1, b"x") + field(2, field(2, field(1, b"abc"))))),
         "packed floats of 3 bytes"),
        (field(1, field(1, field(1, b"x") + field(2, field(3, field(1, b"\x80"))))),
         "packed varints end inside a varint"),
    ],
)
def test_malformed_bytes_raise_a_proto_error_saying_what(data: bytes, problem: str) -> None:
    with pytest.raises(ProtoError, match=problem):
        parse_example(data)


def test_the_test_writer_encodes_an_example_byte_for_byte_as_protobuf_does() -> None:
    message = messages(True)["Example"]()
    message.features.feature["a"].float_list.value.extend([1.0, 2.0])
    message.features.feature["b"].int64_list.value.extend([3, -4])
    message.features.feature["c"].bytes_list.value.extend([b"xy"])
    written = example({"a": np.float32([1, 2]), "b": np.int64([3, -4]), "c": [b"xy"]})
    assert message.SerializeToString(deterministic=True) == written


feature_values = st.one_of(
    st.lists(st.floats(width=32, allow_nan=False), max_size=20).map(
        lambda v: np.array(v, dtype=np.float32)
    ),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20).map(
        lambda v: np.array(v, dtype=np.int64)
    ),
    st.lists(st.binary(max_size=8), min_size=1, max_size=5),
)


@given(st.dictionaries(st.text(min_size=1, max_size=12), feature_values, max_size=6))
def test_any_features_encoded_by_protobuf_decode_to_the_same_values(named: dict[str, Any]) -> None:
    message = messages(True)["Example"]()
    for name, values in named.items():
        target = message.features.feature[name]
        if isinstance(values, list):
            target.bytes_list.value.extend(values)
        elif values.dtype == np.float32:
            target.float_list.value.extend(values.tolist())
        else:
            target.int64_list.value.extend(values.tolist())
    parsed = parse_example(message.SerializeToString()).features
    assert parsed.keys() == named.keys()
    for name, values in named.items():
        if isinstance(values, list):
            assert parsed[name] == values
        else:
            np.testing.assert_array_equal(parsed[name], values)

from __future__ import annotations

import numpy as np
import pytest
import torch

from bufcore.tree import (
    as_key_path,
    flatten,
    join_key_path,
    split_key_name,
    to_tensor,
    unflatten,
)


def test_flatten_and_unflatten_round_trip_nested_dicts() -> None:
    data = {"a": 1, "b": {"c": 2, "d": {"e": 3}}}
    flat = flatten(data)
    assert flat == {("a",): 1, ("b", "c"): 2, ("b", "d", "e"): 3}
    assert unflatten(flat) == data


def test_flatten_refuses_non_string_keys_naming_where() -> None:
    with pytest.raises(TypeError, match=r"\['b'\]"):
        flatten({"b": {3: 1}})


def test_flatten_refuses_an_empty_nested_mapping() -> None:
    with pytest.raises(ValueError, match=r"data\['b'\]: empty mapping"):
        flatten({"a": 1, "b": {}})


def test_flatten_refuses_a_non_mapping() -> None:
    with pytest.raises(TypeError, match="expected a mapping"):
        flatten([1, 2])  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["x", ("x",), ("a", "b", "c")])
def test_as_key_path_accepts_strings_and_tuples(key: str | tuple[str, ...]) -> None:
    path = as_key_path(key)
    assert path == (key if isinstance(key, tuple) else (key,))


@pytest.mark.parametrize("key", [(), 3, ("a", 3), ["a"]])
def test_as_key_path_refuses_other_keys(key: object) -> None:
    with pytest.raises(TypeError, match="key"):
        as_key_path(key)  # type: ignore[arg-type]


@pytest.mark.parametrize("separator", ["-", "|", "::"])
def test_join_and_split_key_names_are_inverse_at_every_depth(separator: str) -> None:
    path = ("obs", "deep", "x")
    assert split_key_name(join_key_path(path, separator), separator) == path


def test_join_key_path_refuses_a_part_containing_the_separator() -> None:
    with pytest.raises(ValueError, match="'last-action'"):
        join_key_path(("obs", "last-action"), "-")


def test_to_tensor_shares_memory_with_numpy_arrays() -> None:
    array = np.zeros((3, 2), dtype=np.float32)
    tensor = to_tensor(array, "data['a']")
    array[0, 0] = 5
    assert tensor[0, 0] == 5


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        ([1.0, 2.0], torch.float32),
        ([1, 2], torch.int64),
        ([True, False], torch.bool),
        (np.arange(3, dtype=np.int16), torch.int16),
    ],
)
def test_to_tensor_converts_lists_and_arrays(value: object, dtype: torch.dtype) -> None:
    assert to_tensor(value, "data['a']").dtype == dtype


@pytest.mark.parametrize(
    "value", ["text", np.array(["a", "b"]), np.array([object()]), [[1, 2], [3]], {1, 2}, None]
)
def test_to_tensor_refuses_non_numeric_leaves_naming_the_key(value: object) -> None:
    with pytest.raises(TypeError, match=r"data\['obs'\]\['x'\]"):
        to_tensor(value, "data['obs']['x']")

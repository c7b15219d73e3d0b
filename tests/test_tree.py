from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bufcore.tree import (
    as_key_path,
    check_cast,
    flatten,
    join_key_path,
    leaf_holding_another,
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


def test_to_tensor_converts_big_endian_arrays_to_native_order_keeping_values() -> None:
    array = np.arange(6, dtype=">f8").reshape(3, 2)
    tensor = to_tensor(array, "data['a']")
    assert tensor.dtype == torch.float64
    assert tensor.tolist() == array.tolist()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]), "nested tensor"),
        (
            lambda: torch.nested.nested_tensor(
                [torch.zeros(2), torch.zeros(3)], layout=torch.jagged
            ),
            "nested tensor",
        ),
        (lambda: torch.zeros(3, 2).to_sparse(), "layout torch.sparse_coo"),
        (lambda: torch.zeros(3, 2).to_sparse_csr(), "layout torch.sparse_csr"),
        (lambda: torch.zeros(3, 2, device="meta"), "meta device"),
    ],
    ids=["nested", "jagged", "sparse_coo", "sparse_csr", "meta"],
)
@pytest.mark.filterwarnings("ignore:.*(nested tensors|Sparse CSR).*:UserWarning")
def test_to_tensor_refuses_tensors_without_dense_data_naming_the_key(
    make: Any, match: str
) -> None:
    with pytest.raises(TypeError, match=rf"data\['x'\]: expected .*{match}"):
        to_tensor(make(), "data['x']")


# ------------------------------------------------------------------------------ check_cast
@pytest.mark.parametrize(
    ("values", "source", "stored", "message"),
    [
        ([-3, 300], torch.int64, torch.int8, r"\[-3, 300\] .* int8 \(range \[-128, 127\]\)"),
        ([255], torch.uint8, torch.int8, r"\[255, 255\] .* int8"),
        ([2**40], torch.int64, torch.int32, r"\[1099511627776, 1099511627776\] .* int32"),
        ([-1], torch.int64, torch.uint8, r"\[-1, -1\] .* uint8 \(range \[0, 255\]\)"),
        ([1e6], torch.float64, torch.float16, r"\[1e\+06, 1e\+06\] .* \(finite range \[-65504"),
        ([-1e39, 0.0], torch.float64, torch.float32, r"\[-1e\+39, 0\] .* float32"),
        ([1e5, float("nan")], torch.float32, torch.float16, r"\[100000, 100000\]"),
        ([3.4e38], torch.float32, torch.bfloat16, r"\[3.4e\+38, 3.4e\+38\] .* bfloat16"),
        ([70000], torch.int32, torch.float16, r"\[70000, 70000\] .* float16"),
        ([65535], torch.uint16, torch.int16, r"\[65535, 65535\] .* int16"),
        ([2**32 - 1], torch.uint32, torch.int32, r"\[4294967295, 4294967295\]"),
        ([2**64 - 1], torch.uint64, torch.int64, r"\[18446744073709551615, 18446744073709551615\]"),
        ([2**40], torch.uint64, torch.int32, r"\[1099511627776, 1099511627776\]"),
    ],
)
def test_check_cast_refuses_values_that_do_not_fit_the_stored_dtype(
    values: list[float], source: torch.dtype, stored: torch.dtype, message: str
) -> None:
    tensor = torch.tensor(values, dtype=source)
    with pytest.raises(ValueError, match=rf"^data\['act'\]: values in {message}"):
        check_cast(tensor, stored, where="data['act']")


@pytest.mark.parametrize(
    ("tensor", "stored"),
    [
        (torch.tensor([-128, 127]), torch.int8),
        (torch.tensor([0, 255], dtype=torch.int16), torch.uint8),
        (torch.tensor([-65504.0, 65504.0], dtype=torch.float64), torch.float16),
        (torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0]), torch.float16),
        (torch.tensor([float("nan")], dtype=torch.float64), torch.float32),
        (torch.tensor([1e-50], dtype=torch.float64), torch.float32),
        (torch.tensor([2**60]), torch.float32),
        (torch.tensor([True, False]), torch.int8),
        (torch.tensor([65504], dtype=torch.int32), torch.float16),
        (torch.zeros(0, 3, dtype=torch.int64), torch.int8),
        (torch.tensor([2**62], dtype=torch.uint64), torch.int64),
        (torch.tensor([7], dtype=torch.uint16), torch.int8),
    ],
)
def test_check_cast_accepts_narrowing_casts_whose_values_fit(
    tensor: torch.Tensor, stored: torch.dtype
) -> None:
    check_cast(tensor, stored, where="data['act']")


@pytest.mark.parametrize(
    ("source", "stored"),
    [(torch.float32, torch.int64), (torch.int64, torch.bool), (torch.float16, torch.uint8)],
)
def test_check_cast_refuses_a_change_of_kind_by_dtype_alone(
    source: torch.dtype, stored: torch.dtype
) -> None:
    with pytest.raises(TypeError, match=r"data\['act'\]: dtype .* cannot be cast safely"):
        check_cast(torch.zeros(2, dtype=source), stored, where="data['act']")


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        ([("a",), ("b",)], None),
        ([("a", "x"), ("a", "y")], None),
        ([("ab",), ("a",)], None),
        ([("a", "x"), ("a",)], (("a",), ("a", "x"))),
        ([("z",), ("o", "s", "t"), ("o", "s")], (("o", "s"), ("o", "s", "t"))),
    ],
)
def test_leaf_holding_another_names_the_leaf_that_is_also_a_group(
    paths: list[tuple[str, ...]], expected: tuple[tuple[str, ...], tuple[str, ...]] | None
) -> None:
    assert leaf_holding_another(paths) == expected


@pytest.mark.parametrize("value", [np.array(2.5, dtype=np.float32), np.array(7),
                                   np.array(1.0, dtype=">f8")])
def test_to_tensor_keeps_a_zero_dimensional_array_a_scalar(value: np.ndarray) -> None:
    converted = to_tensor(value, "x")
    assert converted.shape == () and converted.item() == value.item()

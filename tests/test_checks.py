"""The shared argument validators: one wording, one exception type per kind of mistake."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bufcore.checks import (
    check_choice,
    check_device,
    check_dtype,
    check_int,
    check_real,
    check_seed,
    check_separator,
    check_usable_device,
)


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3), torch.tensor(3)])
def test_check_int_accepts_every_integral_type_and_returns_an_int(value: object) -> None:
    result = check_int(value, "n")
    assert (result, type(result)) == (3, int)


@pytest.mark.parametrize(
    "value",
    [True, np.bool_(True), 1.5, 2.0, "3", None, torch.tensor(1.0), torch.tensor(True),
     torch.tensor([3]), np.array([3])],
)
def test_check_int_refuses_a_non_integral_value_with_a_type_error(value: object) -> None:
    with pytest.raises(TypeError, match="n: expected an int"):
        check_int(value, "n")


@pytest.mark.parametrize(
    ("value", "bounds", "match"),
    [
        (0, {"minimum": 1}, r"n: expected an int >= 1, got 0"),
        (5, {"maximum": 4}, r"n: expected an int <= 4, got 5"),
        (5, {"minimum": 0, "maximum": 4}, r"n: expected an int in \[0, 4\], got 5"),
    ],
)
def test_check_int_refuses_a_value_out_of_bounds_with_a_value_error(
    value: int, bounds: dict[str, int], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        check_int(value, "n", **bounds)


@pytest.mark.parametrize("value", [2, 2.5, np.float32(2.5), torch.tensor(2.5), np.array(2.5)])
def test_check_real_accepts_numbers_and_zero_dimensional_arrays(value: object) -> None:
    assert check_real(value, "x") == pytest.approx(float(value))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, "1", None, [1.0], 1j])
def test_check_real_refuses_a_non_number(value: object) -> None:
    with pytest.raises(TypeError, match="x: expected a number"):
        check_real(value, "x")


@pytest.mark.parametrize("value", [math.nan, math.inf, 10**400])
def test_check_real_refuses_a_value_that_is_not_finite(value: object) -> None:
    with pytest.raises(ValueError, match="x: expected a finite number"):
        check_real(value, "x")


def test_check_real_lets_non_finite_values_through_when_asked() -> None:
    assert math.isinf(check_real(math.inf, "x", finite=False))


@pytest.mark.parametrize(
    ("value", "options", "match"),
    [
        (-1.0, {"minimum": 0.0}, r"x: expected a number >= 0.0"),
        (0.0, {"positive": True}, r"x: expected a number > 0"),
        (math.nan, {"minimum": 0.0, "finite": False}, r"x: expected a number >= 0.0"),
    ],
)
def test_check_real_refuses_a_value_below_its_bound(
    value: float, options: dict[str, object], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        check_real(value, "x", **options)  # type: ignore[arg-type]


def test_check_choice_returns_the_choice_or_lists_the_options() -> None:
    assert check_choice("b", "mode", ("a", "b")) == "b"
    with pytest.raises(ValueError, match=r"mode: expected one of \['a', 'b'\], got 'c'"):
        check_choice("c", "mode", ("a", "b"))


@pytest.mark.parametrize("value", ["cpu", torch.device("cpu"), "cuda:1"])
def test_check_device_accepts_what_torch_reads_as_a_device(value: object) -> None:
    assert isinstance(check_device(value), torch.device)


@pytest.mark.parametrize(("value", "error"), [("gpu", ValueError), (None, TypeError),
                                              (0, TypeError), (True, TypeError)])
def test_check_device_refuses_anything_else(value: object, error: type) -> None:
    with pytest.raises(error, match="device: expected a torch device"):
        check_device(value)


def test_check_seed_accepts_none_and_the_generator_range_only() -> None:
    assert check_seed(None) is None
    assert check_seed(np.int64(-(2**63))) == -(2**63)
    with pytest.raises(ValueError, match="seed"):
        check_seed(2**64)


@pytest.mark.parametrize(("value", "error"), [("", ValueError), ("a/b", ValueError),
                                              (3, TypeError), (None, TypeError)])
def test_check_separator_refuses_empty_slashed_or_non_str_values(
    value: object, error: type
) -> None:
    with pytest.raises(error, match="nested_key_separator"):
        check_separator(value)


def test_check_dtype_accepts_only_the_allowed_torch_dtypes() -> None:
    allowed = {torch.float32, torch.float16}
    assert check_dtype(torch.float16, "dtype", allowed) is torch.float16
    with pytest.raises(ValueError, match=r"dtype: expected one of \['float16', 'float32'\]"):
        check_dtype(torch.complex64, "dtype", allowed)
    with pytest.raises(TypeError, match=r"dtype: expected a torch\.dtype"):
        check_dtype("float32", "dtype", allowed)  # a name is not a dtype


def test_a_device_this_process_cannot_use_is_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match=r"^target: device 'cuda:99' is not usable"):
        check_usable_device(torch.device("cuda:99"), "target")


def test_the_cpu_is_a_usable_device() -> None:
    assert check_usable_device(torch.device("cpu")) == torch.device("cpu")


@pytest.mark.parametrize("value", [1.0, 0.5])
def test_check_real_accepts_a_number_at_most_the_maximum(value: float) -> None:
    assert check_real(value, "x", maximum=1.0) == value


def test_check_real_refuses_a_number_above_the_maximum_naming_the_argument() -> None:
    with pytest.raises(ValueError, match=r"mix: expected a number <= 1.0, got 1.5"):
        check_real(1.5, "mix", maximum=1.0)

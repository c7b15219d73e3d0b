"""EMD -> priority transforms (REFERENCE §7, DESIGN §2 decision 5)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from bufcore.curriculum.priorities import emd_to_priorities

EMDS = [0.1, 0.75, 1.2, 1.3, 3.0]
# Clamped to [0.5, 2.0] and scaled by 2: [1.0, 1.5, 2.4, 2.6, 4.0].
EXPECTED = {
    "lin": [1.0, 1.5, 2.4, 2.6, 4.0],
    "exp": [2.0, 2**1.5, 2**2.4, 2**2.6, 16.0],
    # floor -> bins [1, 1, 2, 2, 4]: two members share each of bins 1 and 2, bin 4 is alone.
    "bin": [0.5, 0.5, 0.5, 0.5, 1.0],
}


# ---------------------------------------------------------------------- priorities
@pytest.mark.parametrize("mode", ["lin", "exp", "bin"])
def test_priorities_of_the_worked_example_in_each_mode(mode: str) -> None:
    priorities = emd_to_priorities(EMDS, mode=mode)
    assert priorities.dtype == torch.float32
    torch.testing.assert_close(priorities, torch.tensor(EXPECTED[mode]))


def test_default_clamp_and_scale_put_linear_priorities_in_one_to_four() -> None:
    priorities = emd_to_priorities(np.linspace(0.0, 10.0, 101), mode="lin")
    assert (priorities.min().item(), priorities.max().item()) == (1.0, 4.0)


def test_default_exp_priorities_span_two_to_sixteen() -> None:
    priorities = emd_to_priorities([0.0, 0.5, 2.0, 100.0], mode="exp")
    assert priorities.tolist() == [2.0, 2.0, 16.0, 16.0]


@pytest.mark.parametrize(
    ("emds", "expected"),
    [
        # Bins 1, 1, 2, 2, 3, 3, 4, 4: EMD [0.5, 1) -> 1, [1, 1.5) -> 2, [1.5, 2) -> 3, >= 2 -> 4.
        ([0.5, 0.9, 1.0, 1.4, 1.5, 1.9, 2.0, 7.0], [0.5] * 8),
        # 1.0 starts bin 2, so it does not share bin 1.
        ([0.5, 0.9, 1.0], [0.5, 0.5, 1.0]),
        # Just below each edge stays in the lower bin.
        ([0.99, 1.49, 1.99, 2.0], [1.0, 1.0, 1.0, 1.0]),
        # Empty bins (2 and 3) receive nothing.
        ([0.5, 0.6, 0.7, 2.5], [1 / 3, 1 / 3, 1 / 3, 1.0]),
        ([1.2], [1.0]),
    ],
)
def test_bin_mode_gives_every_non_empty_bin_equal_mass(
    emds: list[float], expected: list[float]
) -> None:
    torch.testing.assert_close(emd_to_priorities(emds, mode="bin"), torch.tensor(expected))


@given(st.lists(st.floats(0.0, 5.0), min_size=1, max_size=30))
def test_bin_mode_mass_per_bin_is_one(emds: list[float]) -> None:
    priorities = emd_to_priorities(emds, mode="bin")
    bins = torch.floor(emd_to_priorities(emds, mode="lin")).to(torch.int64)
    for b in torch.unique(bins):
        assert priorities[bins == b].sum().item() == pytest.approx(1.0, rel=1e-5)


def test_custom_clamp_and_scale_apply_before_the_mode() -> None:
    priorities = emd_to_priorities([0.0, 1.0, 9.0], min_val=0.25, max_val=3.0, scale=1.0)
    torch.testing.assert_close(priorities, torch.tensor([2**0.25, 2.0, 8.0]))


@pytest.mark.parametrize(
    "emds", [np.array(EMDS), torch.tensor(EMDS, dtype=torch.float64), tuple(EMDS)]
)
def test_priorities_accept_numpy_torch_and_sequences(emds: Any) -> None:
    torch.testing.assert_close(emd_to_priorities(emds), torch.tensor(EXPECTED["exp"]))


@pytest.mark.parametrize(
    ("value", "text"), [(math.nan, "nan"), (-0.1, "-0.1"), (math.inf, "inf"), (-math.inf, "-inf")]
)
@pytest.mark.parametrize("mode", ["lin", "exp", "bin"])
def test_priorities_reject_an_invalid_emd_naming_its_index(
    value: float, text: str, mode: str
) -> None:
    with pytest.raises(ValueError, match=rf"emd\[2\]: expected a finite EMD >= 0, got {text}"):
        emd_to_priorities([0.5, 1.0, value], mode=mode)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"mode": "log"}, r"mode: unsupported prioritization mode 'log'"),
        ({"min_val": 2.5, "max_val": 2.0}, r"min_val: expected min_val <= max_val"),
        ({"scale": 0.0}, r"scale: expected a number > 0"),
        ({"scale": -1.0}, r"scale: expected a number > 0"),
        ({"max_val": math.inf}, r"max_val: expected a finite number"),
        ({"min_val": math.nan}, r"min_val: expected a finite number"),
    ],
)
def test_priorities_reject_invalid_options_naming_them(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        emd_to_priorities(EMDS, **options)


def test_priorities_check_options_before_the_emd_values() -> None:
    with pytest.raises(ValueError, match="mode"):
        emd_to_priorities([math.nan], mode="log")


@pytest.mark.parametrize(
    ("emds", "match"),
    [(np.zeros((2, 2)), r"emd: expected a 1-D"), ([], r"emd: expected at least one")],
)
def test_priorities_reject_a_malformed_emd_array(emds: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        emd_to_priorities(emds)


def test_priorities_reject_a_bool_option() -> None:
    with pytest.raises(TypeError, match="scale"):
        emd_to_priorities(EMDS, scale=True)



# ------------------------------------------------- float32 range of the priorities
@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"scale": 100.0}, r"scale: in mode 'exp' the largest priority, 2 \*\* \(max_val \* "
                           r"scale\) = 2 \*\* 200\.0, exceeds float32 max"),
        ({"max_val": 1e39}, r"max_val: 1e\+39 exceeds float32 max"),
        ({"max_val": 1e300, "mode": "lin"}, r"max_val: 1e\+300 exceeds float32 max"),
        ({"max_val": 1e38, "scale": 10.0, "mode": "lin"}, r"scale: max_val \* scale = .* "
                                                          r"exceeds float32 max"),
        ({"max_val": 1e38, "scale": 10.0, "mode": "bin"}, r"scale: max_val \* scale"),
        ({"scale": 1e39, "mode": "bin"}, r"scale: 1e\+39 exceeds float32 max"),
        ({"scale": 1e-50, "mode": "lin"}, r"scale: 1e-50 rounds to 0 in float32"),
    ],
)
def test_options_whose_float32_priorities_would_overflow_are_refused_naming_them(
    options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        emd_to_priorities([1.0, 2.0], **options)


def test_the_largest_exp_scale_below_the_float32_limit_gives_finite_priorities() -> None:
    priorities = emd_to_priorities([0.0, 2.0], scale=63.99)
    assert bool(torch.isfinite(priorities).all())


def test_a_negative_min_val_is_refused() -> None:
    with pytest.raises(ValueError, match=r"min_val: expected a number >= 0"):
        emd_to_priorities(EMDS, min_val=-1.0, max_val=-0.5, mode="lin")


@pytest.mark.parametrize("mode", ["lin", "exp", "bin"])
@pytest.mark.parametrize(
    "emds", [[1e300, 1.0], np.array([1e300, 1.0]), torch.tensor([1e300, 1.0], dtype=torch.float64)],
    ids=["python-floats", "numpy-float64", "torch-float64"],
)
def test_a_finite_emd_beyond_float32_range_gets_the_max_val_priority(emds: Any, mode: str) -> None:
    expected = emd_to_priorities([2.0, 1.0], mode=mode)
    torch.testing.assert_close(emd_to_priorities(emds, mode=mode), expected)


def test_bin_mode_keeps_bins_apart_beyond_the_int64_range() -> None:
    # floor(p) of 1e20 and 2e20 is past 2**63: as int64 both would land in one bin.
    priorities = emd_to_priorities([1e20, 2e20], max_val=1e30, scale=1.0, mode="bin")
    assert priorities.tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    "emds", [torch.tensor([1.0 + 1j]), np.array([1.0 + 1j]), np.array([True])],
    ids=["torch-complex", "numpy-complex", "numpy-bool"],
)
def test_complex_or_bool_emds_are_refused(emds: Any) -> None:
    with pytest.raises(TypeError, match="emd: expected real numbers"):
        emd_to_priorities(emds)

"""app.query without Streamlit: which query values no widget can take."""

from __future__ import annotations

import pytest

from app.query import infinite_values


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "+INF", "1e999", " inf "])
def test_a_value_that_reads_as_an_infinite_number_is_reported(value: str) -> None:
    assert infinite_values({"lab_batch": value}) == ["lab_batch"]


@pytest.mark.parametrize("value", ["nan", "5", "-3", str(2**70), "1e308", "abc", "", "../etc"])
def test_finite_numbers_nan_and_words_are_left_to_streamlit(value: str) -> None:
    assert infinite_values({"lab_batch": value}) == []


def test_kept_keys_are_never_reported() -> None:
    assert infinite_values({"open_path": "inf", "z_points": "inf"}, keep=["open_path"]) == [
        "z_points"
    ]


def test_a_value_that_is_not_a_str_is_refused_naming_its_key() -> None:
    with pytest.raises(TypeError, match="lab_seed"):
        infinite_values({"lab_seed": 5})  # type: ignore[dict-item]

"""The demo-run fingerprint that pins the demo across machines: float rounding is not a
difference, a change of the run is (tests.fixtures.demo_digests)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bufcore.runs.demo import run_demo
from tests.fixtures.demo_digests import (
    ABS_TOL,
    REL_TOL,
    assert_close,
    leaf_fingerprint,
    run_fingerprint,
)
from tests.support import TINY_DEMO


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run = tmp_path_factory.mktemp("fingerprint") / "run"
    run_demo(run, TINY_DEMO)
    return run_fingerprint(run)


def test_a_float_within_the_tolerance_is_not_a_difference() -> None:
    assert_close({"v": [1.0 + REL_TOL / 2, 0.1234]}, {"v": [1.0, 0.1234 + ABS_TOL / 2]})


def test_a_float_beyond_the_tolerance_is_named_by_its_path() -> None:
    with pytest.raises(AssertionError, match=r"records\[0\]/v"):
        assert_close([{"v": 1.01}], [{"v": 1.0}], "records")


@pytest.mark.parametrize(("got", "expected"), [(1, 1.0), ("a", "b"), ([1], [1, 2]),
                                               ({"a": 1}, {"b": 1}), (True, 1)])
def test_anything_but_float_rounding_is_a_difference(got: Any, expected: Any) -> None:
    with pytest.raises(AssertionError):
        assert_close(got, expected)


def test_two_nans_agree() -> None:
    assert_close([float("nan")], [float("nan")])


@pytest.mark.parametrize("rows", [2, 3, 30])
def test_reordered_rows_of_a_float_leaf_are_a_difference(rows: int) -> None:
    values = np.linspace(-1.0, 2.0, rows * 4, dtype=np.float32).reshape(rows, 4)
    with pytest.raises(AssertionError):
        assert_close(leaf_fingerprint(values[::-1].copy()), leaf_fingerprint(values))


def test_a_run_agrees_with_its_own_fingerprint(tiny: dict[str, Any], tmp_path: Path) -> None:
    run_demo(tmp_path / "run", TINY_DEMO)
    assert_close(run_fingerprint(tmp_path / "run"), tiny)


def test_a_run_with_another_discount_is_a_difference(
    tiny: dict[str, Any], tmp_path: Path
) -> None:
    run_demo(tmp_path / "run", dataclasses.replace(TINY_DEMO, gamma=TINY_DEMO.gamma - 0.01))
    with pytest.raises(AssertionError, match="records"):
        assert_close(run_fingerprint(tmp_path / "run")["records"], tiny["records"], "records")

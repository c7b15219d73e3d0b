"""Compare: aligning two sides per motion, shared length bins, and the page on two runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from app.compare import (
    align,
    length_fractions,
    motion_lengths,
    motion_priorities,
    shared_length_bins,
)
from app.trajectory_stats import MotionLengths
from bufcore.inspect import WindowSettings
from tests.app.conftest import Dashboard


def settings(priorities: list[float] | None) -> WindowSettings:
    return WindowSettings(8, 1, "trajectory", ("end",), ("motion",),
                          None if priorities is None else np.array(priorities), None)


def test_align_takes_the_union_of_motion_ids_with_nan_where_a_side_lacks_one() -> None:
    ids, a, b = align({0: 0.5, 2: 0.5}, {2: 1.0, 3: 0.0})
    assert ids.tolist() == [0, 2, 3]
    np.testing.assert_array_equal(a, [0.5, 0.5, np.nan])
    np.testing.assert_array_equal(b, [np.nan, 1.0, 0.0])


def test_align_of_nothing_is_empty() -> None:
    ids, a, b = align(None, None)
    assert ids.size == a.size == b.size == 0


@pytest.mark.parametrize(("a", "b"), [([1], [1]), ([1, 2], [7]), ([3, 500], [40, 1000])])
def test_shared_bins_cover_both_samples(a: list[int], b: list[int]) -> None:
    edges = shared_length_bins(np.array(a), np.array(b))
    assert edges[0] <= min(a + b) and edges[-1] > max(a + b) and len(edges) <= 62
    assert length_fractions(np.array(a), edges).sum() == pytest.approx(1.0)


def test_shared_bins_of_two_empty_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        shared_length_bins(np.array([]), np.array([]))


def test_motion_priorities_sum_the_trajectories_of_a_motion_and_normalise() -> None:
    motions = MotionLengths(np.array([5, 5, 9]), np.array([10, 20, 30]))
    assert motion_priorities(settings([1.0, 1.0, 2.0]), motions) == {5: 0.5, 9: 0.5}


def test_motion_priorities_refuse_a_buffer_without_one_per_trajectory() -> None:
    motions = MotionLengths(np.array([5, 9]), np.array([10, 20]))
    with pytest.raises(ValueError, match="one per trajectory"):
        motion_priorities(settings([1.0]), motions)
    with pytest.raises(ValueError, match="saved none"):
        motion_priorities(settings(None), motions)


def test_motion_lengths_sum_the_episodes_of_a_motion() -> None:
    assert motion_lengths(MotionLengths(np.array([1, 1, 2]), np.array([3, 4, 5]))) == {1: 7, 2: 5}


def test_the_page_compares_two_runs_named_in_the_url(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    shutil.copytree(demo_run, tmp_path / "a")
    shutil.copytree(demo_run, tmp_path / "b")
    at = dashboard("compare", roots=(tmp_path,), query={"cmp_a": "b", "cmp_b": "a"})
    assert not at.exception
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == ("b", "a")
    assert not at.info  # every section has data on both sides
    assert len(at.get("plotly_chart")) == 5


def test_a_reprioritized_version_can_be_compared_with_the_original(
    dashboard: Dashboard, run_copy: Path
) -> None:
    from app.curriculum_view import save_reprioritized

    expert = run_copy / "checkpoint" / "buffers" / "expert"
    count = len(__import__("bufcore").load_buffer(expert).motion_ids)
    saved = save_reprioritized(expert, run_copy, "lin", np.arange(1, count + 1, dtype=np.float64))
    assert saved == run_copy / "reprioritized" / "expert-lin-1"
    at = dashboard("compare", run_copy,
                   query={"cmp_b_expert": "reprioritized/expert-lin-1"})
    assert not at.exception
    assert at.selectbox(key="cmp_b_expert").value == "reprioritized/expert-lin-1"
    assert any("B minus A" in str(chart.proto.spec) for chart in at.get("plotly_chart"))


def test_a_side_without_an_expert_buffer_says_what_is_missing(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    shutil.copytree(demo_run / "checkpoint" / "buffers" / "z", tmp_path / "zonly")
    shutil.copytree(demo_run, tmp_path / "run")
    at = dashboard("compare", roots=(tmp_path,), query={"cmp_a": "run", "cmp_b": "zonly"})
    assert not at.exception
    assert any("expert buffer with saved priorities" in i.value for i in at.info)


def test_comparing_a_run_with_itself_says_so(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("compare", demo_run)
    assert not at.exception
    assert any("A and B are the same" in i.value for i in at.info)

"""Compare: aligning two sides per motion, shared length bins, and the page on two runs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from app.compare import (
    align,
    comparable,
    latest_other,
    length_fractions,
    motion_lengths,
    motion_priorities,
    shared_length_bins,
)
from app.sources import Source
from app.trajectory_stats import MotionLengths
from bufcore.inspect import BUFFER_CHECKPOINT, RUN_CHECKPOINT, RUN_DIRECTORY, WindowSettings
from tests.app.conftest import Dashboard


def titles(at: AppTest) -> list[str]:
    """The titles of the Vega-Lite charts drawn, in order; the page draws no Plotly chart."""
    assert not at.get("plotly_chart")
    return [json.loads(chart.proto.spec)["title"]["text"] for chart in at.get("vega_lite_chart")]


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
    assert titles(at) == ["Online trajectory lengths", "Expert rows per motion",
                          "Normalised priority per motion", "Priority change, B minus A",
                          "EMD per motion"]


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
    assert "Priority change, B minus A" in titles(at)


def test_a_side_without_an_expert_buffer_says_what_is_missing(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    shutil.copytree(demo_run / "checkpoint" / "buffers" / "z", tmp_path / "zonly")
    shutil.copytree(demo_run, tmp_path / "run")
    at = dashboard("compare", roots=(tmp_path,), query={"cmp_a": "run", "cmp_b": "zonly"})
    assert not at.exception
    assert any("expert buffer with saved priorities" in i.value for i in at.info)


def test_comparing_a_run_with_itself_says_so(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("compare", demo_run, query={"cmp_a": "demo", "cmp_b": "demo"})
    assert not at.exception
    assert any("A and B are the same" in i.value for i in at.info)


def test_b_starts_on_the_runs_latest_earlier_checkpoint_under_make_demo(
    dashboard: Dashboard, run_copy: Path
) -> None:
    # make demo: the run named, its parent the root.
    at = dashboard("compare", run_copy, roots=(run_copy.parent,))
    assert not at.exception
    assert at.selectbox(key="cmp_a").value == "demo"
    assert at.selectbox(key="cmp_b").value == "demo/checkpoints/step-000030"
    assert "step-000012" in " ".join(at.selectbox(key="cmp_b").options)
    assert not [i for i in at.info if "same run" in i.value]
    assert len(titles(at)) == 5


def test_b_starts_on_the_run_when_a_is_one_of_its_earlier_checkpoints(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("compare", run_copy, roots=(run_copy.parent,),
                   query={"cmp_a": "demo/checkpoints/step-000012"})
    assert not at.exception
    assert at.selectbox(key="cmp_b").value == "demo"


def test_a_path_opened_in_the_sidebar_is_a_and_b_the_latest_other_of_its_run(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("compare", roots=(run_copy.parent,))
    at.sidebar.text_input(key="open_path").input("demo/checkpoints/step-000030").run()
    assert not at.exception
    assert at.selectbox(key="cmp_a").value == "demo/checkpoints/step-000030"
    assert at.selectbox(key="cmp_b").value == "demo"


def test_b_starts_on_the_newest_expert_saved_from_the_curriculum_page(
    dashboard: Dashboard, run_copy: Path
) -> None:
    expert = run_copy / "checkpoint" / "buffers" / "expert"
    for version in ("expert-exp-1", "expert-lin-1"):
        shutil.copytree(expert, run_copy / "reprioritized" / version)
    newest = run_copy / "reprioritized" / "expert-exp-1"
    os.utime(newest, (newest.stat().st_atime, newest.stat().st_mtime + 60))
    at = dashboard("compare", run_copy, roots=(run_copy.parent,))
    assert not at.exception
    assert at.selectbox(key="cmp_a").value == at.selectbox(key="cmp_b").value == "demo"
    assert at.selectbox(key="cmp_a_expert").value == "expert"
    assert at.selectbox(key="cmp_b_expert").value == "reprioritized/expert-exp-1"


def test_comparable_lists_each_runs_kept_checkpoints_newest_first_after_it(
    tmp_path: Path,
) -> None:
    run = tmp_path / "demo"
    for step in (12, 150, 300):
        (run / "checkpoints" / f"step-{step:06d}").mkdir(parents=True)
    other = Source(tmp_path / "other", BUFFER_CHECKPOINT, "other")
    listed = comparable([Source(run, RUN_DIRECTORY, "demo"), other], None)
    assert [s.label for s in listed] == [
        "demo", "demo/checkpoints/step-000300", "demo/checkpoints/step-000150",
        "demo/checkpoints/step-000012", "other",
    ]
    assert {s.kind for s in listed[1:4]} == {RUN_CHECKPOINT}


def test_comparable_puts_a_typed_source_first_unless_it_is_listed(tmp_path: Path) -> None:
    listed = [Source(tmp_path / "a", BUFFER_CHECKPOINT, "a")]
    typed = Source(tmp_path / "b", BUFFER_CHECKPOINT, "b typed")
    assert [s.label for s in comparable(listed, typed)] == ["b typed", "a"]
    assert [s.label for s in comparable(listed, listed[0])] == ["a"]


@pytest.mark.parametrize(("a", "expected"), [(0, 1), (1, 0), (2, 0), (3, None)])
def test_latest_other_is_the_newest_other_checkpoint_of_as_run(
    tmp_path: Path, a: int, expected: int | None
) -> None:
    run = tmp_path / "demo"
    choices = [
        Source(run, RUN_DIRECTORY, "demo"),
        Source(run / "checkpoints" / "step-000150", RUN_CHECKPOINT, "150"),
        Source(run / "checkpoints" / "step-000012", RUN_CHECKPOINT, "12"),
        Source(tmp_path / "other", RUN_DIRECTORY, "other"),
    ]
    assert latest_other(choices, a) == expected


def test_b_follows_a_to_the_latest_other_checkpoint_of_as_new_run(
    dashboard: Dashboard, run_copy: Path, widget_warnings: list[str]
) -> None:
    at = dashboard("compare", run_copy, roots=(run_copy.parent,))
    at.selectbox(key="cmp_a").select("demo/checkpoints/step-000012").run()
    assert not at.exception
    assert at.selectbox(key="cmp_b").value == "demo"
    assert widget_warnings == []


def test_a_b_picked_by_hand_stays_while_a_does(dashboard: Dashboard, run_copy: Path) -> None:
    at = dashboard("compare", run_copy, roots=(run_copy.parent,))
    at.selectbox(key="cmp_b").select("demo/checkpoints/step-000012").run()
    at.run()
    assert at.selectbox(key="cmp_b").value == "demo/checkpoints/step-000012"


def test_each_side_says_the_step_and_round_of_its_checkpoint(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("compare", run_copy, roots=(run_copy.parent,))
    captions = [c.value for c in at.caption]
    assert "A: checkpoint at step 60, round 2" in captions
    assert "B: checkpoint at step 30, round 1" in captions

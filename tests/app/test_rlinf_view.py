"""The RLinf views' plain functions: window and cache over the id list, episode segments,
bounded reads, draws and their frequencies, the window's history, the export snippet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.rlinf_figures import (
    MAX_BARS,
    SEGMENT_NAMES,
    history_figure,
    id_strip_figure,
    landing_figure,
    samples_figure,
    segment_histogram,
    segments_figure,
)
from app.rlinf_view import (
    ABSENT,
    CACHED,
    MAX_READ,
    OLDER,
    STATES,
    WINDOW,
    Segments,
    batch_columns,
    draw_many,
    episode_segments,
    frequencies,
    overview_items,
    read_positions,
    rlinf_problems,
    snippet,
    states,
    weights_rows,
    window_history,
    window_table,
)
from bufcore import TrajectoryReplayBuffer
from bufcore.inspect import RLinfIndex, read_rlinf_index, summarize_rlinf_directory
from tests.buffers.rlinf.rlinf_data import trajectory, write_rlinf_directory


@pytest.fixture
def index(tmp_path: Path) -> RLinfIndex:
    """Six trajectories (T = 1..6, B = 2), files for all but id 4; weights a, a, b, b, c, c."""
    write_rlinf_directory(
        tmp_path / "d",
        [trajectory(i, i + 1, 2, weights="abc"[i // 2]) for i in range(6)],
        with_files=[0, 1, 2, 3, 5],
    )
    return read_rlinf_index(tmp_path / "d")


def test_states_mark_absent_files_and_the_newest_present_as_window_and_cache(
    index: RLinfIndex,
) -> None:
    assert states(index, window=3, cache=1).tolist() == [OLDER, OLDER, WINDOW, WINDOW, ABSENT,
                                                         CACHED]
    assert states(index, window=0, cache=0).tolist() == [WINDOW] * 4 + [ABSENT, WINDOW]


@pytest.mark.parametrize(
    ("flags", "whole", "first", "running"),
    [
        ([[0], [0], [0]], [], [], [3]),
        ([[1], [0], [0]], [], [1], [2]),
        ([[0], [0], [1]], [], [3], []),
        ([[0], [1], [0], [0], [1], [0]], [3], [2], [1]),
        ([[1, 0], [1, 0], [0, 1]], [1], [1, 3], [1]),
    ],
)
def test_episode_segments_cut_each_env_at_its_end_flags(
    flags: list[list[int]], whole: list[int], first: list[int], running: list[int]
) -> None:
    seg = episode_segments(np.array(flags, dtype=bool))
    assert (seg.whole.tolist(), seg.first.tolist(), seg.running.tolist()) == (
        whole, first, running)


def test_episode_segments_refuse_a_flag_vector() -> None:
    with pytest.raises(ValueError, match=r"expected \[T, B\]"):
        episode_segments(np.zeros(4, dtype=bool))


@pytest.mark.parametrize(
    ("count", "last", "total", "expected"),
    [
        (20, 99, 100, list(range(80, 100))),
        (20, 5, 100, list(range(0, 6))),
        (0, 3, 10, [3]),
        (5, 500, 10, list(range(5, 10))),
        (5, -3, 10, [0]),
        (5, 3, 0, []),
    ],
)
def test_read_positions_are_clamped_to_the_list(
    count: int, last: int, total: int, expected: list[int]
) -> None:
    assert read_positions(count, last, total).tolist() == expected


def test_read_positions_never_exceed_the_bound() -> None:
    assert len(read_positions(10 * MAX_READ, 10**6, 10**6)) == MAX_READ


def test_the_window_table_weighs_each_trajectory_by_its_rows(index: RLinfIndex) -> None:
    ids, share = window_table(index, 3)
    assert ids.tolist() == [2, 3, 5]
    assert share.tolist() == pytest.approx([6 / 26, 8 / 26, 12 / 26])


def test_frequencies_count_draws_per_window_trajectory(index: RLinfIndex) -> None:
    draws = draw_many(index, window=3, count=500, seed=0, repeats=4)
    result = frequencies(index, 3, draws)
    assert result.labels.tolist() == [2, 3, 5]
    assert result.observed.sum() == 2000
    assert (result.batches, result.draws, result.valid) == (4, 2000, 26)
    assert result.hit == 26  # 2000 draws hit every one of 26 rows
    assert result.test.p_value > 1e-6


def test_draw_many_is_one_stream_from_the_seed(index: RLinfIndex) -> None:
    once = draw_many(index, window=0, count=8, seed=3, repeats=2)
    again = draw_many(index, window=0, count=8, seed=3, repeats=2)
    assert torch.equal(once[1].row, again[1].row)
    assert not torch.equal(once[0].trajectory_id, once[1].trajectory_id) or not torch.equal(
        once[0].row, once[1].row)


def test_batch_columns_split_rows_into_steps_and_envs(index: RLinfIndex) -> None:
    drawn = draw_many(index, window=0, count=50, seed=1, repeats=1)[0]
    columns = batch_columns(index, drawn)
    assert np.array_equal(columns["step"] * 2 + columns["env"], columns["row"])
    weights = dict(zip(index.ids.tolist(), ["a", "a", "b", "b", "c", "c"], strict=True))
    assert columns["model_weights_id"].tolist() == [weights[i] for i in columns["trajectory_id"]]


def test_the_snippet_reproduces_the_draw(index: RLinfIndex) -> None:
    drawn = draw_many(index, window=2, count=30, seed=11, repeats=1)[0]
    scope: dict[str, Any] = {}
    with pytest.warns(RuntimeWarning, match="left out"):  # id 4 has no file
        exec(snippet(str(index.path), window=2, count=30, seed=11), scope)
    assert torch.equal(scope["index"].trajectory_id, drawn.trajectory_id)
    assert torch.equal(scope["index"].row, drawn.row)
    assert (scope["batch"]["rewards"].long() // 1000).tolist() == drawn.trajectory_id.tolist()


def test_a_pkl_snippet_says_it_needs_allow_pickle() -> None:
    code = snippet("/x", window=1, count=2, seed=0, pickled=True)
    assert "allow_pickle=True" in code and "trust" in code


def test_the_window_history_slides_one_id_per_add(index: RLinfIndex) -> None:
    history = window_history(index, 2)
    assert history.added.tolist() == [1, 2, 3, 4, 5, 6]
    assert history.oldest.tolist() == [0, 0, 1, 2, 3, 4]
    assert history.newest.tolist() == [0, 1, 2, 3, 4, 5]
    assert window_history(index, 0).oldest.tolist() == [0] * 6


def test_weights_rows_count_each_policy_version_in_the_window(index: RLinfIndex) -> None:
    rows = weights_rows(index, window=2)
    assert [(r["model_weights_id"], r["trajectories"], r["in the window"]) for r in rows] == [
        ("a", 2, 0), ("b", 2, 1), ("c", 2, 1)]


def test_problems_name_absent_files_and_stale_metadata(index: RLinfIndex) -> None:
    problems = rlinf_problems(summarize_rlinf_directory(index.path), index)
    assert len(problems) == 1
    assert "1 trajectories whose file is absent (`trajectory_4_c.pt`)" in problems[0]


def test_a_whole_directory_has_no_problems(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path / "d"))
    rb.add_trajectories([trajectory(i) for i in range(3)])
    rb.close()
    index = read_rlinf_index(tmp_path / "d")
    assert rlinf_problems(summarize_rlinf_directory(tmp_path / "d"), index) == []


def test_overview_items_name_the_window_and_cache(index: RLinfIndex) -> None:
    items = dict(overview_items(summarize_rlinf_directory(index.path), index, window=3, cache=0))
    assert items["window"] == "3: ids 2..5, 3 trajectories, 26 samples"
    assert items["cache"] == "0: nothing"
    assert items["trajectories"] == "6 indexed, 1 without a file"


def test_the_figures_draw_every_state_and_segment(index: RLinfIndex) -> None:
    state = states(index, window=3, cache=1)
    spec = samples_figure(index.ids, index.samples, state, window=3, cache=1)
    (bars,) = spec["layer"]
    assert bars["encoding"]["color"]["scale"]["domain"] == [
        "no file (a load skips it) (1)", "older than the window (2)",
        "in the window, not cached (2)", "cached (newest) (1)"]
    np.testing.assert_array_equal(spec["datasets"]["ids"]["samples"], index.samples)
    seg = episode_segments(np.array([[0, 1], [1, 0], [0, 0]], dtype=bool))
    bins = segment_histogram(seg)["datasets"]["bins"]
    assert bins["count"].sum() == len(seg.whole) + len(seg.first) + len(seg.running)


@pytest.mark.parametrize(("count", "mark"), [(MAX_BARS, "rect"), (MAX_BARS + 1, "circle")])
def test_samples_are_a_bar_per_trajectory_up_to_max_bars_and_a_dot_above(
    count: int, mark: str
) -> None:
    ids = np.arange(count)
    spec = samples_figure(ids, np.full(count, 8), np.full(count, WINDOW), window=0, cache=0)
    (drawn,) = spec["layer"]
    assert drawn["mark"]["type"] == mark
    assert len(spec["datasets"]["ids"]) == count
    assert drawn["encoding"]["x"]["axis"]["format"] == ",d"


def test_segment_bars_stack_whole_first_and_running_in_that_order() -> None:
    seg = Segments(whole=np.array([3, 3]), first=np.array([3]), running=np.array([3, 5]))
    bins = segment_histogram(seg)["datasets"]["bins"]
    at_three = bins[(bins["left"] < 3) & (bins["right"] > 3)]
    assert at_three["kind"].tolist() == [SEGMENT_NAMES[k] for k in ("whole", "first", "running")]
    assert at_three["bottom"].tolist() == [0, 2, 3]
    assert at_three["top"].tolist() == [2, 3, 4]


def test_each_segment_is_a_dot_at_its_trajectory_named_by_its_kind() -> None:
    segments = [Segments(whole=np.array([4]), first=np.array([2, 7]), running=np.zeros(0)),
                Segments(whole=np.zeros(0), first=np.zeros(0), running=np.array([9]))]
    spec = segments_figure(np.array([10, 11]), segments)
    dots = spec["datasets"]["segments"]
    assert sorted(zip(dots["id"], dots["steps"], strict=True)) == [(10, 2), (10, 4), (10, 7),
                                                                    (11, 9)]
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == [
        SEGMENT_NAMES[k] for k in ("whole", "first", "running")]


def test_the_landing_puts_each_drawn_row_in_the_middle_of_its_row_over_the_bars() -> None:
    spec = landing_figure(np.array([3, 4]), np.array([8, 6]), np.array([4, 3]), np.array([5, 0]))
    bars, dots = spec["layer"]
    assert spec["title"]["text"] == "Where the batch landed: 2 rows"
    assert spec["datasets"]["window"]["rows"].tolist() == [8, 6]
    assert dots["transform"] == [{"calculate": "datum.row + 0.5", "as": "middle"}]
    assert spec["datasets"]["drawn"]["row"].tolist() == [5, 0]
    assert bars["encoding"]["color"]["datum"] == "rows of the trajectory"
    assert dots["encoding"]["color"]["datum"] == "drawn row"


def test_the_id_strip_colours_every_id_by_its_state_named_with_its_count(
    index: RLinfIndex,
) -> None:
    state = states(index, window=3, cache=1)
    strip = id_strip_figure(index.ids, state)
    names = ["no file (a load skips it) (1)", "older than the window (2)",
             "in the window, not cached (2)", "cached (newest) (1)"]
    (cells,) = strip["layer"]
    assert cells["mark"] == {"type": "rect"}
    assert cells["encoding"]["color"]["scale"]["domain"] == names
    ids = strip["datasets"]["ids"]
    np.testing.assert_array_equal(ids["id"], index.ids)
    assert list(ids["name"]) == [names[STATES.index(s)] for s in state]
    assert cells["encoding"]["x"]["scale"]["domain"] == [index.ids.min() - 0.5,
                                                         index.ids.max() + 0.5]


def test_the_window_history_draws_the_oldest_and_newest_id_after_each_add(
    index: RLinfIndex,
) -> None:
    history = window_history(index, 3)
    spec = history_figure(history, window=3)
    data = spec["datasets"]["window"]
    np.testing.assert_array_equal(data["added"], history.added)
    np.testing.assert_array_equal(data["oldest"], history.oldest)
    np.testing.assert_array_equal(data["newest"], history.newest)
    area, lines, _ = spec["layer"]
    assert (area["encoding"]["y"]["field"], area["encoding"]["y2"]["field"]) == (
        "oldest", "newest")
    assert lines["transform"][0] == {"fold": ["oldest", "newest"], "as": ["which", "id"]}
    assert lines["encoding"]["color"]["scale"]["domain"] == [
        "oldest id in the window", "newest id (just added)"]

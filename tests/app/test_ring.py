"""Ring arithmetic of the FIFO page (app/ring.py), without Streamlit."""

from __future__ import annotations

import numpy as np
import pytest

from app.ring import (
    boundary_map,
    latest_wraps,
    occupancy,
    ring_segments,
    ring_state,
    slot_age,
    slot_age_series,
    window_runs,
)


@pytest.mark.parametrize("capacity", [1, 2, 7, 1000])
def test_a_full_ring_has_its_oldest_row_at_the_cursor(capacity: int) -> None:
    cursor = capacity // 2
    state = ring_state(capacity, capacity, cursor, True)
    assert state.oldest == cursor
    assert state.newest == (cursor - 1) % capacity


@pytest.mark.parametrize("capacity", [2, 7, 1000])
def test_a_ring_that_never_wrapped_starts_at_slot_zero(capacity: int) -> None:
    state = ring_state(capacity, capacity - 1, capacity - 1, False)
    assert (state.oldest, state.newest) == (0, capacity - 2)
    assert state.wraps_text() == "0"


def test_an_empty_ring_has_no_oldest_or_newest_slot() -> None:
    state = ring_state(5, 0, 0, False)
    assert state.oldest is None and state.newest is None


@pytest.mark.parametrize(
    ("capacity", "length", "cursor", "full"),
    [(0, 0, 0, False), (3, 4, 0, False), (3, 3, 3, True), (3, 2, 2, True)],
)
def test_an_impossible_position_is_refused(
    capacity: int, length: int, cursor: int, full: bool
) -> None:
    with pytest.raises(ValueError):
        ring_state(capacity, length, cursor, full)


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_slot_age_counts_writes_back_from_the_newest_row(capacity: int) -> None:
    cursor = capacity - 1
    age = slot_age(capacity, capacity, cursor, True)
    assert age[(cursor - 1) % capacity] == 0
    assert age[cursor] == capacity - 1
    assert sorted(age.tolist()) == list(range(capacity))


def test_slot_age_of_an_unwritten_slot_is_nan() -> None:
    age = slot_age(7, 3, 3, False)
    assert age[:3].tolist() == [2, 1, 0]
    assert np.isnan(age[3:]).all()


def test_slot_age_of_a_huge_ring_is_reduced_to_the_point_budget() -> None:
    state = ring_state(1_000_003, 1_000_003, 17, True)
    series = slot_age_series(state, max_points=1000)
    assert len(series.x) <= 1000
    assert "1,000,003 ->" in series.caption()


@pytest.mark.parametrize("capacity", [1, 2, 7, 1000])
def test_ring_segments_are_filled_where_rows_are(capacity: int) -> None:
    length = (capacity + 1) // 2
    starts, filled = ring_segments(ring_state(capacity, length, length % capacity, False))
    assert len(starts) == min(capacity, 360)
    assert filled[0] == 1.0
    if capacity > 1:
        assert filled[-1] == 0.0


@pytest.mark.parametrize(("rows", "envs"), [(1, 1), (2, 3), (7, 5)])
def test_a_small_boundary_map_is_kept_cell_for_cell(rows: int, envs: int) -> None:
    flags = np.random.default_rng(0).random((rows, envs)) < 0.3
    binned = boundary_map(flags)
    assert not binned.binned
    assert np.array_equal(binned.cells, flags.astype(float))


def test_a_huge_boundary_map_fits_the_cell_budget_and_keeps_every_boundary() -> None:
    flags = np.zeros((100_003, 1024), dtype=bool)
    flags[12_345, 1023] = True
    binned = boundary_map(flags, max_cells=50_000)
    assert binned.cells.size <= 50_000
    assert binned.cells.sum() == 1
    t = np.searchsorted(binned.time_starts, 12_345, side="right") - 1
    e = np.searchsorted(binned.env_starts, 1023, side="right") - 1
    assert binned.cells[t, e] == 1
    assert "->" in binned.caption()


def test_a_trailing_singleton_axis_of_end_flags_is_dropped() -> None:
    assert boundary_map(np.ones((4, 2, 1), dtype=bool)).cells.shape == (4, 2)


def test_occupancy_reads_len_over_capacity_and_skips_records_without_the_buffer() -> None:
    records = [
        {"step": 10, "kind": "buffer", "train": {"len": 5, "capacity": 10, "wraps": 0}},
        {"step": 20, "kind": "buffer", "z": {"len": 1, "capacity": 2}},
        {"step": 30, "kind": "buffer", "train": {"len": 10, "capacity": 10, "wraps": 2}},
        {"step": 40, "kind": "buffer", "train": {"len": "torn", "capacity": 10}},
    ]
    series = occupancy(records, "train")
    assert series.step.tolist() == [10, 30]
    assert series.fill.tolist() == [0.5, 1.0]
    assert latest_wraps(records, "train") == (2, 30)


def test_a_log_without_wrap_counts_leaves_the_count_unknown() -> None:
    assert latest_wraps([{"step": 1, "train": {"len": 1, "capacity": 2}}], "train") is None
    assert ring_state(2, 2, 0, True).wraps_text() == ">= 1"


def covered(start: int, seq_length: int, capacity: int) -> list[int]:
    window, first, last = window_runs(np.array([start]), seq_length, capacity)
    assert window.tolist() == [0] * len(first)
    return [slot for a, b in zip(first, last, strict=True) for slot in range(a, b + 1)]


def test_a_window_running_past_the_last_slot_continues_at_slot_zero() -> None:
    assert covered(5, 4, 7) == [5, 6, 0, 1]


@pytest.mark.parametrize("capacity", [1, 2, 7, 1000])
def test_every_window_covers_seq_length_consecutive_ring_slots(capacity: int) -> None:
    for seq_length in {1, 2, capacity} & set(range(1, capacity + 1)):
        for start in {0, capacity // 2, capacity - 1}:
            expected = [(start + k) % capacity for k in range(seq_length)]
            assert covered(start, seq_length, capacity) == expected


def test_runs_follow_the_order_of_the_windows() -> None:
    window, first, last = window_runs(np.array([6, 1, 5]), 3, 7)
    assert window.tolist() == [0, 0, 1, 2, 2]
    assert first.tolist() == [6, 0, 1, 5, 0]
    assert last.tolist() == [6, 1, 3, 6, 0]


@pytest.mark.parametrize(("starts", "seq_length", "capacity"),
                         [([0], 0, 7), ([0], 8, 7), ([7], 2, 7), ([-1], 1, 7), ([0], 1, 0)])
def test_impossible_windows_are_refused_naming_the_argument(
    starts: list[int], seq_length: int, capacity: int
) -> None:
    with pytest.raises(ValueError, match=r"capacity|seq_length|starts"):
        window_runs(np.array(starts), seq_length, capacity)

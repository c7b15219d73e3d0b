"""Figures of the FIFO page (app/ring_figures.py) on their Vega-Lite specs, without Streamlit:
the data each chart draws, its marks and encodings, the cursor's sides, the episode-end map's
wording, slot age per slot, whole-number axes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from app.ring import boundary_map, occupancy, ring_state, slot_age, slot_age_series
from app.ring_figures import (
    AGE_BARS,
    CURSOR,
    FILLED,
    NEWEST,
    OLDEST,
    boundary_map_figure,
    occupancy_figure,
    ring_figure,
    slot_age_figure,
)
from app.vega import Spec


def _layers(spec: Spec) -> list[Spec]:
    """Every unit layer of ``spec``, nested groups flattened, in drawing order."""
    out = []
    for one in spec["layer"]:
        out.extend(_layers(one) if "layer" in one else [one])
    return out


def _mark(layer: Spec) -> str:
    return layer["mark"] if isinstance(layer["mark"], str) else layer["mark"]["type"]


def _of(spec: Spec, mark: str) -> list[Spec]:
    return [layer for layer in _layers(spec) if _mark(layer) == mark]


def _map(capacity: int, envs: int, cursor: int, *, full: bool,
         flags: np.ndarray | None = None) -> Spec:
    cells = np.zeros((capacity, envs), dtype=bool) if flags is None else flags
    return boundary_map_figure(boundary_map(cells), cursor, end_key="truncated", full=full)


def _labels(spec: Spec) -> dict[str, Spec]:
    """Each text written on the map -> its layer."""
    return {layer["data"]["values"][0]["text"]: layer for layer in _of(spec, "text")}


def test_the_newest_rows_are_labelled_left_of_the_cursor_and_the_oldest_right() -> None:
    # A full ring of 10 with the cursor at 4: slot 3 is the newest row, slot 4 the oldest.
    labels = _labels(_map(10, 2, 4, full=True))
    newest = next(text for text in labels if "newest" in text)
    oldest = next(text for text in labels if "oldest" in text)
    assert labels[newest]["mark"]["align"] == "right"  # it ends at the line: names the left
    assert labels[oldest]["mark"]["align"] == "left"


def test_a_ring_that_never_wrapped_has_no_oldest_side_right_of_the_cursor() -> None:
    labels = _labels(_map(10, 2, 6, full=False))
    assert [text for text in labels if "oldest" in text] == []
    assert any("newest" in text for text in labels)


@pytest.mark.parametrize("cursor", [0, 5, 9])
def test_the_cursor_labels_sit_above_the_map_at_the_cursor(cursor: int) -> None:
    spec = _map(10, 2, cursor, full=True)
    for layer in _labels(spec).values():
        assert layer["data"]["values"][0]["x"] == cursor - 0.5
        assert layer["encoding"]["y"] == {"value": -4}  # pixels above the plot's top
        assert layer["mark"]["baseline"] == "bottom"
        assert layer["mark"]["clip"] is False  # zooming clips marks to the plot otherwise
    (rule,) = _of(spec, "rule")
    assert rule["data"]["values"][0]["x"] == cursor - 0.5
    assert rule["mark"]["color"] == CURSOR


def test_the_map_calls_its_flags_episode_ends_naming_the_flag() -> None:
    title = _map(10, 2, 4, full=True)["title"]["text"]
    assert title.startswith("Episode ends (the truncated flag)")


def test_the_map_draws_one_dark_cell_per_flag_at_its_row_and_env() -> None:
    flags = np.zeros((10, 3), dtype=bool)
    flags[[1, 4, 9], [0, 2, 1]] = True
    spec = _map(10, 3, 4, full=True, flags=flags)
    cells = spec["datasets"]["ends"]
    assert sorted(zip(cells["time"], cells["env"], strict=True)) == [(1, 0), (4, 2), (9, 1)]
    (rect,) = _of(spec, "rect")
    assert (rect["encoding"]["x"]["field"], rect["encoding"]["x2"]["field"]) == ("t0", "t1")
    assert spec["view"]["fill"] != rect["mark"]["color"]  # cells without a flag: the pale plot


def test_a_binned_map_keeps_every_flag_and_names_the_rows_each_cell_spans() -> None:
    flags = np.zeros((1000, 64), dtype=bool)
    flags[999, 63] = True  # the very last step of the last env
    binned = boundary_map(flags)
    spec = boundary_map_figure(binned, 0, end_key="truncated", full=True)
    assert binned.binned and "any boundary per bin" in spec["title"]["subtitle"]
    cells = spec["datasets"]["ends"]
    assert len(cells) == 1 and cells["time"][0] == binned.time_starts[-1]
    (rect,) = _of(spec, "rect")
    rows = next(t["calculate"] for t in rect["transform"] if t["as"] == "rows")
    assert "'..'" in rows  # a tooltip reads "998..999", not one row of the bin


@pytest.mark.parametrize(("capacity", "mark"), [(1, "bar"), (30, "bar"), (AGE_BARS, "bar"),
                                                (AGE_BARS + 1, "circle")])
def test_slot_age_is_one_bar_or_dot_per_slot_never_a_line(capacity: int, mark: str) -> None:
    state = ring_state(capacity, capacity, 0, True)
    spec = slot_age_figure(slot_age_series(state), capacity, 0)
    assert [_mark(layer) for layer in _layers(spec)] == [mark, "rule"]
    ages = spec["datasets"]["age"]
    np.testing.assert_array_equal(ages["slot"], np.arange(capacity))
    np.testing.assert_array_equal(ages["age"], slot_age(capacity, capacity, 0, True))


def test_slot_age_leaves_empty_slots_without_an_age() -> None:
    state = ring_state(8, 3, 3, False)
    ages = slot_age_figure(slot_age_series(state), 8, 3)["datasets"]["age"]
    assert list(ages["age"][:3]) == [2.0, 1.0, 0.0]
    assert ages["age"][3:].isna().all()  # null in the browser: no bar


def test_a_reduced_slot_age_says_so_under_its_title() -> None:
    state = ring_state(10_000, 10_000, 0, True)
    spec = slot_age_figure(slot_age_series(state, max_points=100), 10_000, 0)
    assert spec["title"]["subtitle"] == "10,000 -> 100 points (min/max per bucket)"


def _axes(layer: Spec) -> list[Spec]:
    return [layer["encoding"][c]["axis"] for c in ("x", "y")]


@pytest.mark.parametrize(("capacity", "envs"), [(3, 1), (7, 4), (30, 4), (1000, 64)])
def test_the_map_ticks_envs_and_time_rows_on_whole_numbers(capacity: int, envs: int) -> None:
    (rect,) = _of(_map(capacity, envs, 0, full=True), "rect")
    for axis in _axes(rect):
        assert axis["tickMinStep"] == 1 and axis["format"] == ",d"


@pytest.mark.parametrize("capacity", [2, 7, 30, 1000])
def test_slot_age_ticks_slots_and_ages_on_whole_numbers(capacity: int) -> None:
    state = ring_state(capacity, capacity, 1, True)
    ages = _layers(slot_age_figure(slot_age_series(state), capacity, 1))[0]
    for axis in _axes(ages):
        assert axis["tickMinStep"] == 1 and axis["format"] == ",d"


def test_the_slot_age_cursor_is_named_in_the_legend_not_written_on_the_bars() -> None:
    state = ring_state(8, 8, 3, True)
    spec = slot_age_figure(slot_age_series(state), 8, 3)
    assert not _of(spec, "text")
    (rule,) = _of(spec, "rule")
    colour = rule["encoding"]["color"]
    assert rule["data"]["values"] == [{"x": 2.5, "label": "cursor (next write): slot 3"}]
    assert colour["scale"] == {"domain": ["age", "cursor (next write): slot 3"],
                               "range": [FILLED, CURSOR]}


def test_the_ring_draws_one_arc_per_run_covering_every_slot_once() -> None:
    spec = ring_figure(ring_state(150, 60, 60, False))
    arcs = spec["datasets"]["arcs"]
    assert list(arcs["start"]) == [0, 60] and list(arcs["end"]) == [60, 150]
    assert list(arcs["label"]) == ["filled", "empty"]
    assert list(arcs["filled"]) == [1.0, 0.0]
    assert list(arcs["slots"]) == ["0..59 (60 slots)", "60..149 (90 slots)"]


@pytest.mark.parametrize("capacity", [1, 7, 360, 361, 10_000])
def test_a_full_ring_is_one_filled_arc_whatever_its_size(capacity: int) -> None:
    arcs = ring_figure(ring_state(capacity, capacity, 0, True))["datasets"]["arcs"]
    assert (list(arcs["start"]), list(arcs["end"]), list(arcs["label"])) == (
        [0], [capacity], ["filled"])


def test_the_ring_turns_clockwise_from_the_top_over_the_capacity() -> None:
    band = _of(ring_figure(ring_state(40, 10, 10, False)), "arc")[0]
    assert band["encoding"]["theta"]["scale"]["domain"] == [0, 40]
    assert band["encoding"]["theta"]["scale"]["range"] == [0, 2 * np.pi]  # Vega: 0 = 12 o'clock


def test_the_ring_names_the_cursor_oldest_and_newest_slots_in_its_legend() -> None:
    spec = ring_figure(ring_state(10, 10, 4, True, wraps=3))
    band = _of(spec, "arc")[0]
    assert band["encoding"]["color"]["scale"] == {
        "domain": ["filled", "empty", "cursor (next write): slot 4", "oldest row: slot 4",
                   "newest row: slot 3"],
        "range": [FILLED, "#e5e7eb", CURSOR, OLDEST, NEWEST]}
    (marks,) = [t for t in _of(spec, "text") if "color" in t["encoding"]]
    assert [(m["slot"], m["label"]) for m in marks["data"]["values"]] == [
        (4.5, "oldest row: slot 4"), (3.5, "newest row: slot 3")]
    assert spec["title"]["subtitle"] == "10 of 10 slots filled (100%); wraps: 3"


def test_an_empty_ring_marks_no_oldest_or_newest_row() -> None:
    spec = ring_figure(ring_state(10, 0, 0, False))
    assert all("color" not in t["encoding"] for t in _of(spec, "text"))
    assert list(spec["datasets"]["arcs"]["label"]) == ["empty"]


def _records(wraps: list[int | None]) -> list[dict[str, Any]]:
    return [{"step": 10 * i, "train": {"len": 5 * (i + 1), "capacity": 20,
                                       **({} if w is None else {"wraps": w})}}
            for i, w in enumerate(wraps)]


def test_occupancy_draws_the_fill_in_percent_and_the_wraps_as_steps_on_the_right() -> None:
    spec = occupancy_figure(occupancy(_records([0, 0, 1, 2]), "train"))
    data = spec["datasets"]["occupancy"]
    assert list(data["step"]) == [0, 10, 20, 30]
    assert list(data["filled"]) == [25.0, 50.0, 75.0, 100.0]
    assert list(data["wraps"]) == [0, 0, 1, 2]
    lines = _of(spec, "line")
    assert [line["encoding"]["y"]["field"] for line in lines] == ["filled", "wraps"]
    assert lines[1]["mark"]["interpolate"] == "step-after"
    assert lines[1]["encoding"]["y"]["axis"]["orient"] == "right"
    assert lines[1]["encoding"]["y"]["scale"]["domain"] == [0, 2.0]
    assert spec["resolve"] == {"scale": {"y": "independent"}}


def test_occupancy_without_wrap_counts_draws_only_the_fill() -> None:
    spec = occupancy_figure(occupancy(_records([None, None]), "train"))
    assert [line["encoding"]["y"]["field"] for line in _of(spec, "line")] == ["filled"]
    assert "resolve" not in spec


def test_a_ring_that_never_wrapped_still_draws_its_wraps_axis_from_zero_to_one() -> None:
    spec = occupancy_figure(occupancy(_records([0, 0]), "train"))
    assert _of(spec, "line")[1]["encoding"]["y"]["scale"]["domain"] == [0, 1.0]


def test_every_line_point_carries_its_own_tooltip() -> None:
    spec = occupancy_figure(occupancy(_records([0, 1]), "train"))
    points = _of(spec, "point")
    assert [p["encoding"]["y"]["field"] for p in points] == ["filled", "wraps"]
    assert all(p["mark"]["opacity"] == 0 and p["encoding"]["tooltip"] for p in points)


@pytest.mark.parametrize("spec", [
    ring_figure(ring_state(10, 10, 4, True)),
    slot_age_figure(slot_age_series(ring_state(10, 10, 4, True)), 10, 4),
    boundary_map_figure(boundary_map(np.ones((10, 2), dtype=bool)), 4, end_key="t", full=True),
    occupancy_figure(occupancy(_records([0, 1]), "train")),
], ids=["ring", "slot age", "map", "occupancy"])
def test_a_spec_is_plain_json_besides_its_frames(spec: Spec) -> None:
    text = json.dumps({key: value for key, value in spec.items() if key != "datasets"})
    assert json.loads(text)["layer"]

"""The Compare page's Vega-Lite specs: both sides drawn on shared bins and motions."""

from __future__ import annotations

import numpy as np
import pytest

from app.compare_figures import COLOURS, difference_bars, length_overlay, motion_bars

LABELS = ("A: one", "B: two")


def test_the_length_overlay_gives_each_side_its_fraction_per_shared_bin() -> None:
    spec = length_overlay(np.array([3, 3, 4]), np.array([4]), LABELS)
    bins = spec["datasets"]["bins"]
    assert bins["side"].tolist() == (["A: one (3 trajectories)"] * 2
                                     + ["B: two (1 trajectories)"] * 2)
    assert bins["fraction"].tolist() == pytest.approx([2 / 3, 1 / 3, 0.0, 1.0])
    assert bins["count"].tolist() == [2, 1, 0, 1]
    assert bins["lengths"].tolist() == ["3", "4"] * 2


@pytest.mark.parametrize("longest", [5, 1_000])
def test_overlay_bars_cover_ninety_percent_of_their_bin_around_its_lengths(longest: int) -> None:
    spec = length_overlay(np.array([1, longest]), np.array([2]), LABELS)
    bins = spec["datasets"]["bins"]
    width = (bins["right"] - bins["left"]).to_numpy()
    assert width == pytest.approx(np.full(len(bins), width[0]))
    step = width[0] / 0.9
    first_centre = (bins["left"].iloc[0] + bins["right"].iloc[0]) / 2
    assert first_centre == pytest.approx(1 + (step - 1) / 2)
    assert len(bins) <= 2 * 60


def test_the_overlay_bars_see_through_each_other_stand_on_zero_and_zoom() -> None:
    bars = length_overlay(np.array([3, 4]), np.array([4]), LABELS)["layer"][0]
    assert bars["mark"] == {"type": "bar", "opacity": 0.55}
    assert bars["encoding"]["y2"] == {"datum": 0}
    assert bars["encoding"]["color"]["scale"]["range"] == list(COLOURS)
    assert bars["encoding"]["x"]["axis"]["format"] == ",d"
    assert bars["params"][0]["bind"] == "scales"


def test_motion_bars_set_the_sides_next_to_each_other_with_a_gap_for_a_missing_value() -> None:
    spec = motion_bars(np.array([1, 5]), np.array([0.2, np.nan]), np.array([0.3, 0.4]), LABELS,
                       title="T", y="priority")
    sides = spec["datasets"]["sides"]
    assert sides["motion"].tolist() == [1, 5, 1, 5]
    assert sides["side"].tolist() == ["A: one", "A: one", "B: two", "B: two"]
    assert np.isnan(sides["value"].iloc[1])  # null in the browser: no bar
    encoding = spec["layer"][0]["encoding"]
    assert encoding["xOffset"]["sort"] == list(LABELS)
    assert encoding["y"]["axis"]["title"] == "priority"


@pytest.mark.parametrize(("whole", "fmt"), [(True, ",d"), (False, None)])
def test_motion_bars_of_a_count_tick_whole_numbers(whole: bool, fmt: str | None) -> None:
    spec = motion_bars(np.array([1]), np.array([3.0]), np.array([4.0]), LABELS, title="T",
                       y="rows", whole=whole)
    assert spec["layer"][0]["encoding"]["y"]["axis"].get("format") == fmt


def test_difference_bars_colour_each_motion_by_the_side_that_is_higher() -> None:
    spec = difference_bars(np.array([1, 2]), np.array([0.5, 0.2]), np.array([0.4, 0.3]),
                           LABELS, title="B minus A", y="change")
    diff = spec["datasets"]["diff"]
    assert diff["diff"].tolist() == pytest.approx([-0.1, 0.1])
    assert diff["higher"].tolist() == ["A higher", "B higher"]
    colour = spec["layer"][0]["encoding"]["color"]["scale"]
    assert colour == {"domain": ["A higher", "B higher"], "range": list(COLOURS)}
    assert spec["title"]["subtitle"] == "B: two minus A: one"


def test_difference_bars_show_both_values_on_hover() -> None:
    spec = difference_bars(np.array([1]), np.array([0.5]), np.array([0.4]), LABELS, title="T",
                           y="change")
    titles = [t["title"] for t in spec["layer"][0]["encoding"]["tooltip"]]
    assert titles == ["motion", "difference", "A: one", "B: two"]

"""The Sampling lab's figures (app/sampling_figures.py) on their figure data, without
Streamlit: each drawn window covers exactly its ring slots, wrapped ones included; the expert
chart marks motion boundaries; many bins show how far each is from its expected count."""

from __future__ import annotations

import numpy as np
import pytest

from app.ring import boundary_map
from app.sampling_figures import (
    BAR_BINS,
    RUN_EDGE,
    SEGMENT_LABELS,
    frequency_figure,
    landing_map_figure,
    row_landing_figure,
    standardized_deviations,
)
from app.vega import Spec


def window_bars(spec: Spec) -> list[tuple[int, list[int]]]:
    """Each red bar of the drawn windows as ``(env, slots it covers)``."""
    runs = spec["datasets"]["runs"]
    return [(int(env), list(range(round(a + RUN_EDGE), round(b - RUN_EDGE) + 1)))
            for a, b, env in zip(runs["left"], runs["right"], runs["env"], strict=True)]


def figure_for(capacity: int, envs: int, starts: list[int], on: list[int],
               seq_length: int) -> Spec:
    flags = np.zeros((capacity, envs), dtype=bool)
    return landing_map_figure(boundary_map(flags), 0, np.array(starts), np.array(on),
                              seq_length, end_key="done", full=True)


def test_a_window_of_4_from_slot_5_of_7_covers_slots_5_6_0_1() -> None:
    bars = window_bars(figure_for(7, 2, [5], [1], 4))
    assert bars == [(1, [5, 6]), (1, [0, 1])]
    assert sorted(slot for _, slots in bars for slot in slots) == [0, 1, 5, 6]


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_every_drawn_window_covers_seq_length_slots(capacity: int) -> None:
    starts = sorted({0, capacity // 2, capacity - 1})
    for seq_length in sorted({1, capacity}):
        bars = window_bars(figure_for(capacity, 1, starts, [0] * len(starts), seq_length))
        slots = [slot for _, run in bars for slot in run]
        expected = [(s + k) % capacity for s in starts for k in range(seq_length)]
        assert slots == expected


def test_the_title_counts_the_windows_that_wrap() -> None:
    figure = figure_for(7, 1, [5, 0], [0, 0], 4)
    assert "1 run past the last slot" in figure["title"]["subtitle"]


def test_each_window_start_is_a_dot_at_its_row_and_env_over_the_map() -> None:
    spec = figure_for(7, 3, [5, 2], [1, 2], 4)
    starts = spec["datasets"]["starts"]
    assert list(zip(starts["start"], starts["env"], strict=True)) == [(5, 1), (2, 2)]
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks[0] == "rect" and marks[-2:] == ["rule", "circle"]  # drawn over the cells
    rule = spec["layer"][-2]
    assert (rule["encoding"]["x"]["field"], rule["encoding"]["x2"]["field"],
            rule["encoding"]["y"]["field"]) == ("left", "right", "env")


def test_envs_that_do_not_match_the_starts_are_refused() -> None:
    with pytest.raises(ValueError, match="envs"):
        figure_for(7, 1, [1, 2], [0], 2)


def test_many_equally_likely_bins_show_the_distribution_of_deviations_not_a_stripe() -> None:
    # Trajectory weighting: every one of 500 trajectories expects the same share.
    generator = np.random.default_rng(0)
    expected = np.full(500, 1 / 500)
    observed = generator.multinomial(50_000, expected).astype(np.float64)
    spec = frequency_figure(np.arange(500), expected, observed, unit="trajectory",
                            units="trajectories")
    bars, bell, _ = spec["layer"]
    assert "trajectorys" not in spec["title"]["text"] + bars["encoding"]["y"]["axis"]["title"]
    counts = spec["datasets"]["bins"]["count"]
    assert counts.sum() == 500  # every trajectory counted once
    assert (counts > 0).sum() > 1  # spread along x, not one stripe
    assert bell["mark"]["type"] == "line"
    assert bell["encoding"]["color"]["scale"]["domain"] == ["trajectories", "a correct sampler"]


def test_the_bell_holds_as_many_bins_as_the_bars() -> None:
    generator = np.random.default_rng(2)
    expected = np.full(400, 1 / 400)
    observed = generator.multinomial(40_000, expected).astype(np.float64)
    spec = frequency_figure(np.arange(400), expected, observed, unit="trajectory",
                            units="trajectories")
    bell = spec["datasets"]["bell"]
    width = 0.5  # half-sd bins
    area = float(np.sum(bell["count"].to_numpy()[:-1] * np.diff(bell["deviation"]))) / width
    assert area == pytest.approx(400, rel=0.01)


@pytest.mark.parametrize("bins", [1, 3, BAR_BINS])
def test_up_to_bar_bins_expected_and_empirical_stand_side_by_side_per_bin(bins: int) -> None:
    expected = np.full(bins, 1 / bins)
    observed = np.arange(1, bins + 1, dtype=np.float64)
    spec = frequency_figure(np.arange(bins) * 7, expected, observed, unit="motion",
                            units="motions")
    (bars,) = spec["layer"]
    assert bars["encoding"]["xOffset"]["field"] == "series"
    assert bars["encoding"]["x"]["scale"]["domain"] == [str(7 * k) for k in range(bins)]
    data = spec["datasets"]["frequencies"]
    empirical = data[data["series"] == "empirical"]["fraction"]
    assert len(data) == 2 * bins and empirical.sum() == pytest.approx(1.0)


def test_deviations_of_a_correct_sampler_have_mean_near_0_and_sd_near_1() -> None:
    generator = np.random.default_rng(1)
    expected = generator.uniform(1, 3, 2_000)
    expected /= expected.sum()
    observed = generator.multinomial(400_000, expected).astype(np.float64)
    deviation, left_out = standardized_deviations(expected, observed)
    assert left_out == 0
    assert abs(deviation.mean()) < 0.1 and abs(deviation.std() - 1) < 0.1


def test_bins_that_cannot_be_drawn_are_left_out_and_counted() -> None:
    expected = np.array([0.0, 0.5, 0.5])
    deviation, left_out = standardized_deviations(expected, np.array([0.0, 4.0, 6.0]))
    assert left_out == 1 and len(deviation) == 2


@pytest.mark.parametrize("motions", [1, 3, SEGMENT_LABELS, SEGMENT_LABELS + 1])
def test_the_expert_landing_chart_draws_a_boundary_between_motions(motions: int) -> None:
    starts = np.arange(motions) * 10
    spec = row_landing_figure(np.array([0, 5, 12]), motions * 10, segments=(
        starts, np.arange(100, 100 + motions)))
    assert spec["datasets"]["boundaries"]["x"].tolist() == starts[1:].tolist()
    (rule,) = [one for one in spec["layer"] if one["mark"]["type"] == "rule"]
    assert "y" not in rule["encoding"]  # across the whole plot
    named = spec["datasets"]["motions"]["label"].tolist() if "motions" in spec["datasets"] else []
    assert named == ([str(m) for m in range(100, 100 + motions)] if motions <= SEGMENT_LABELS
                     else [])
    assert ("motion ids along the top" in spec["title"]["subtitle"]) == bool(named)


def test_the_motion_ids_sit_above_the_plot_in_the_middle_of_each_motion() -> None:
    spec = row_landing_figure(np.array([0]), 30, segments=(np.array([0, 10, 25]),
                                                           np.array([7, 8, 9])))
    (text,) = [one for one in spec["layer"] if one["mark"]["type"] == "text"]
    assert text["mark"]["clip"] is False and text["encoding"]["y"] == {"value": 0}
    assert spec["datasets"]["motions"]["left"].tolist() == [5.0, 17.5, 27.5]
    # Zoomed, the ids of motions out of view are left out rather than drawn beside the plot.
    assert text["transform"] == [{"filter": {"param": "zoom"}}]


def test_a_landing_chart_of_a_few_rows_ticks_draws_on_whole_numbers() -> None:
    (bars,) = row_landing_figure(np.array([0, 1, 1, 2]), 3)["layer"]
    for channel in ("x", "y"):
        assert bars["encoding"][channel]["axis"]["format"] == ",d"
        assert bars["encoding"][channel]["axis"]["tickMinStep"] == 1


def test_each_landing_bin_names_the_rows_it_holds_and_counts_every_draw() -> None:
    spec = row_landing_figure(np.array([0, 1, 1, 2, 399, 400]), 401)
    bins = spec["datasets"]["bins"]
    assert len(bins) == 200 and bins["count"].sum() == 6
    assert bins["rows"].iloc[0] == "0..2" and bins["rows"].iloc[-1] == "399..400"
    assert spec["title"]["subtitle"] == "200 bins"

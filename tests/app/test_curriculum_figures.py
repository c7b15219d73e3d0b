"""The Curriculum page's Vega-Lite specs: what each chart draws, its axes and its legend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.curriculum_figures import (
    TOP_LINES,
    current_priority_bars,
    emd_heatmap,
    motion_history,
    preview_figure,
    priority_lines,
    saved_probability_bars,
    spread_figure,
)
from app.curriculum_history import CurriculumHistory


def history_of(rounds: int, motions: int) -> CurriculumHistory:
    """A history whose EMD is ``round + motion / 100`` and whose probability favours the
    higher motion ids more each round."""
    emd = np.arange(1, rounds + 1)[:, None] + np.arange(motions)[None, :] / 100
    weights = np.exp(np.outer(np.arange(rounds) / 10, np.arange(motions)))
    probability = weights / weights.sum(axis=1, keepdims=True)
    return CurriculumHistory(np.arange(1, rounds + 1) * 100, np.arange(motions) + 10, emd,
                             probability, probability, "test")


def flat(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every layer of ``spec``, the groups' own layers included."""
    out = []
    for one in spec["layer"]:
        out.extend(one["layer"] if "mark" not in one else [one])
    return out


def marks(spec: dict[str, Any]) -> list[str]:
    return [one["mark"]["type"] if isinstance(one["mark"], dict) else one["mark"]
            for one in flat(spec)]


@pytest.mark.parametrize(("rounds", "motions"), [(1, 1), (3, 4), (12, 60)])
def test_the_heatmap_has_one_cell_per_motion_and_round_with_its_emd(
    rounds: int, motions: int
) -> None:
    history = history_of(rounds, motions)
    spec = emd_heatmap(history, np.arange(motions), sort="motion id")
    cells = spec["datasets"]["cells"]
    assert len(cells) == rounds * motions
    last = cells.iloc[-1]
    assert (last["motion"], last["round"], last["step"]) == (
        f"motion {9 + motions}", rounds, rounds * 100)
    assert last["emd"] == pytest.approx(history.emd[-1, -1])


def test_the_heatmap_draws_rect_cells_coloured_by_emd_with_a_legend() -> None:
    spec = emd_heatmap(history_of(3, 4), np.arange(4), sort="motion id")
    (cells,) = spec["layer"]
    assert cells["mark"]["type"] == "rect"
    colour = cells["encoding"]["color"]
    assert (colour["field"], colour["legend"]["title"]) == ("emd", "EMD")
    assert spec["title"]["subtitle"].startswith("darker = tracked worse")


def test_the_heatmap_rows_follow_the_order_given_and_name_the_sort() -> None:
    order = np.array([2, 0, 3, 1])
    spec = emd_heatmap(history_of(2, 4), order, sort="last EMD")
    cells = spec["datasets"]["cells"]
    assert cells.drop_duplicates("rank")["motion"].tolist() == [
        "motion 12", "motion 10", "motion 13", "motion 11"]
    y = spec["layer"][0]["encoding"]["y"]
    assert y["sort"] == {"field": "rank", "op": "min"}
    assert y["axis"]["title"] == "motion (sorted by last EMD)"


@pytest.mark.parametrize(("motions", "crowded"), [(24, False), (300, True)])
def test_heatmap_labels_are_thinned_only_when_rows_are_too_thin_for_them(
    motions: int, crowded: bool
) -> None:
    spec = emd_heatmap(history_of(2, motions), np.arange(motions), sort="motion id")
    overlap = spec["layer"][0]["encoding"]["y"]["axis"]["labelOverlap"]
    assert (overlap == "greedy") == crowded
    assert spec["height"] <= 900


def test_the_heatmap_round_axis_ticks_whole_rounds() -> None:
    x = emd_heatmap(history_of(3, 2), np.arange(2), sort="motion id")["layer"][0]["encoding"]["x"]
    assert x["axis"]["format"] == ",d" and x["scale"]["domain"] == [0.5, 3.5]


@pytest.mark.parametrize(("motions", "shown"), [(3, 3), (TOP_LINES + 5, TOP_LINES)])
def test_priority_lines_draw_the_most_likely_motions_now_most_likely_first(
    motions: int, shown: int
) -> None:
    spec = priority_lines(history_of(4, motions))
    lines = spec["datasets"]["lines"]
    assert len(lines) == 4 * shown
    domain = flat(spec)[0]["encoding"]["color"]["scale"]["domain"]
    assert domain[0] == f"motion {9 + motions}"  # the highest id is favoured most
    assert domain[-1] == "uniform" and len(domain) == shown + 1
    assert spec["title"]["subtitle"] == (
        f"the {shown} motions with the highest priority now, of {motions}")


def test_priority_lines_carry_a_tooltip_per_point_and_zoom_on_rounds() -> None:
    spec = priority_lines(history_of(4, 3))
    line, points, _ = flat(spec)
    assert line["params"][0]["bind"] == "scales"
    assert [t["field"] for t in points["encoding"]["tooltip"]] == [
        "motion", "round", "step", "probability"]
    assert line["encoding"]["x"]["axis"]["format"] == ",d"


def test_a_single_round_is_drawn_as_points_inside_the_axis() -> None:
    spec = priority_lines(history_of(1, 3))
    line = flat(spec)[0]
    assert line["mark"]["point"] is True
    assert line["encoding"]["x"]["scale"]["domain"] == [0.5, 1.5]


def test_the_spread_chart_puts_entropy_and_effective_motions_on_two_axes() -> None:
    spec = spread_figure(history_of(5, 24))
    assert spec["resolve"] == {"scale": {"y": "independent"}}
    entropy_group, effective_group = spec["layer"]
    entropy = entropy_group["layer"][0]["encoding"]["y"]
    effective = effective_group["layer"][0]["encoding"]["y"]
    assert (entropy["field"], effective["field"]) == ("entropy", "effective")
    assert effective["axis"]["orient"] == "right"


def test_the_effective_motions_axis_ticks_whole_numbers_and_entropy_does_not() -> None:
    entropy_group, effective_group = spread_figure(history_of(5, 24))["layer"]
    effective = effective_group["layer"][0]["encoding"]["y"]["axis"]
    entropy = entropy_group["layer"][0]["encoding"]["y"]["axis"]
    assert (effective["format"], effective["tickMinStep"]) == (",d", 1)
    assert "format" not in entropy


@pytest.mark.parametrize("motions", [2, 24, 1000])
def test_one_uniform_line_marks_the_maximum_of_both_axes(motions: int) -> None:
    spec = spread_figure(history_of(3, motions))
    entropy_group, effective_group = spec["layer"]
    entropy = entropy_group["layer"][0]["encoding"]["y"]["scale"]["domain"]
    effective = effective_group["layer"][0]["encoding"]["y"]["scale"]["domain"]
    (rule,) = [one for one in entropy_group["layer"] if one["mark"]["type"] == "rule"]
    level = rule["data"]["values"][0]["y"]
    assert level == pytest.approx(np.log(motions))
    # The same fraction of each axis: the line is uniform for both quantities.
    assert level / entropy[1] == pytest.approx(motions / effective[1])
    assert rule["data"]["values"][0]["label"] == f"uniform over {motions} motions"
    assert f"log {motions} = " in spec["title"]["subtitle"]


def test_the_spread_chart_names_its_three_lines_in_one_legend() -> None:
    spec = spread_figure(history_of(3, 4))
    domains = {tuple(one["encoding"]["color"]["scale"]["domain"]) for one in flat(spec)
               if "color" in one["encoding"]}
    assert domains == {("entropy (nats)", "effective motions 1/sum(p^2)",
                        "uniform over 4 motions")}


def test_the_motion_history_draws_emd_left_and_probability_right() -> None:
    spec = motion_history(history_of(3, 4), 11)
    assert marks(spec) == ["line", "point", "line", "point"]
    emd, probability = (group["layer"][0]["encoding"] for group in spec["layer"])
    assert emd["color"]["datum"] == "EMD (left)"
    assert probability["color"]["datum"] == "sampling probability (right)"
    data = spec["datasets"]["motion"]
    assert data["emd"].tolist() == pytest.approx([1.01, 2.01, 3.01])


def test_current_priority_bars_follow_the_order_with_one_bar_per_motion() -> None:
    history = history_of(2, 3)
    spec = current_priority_bars(history, np.array([2, 0, 1]))
    bars = spec["datasets"]["bars"]
    assert bars["motion"].tolist() == [12, 10, 11] and bars["rank"].tolist() == [0, 1, 2]
    assert bars["p"].tolist() == pytest.approx(history.probability[-1, [2, 0, 1]].tolist())
    assert spec["title"]["text"] == "Current priorities (after round 2)"
    x = spec["layer"][0]["encoding"]["x"]
    assert (x["type"], x["sort"]["field"]) == ("ordinal", "rank")


def test_the_preview_sets_now_and_after_side_by_side_without_a_uniform_line() -> None:
    spec = preview_figure(np.array([3, 7]), np.array([0.5, 0.5]), np.array([0.25, 0.75]))
    assert marks(spec) == ["bar"]
    bars = spec["datasets"]["bars"]
    assert bars["series"].tolist() == ["now", "now", "after re-prioritizing",
                                       "after re-prioritizing"]
    assert bars["p"].tolist() == [0.5, 0.5, 0.25, 0.75]
    assert spec["layer"][0]["encoding"]["xOffset"]["sort"] == ["now", "after re-prioritizing"]


def test_the_saved_probability_bars_name_the_uniform_level_over_the_motions() -> None:
    spec = saved_probability_bars(np.array([4, 5, 6, 9]), np.full(4, 0.25))
    assert marks(spec) == ["bar", "rule"]
    assert spec["layer"][1]["data"]["values"] == [{"y": 0.25, "label": "uniform over 4 motions"}]
    assert spec["layer"][0]["encoding"]["y"]["axis"]["title"] == "P(window from motion)"


def test_one_motion_over_one_round_draws_every_chart() -> None:
    history = history_of(1, 1)
    one = np.arange(1)
    specs = [emd_heatmap(history, one, sort="motion id"), priority_lines(history),
             spread_figure(history), motion_history(history, 10),
             current_priority_bars(history, one)]
    assert [len(next(iter(spec["datasets"].values()))) for spec in specs] == [1, 1, 1, 1, 1]


def test_grouped_bars_name_the_series_on_hover_and_single_bars_do_not() -> None:
    preview = preview_figure(np.array([3]), np.array([1.0]), np.array([1.0]))
    saved = saved_probability_bars(np.array([3]), np.array([1.0]))
    fields = [[t["field"] for t in spec["layer"][0]["encoding"]["tooltip"]]
              for spec in (preview, saved)]
    assert fields == [["motion", "series", "p"], ["motion", "p"]]

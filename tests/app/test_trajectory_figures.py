"""Figures of the Trajectories page (app/trajectory_figures.py) on their Vega-Lite specs: the
window's need is a legend-named line, never a label over the bars, counts tick on whole numbers
however few there are, and each bar, cell and curve carries the numbers it stands for."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from app.trajectory_figures import (
    env_length_heatmap,
    length_histogram,
    motion_length_bars,
    samplable_figure,
)
from app.trajectory_stats import MotionLengths, SamplableCurve, Trajectories
from app.vega import Spec

APP = Path(__file__).resolve().parents[2] / "app"
SMALL = Trajectories(env=np.array([0, 0, 1, 2, 3]), length=np.array([3, 5, 5, 9, 12]))
MOTIONS = MotionLengths(motion_id=np.array([2, 0, 1]), length=np.array([13, 4, 18]))
CURVE = SamplableCurve(np.arange(1, 13), np.linspace(1, 0, 12), np.linspace(1, 0.1, 12))


def _figures() -> list[Spec]:
    return [
        length_histogram(SMALL, need=9, title="t"),
        env_length_heatmap(SMALL, 4, need=9),
        motion_length_bars(MOTIONS, need=9),
        samplable_figure({"online": CURVE}, seq_length=8),
    ]


def _rules(spec: Spec) -> list[Spec]:
    return [one for one in spec["layer"] if one["mark"]["type"] == "rule"]


@pytest.mark.parametrize("index", range(4))
def test_the_window_line_is_named_in_the_legend_with_no_label_over_the_data(index: int) -> None:
    spec = _figures()[index]
    assert not [one for one in spec["layer"] if one["mark"]["type"] == "text"]
    (rule,) = _rules(spec)
    (row,) = rule["data"]["values"]
    assert row["label"] in ("window needs 9 rows", "seq_length 8")
    assert row["label"] in rule["encoding"]["color"]["scale"]["domain"]


def test_the_need_line_falls_between_the_longest_too_short_and_the_shortest_enough() -> None:
    (rule,) = _rules(length_histogram(SMALL, need=9, title="t"))
    assert rule["data"]["values"][0]["x"] == 8.5


def test_bins_shorter_than_the_need_are_grey_and_the_rest_long_enough() -> None:
    spec = length_histogram(SMALL, need=9, title="t")
    bins = spec["datasets"]["bins"]
    assert bins["count"].sum() == len(SMALL)
    short = bins[bins["kind"] == "too short (< 9 rows)"]
    enough = bins[bins["kind"] == "long enough (>= 9 rows)"]
    assert short["count"].sum() == 3  # lengths 3, 5, 5
    assert short["right"].max() < 8.5 < enough["left"].min()


def test_few_trajectories_per_bin_tick_the_count_axis_on_whole_numbers() -> None:
    (bars, _) = length_histogram(SMALL, need=9, title="t")["layer"]
    for channel in ("x", "y"):
        axis = bars["encoding"][channel]["axis"]
        assert (axis["format"], axis["tickMinStep"]) == (",d", 1)


def test_four_envs_tick_the_env_axis_and_the_colour_legend_on_whole_numbers() -> None:
    (cells, _) = env_length_heatmap(SMALL, 4, need=9)["layer"]
    assert cells["encoding"]["y"]["axis"]["tickMinStep"] == 1
    assert cells["encoding"]["y"]["scale"]["domain"] == [-0.5, 3.5]
    legend = cells["encoding"]["fill"]["legend"]
    assert (legend["title"], legend["format"], legend["tickMinStep"]) == ("trajectories", ",d", 1)


def test_the_heatmap_sends_only_the_cells_holding_trajectories() -> None:
    spec = env_length_heatmap(SMALL, 4, need=9)
    cells = spec["datasets"]["cells"]
    # env 0 holds lengths 3 and 5 (two bins), envs 1..3 one each.
    assert sorted(zip(cells["env"], cells["count"], strict=True)) == [
        (0, 1), (0, 1), (1, 1), (2, 1), (3, 1)]
    assert spec["view"]["fill"] == spec["layer"][0]["encoding"]["fill"]["scale"]["range"][0]


def test_motions_are_in_id_order_grey_when_shorter_than_the_need() -> None:
    spec = motion_length_bars(MOTIONS, need=9)
    motions = spec["datasets"]["motions"]
    assert motions["motion"].tolist() == ["0", "1", "2"]
    assert motions["kind"].tolist() == ["too short (< 9 rows)", "long enough (>= 9 rows)",
                                        "long enough (>= 9 rows)"]
    assert spec["layer"][0]["encoding"]["x"]["scale"]["domain"] == ["0", "1", "2"]
    assert "1 shorter than the window" in spec["title"]["subtitle"]


def test_each_buffer_has_a_solid_and_a_dotted_curve_in_one_legend_with_the_rule() -> None:
    spec = samplable_figure({"online": CURVE, "expert": CURVE}, seq_length=8)
    lines = spec["layer"][0]
    names = ["online: trajectories", "online: transitions", "expert: trajectories",
             "expert: transitions", "seq_length 8"]
    # One field for colour and dash, and the rule's: Vega-Lite draws them as one legend.
    assert lines["encoding"]["color"]["field"] == lines["encoding"]["strokeDash"]["field"]
    assert _rules(spec)[0]["encoding"]["color"]["field"] == "label"
    assert lines["encoding"]["color"]["scale"]["domain"] == names
    dashes = lines["encoding"]["strokeDash"]["scale"]["range"]
    assert dashes[0] == dashes[2] != dashes[1] == dashes[3]
    assert len(spec["datasets"]["curves"]) == 4 * len(CURVE.seq_length)
    assert lines["encoding"]["y"]["axis"]["format"] == ".0%"


@pytest.mark.parametrize("module", ["trajectory_figures", "rlinf_figures", "sampling_figures"])
def test_the_figure_modules_of_these_pages_import_neither_plotly_nor_app_figures(
    module: str,
) -> None:
    tree = ast.parse((APP / f"{module}.py").read_text(encoding="utf-8"))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {n for n in names if n.split(".")[0] == "plotly" or n == "app.figures"}

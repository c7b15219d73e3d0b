"""Figures of the Trajectories page (app/trajectory_figures.py) on their figure data: the
window's need is a legend-named line, never a label over the bars, and counts tick on whole
numbers however few there are."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from app.trajectory_figures import (
    env_length_heatmap,
    length_histogram,
    motion_length_bars,
    samplable_figure,
)
from app.trajectory_stats import MotionLengths, SamplableCurve, Trajectories

SMALL = Trajectories(env=np.array([0, 0, 1, 2, 3]), length=np.array([3, 5, 5, 9, 12]))


def _figures() -> list[go.Figure]:
    motions = MotionLengths(motion_id=np.array([0, 1, 2]), length=np.array([4, 18, 13]))
    curve = SamplableCurve(np.arange(1, 13), np.linspace(1, 0, 12), np.linspace(1, 0.1, 12))
    return [
        length_histogram(SMALL, need=9, title="t"),
        env_length_heatmap(SMALL, 4, need=9),
        motion_length_bars(motions, need=9),
        samplable_figure({"online": curve}, seq_length=8),
    ]


@pytest.mark.parametrize("index", range(4))
def test_the_window_line_is_named_in_the_legend_with_no_label_over_the_data(index: int) -> None:
    figure = _figures()[index]
    assert not figure.layout.annotations
    names = [shape.name for shape in figure.layout.shapes if shape.showlegend]
    assert names in (["window needs 9 rows"], ["seq_length 8"])


def test_few_trajectories_per_bin_tick_the_count_axis_on_whole_numbers() -> None:
    layout = length_histogram(SMALL, need=9, title="t").layout
    assert layout.yaxis.dtick == 1 and layout.yaxis.tickformat == ",d"
    assert isinstance(layout.xaxis.dtick, int)


def test_four_envs_tick_the_env_axis_and_the_colour_bar_on_whole_numbers() -> None:
    figure = env_length_heatmap(SMALL, 4, need=9)
    assert figure.layout.yaxis.dtick == 1
    assert figure.data[0].colorbar.dtick == 1

"""The shared chart style."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from app.figures import (
    MAX_TICK_INTERVALS,
    WEBGL_POINTS,
    line_trace,
    reference_line,
    styled,
    whole_number_ticks,
)


def test_styled_titles_the_axes_but_keeps_an_overlaid_axis_title() -> None:
    figure = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    figure.update_layout(yaxis2={"title": {"text": "right"}, "overlaying": "y", "side": "right"})
    styled(figure, title="t", x="step", y="left")
    assert figure.layout.xaxis.title.text == "step"
    assert figure.layout.yaxis.title.text == "left"
    assert figure.layout.yaxis2.title.text == "right"


def test_styled_leaves_the_template_to_the_dashboards_theme() -> None:
    figure = go.Figure(go.Bar(x=[1], y=[1]))
    default = figure.layout.template.to_plotly_json()
    styled(figure, title="t", x="x", y="y")
    assert figure.layout.template.to_plotly_json() == default


def test_styled_puts_the_note_under_the_title() -> None:
    figure = styled(go.Figure(), title="Loss", x="x", y="y", note="10 -> 2 points")
    assert figure.layout.title.text == "Loss<br><sup>10 -> 2 points</sup>"


def test_only_long_lines_use_webgl() -> None:
    short = np.arange(WEBGL_POINTS, dtype=float)
    long = np.arange(WEBGL_POINTS + 1, dtype=float)
    assert isinstance(line_trace(short, short, name="a"), go.Scatter)
    assert isinstance(line_trace(long, long, name="a"), go.Scattergl)


@pytest.mark.parametrize("span", [0, 1, 2, 3, 7, 9, 30, 64, 1000, 123_456])
def test_a_whole_number_axis_ticks_on_integers_with_few_intervals(span: int) -> None:
    ticks = whole_number_ticks(span)
    step = ticks["dtick"]
    assert isinstance(step, int) and step >= 1
    assert ticks["tick0"] == 0 and ticks["tickformat"] == ",d"
    assert span / step <= MAX_TICK_INTERVALS
    # The smallest such step: one notch smaller would give too many intervals (or be < 1).
    smaller = {1: 0, 2: 1, 5: 2}[int(str(step)[0])] * 10 ** (len(str(step)) - 1)
    assert smaller < 1 or span / smaller > MAX_TICK_INTERVALS


def test_a_whole_number_axis_refuses_no_intervals() -> None:
    with pytest.raises(ValueError, match="intervals"):
        whole_number_ticks(10, intervals=0)


@pytest.mark.parametrize("where", [{"x": 3.5}, {"y": 1.25}])
def test_a_reference_line_is_named_in_the_legend_and_writes_nothing_on_the_plot(
    where: dict[str, float]
) -> None:
    figure = go.Figure(go.Bar(x=[1, 2, 3], y=[1.0, 2.0, 1.5], name="bars"))
    reference_line(figure, label="mean 1.5", colour="#444", **where)
    (shape,) = figure.layout.shapes
    assert shape.name == "mean 1.5" and shape.showlegend
    assert figure.layout.showlegend
    assert not figure.layout.annotations


@pytest.mark.parametrize("where", [{}, {"x": 1.0, "y": 1.0}])
def test_a_reference_line_needs_exactly_one_position(where: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        reference_line(go.Figure(), label="l", colour="#444", **where)

"""The shared chart style."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures import WEBGL_POINTS, line_trace, styled


def test_styled_titles_the_axes_but_keeps_an_overlaid_axis_title() -> None:
    figure = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    figure.update_layout(yaxis2={"title": {"text": "right"}, "overlaying": "y", "side": "right"})
    styled(figure, title="t", x="step", y="left")
    assert figure.layout.xaxis.title.text == "step"
    assert figure.layout.yaxis.title.text == "left"
    assert figure.layout.yaxis2.title.text == "right"


def test_styled_puts_the_note_under_the_title() -> None:
    figure = styled(go.Figure(), title="Loss", x="x", y="y", note="10 -> 2 points")
    assert figure.layout.title.text == "Loss<br><sup>10 -> 2 points</sup>"


def test_only_long_lines_use_webgl() -> None:
    short = np.arange(WEBGL_POINTS, dtype=float)
    long = np.arange(WEBGL_POINTS + 1, dtype=float)
    assert isinstance(line_trace(short, short, name="a"), go.Scatter)
    assert isinstance(line_trace(long, long, name="a"), go.Scattergl)

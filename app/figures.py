"""What every dashboard chart shares: one plotly template, axis titles, a point-count note.

Figure builders elsewhere in app/ take numpy arrays and return ``plotly.graph_objects.Figure``;
they call :func:`styled` last so all charts look alike. Line charts with many points use
``Scattergl`` (WebGL) only through :func:`line_trace`, which keeps WebGL for long series alone:
browsers allow a page only a few WebGL contexts.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

# Above this many points a line is drawn with WebGL.
WEBGL_POINTS = 5_000
TEMPLATE = "plotly_white"


def styled(
    figure: go.Figure,
    *,
    title: str,
    x: str,
    y: str,
    height: int = 360,
    note: str | None = None,
) -> go.Figure:
    """``figure`` with the dashboard's template, a title, axis titles and an optional note
    (such as ``"1,000,000 -> 4,000 points"``) under the title."""
    text = title if note is None else f"{title}<br><sup>{note}</sup>"
    figure.update_layout(
        template=TEMPLATE,
        title={"text": text, "x": 0.0, "xanchor": "left"},
        height=height,
        margin={"l": 60, "r": 20, "t": 70 if note else 50, "b": 60},
        # Below the x axis title, not on it.
        legend={"orientation": "h", "y": -0.3, "yanchor": "top"},
    )
    figure.update_xaxes(title_text=x)
    # A second axis drawn over the first (``overlaying="y"``) keeps its own title.
    figure.for_each_yaxis(lambda axis: axis.update(title_text=y) if not axis.overlaying else None)
    return figure


def line_trace(
    x: np.ndarray, y: np.ndarray, *, name: str, **style: object
) -> go.Scatter | go.Scattergl:
    """A line trace; WebGL only when it has more than :data:`WEBGL_POINTS` points."""
    trace = go.Scattergl if len(x) > WEBGL_POINTS else go.Scatter
    return trace(x=x, y=y, name=name, mode="lines", **style)

"""What every dashboard chart shares: the dashboard's theme, axis titles, a point-count note.

Figure builders elsewhere in app/ take numpy arrays and return ``plotly.graph_objects.Figure``;
they call :func:`styled` last so all charts look alike (the FIFO page's return Vega-Lite specs
instead, built with :mod:`app.vega`, which loads no Plotly in the browser). Line charts with
many points use ``Scattergl`` (WebGL) only through :func:`line_trace`, which keeps WebGL for
long series alone: browsers allow a page only a few WebGL contexts. Charts take their look
from the dashboard's theme (Streamlit's plotly template, which plotly applies by default):
naming another template per figure cost 20-50 ms of server time for each chart drawn. Axes
that count things (rows, slots, envs, draws, rounds) tick on whole numbers through
:func:`whole_number_ticks`; reference lines (a mean, a cursor, a threshold) are named in the
legend through :func:`reference_line`, so no label is ever written over the bars.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

# Above this many points a line is drawn with WebGL.
WEBGL_POINTS = 5_000
# Most intervals between the ticks of a whole-number axis.
MAX_TICK_INTERVALS = 8


def styled(
    figure: go.Figure,
    *,
    title: str,
    x: str,
    y: str,
    height: int = 360,
    note: str | None = None,
) -> go.Figure:
    """``figure`` with a title, axis titles and an optional note
    (such as ``"1,000,000 -> 4,000 points"``) under the title."""
    text = title if note is None else f"{title}<br><sup>{note}</sup>"
    figure.update_layout(
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


def whole_number_ticks(span: float, *, intervals: int = MAX_TICK_INTERVALS) -> dict[str, object]:
    """Axis settings that tick a quantity counted in whole numbers (rows, slots, envs, draws,
    rounds) at integers only: a step of 1, 2 or 5 x 10^k, the smallest that leaves at most
    ``intervals`` intervals over ``span``, and never below 1 (left alone, plotly ticks a span
    of 3 at 0.5).

    Use as ``figure.update_yaxes(**whole_number_ticks(span))`` or inside a colorbar.

    Raises:
        ValueError: ``intervals < 1``.
    """
    if intervals < 1:
        raise ValueError(f"intervals: expected >= 1, got {intervals}")
    target = max(float(span), 1.0) / intervals if np.isfinite(span) else 1.0
    magnitude = 1
    while True:
        for factor in (1, 2, 5):
            if factor * magnitude >= target:
                return {"tick0": 0, "dtick": factor * magnitude, "tickformat": ",d"}
        magnitude *= 10


def reference_line(
    figure: go.Figure, *, label: str, colour: str, x: float | None = None,
    y: float | None = None, dash: str = "dash",
) -> go.Figure:
    """A vertical line at ``x`` or a horizontal one at ``y`` across the plot, named ``label``
    in the legend. A label written inside the plot lands on bars or lines wherever it is put;
    the legend keeps it clear of the data.

    Raises:
        ValueError: neither or both of ``x`` and ``y``.
    """
    if (x is None) == (y is None):
        raise ValueError(f"x, y: expected exactly one, got x={x!r}, y={y!r}")
    style = {"line": {"color": colour, "dash": dash, "width": 2}, "name": label,
             "showlegend": True}
    if x is not None:
        figure.add_vline(x=x, **style)
    else:
        figure.add_hline(y=y, **style)
    figure.update_layout(showlegend=True)
    return figure

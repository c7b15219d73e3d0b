"""Figures of an RLinf buffer directory: samples per trajectory with the window and cache
marked, episode lengths inside trajectories, where a draw landed, and the window sliding over
trajectory ids (numpy arrays in, plotly figures out; the FIFO page's two, the id strip and the
window's history, are Vega-Lite specs drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures import styled, whole_number_ticks
from app.rlinf_view import ABSENT, CACHED, OLDER, STATES, WINDOW, Segments, WindowHistory
from app.vega import Spec, chart, colours, frame, hover_points, layer, position, tooltip, zoom

COLOURS = {ABSENT: "#e45756", OLDER: "#c7ccd4", WINDOW: "#4c78a8", CACHED: "#f58518"}
# Legend names: a cached trajectory is (with a cache no larger than the window) in the window.
LEGEND = {ABSENT: "no file (a load skips it)", OLDER: "older than the window",
          WINDOW: "in the window, not cached", CACHED: "cached (newest)"}
# Above this many trajectories, bars become WebGL markers (a bar per id is too many to draw).
MAX_BARS = 2_000
SEGMENT_COLOURS = {"whole": "#4c78a8", "first": "#72b7b2", "running": "#c7ccd4"}
SEGMENT_NAMES = {
    "whole": "whole episode (between two end flags)",
    "first": "ended by the env's first flag (began here or earlier)",
    "running": "still running at the trajectory's end",
}


def samples_figure(ids: np.ndarray, samples: np.ndarray, states: np.ndarray, *, window: int,
                   cache: int) -> go.Figure:
    """Samples (``T * B``) per trajectory id, coloured by what a buffer loading the directory
    with this window and cache does with each (:data:`app.rlinf_view.STATES`)."""
    figure = go.Figure()
    for state in STATES:
        mask = states == state
        if not mask.any():
            continue
        name = f"{LEGEND[state]} ({int(mask.sum()):,})"
        if len(ids) <= MAX_BARS:
            figure.add_bar(x=ids[mask], y=samples[mask], name=name,
                           marker_color=COLOURS[state],
                           hovertemplate="id %{x}: %{y} samples<extra>" + state + "</extra>")
        else:
            figure.add_trace(go.Scattergl(
                x=ids[mask], y=samples[mask], mode="markers", name=name,
                marker={"color": COLOURS[state], "size": 3}))
    figure.update_layout(barmode="overlay", bargap=0.1, showlegend=True)
    figure.update_xaxes(**whole_number_ticks(float(ids.max() - ids.min()) if len(ids) else 0.0))
    note = (f"{len(ids):,} trajectories; window {window or 'all'}, cache {cache}: the newest "
            "trajectories whose files are there")
    return styled(figure, title="Samples per trajectory (T x B rows each)", x="trajectory id",
                  y="samples", note=note)


def segments_figure(ids: np.ndarray, segments: list[Segments]) -> go.Figure:
    """Every episode segment of each trajectory read: one dot per segment at its trajectory's
    id, its height the segment's length in steps."""
    figure = go.Figure()
    for kind in ("whole", "first", "running"):
        xs = np.concatenate([np.full(len(getattr(s, kind)), i) for i, s in
                             zip(ids, segments, strict=True)]) if segments else np.zeros(0)
        ys = np.concatenate([getattr(s, kind) for s in segments]) if segments else np.zeros(0)
        if len(xs) == 0:
            continue
        figure.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers", name=SEGMENT_NAMES[kind],
            marker={"color": SEGMENT_COLOURS[kind], "size": 7, "opacity": 0.7},
            hovertemplate="trajectory %{x}: %{y} steps<extra></extra>"))
    span = float(ids.max() - ids.min()) if len(ids) else 0.0
    figure.update_xaxes(**whole_number_ticks(span))
    return styled(figure, title="Episode lengths inside each trajectory read",
                  x="trajectory id", y="steps", note="one dot per env and episode segment")


def segment_histogram(pooled: Segments) -> go.Figure:
    """Segments per length over every trajectory read, stacked by kind."""
    lengths = np.concatenate([pooled.whole, pooled.first, pooled.running])
    high = int(lengths.max()) if len(lengths) else 1
    edges = np.unique(np.linspace(1, high + 1, min(high, 60) + 1).round().astype(np.int64))
    figure = go.Figure()
    stacked = np.zeros(len(edges) - 1, dtype=np.int64)
    for kind in ("whole", "first", "running"):
        counts, _ = np.histogram(getattr(pooled, kind), bins=edges)
        stacked += counts
        centre = (edges[:-1] + edges[1:] - 1) / 2
        figure.add_bar(x=centre, y=counts, width=np.diff(edges) * 0.9,
                       name=SEGMENT_NAMES[kind], marker_color=SEGMENT_COLOURS[kind])
    figure.update_layout(barmode="stack")
    figure.update_yaxes(**whole_number_ticks(float(stacked.max()) if len(stacked) else 0.0))
    note = (f"{len(pooled.whole):,} whole, {len(pooled.first):,} first, "
            f"{len(pooled.running):,} running segments")
    return styled(figure, title="Episode segment lengths", x="steps", y="segments", note=note)


def landing_figure(window_ids: np.ndarray, window_samples: np.ndarray, drawn_ids: np.ndarray,
                   drawn_rows: np.ndarray) -> go.Figure:
    """Where a draw landed: each drawn row as a dot at (trajectory id, row), over bars giving
    each window trajectory's rows."""
    figure = go.Figure()
    figure.add_bar(x=window_ids, y=window_samples, name="rows of the trajectory",
                   marker_color=COLOURS[OLDER], hoverinfo="skip")
    figure.add_trace(go.Scatter(
        x=drawn_ids, y=drawn_rows + 0.5, mode="markers", name="drawn row",
        marker={"color": "#e45756", "size": 6},
        hovertemplate="trajectory %{x}, row %{customdata}<extra></extra>",
        customdata=drawn_rows))
    span = float(window_ids.max() - window_ids.min()) if len(window_ids) else 0.0
    figure.update_xaxes(**whole_number_ticks(span))
    return styled(figure, title=f"Where the batch landed: {len(drawn_ids):,} rows",
                  x="trajectory id (the window)", y="row (t * B + b)",
                  note="a bar is one trajectory's T x B rows; a dot one drawn row")


def id_strip_figure(ids: np.ndarray, states: np.ndarray) -> Spec:
    """Every trajectory id as one cell coloured by its state: the window and cache at the
    newest end of the id list (a Vega-Lite spec, as the FIFO page draws only those)."""
    present = [state for state in STATES if (states == state).any()]
    names = {state: f"{LEGEND[state]} ({int((states == state).sum()):,})" for state in present}
    low, high = (int(ids.min()), int(ids.max())) if len(ids) else (0, 0)
    span = position("left", title="trajectory id", whole=True,
                    scale={"domain": [low - 0.5, high + 0.5]}, axis={"grid": False})
    strip = layer(
        {"type": "rect"}, data="ids", params=[zoom("x")],
        transform=[{"calculate": "datum.id - 0.5", "as": "left"},
                   {"calculate": "datum.id + 0.5", "as": "right"}],
        encoding={"x": span, "x2": {"field": "right"},
                  "y": {"datum": 0, "type": "quantitative", "axis": None,
                        "scale": {"domain": [0, 1]}},
                  "y2": {"datum": 1},
                  "color": colours([names[s] for s in present], [COLOURS[s] for s in present],
                                   field="name"),
                  "tooltip": tooltip(("id", "id", ",d"), ("state", "state", None))})
    return chart([strip], title="Trajectory ids, oldest to newest", height=220,
                 datasets={"ids": frame(id=ids, state=states.astype(str),
                                        name=[names[s] for s in states])})


def history_figure(history: WindowHistory, *, window: int) -> Spec:
    """The window's oldest and newest id after each add: the band slides up the id list
    (a Vega-Lite spec)."""
    oldest, newest = "oldest id in the window", "newest id (just added)"
    added = position("added", title="trajectories added", whole=True)
    ident = position("id", title="trajectory id", whole=True)
    lines = (["oldest", "newest"], [oldest, newest])
    layers = [
        layer({"type": "area", "opacity": 0.2, "color": COLOURS[WINDOW], "tooltip": None},
              data="window", params=[zoom("x")],
              encoding={"x": added, "y": {**ident, "field": "oldest"}, "y2": {"field": "newest"}}),
        layer({"type": "line", "strokeWidth": 2}, data="window",
              transform=[{"fold": lines[0], "as": ["which", "id"]},
                         {"calculate": f"datum.which == 'oldest' ? '{oldest}' : '{newest}'",
                          "as": "line"}],
              encoding={"x": added, "y": ident,
                        "color": colours([oldest, newest], [COLOURS[WINDOW], COLOURS[WINDOW]],
                                         field="line"),
                        "strokeDash": {"field": "line", "type": "nominal",
                                       "scale": {"domain": [oldest, newest],
                                                 "range": [[5, 3], [1, 0]]},
                                       "legend": {"title": ""}}}),
        hover_points("window", x=added, y={**ident, "field": "newest"},
                     fields=[("added", "trajectories added", ",d"),
                             ("oldest", "oldest id", ",d"), ("newest", "newest id", ",d")]),
    ]
    return chart(layers, title="How the window slid as trajectories were added",
                 note=f"window {window or 'all'}: after k adds it holds the newest "
                 f"{window or 'k'} ids of the list",
                 datasets={"window": frame(added=history.added, oldest=history.oldest,
                                           newest=history.newest)})

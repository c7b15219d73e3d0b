"""Figures of an RLinf buffer directory: samples per trajectory with the window and cache
marked, episode lengths inside trajectories, where a draw landed, and the window sliding over
trajectory ids (numpy arrays in, Vega-Lite specs out, drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.rlinf_view import ABSENT, CACHED, OLDER, STATES, WINDOW, Segments, WindowHistory
from app.vega import (
    Spec,
    bar_spans,
    chart,
    colours,
    frame,
    hover_points,
    layer,
    position,
    tooltip,
    zoom,
)

COLOURS = {ABSENT: "#e45756", OLDER: "#c7ccd4", WINDOW: "#4c78a8", CACHED: "#f58518"}
# Legend names: a cached trajectory is (with a cache no larger than the window) in the window.
LEGEND = {ABSENT: "no file (a load skips it)", OLDER: "older than the window",
          WINDOW: "in the window, not cached", CACHED: "cached (newest)"}
# Above this many trajectories, bars become dots (a bar per id is too thin to see).
MAX_BARS = 2_000
DRAWN = "#e45756"
# Kinds of episode segment, in stacking order (whole episodes at the bottom).
SEGMENT_KINDS = ("whole", "first", "running")
SEGMENT_COLOURS = {"whole": "#4c78a8", "first": "#72b7b2", "running": "#c7ccd4"}
SEGMENT_NAMES = {
    "whole": "whole episode (between two end flags)",
    "first": "ended by the env's first flag (began here or earlier)",
    "running": "still running at the trajectory's end",
}


def samples_figure(ids: np.ndarray, samples: np.ndarray, states: np.ndarray, *, window: int,
                   cache: int) -> Spec:
    """Samples (``T * B``) per trajectory id, coloured by what a buffer loading the directory
    with this window and cache does with each (:data:`app.rlinf_view.STATES`): a bar per id up
    to :data:`MAX_BARS` ids, a dot above."""
    present = [state for state in STATES if (states == state).any()]
    names = {state: f"{LEGEND[state]} ({int((states == state).sum()):,})" for state in present}
    low, high = (int(ids.min()), int(ids.max())) if len(ids) else (0, 0)
    ident = position("left" if len(ids) <= MAX_BARS else "id", title="trajectory id",
                     whole=True, scale={"domain": [low - 0.5, high + 0.5]})
    encoding: Spec = {
        "x": ident, "y": position("samples", title="samples", whole=True),
        "color": colours([names[s] for s in present], [COLOURS[s] for s in present],
                         field="name"),
        "tooltip": tooltip(("id", "id", ",d"), ("samples", "samples", ",d"),
                           ("state", "state", None)),
    }
    if len(ids) <= MAX_BARS:
        mark: Spec = {"type": "rect"}
        encoding.update({"x2": {"field": "right"}, "y2": {"datum": 0}})
    else:
        mark = {"type": "circle", "size": 9, "opacity": 0.9}
    left, right = bar_spans(ids - 0.5, ids + 0.5)
    note = (f"{len(ids):,} trajectories; window {window or 'all'}, cache {cache}: the newest "
            "trajectories whose files are there")
    return chart(
        [layer(mark, data="ids", params=[zoom("x")], encoding=encoding)],
        title="Samples per trajectory (T x B rows each)", note=note,
        datasets={"ids": frame(id=ids, left=left, right=right, samples=samples,
                               state=states.astype(str), name=[names[s] for s in states])},
    )


def segments_figure(ids: np.ndarray, segments: list[Segments]) -> Spec:
    """Every episode segment of each trajectory read: one dot per segment at its trajectory's
    id, its height the segment's length in steps."""
    kinds = [kind for kind in SEGMENT_KINDS if any(len(getattr(s, kind)) for s in segments)]
    columns: dict[str, list[np.ndarray]] = {"id": [], "steps": [], "kind": []}
    for kind in kinds:
        for ident, segment in zip(ids.tolist(), segments, strict=True):
            lengths = np.asarray(getattr(segment, kind))
            columns["id"].append(np.full(len(lengths), ident, dtype=np.int64))
            columns["steps"].append(lengths)
            columns["kind"].append(np.full(len(lengths), SEGMENT_NAMES[kind]))
    low, high = (int(ids.min()), int(ids.max())) if len(ids) else (0, 0)
    dots = layer(
        {"type": "circle", "size": 49, "opacity": 0.7}, data="segments", params=[zoom("x")],
        encoding={"x": position("id", title="trajectory id", whole=True,
                                scale={"domain": [low - 0.5, high + 0.5]}),
                  # Room above the longest: a dot on the plot's edge is cut in half.
                  "y": position("steps", title="steps", whole=True,
                                scale={"zero": True, "padding": 8}),
                  "color": colours([SEGMENT_NAMES[k] for k in kinds],
                                   [SEGMENT_COLOURS[k] for k in kinds], field="kind"),
                  "tooltip": tooltip(("id", "trajectory", ",d"), ("steps", "steps", ",d"),
                                     ("kind", "segment", None))})
    return chart(
        [dots], title="Episode lengths inside each trajectory read",
        note="one dot per env and episode segment",
        datasets={"segments": frame(**{name: np.concatenate(parts) if parts else np.zeros(0)
                                       for name, parts in columns.items()})},
    )


def segment_histogram(pooled: Segments) -> Spec:
    """Segments per length over every trajectory read, stacked by kind (whole episodes at the
    bottom)."""
    lengths = np.concatenate([pooled.whole, pooled.first, pooled.running])
    high = int(lengths.max()) if len(lengths) else 1
    edges = np.unique(np.linspace(1, high + 1, min(high, 60) + 1).round().astype(np.int64))
    left, right = bar_spans(edges[:-1] - 0.5, edges[1:] - 0.5)
    labels = [f"{a:,}" if a == b else f"{a:,}-{b:,}" for a, b in
              zip(edges[:-1].tolist(), (edges[1:] - 1).tolist(), strict=True)]
    base = np.zeros(len(edges) - 1, dtype=np.int64)
    parts = []
    for kind in SEGMENT_KINDS:
        counts, _ = np.histogram(getattr(pooled, kind), bins=edges)
        parts.append(frame(left=left, right=right, bottom=base, top=base + counts, count=counts,
                           kind=[SEGMENT_NAMES[kind]] * len(counts), lengths=labels))
        base = base + counts
    bars = layer(
        {"type": "rect"}, data="bins", params=[zoom("x")],
        # Stacked here rather than by Vega-Lite: each kind's bar starts where the last ended.
        encoding={"x": position("left", title="steps", whole=True,
                                scale={"domain": [float(edges[0]) - 0.5,
                                                  float(edges[-1]) - 0.5]}),
                  "x2": {"field": "right"},
                  "y": position("top", title="segments", whole=True), "y2": {"field": "bottom"},
                  "color": colours([SEGMENT_NAMES[k] for k in SEGMENT_KINDS],
                                   [SEGMENT_COLOURS[k] for k in SEGMENT_KINDS], field="kind"),
                  "tooltip": tooltip(("lengths", "steps", None), ("kind", "segment", None),
                                     ("count", "segments", ",d"))})
    note = (f"{len(pooled.whole):,} whole, {len(pooled.first):,} first, "
            f"{len(pooled.running):,} running segments")
    return chart([bars], title="Episode segment lengths", note=note,
                 datasets={"bins": pd.concat(parts, ignore_index=True)})


def landing_figure(window_ids: np.ndarray, window_samples: np.ndarray, drawn_ids: np.ndarray,
                   drawn_rows: np.ndarray) -> Spec:
    """Where a draw landed: each drawn row as a dot at (trajectory id, row), over bars giving
    each window trajectory's rows (row r spans ``[r, r + 1]``, the dot at its middle)."""
    rows_name, drawn_name = "rows of the trajectory", "drawn row"
    legend = ([rows_name, drawn_name], [COLOURS[OLDER], DRAWN])
    low, high = (int(window_ids.min()), int(window_ids.max())) if len(window_ids) else (0, 0)
    ident = position("id", title="trajectory id (the window)", whole=True,
                     scale={"domain": [low - 0.5, high + 0.5]})
    # A few pixels of room at both ends: the dots of the first and last rows sit on the edge,
    # where the plot would cut them in half.
    row = position("row", title="row (t * B + b)", whole=True,
                   scale={"zero": True, "padding": 5})
    left, right = bar_spans(window_ids - 0.5, window_ids + 0.5, fill=0.8)
    layers = [
        layer({"type": "rect", "tooltip": None}, data="window", params=[zoom("x")],
              encoding={"x": {**ident, "field": "left"}, "x2": {"field": "right"},
                        "y": {**row, "field": "rows"}, "y2": {"datum": 0},
                        "color": colours(*legend, datum=rows_name)}),
        layer({"type": "circle", "size": 36, "opacity": 1}, data="drawn",
              transform=[{"calculate": "datum.row + 0.5", "as": "middle"}],
              encoding={"x": ident, "y": {**row, "field": "middle"},
                        "color": colours(*legend, datum=drawn_name),
                        "tooltip": tooltip(("id", "trajectory", ",d"), ("row", "row", ",d"))}),
    ]
    return chart(
        layers, title=f"Where the batch landed: {len(drawn_ids):,} rows",
        note="a bar is one trajectory's T x B rows; a dot one drawn row",
        datasets={"window": frame(left=left, right=right, rows=window_samples),
                  "drawn": frame(id=drawn_ids, row=drawn_rows)},
    )


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

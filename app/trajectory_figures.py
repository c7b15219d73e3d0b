"""Figures of the Trajectories page: length histograms, per-env lengths, per-motion lengths and
the samplable fraction against the window length (numpy in, Vega-Lite specs out, drawn with
``st.vega_lite_chart``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.trajectory_stats import (
    MotionLengths,
    SamplableCurve,
    Trajectories,
    env_length_counts,
    length_bins,
    length_counts,
)
from app.vega import (
    Spec,
    bar_spans,
    chart,
    colours,
    frame,
    hover_points,
    hover_rows,
    layer,
    position,
    tooltip,
    vertical_rule,
    zoom,
)

SAMPLABLE = "#1f77b4"
TOO_SHORT = "#c7c7c7"
NEED = "#d62728"
# ColorBrewer's Blues, light to dark: the heatmap's counts from 0 to the most.
BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5",
         "#08519c", "#08306b"]
# One colour per buffer on the samplable chart; a buffer's transitions are dotted.
CURVE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c")
SOLID, DOTTED, DASHED = [1, 0], [2, 3], [6, 4]


def _series(need: int) -> tuple[list[str], list[str]]:
    """The legend of a chart split at ``need`` rows: long enough, too short, the need line."""
    return ([f"long enough (>= {need} rows)", f"too short (< {need} rows)",
             f"window needs {need} rows"], [SAMPLABLE, TOO_SHORT, NEED])


def _length_labels(low: np.ndarray, high: np.ndarray) -> list[str]:
    return [f"{a:,}" if a == b else f"{a:,}-{b:,}" for a, b in zip(low.tolist(), high.tolist(),
                                                                   strict=True)]


def _length_axis(edges: np.ndarray, need: int, field: str) -> Spec:
    """The trajectory-length axis over the bins and the need line (a line just outside the
    bins still shows, at the plot's edge)."""
    low = min(float(edges[0]), float(need)) - 0.5
    high = max(float(edges[-1]), float(need)) - 0.5
    return position(field, title="trajectory length (rows)", whole=True,
                    scale={"domain": [low, high]})


def length_histogram(traj: Trajectories, *, need: int, title: str) -> Spec:
    """Trajectories per length bin, bins below ``need`` grey (never sampled), with the need
    named in the legend (a bin holds the lengths ``edges[i] .. edges[i+1] - 1``)."""
    edges = length_bins(traj.length)
    counts = length_counts(traj.length, edges)
    low, high = edges[:-1], edges[1:] - 1
    left, right = bar_spans(low - 0.5, high + 0.5)
    names, palette = _series(need)
    bars = layer(
        {"type": "rect"}, data="bins", params=[zoom("x")],
        encoding={"x": _length_axis(edges, need, "left"), "x2": {"field": "right"},
                  "y": position("count", title="trajectories", whole=True),
                  "y2": {"datum": 0},
                  "color": colours(names, palette, field="kind"),
                  "tooltip": tooltip(("lengths", "length (rows)", None),
                                     ("count", "trajectories", ",d"))})
    return chart(
        [bars, vertical_rule(need - 0.5, colour=NEED, label=names[2], legend=(names, palette))],
        title=title, note=f"{len(traj):,} trajectories, {int(traj.length.sum()):,} rows",
        datasets={"bins": frame(left=left, right=right, count=counts,
                                kind=np.where(high >= need, names[0], names[1]),
                                lengths=_length_labels(low, high))},
    )


def env_length_heatmap(traj: Trajectories, env_count: int, *, need: int) -> Spec:
    """Trajectories per env (rows) and length bin (columns): only the cells holding any are
    sent and drawn, over a plot filled with the colour of 0."""
    edges = length_bins(traj.length)
    counts = env_length_counts(traj, env_count, edges)
    env, column = np.nonzero(counts)
    low, high = edges[:-1][column], edges[1:][column] - 1
    most = int(counts.max()) if counts.size else 0
    names, palette = [f"window needs {need} rows"], [NEED]
    height = int(min(700, max(300, 14 * env_count + 120)))
    cells = layer(
        {"type": "rect"}, data="cells", params=[zoom("x", "y")],
        encoding={
            "x": _length_axis(edges, need, "left"), "x2": {"field": "right"},
            "y": position("bottom", title="env", whole=True,
                          scale={"domain": [-0.5, max(env_count, 1) - 0.5]},
                          axis={"grid": False}),
            "y2": {"field": "top"},
            # fill, not color: the need line's legend keeps the color channel to itself.
            "fill": {"field": "count", "type": "quantitative",
                     "scale": {"domain": [0, max(most, 1)], "range": BLUES},
                     "legend": {"title": "trajectories", "orient": "right",
                                "direction": "vertical", "format": ",d", "tickMinStep": 1,
                                "gradientLength": height // 2}},
            "tooltip": tooltip(("env", "env", ",d"), ("lengths", "length (rows)", None),
                               ("count", "trajectories", ",d")),
        })
    spec = chart(
        [cells, vertical_rule(need - 0.5, colour=NEED, label=names[0],
                              legend=(names, palette))],
        title="Trajectory lengths per env",
        note="each row is one env; darker = more trajectories of that length",
        height=height,
        datasets={"cells": frame(left=low - 0.5, right=high + 0.5, bottom=env - 0.5,
                                 top=env + 0.5, env=env, count=counts[env, column],
                                 lengths=_length_labels(low, high))},
    )
    spec["view"] = {"fill": BLUES[0], "stroke": None}
    return spec


def motion_length_bars(motions: MotionLengths, *, need: int) -> Spec:
    """One bar per expert trajectory (motion), grey when shorter than ``need``, and the need
    as a horizontal line named in the legend."""
    order = np.argsort(motions.motion_id, kind="stable")
    ids, lengths = motions.motion_id[order], motions.length[order]
    names, palette = _series(need)
    motion = [str(m) for m in ids.tolist()]
    bars = layer(
        {"type": "bar"}, data="motions",
        encoding={
            # One band per motion in id order, labels level and thinned out when crowded.
            "x": {"field": "motion", "type": "ordinal",
                  "scale": {"domain": list(dict.fromkeys(motion))},
                  "axis": {"title": "motion id", "labelAngle": 0, "labelOverlap": "greedy"}},
            "y": {**position("length", title="length (rows)", whole=True), "stack": None},
            "color": colours(names, palette, field="kind"),
            "tooltip": tooltip(("motion", "motion", None), ("length", "rows", ",d")),
        })
    need_line = layer(
        {"type": "rule", "strokeWidth": 2, "color": NEED, "strokeDash": DASHED},
        data=[{"y": need - 0.5, "label": names[2]}],
        encoding={"y": {"field": "y", "type": "quantitative"},
                  "color": colours(names, palette, field="label"),
                  "tooltip": tooltip(("label", "line", None))})
    short = int((lengths < need).sum())
    return chart(
        [bars, need_line], title="Expert trajectory length per motion",
        note=f"{len(ids):,} trajectories; {short:,} shorter than the window (grey) are never "
        "sampled",
        datasets={"motions": frame(motion=motion, length=lengths,
                                   kind=np.where(lengths >= need, names[0], names[1]))},
    )


def samplable_figure(curves: dict[str, SamplableCurve], *, seq_length: int) -> Spec:
    """Samplable fraction of trajectories (solid) and transitions (dotted) vs window length,
    one colour per buffer, and the chosen ``seq_length`` named in the legend."""
    names: list[str] = []
    palette: list[str] = []
    dashes: list[list[int]] = []
    parts = []
    for (buffer, curve), colour in zip(curves.items(), CURVE_COLOURS, strict=False):
        for what, fraction, dash in (("trajectories", curve.trajectory_fraction, SOLID),
                                     ("transitions", curve.transition_fraction, DOTTED)):
            names.append(f"{buffer}: {what}")
            palette.append(colour)
            dashes.append(dash)
            parts.append(frame(seq_length=curve.seq_length, fraction=fraction,
                               label=[names[-1]] * len(curve.seq_length)))
    rule = f"seq_length {seq_length}"
    legend = ([*names, rule], [*palette, NEED])
    x = position("seq_length", title="seq_length", whole=True)
    y = position("fraction", title="fraction samplable", scale={"domain": [0, 1.05]},
                 axis={"format": ".0%"})
    lines = layer(
        {"type": "line", "strokeWidth": 2}, data="curves", params=[zoom("x")],
        # "label", the rule's field too: one legend for colour and dash, each entry drawn as
        # its line is.
        encoding={"x": x, "y": y, "color": colours(*legend, field="label"),
                  "strokeDash": {"field": "label", "type": "nominal",
                                 "scale": {"domain": legend[0], "range": [*dashes, DASHED]},
                                 "legend": {"title": ""}}})
    points = hover_points("hover", x=x, y=y, fields=[
        ("label", "curve", None), ("seq_length", "seq_length", ",d"),
        ("fraction", "samplable", ".1%")])
    data = (pd.concat(parts, ignore_index=True) if parts else
            frame(seq_length=np.zeros(0), fraction=np.zeros(0), label=np.zeros(0, dtype=str)))
    return chart(
        [lines, points, vertical_rule(seq_length, colour=NEED, label=rule, legend=legend)],
        title="What a window length can still sample",
        note="solid: trajectories long enough; dotted: rows a window can return",
        datasets={"curves": data, "hover": hover_rows(data)},
    )

"""Figures of the Sampling lab: where a batch landed and empirical against expected frequency
(numpy arrays in, plotly figures out; the landing map over the episode-end map is a Vega-Lite
spec, as the FIFO page's map it builds on)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures import styled, whole_number_ticks
from app.ring import BinnedMap, window_runs
from app.ring_figures import CURSOR, boundary_map_figure
from app.vega import Spec, colours, frame, layer, position, tooltip

DRAWN = "#e45756"
EXPECTED = "#9ca3af"
EMPIRICAL = "#4c78a8"
BOUNDARY = "#6b7280"
# How far a window's bar reaches into its first and last cell (cells are 1 row wide).
RUN_EDGE = 0.4
# Up to this many bins the frequencies are bars, one pair per bin.
BAR_BINS = 100
# Up to this many motions the landing chart names them along its top.
SEGMENT_LABELS = 40


def landing_map_figure(
    binned: BinnedMap, cursor: int, starts: np.ndarray, envs: np.ndarray, seq_length: int,
    *, end_key: str, full: bool,
) -> Spec:
    """The episode-end map (a Vega-Lite spec, :func:`app.ring_figures.boundary_map_figure`)
    with each drawn window as a red bar over the time rows it covers (in its env), a dot at
    its start. A window that runs past the ring's last slot continues at slot 0: it is drawn
    as two bars (:func:`app.ring.window_runs`).

    Raises:
        ValueError: ``starts`` and ``envs`` differ in length, or as :func:`window_runs`.
    """
    starts = np.asarray(starts, dtype=np.int64)
    envs = np.asarray(envs, dtype=np.int64)
    if starts.shape != envs.shape:
        raise ValueError(f"envs: expected one per start ({starts.shape}), got {envs.shape}")
    spec = boundary_map_figure(binned, cursor, end_key=end_key, full=full)
    window, first, last = window_runs(starts, seq_length, binned.time_rows)
    wraps = int((np.bincount(window, minlength=len(starts)) > 1).sum())
    bar, dot = f"drawn window ({seq_length} rows)", "window start"
    legend = ([bar, dot], [DRAWN, DRAWN])
    time = position("left", title="time row (physical slot)", whole=True)
    env = position("env", title="env", whole=True)
    # Each bar spans its cells (a slot's cell is [slot - 0.5, slot + 0.5]), so a run of one
    # slot stays visible.
    spec["layer"] += [
        layer({"type": "rule", "strokeWidth": 3, "tooltip": None}, data="runs",
              encoding={"x": time, "x2": {"field": "right"}, "y": env,
                        "color": colours(*legend, datum=bar)}),
        layer({"type": "circle", "size": 36, "opacity": 1}, data="starts",
              encoding={"x": {**time, "field": "start"}, "y": env,
                        "color": colours(*legend, datum=dot),
                        "tooltip": tooltip(("start", "start row", ",d"), ("env", "env", ",d"))}),
    ]
    spec["datasets"] = {
        **spec["datasets"],
        "runs": frame(left=first - RUN_EDGE, right=last + RUN_EDGE, env=envs[window]),
        "starts": frame(start=starts, env=envs),
    }
    wrapped = (f"; {wraps:,} run past the last slot and continue at slot 0" if wraps else "")
    spec["title"] = {
        **spec["title"],
        "text": f"Where the batch landed: {len(starts):,} windows on the episode map",
        "subtitle": f"{binned.caption()}; dark cells end an episode, red = drawn windows"
        f"{wrapped}; no window crosses a dark cell or the cursor",
    }
    return spec


def row_landing_figure(
    rows: np.ndarray, length: int, *, unit: str = "row",
    segments: tuple[np.ndarray, np.ndarray] | None = None,
) -> go.Figure:
    """Drawn rows along the row axis ``[0, length)``, counted in at most 200 bins.

    ``segments`` (each segment's first row and its label, e.g. an expert buffer's motions)
    draws a boundary before every segment but the first, and names the segments along the top
    when there are at most :data:`SEGMENT_LABELS`.
    """
    bins = int(min(length, 200))
    counts, edges = np.histogram(rows, bins=bins, range=(0, length))
    figure = go.Figure(
        go.Bar(x=edges[:-1], y=counts, width=np.diff(edges), offset=0, marker={"color": DRAWN},
               name="draws", hovertemplate=f"{unit}s %{{x:.0f}}+<br>draws %{{y}}<extra></extra>")
    )
    figure.update_xaxes(range=[0, length], **whole_number_ticks(length))
    figure.update_yaxes(**whole_number_ticks(float(counts.max()) if counts.size else 0.0))
    note = f"{bins} bins" if bins < length else None
    if segments is not None:
        starts, labels = np.asarray(segments[0], dtype=np.int64), np.asarray(segments[1])
        inner = starts[starts > 0]
        top = float(counts.max()) * 1.05 if counts.size and counts.max() > 0 else 1.0
        # One trace for every boundary (None breaks the line between them): cheap at any count.
        xs = np.column_stack([inner, inner, np.full(len(inner), np.nan)]).reshape(-1)
        ys = np.column_stack([np.zeros(len(inner)), np.full(len(inner), top),
                              np.full(len(inner), np.nan)]).reshape(-1)
        figure.add_trace(go.Scatter(x=xs.astype(np.float64), y=ys, mode="lines",
                                    name="motion boundary", hoverinfo="skip",
                                    line={"color": BOUNDARY, "width": 1}))
        if len(starts) <= SEGMENT_LABELS:
            ends = np.append(starts[1:], length)
            figure.update_layout(xaxis2={
                "overlaying": "x", "side": "top", "range": [0, length], "showgrid": False,
                "tickmode": "array", "tickvals": ((starts + ends) / 2).tolist(),
                "ticktext": [str(v) for v in labels.tolist()], "tickfont": {"size": 10},
            })
            # An empty trace on the top axis makes plotly draw it.
            figure.add_trace(go.Scatter(x=[], y=[], xaxis="x2", showlegend=False))
        note = (note + "; " if note else "") + f"grey lines: {len(starts):,} motions"
        figure.update_layout(showlegend=False)
    styled(
        figure,
        title=f"Where the batch landed: {len(rows):,} draws along the {length:,} filled {unit}s",
        x=f"{unit} (physical storage index)",
        y="draws",
        height=340 if segments is not None else 300,
        note=note,
    )
    if segments is not None and len(segments[0]) <= SEGMENT_LABELS:
        # styled titles every x axis alike; the top one names the motions.
        figure.update_layout(margin={"t": 110}, xaxis2={"title": {"text": "motion id"}})
    return figure


def frequency_figure(
    labels: np.ndarray, expected: np.ndarray, observed: np.ndarray, *, unit: str, units: str
) -> go.Figure:
    """Empirical against expected frequency per bin: bars for up to :data:`BAR_BINS` bins;
    above, the distribution of each bin's standardized deviation
    ``(drawn - expected) / sd`` against the standard normal a correct sampler gives.
    ``unit`` names one bin, ``units`` several.

    A scatter of empirical against expected says nothing when every bin expects the same (a
    vertical stripe, as with ``"trajectory"`` weighting); the deviations' histogram does.

    Raises:
        ValueError: no draws, or ``labels``, ``expected`` and ``observed`` differ in length.
    """
    if not len(labels) == len(expected) == len(observed):
        raise ValueError(f"labels, expected, observed: expected one length, got "
                         f"{len(labels)}, {len(expected)}, {len(observed)}")
    total = float(np.sum(observed))
    if total <= 0:
        raise ValueError("observed: expected at least one draw")
    if len(labels) <= BAR_BINS:
        text = [str(v) for v in labels.tolist()]
        figure = go.Figure([
            go.Bar(x=text, y=expected, name="expected", marker={"color": EXPECTED}),
            go.Bar(x=text, y=observed / total, name="empirical", marker={"color": EMPIRICAL}),
        ])
        figure.update_layout(barmode="group")
        figure.update_xaxes(type="category")
        return styled(figure, title=f"Empirical vs expected frequency per {unit}",
                      x=unit, y="fraction of draws")
    deviation, left_out = standardized_deviations(expected, observed)
    # Half-sd bins: finer ones leave gaps, as counts are whole numbers.
    edges = np.linspace(-5.0, 5.0, 21)
    counts, _ = np.histogram(np.clip(deviation, -5.0, 5.0), bins=edges)
    width = float(edges[1] - edges[0])
    figure = go.Figure(
        go.Bar(x=edges[:-1] + width / 2, y=counts, width=width * 0.95, name=units,
               marker={"color": EMPIRICAL},
               hovertemplate=f"deviation %{{x:.2f}}: %{{y}} {units}<extra></extra>")
    )
    grid = np.linspace(-5.0, 5.0, 201)
    normal = len(deviation) * width * np.exp(-grid**2 / 2) / np.sqrt(2 * np.pi)
    figure.add_trace(go.Scatter(x=grid, y=normal, mode="lines", name="a correct sampler",
                                line={"color": CURSOR, "dash": "dash"}))
    figure.update_yaxes(**whole_number_ticks(float(max(counts.max(), normal.max()))))
    note = (f"{len(deviation):,} {units}; the bell is the standard normal; outside +/-5 "
            "counted at the edge")
    if left_out:
        note += f"; {left_out:,} {units} that cannot be drawn left out"
    return styled(figure, title=f"How far each {unit}'s draws are from the expected count",
                  x="(drawn - expected) / sd", y=units, note=note)


def standardized_deviations(
    expected: np.ndarray, observed: np.ndarray
) -> tuple[np.ndarray, int]:
    """Each bin's ``(observed - n p) / sqrt(n p (1 - p))`` over the bins that can be drawn
    (``0 < p < 1``), and how many bins were left out. With a correct sampler and enough draws
    these follow the standard normal.
    """
    probability = np.asarray(expected, dtype=np.float64)
    counts = np.asarray(observed, dtype=np.float64)
    total = counts.sum()
    keep = (probability > 0) & (probability < 1)
    p = probability[keep]
    deviation = (counts[keep] - total * p) / np.sqrt(total * p * (1 - p))
    return deviation, int((~keep).sum())

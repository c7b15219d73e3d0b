"""Figures of the Replay statistics view: log-scale histograms of priorities and importance
weights with the drawn batch marked, use and staleness histograms with their limits, the logged
replay figures over training, and the trajectories prioritized window draws favour (numpy
arrays in, plotly figures out)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from app.figures import line_trace, reference_line, styled, whole_number_ticks
from app.replay_view import CountHistogram, Dominance, LogHistogram, ReplaySeries
from app.vega import log_ticks

HELD = "#4c78a8"
EXPECTED = "#6b7280"
DRAWN = "#e45756"
LIMIT = "#d62728"
BAND = "rgba(76, 120, 168, 0.18)"
INNER_BAND = "rgba(76, 120, 168, 0.35)"
PUSH = "#4c78a8"
SAMPLE = "#f58518"
# Trajectories the dominance chart names at most.
TOP_TRAJECTORIES = 20


def log_histogram_figure(
    hist: LogHistogram,
    *,
    title: str,
    x: str,
    unit: str,
    expected_label: str = "share of draws the sampler promises",
    seed: int | None = None,
) -> go.Figure:
    """Shares per log-scale bin: the held ``unit`` s (bars), the draws the sampler promises
    (a line, where known) and the drawn batch (red bars over the others, labelled with its
    ``seed``). The note counts what a log axis cannot show (values 0 or not finite)."""
    centres = (hist.edges[:-1] + hist.edges[1:]) / 2
    widths = np.diff(hist.edges)
    figure = go.Figure()
    figure.add_trace(go.Bar(x=centres, y=100 * hist.held, width=widths, name=f"held {unit}s",
                            marker={"color": HELD}, opacity=0.55))
    if hist.drawn is not None:
        label = "drawn batch" + ("" if seed is None else f" (seed {seed})")
        figure.add_trace(go.Bar(x=centres, y=100 * hist.drawn, width=widths, name=label,
                                marker={"color": DRAWN}, opacity=0.65))
    if hist.expected is not None:
        # A step line over the bin edges: the promised share of each bin, flat across it.
        xs = np.repeat(hist.edges, 2)[1:-1]
        ys = np.repeat(100 * hist.expected, 2)
        figure.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=expected_label,
                                    line={"color": EXPECTED, "width": 2, "dash": "dot"}))
    figure.update_layout(barmode="overlay", showlegend=True)
    low, high = math.log10(hist.edges[0]), math.log10(hist.edges[-1])
    pad = (high - low) / max(len(widths), 1)  # one bin each side: edge bars stay visible
    ticks = log_ticks(10.0 ** (low - pad), 10.0 ** (high + pad))
    figure.update_xaxes(type="log", range=[low - pad, high + pad], tickvals=ticks,
                        ticktext=[f"{tick:.3g}" for tick in ticks])
    notes = []
    if hist.drawn is not None:
        notes.append(f"drawn batch: {hist.drawn_count:,} {unit}s")
    if hist.left_out:
        notes.append(f"{hist.left_out:,} {unit}s at 0 (never drawn) not on the log axis")
    return styled(figure, title=title, x=x, y=f"% of {unit}s (or draws)",
                  note="; ".join(notes) or None)


def count_histogram_figure(
    hist: CountHistogram,
    *,
    title: str,
    x: str,
    unit: str,
    limit: float | None = None,
    limit_label: str = "",
) -> go.Figure:
    """Items per whole value (or bin), with ``limit`` as a dashed line where it is finite;
    the note counts the items without a value."""
    # One value per bar: centred on it, with a gap; a bin: spanning its values.
    centres = hist.left if hist.per_value else hist.left + hist.width / 2
    widths = 0.8 * hist.width if hist.per_value else hist.width
    figure = go.Figure(go.Bar(x=centres, y=hist.counts, width=widths, name=f"{unit}s",
                              marker={"color": HELD}))
    if limit is not None and math.isfinite(limit):
        reference_line(figure, label=limit_label, colour=LIMIT, x=limit)
    span = float(hist.counts.max()) if len(hist.counts) else 1.0
    figure.update_yaxes(**whole_number_ticks(span))
    note = f"{hist.missing:,} {unit}s without a value not shown" if hist.missing else None
    return styled(figure, title=title, x=x, y=f"{unit}s", note=note)


def _band(
    figure: go.Figure, steps: np.ndarray, low: np.ndarray, high: np.ndarray, *, name: str,
    colour: str,
) -> None:
    """A filled band between ``low`` and ``high`` over ``steps`` (one legend entry)."""
    figure.add_trace(go.Scatter(x=steps, y=high, mode="lines", line={"width": 0},
                                showlegend=False, hoverinfo="skip", legendgroup=name))
    figure.add_trace(go.Scatter(x=steps, y=low, mode="lines", line={"width": 0},
                                fill="tonexty", fillcolor=colour, name=name, legendgroup=name))


def quantile_figure(
    series: ReplaySeries,
    keys: Sequence[str],
    *,
    title: str,
    y: str,
    log_y: bool,
) -> go.Figure:
    """Quantiles over training: ``keys`` are (min, q25, median, q75, max) or (min, median,
    max); the outer pair as a pale band, the inner pair as a darker one, the median as a
    line. Missing keys are left out."""
    steps = series.steps.astype(np.float64)
    figure = go.Figure()
    pairs = [(keys[0], keys[-1], "min to max", BAND)]
    if len(keys) == 5:
        pairs.append((keys[1], keys[3], "25 % to 75 %", INNER_BAND))
    for low, high, name, colour in pairs:
        if series.has(low) and series.has(high):
            _band(figure, steps, series.column(low), series.column(high), name=name,
                  colour=colour)
    median = keys[len(keys) // 2]
    if series.has(median):
        figure.add_trace(line_trace(steps, series.column(median), name="median",
                                    line={"color": HELD, "width": 2}))
    if log_y:
        values = np.concatenate([series.column(key) for key in keys if series.has(key)])
        positive = values[np.isfinite(values) & (values > 0)]
        if len(positive):
            # Written out in full: plotly's own log labels read "5" for 0.5 and for 50.
            ticks = log_ticks(float(positive.min()), float(positive.max()))
            figure.update_yaxes(type="log", tickvals=ticks,
                                ticktext=[f"{tick:.3g}" for tick in ticks])
    return styled(figure, title=title, x="training step", y=y, note=_points(series))


def top_share_figure(series: ReplaySeries, *, top: str) -> go.Figure:
    """The share of each interval's drawn windows that came from its ``top`` (e.g. "5")
    most-drawn trajectories, and how many distinct trajectories were drawn, over training."""
    steps = series.steps.astype(np.float64)
    figure = go.Figure()
    if series.has("top_share"):
        figure.add_trace(line_trace(steps, 100 * series.column("top_share"),
                                    name=f"top {top} trajectories' share (%)",
                                    line={"color": HELD, "width": 2}))
    if series.has("trajectories_drawn"):
        figure.add_trace(line_trace(steps, series.column("trajectories_drawn"),
                                    name="trajectories drawn", yaxis="y2",
                                    line={"color": SAMPLE, "width": 2, "dash": "dot"}))
        figure.update_layout(yaxis2={"overlaying": "y", "side": "right", "showgrid": False,
                                     "title": {"text": "trajectories drawn"}})
    figure.update_layout(showlegend=True)
    return styled(figure, title="Top trajectories' share of the window draws",
                  x="training step", y=f"% of windows from the top {top}",
                  note="per interval between records; " + _points(series))


def rates_figure(series: ReplaySeries) -> go.Figure:
    """Push and sample rates (items per second) over training."""
    steps = series.steps.astype(np.float64)
    figure = go.Figure()
    for key, name, colour in (("push_rate", "pushed items/s", PUSH),
                              ("sample_rate", "sampled items/s", SAMPLE)):
        if series.has(key):
            figure.add_trace(line_trace(steps, series.column(key), name=name,
                                        line={"color": colour, "width": 2}))
    return styled(figure, title="Push and sample rates", x="training step", y="items per second",
                  note=_points(series))


def thruput_figure(series: ReplaySeries) -> go.Figure:
    """The push/sample ratio over training against its ``[thruput_min, thruput_max]`` band:
    above the max the buffer refuses pushes, below the min it refuses samples."""
    steps = series.steps.astype(np.float64)
    figure = go.Figure()
    low, high = series.column("thruput_min"), series.column("thruput_max")
    if series.has("thruput_min"):
        figure.add_trace(go.Scatter(x=steps, y=low, mode="lines", name="min: samples refused "
                                    "below", line={"color": LIMIT, "dash": "dash", "width": 1.5}))
    if series.has("thruput_max"):
        figure.add_trace(go.Scatter(x=steps, y=high, mode="lines", name="max: pushes refused "
                                    "above", line={"color": LIMIT, "dash": "dot", "width": 1.5}))
    figure.add_trace(line_trace(steps, series.column("thruput_ratio"), name="pushed / sampled",
                                line={"color": HELD, "width": 2}))
    notes = [_points(series)]
    if not series.has("thruput_max"):
        notes.append("no max (unlimited: pushes are never refused)")
    return styled(figure, title="Throughput ratio (pushed / sampled items)", x="training step",
                  y="ratio", note="; ".join(notes))


def refusals_figure(series: ReplaySeries) -> go.Figure:
    """Refused pushes and samples so far, over training (the counters as logged)."""
    steps = series.steps.astype(np.float64)
    figure = go.Figure()
    for key, name, colour in (("refused_pushes", "refused pushes", PUSH),
                              ("refused_samples", "refused samples", SAMPLE)):
        if series.has(key):
            figure.add_trace(go.Scatter(x=steps, y=series.column(key), mode="lines", name=name,
                                        line={"color": colour, "width": 2, "shape": "hv"}))
    top = max((float(np.nanmax(series.column(k))) for k in ("refused_pushes", "refused_samples")
               if series.has(k)), default=1.0)
    figure.update_yaxes(**whole_number_ticks(top))
    return styled(figure, title="Refused pushes and samples (so far)", x="training step",
                  y="refusals", note=_points(series))


def mean_max_figure(
    series: ReplaySeries, name: str, *, limit: float | None = None
) -> go.Figure:
    """``<name>_mean`` and ``<name>_max`` of recent samples over training (``use`` or
    ``staleness``), with the buffer's limit as a dashed line where it is finite."""
    steps = series.steps.astype(np.float64)
    figure = go.Figure()
    for suffix, width in (("mean", 2), ("max", 1.5)):
        key = f"{name}_{suffix}"
        if series.has(key):
            figure.add_trace(line_trace(steps, series.column(key), name=f"{suffix} {name}",
                                        line={"color": HELD if suffix == "mean" else SAMPLE,
                                              "width": width}))
    if limit is not None and math.isfinite(limit):
        reference_line(figure, label=f"max_{name}", colour=LIMIT, y=limit)
    return styled(figure, title=f"{name.capitalize()} of the sampled items",
                  x="training step", y=name, note=_points(series))


def scalar_figure(series: ReplaySeries, key: str) -> go.Figure:
    """Any other logged figure ``key`` over training."""
    steps = series.steps.astype(np.float64)
    figure = go.Figure(line_trace(steps, series.column(key), name=key,
                                  line={"color": HELD, "width": 2}))
    return styled(figure, title=key, x="training step", y=key, note=_points(series))


def _points(series: ReplaySeries) -> str:
    if series.total > len(series):
        return f"{series.total:,} records, {len(series):,} drawn (evenly spread)"
    return f"{series.total:,} records"


def dominance_figure(ranking: Dominance, drawn: np.ndarray | None, *, windows: int) -> go.Figure:
    """The :data:`TOP_TRAJECTORIES` trajectories with the largest share of window draws:
    their share, their share if every valid window were equally likely, and (``drawn``, per
    trajectory in table order) the drawn batch's share of its ``windows`` windows."""
    chosen = ranking.order[:TOP_TRAJECTORIES]
    labels = [f"#{int(i)}" for i in chosen]
    figure = go.Figure()
    figure.add_trace(go.Bar(x=labels, y=100 * ranking.share[chosen], name="share of draws",
                            marker={"color": HELD}))
    figure.add_trace(go.Bar(x=labels, y=100 * ranking.uniform[chosen],
                            name="without priorities (every window alike)",
                            marker={"color": EXPECTED}))
    if drawn is not None and windows > 0:
        figure.add_trace(go.Bar(x=labels, y=100 * drawn[chosen] / windows,
                                name="drawn batch", marker={"color": DRAWN}))
    figure.update_layout(barmode="group", showlegend=True)
    figure.update_xaxes(type="category")
    shown = len(chosen)
    note = (f"the {shown} largest of {ranking.eligible:,} trajectories holding a window; "
            f"worth {ranking.effective:.1f} equally likely ones")
    return styled(figure, title="Which trajectories the window draws favour",
                  x="trajectory (position in trajectories())", y="% of windows drawn",
                  note=note)

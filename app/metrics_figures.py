"""The Metrics view's chart: one logged scalar over steps or wall time, several runs overlaid,
the raw curve faint behind the smoothed one (numpy arrays in, a Vega-Lite spec out, drawn with
``st.vega_lite_chart``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from app.metrics_view import RAW, RELATIVE, STEP, WALL, X_AXES, Trace, wall_clock
from app.vega import (
    Spec,
    chart,
    hover_points,
    hover_rows,
    legend_columns,
    lines,
    log_position,
    long_frame,
    position,
    zoom,
)

# One colour per run, in the order the runs are given (Vega's tableau10).
COLOURS = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2",
           "#ff9da6", "#9d755d", "#bab0ac")
# A faint raw curve behind its smoothed one.
FAINT_OPACITY, FAINT_WIDTH, WIDTH = 0.3, 1.0, 2.0
# A log axis with nothing to draw still needs a domain.
EMPTY_LOG_DOMAIN = (1.0, 10.0)

# Longest legend entry (characters) that two columns of a half-width chart still show whole.
LEGEND_SIDE_BY_SIDE = 24


def metric_figure(
    traces: Sequence[Trace],
    *,
    metric: str,
    runs: Sequence[str],
    axis: str,
    log_y: bool,
    smoothing: float,
    hidden: int = 0,
) -> Spec:
    """``metric`` over ``axis`` for every run: with smoothing the raw curve is drawn faint in
    the run's colour behind the smoothed one. The note gives the point counts (``n -> m
    points`` for a reduced curve) and the points a log axis cannot draw (``hidden``). The
    chart's dataset ``curves`` holds exactly the points of ``traces`` (the CSV download's
    rows, :func:`app.metrics_view.traces_csv`), in their order; ``hover``, the ones that carry
    tooltips (:func:`app.vega.hover_rows`).

    Args:
        traces: The traces of this metric (:func:`app.metrics_view.metric_traces`).
        metric: The scalar's name (the title).
        runs: Every run's label, in colour order (a run without traces keeps its colour).
        axis: A key of :data:`app.metrics_view.X_AXES`.
        log_y: Logarithmic y axis.
        smoothing: The smoothing weight, named in the legend.
        hidden: Points at or below 0 left out for the log axis.

    Raises:
        ValueError: an unknown ``axis``, or a trace of a run not in ``runs``.
    """
    if axis not in X_AXES:
        raise ValueError(f"axis: expected one of {sorted(X_AXES)}, got {axis!r:.40}")
    several = len(runs) > 1
    names, palette, opacity, width, faint = [], [], [], [], []
    curves = []
    for trace in traces:
        if trace.run not in runs:
            raise ValueError(f"traces: run {trace.run!r} is not among runs {list(runs)}")
        behind = trace.curve == RAW and smoothing > 0
        label = trace.run if several else trace.metric
        if behind:
            label += " (raw)"
            faint.append(label)
        elif trace.curve != RAW:
            label += f" (smoothed {smoothing:.2f})"
        names.append(label)
        palette.append(COLOURS[runs.index(trace.run) % len(COLOURS)])
        opacity.append(FAINT_OPACITY if behind else 1.0)
        width.append(FAINT_WIDTH if behind else WIDTH)
        curves.append((label, wall_clock(trace.x) if axis == WALL else trace.x, trace.y))
    x, x_tip = _x_channel(axis)
    y = _y_channel(traces, metric=metric, log_y=log_y)

    def drawn(which: list[str], params: list[Spec]) -> Spec:
        return lines("curves", x=x, y=y, names=names, palette=palette, opacity=opacity,
                     width=width, draw=which, params=params)

    layers = [drawn(faint, [])] if faint else []
    layers.append(drawn([n for n in names if n not in faint], [zoom("x", "y")]))
    layers.append(hover_points("hover", x=x, y=y, fields=[("label", "curve", None), x_tip,
                                                           ("y", metric, ".4~g")]))
    if x["type"] == "temporal":
        layers[-1]["encoding"]["tooltip"][1].update(type="temporal", formatType="utc")
    data = long_frame(curves, x="x", y="y")
    spec = chart(layers, title=metric, note=_note(traces, several=several, hidden=hidden),
                 datasets={"curves": data, "hover": hover_rows(data)})
    # Two entries side by side fit half the page only while they are short.
    return legend_columns(spec, 2 if max(map(len, names)) <= LEGEND_SIDE_BY_SIDE else 1)


def _x_channel(axis: str) -> tuple[Spec, tuple[str, str, str | None]]:
    """The x channel for ``axis`` and its tooltip field (wall clock: a UTC time axis)."""
    title = X_AXES[axis]
    if axis == WALL:
        # Hours on a 24-hour clock (Vega's default, "07:25", reads as morning or evening).
        channel = {"field": "x", "type": "temporal", "scale": {"type": "utc"},
                   "axis": {"title": title, "format": {"hours": "%H:%M", "minutes": "%H:%M"}}}
        return channel, ("x", "time (UTC)", "%Y-%m-%d %H:%M:%S")
    if axis == RELATIVE:
        return position("x", title=title, scale={}), ("x", "seconds", ",.1f")
    return position("x", title=title, whole=axis == STEP, scale={}), ("x", "step", ",d")


def _y_channel(traces: Sequence[Trace], *, metric: str, log_y: bool) -> Spec:
    """The y channel: linear, or log over the drawn values (all > 0 there)."""
    if not log_y:
        return position("y", title=metric, scale={"nice": True})
    values = np.concatenate([t.y for t in traces]) if traces else np.zeros(0)
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return log_position("y", title=metric, low=EMPTY_LOG_DOMAIN[0],
                            high=EMPTY_LOG_DOMAIN[1])
    low, high = float(values.min()), float(values.max())
    # Out to the nearest 1, 2 or 5 times a power of ten: ticks at both ends, written short
    # (a narrow range would otherwise be ticked at its raw ends, "1.70671148752").
    bottom, top = _nice(low, down=True), _nice(high, down=False)
    if bottom == top:  # one value, on a tick: up to the next one
        top = _nice(top * 1.01, down=False)
    return log_position("y", title=metric, low=bottom, high=top)


def _nice(value: float, *, down: bool) -> float:
    """The nearest 1, 2 or 5 times a power of ten at or below (``down``) or above ``value``."""
    power = 10.0 ** math.floor(math.log10(value))
    steps = [power * f for f in (1.0, 2.0, 5.0, 10.0)]
    # A hair of slack: 0.3 is stored a little above 3 x 10^-1.
    if down:
        return max(step for step in steps if step <= value * (1 + 1e-9))
    return min(step for step in steps if step >= value * (1 - 1e-9))


def _note(traces: Sequence[Trace], *, several: bool, hidden: int) -> str:
    raw = [trace for trace in traces if trace.curve == RAW]
    parts = [
        (f"{trace.run}: " if several else "") + trace.caption()
        for trace in raw if trace.reduced
    ]
    if not parts:
        parts = [f"{max((t.total for t in raw), default=0):,} points"
                 + (" per run at most" if several else "")]
    if hidden:
        parts.append(f"{hidden:,} values <= 0 not drawn on the log axis")
    return "; ".join(parts)

"""The Metrics view's chart: one logged scalar over steps or wall time, several runs overlaid,
the raw curve faint behind the smoothed one (numpy arrays in, a plotly figure out)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative

from app.figures import line_trace, styled
from app.metrics_view import RAW, WALL, X_AXES, Trace, wall_clock

# One colour per run, in the order the runs are given.
COLOURS = qualitative.Plotly


def metric_figure(
    traces: Sequence[Trace],
    *,
    metric: str,
    runs: Sequence[str],
    axis: str,
    log_y: bool,
    smoothing: float,
    hidden: int = 0,
) -> go.Figure:
    """``metric`` over ``axis`` for every run: with smoothing the raw curve is drawn faint in
    the run's colour behind the smoothed one. The note gives the point counts (``n -> m
    points`` for a reduced curve) and the points a log axis cannot draw (``hidden``).

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
    figure = go.Figure()
    several = len(runs) > 1
    for trace in traces:
        if trace.run not in runs:
            raise ValueError(f"traces: run {trace.run!r} is not among runs {list(runs)}")
        colour = COLOURS[runs.index(trace.run) % len(COLOURS)]
        faint = trace.curve == RAW and smoothing > 0
        label = trace.run if several else trace.metric
        if faint:
            label += " (raw)"
        elif trace.curve != RAW:
            label += f" (smoothed {smoothing:.2f})"
        x = wall_clock(trace.x) if axis == WALL else trace.x
        figure.add_trace(line_trace(
            x, trace.y, name=label, legendgroup=trace.run,
            line={"color": colour, "width": 1 if faint else 2}, opacity=0.3 if faint else 1.0,
        ))
    if log_y:
        figure.update_yaxes(type="log")
    return styled(figure, title=metric, x=X_AXES[axis], y=metric,
                  note=_note(traces, several=several, hidden=hidden))


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

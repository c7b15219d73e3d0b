"""Figures of the TD-EMA view: EMA against batch statistics, the weight histogram, and the
clipped fractions over training (numpy arrays in, plotly figures out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.downsample import MAX_POINTS, histogram, min_max
from app.figures import line_trace, styled
from app.td_view import TDSeries, WeightPreview, smooth

BATCH_COLOUR = "#1f77b4"
EMA_COLOUR = "#d62728"
MIN_COLOUR = "#2ca02c"
MAX_COLOUR = "#ff7f0e"


def stat_figure(
    series: TDSeries,
    stat: str,
    *,
    smoothing: float,
    warmup_step: int | None,
    warmup: int | None,
    max_points: int = MAX_POINTS,
) -> go.Figure:
    """The EMA's ``stat`` ("mean" or "std") against the batches' over training steps.

    The batch curve is smoothed with ``smoothing`` (raw curve faint behind); the EMA is drawn
    as logged, since it is what training normalised with. The warmup is shaded up to
    ``warmup_step``. Long series are reduced with :func:`app.downsample.min_max`.

    Raises:
        ValueError: ``stat`` is not "mean" or "std", or ``smoothing`` outside [0, 1).
    """
    if stat not in ("mean", "std"):
        raise ValueError(f"stat: expected 'mean' or 'std', got {stat!r}")
    batch = series.batch_mean if stat == "mean" else series.batch_std
    ema = series.ema_mean if stat == "mean" else series.ema_std
    steps = series.steps.astype(np.float64)
    raw = min_max(steps, batch, max_points=max_points)
    figure = go.Figure()
    if smoothing > 0:
        figure.add_trace(line_trace(raw.x, raw.y, name=f"batch {stat} (raw)",
                                    line={"color": BATCH_COLOUR, "width": 1}, opacity=0.25))
        shown = min_max(steps, smooth(batch, smoothing), max_points=max_points)
        label = f"batch {stat} (smoothed {smoothing:.2f})"
    else:
        shown, label = raw, f"batch {stat}"
    figure.add_trace(line_trace(shown.x, shown.y, name=label, line={"color": BATCH_COLOUR}))
    kept = min_max(steps, ema, max_points=max_points)
    figure.add_trace(line_trace(kept.x, kept.y, name=f"EMA {stat}",
                                line={"color": EMA_COLOUR, "width": 2.5}))
    if warmup_step is not None and len(steps):
        figure.add_vrect(x0=float(steps[0]), x1=warmup_step, fillcolor="grey", opacity=0.12,
                         line_width=0)
        figure.add_vline(x=warmup_step, line_dash="dash", line_color="grey",
                         annotation_text=f"warmup ends ({warmup} updates)",
                         annotation_position="top right")
    return styled(
        figure,
        title=f"TD error {stat}: EMA vs each batch",
        x="training step",
        y=f"TD error {stat}",
        note=raw.caption(),
    )


def weight_histogram_figure(
    weights: np.ndarray,
    *,
    min_weight: float,
    max_weight: float,
    step: int,
    empirical: bool,
    bins: int = 60,
) -> go.Figure:
    """Histogram of previewed weights at ``step``, with the clip bounds as dashed lines; the
    note says whether they come from the logged distribution (``empirical``) or from the
    Normal assumption."""
    counts, edges = histogram(weights, bins=bins)
    figure = go.Figure()
    if counts.size:
        share = counts / max(int(counts.sum()), 1)
        figure.add_trace(go.Bar(x=(edges[:-1] + edges[1:]) / 2, y=share,
                                width=np.diff(edges), name="TD errors",
                                marker={"color": BATCH_COLOUR}))
    for bound, name, colour in ((min_weight, "min", MIN_COLOUR), (max_weight, "max", MAX_COLOUR)):
        figure.add_vline(x=bound, line_dash="dash", line_color=colour,
                         annotation_text=f"{name} weight {bound:g}")
    return styled(
        figure,
        title=f"Previewed TD weights at step {step}",
        x="weight (after clipping)",
        y="share of TD errors",
        note=f"{len(weights):,} evenly spaced levels of "
        + ("the logged TD error distribution" if empirical
           else "Normal(batch mean, batch std): no distribution logged"),
    )


def clip_figure(
    preview: WeightPreview,
    series: TDSeries,
    *,
    logged: bool,
    smoothing: float = 0.0,
    warmup_step: int | None = None,
) -> go.Figure:
    """Fraction of weights clipped at each bound over training: the preview, and (with
    ``logged``) the fractions training logged at the run's own settings; both smoothed with
    ``smoothing`` (see :func:`app.td_view.smooth`).

    The first batches, normalised with the prior or a young EMA, clip far more than the rest;
    with ``warmup_step`` the warmup is shaded and the y axis fits the curves after it (the
    note gives the warmup's peak, drawn off the axis).

    Raises:
        ValueError: ``smoothing`` outside [0, 1).
    """
    figure = go.Figure()
    curves: list[tuple[np.ndarray, np.ndarray]] = []
    if logged:
        # Drawn first, wide and pale, so the preview on top does not hide them where they agree.
        all_steps = series.steps.astype(np.float64)
        for values, name, colour in ((series.clip_min, "min", MIN_COLOUR),
                                     (series.clip_max, "max", MAX_COLOUR)):
            kept = min_max(all_steps, smooth(values, smoothing))
            curves.append((kept.x, kept.y))
            figure.add_trace(line_trace(kept.x, kept.y, name=f"logged: clipped at {name}",
                                        line={"color": colour, "width": 6}, opacity=0.3))
    steps = preview.steps.astype(np.float64)
    for values, name, colour in ((preview.clip_min, "min", MIN_COLOUR),
                                 (preview.clip_max, "max", MAX_COLOUR)):
        shown = smooth(values, smoothing)
        curves.append((steps, shown))
        figure.add_trace(line_trace(steps, shown, name=f"preview: clipped at {name}",
                                    line={"color": colour, "width": 1.5}))
    notes = [f"preview at {len(steps):,} logged steps"]
    if smoothing:
        notes.append(f"smoothed {smoothing:.2f}")
    top = _fitted_top(curves, warmup_step)
    if top is not None and warmup_step is not None:
        after, peak = top
        figure.update_yaxes(range=[0.0, after])
        figure.add_vrect(x0=float(series.steps[0]), x1=warmup_step, fillcolor="grey",
                         opacity=0.12, line_width=0)
        if peak > after:
            notes.append(f"warmup (shaded) peaks at {peak:.0%}, off the axis")
    else:
        figure.update_yaxes(rangemode="tozero")
    figure.update_yaxes(tickformat=".1%")
    return styled(
        figure,
        title="Fraction of TD weights clipped at each bound",
        x="training step",
        y="share of TD weights clipped",
        note="; ".join(notes),
    )


def _fitted_top(
    curves: list[tuple[np.ndarray, np.ndarray]], warmup_step: int | None
) -> tuple[float, float] | None:
    """``(axis top, highest value anywhere)`` for a y axis fitted to the values after
    ``warmup_step``; None without a warmup or without a finite value after it."""
    if warmup_step is None:
        return None
    after = [y[(x > warmup_step) & np.isfinite(y)] for x, y in curves]
    later = np.concatenate(after) if after else np.zeros(0)
    if later.size == 0:
        return None
    everything = np.concatenate([y[np.isfinite(y)] for _, y in curves])
    # Headroom above the highest curve; an all-zero curve still gets a visible axis.
    return max(1.15 * float(later.max()), 0.01), float(everything.max())

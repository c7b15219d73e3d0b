"""Figures of the TD-EMA view: EMA against batch statistics, the weight histogram, and the
clipped fractions over training (numpy arrays in, Vega-Lite specs out, drawn with
``st.vega_lite_chart``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from app.downsample import MAX_POINTS, histogram, min_max
from app.td_view import TDSeries, WeightPreview, smooth
from app.vega import (
    Spec,
    chart,
    colours,
    frame,
    hover_points,
    hover_rows,
    layer,
    legend_columns,
    lines,
    long_frame,
    position,
    tooltip,
    vertical_rule,
    zoom,
)

BATCH_COLOUR = "#1f77b4"
EMA_COLOUR = "#d62728"
MIN_COLOUR = "#2ca02c"
MAX_COLOUR = "#ff7f0e"
WARMUP_COLOUR = "#7f7f7f"


@dataclass(frozen=True)
class _Curve:
    """One drawn curve and its look; ``behind`` curves are drawn first."""

    name: str
    x: np.ndarray
    y: np.ndarray
    colour: str
    opacity: float = 1.0
    width: float = 2.0
    behind: bool = False


def _curve_layers(
    curves: list[_Curve], *, y: Spec, y_format: str, rules: list[tuple[str, str]],
) -> tuple[list[Spec], tuple[list[str], list[str]], dict[str, pd.DataFrame]]:
    """The layers of ``curves`` over training steps, ``y`` their values: those ``behind``
    first, the rest over them (wheel zoom on both axes), then tooltip points
    (:func:`app.vega.hover_rows` of them, dataset ``hover``). ``rules`` are
    ``(label, colour)`` of lines the caller draws, listed in the same legend.

    Returns:
        The layers, the legend's ``(names, palette)`` and the datasets.
    """
    names = [c.name for c in curves] + [label for label, _ in rules]
    palette = [c.colour for c in curves] + [colour for _, colour in rules]
    opacity = [c.opacity for c in curves] + [1.0] * len(rules)
    width = [c.width for c in curves] + [2.0] * len(rules)
    step = position("step", title="training step", whole=True, scale={})

    def drawn(which: list[str], params: list[Spec]) -> Spec:
        return lines("curves", x=step, y=y, names=names, palette=palette, opacity=opacity,
                     width=width, draw=which, params=params)

    back = [c.name for c in curves if c.behind]
    layers = [drawn(back, [])] if back else []
    layers.append(drawn([c.name for c in curves if not c.behind], [zoom("x", "y")]))
    layers.append(hover_points("hover", x=step, y=y, fields=[
        ("label", "curve", None), ("step", "step", ",d"),
        (y["field"], y["axis"]["title"], y_format)]))
    data = long_frame([(c.name, c.x, c.y) for c in curves], x="step", y=y["field"])
    return layers, (names, palette), {"curves": data, "hover": hover_rows(data)}


def _warmup_shade(first: float, warmup_step: float) -> Spec:
    """The warmup, shaded grey across the plot's height."""
    return layer({"type": "rect", "color": WARMUP_COLOUR, "opacity": 0.12, "clip": True,
                  "tooltip": None},
                 data=[{"from": first, "to": warmup_step}],
                 encoding={"x": {"field": "from", "type": "quantitative"},
                           "x2": {"field": "to"}})


def stat_figure(
    series: TDSeries,
    stat: str,
    *,
    smoothing: float,
    warmup_step: int | None,
    warmup: int | None,
    max_points: int = MAX_POINTS,
) -> Spec:
    """The EMA's ``stat`` ("mean" or "std") against the batches' over training steps.

    The batch curve is smoothed with ``smoothing`` (raw curve faint behind); the EMA is drawn
    as logged, since it is what training normalised with. The warmup is shaded up to
    ``warmup_step``, its end a dashed line named in the legend. Long series are reduced with
    :func:`app.downsample.min_max`.

    Raises:
        ValueError: ``stat`` is not "mean" or "std", or ``smoothing`` outside [0, 1).
    """
    if stat not in ("mean", "std"):
        raise ValueError(f"stat: expected 'mean' or 'std', got {stat!r}")
    batch = series.batch_mean if stat == "mean" else series.batch_std
    ema = series.ema_mean if stat == "mean" else series.ema_std
    steps = series.steps.astype(np.float64)
    raw = min_max(steps, batch, max_points=max_points)
    curves = []
    if smoothing > 0:
        curves.append(_Curve(f"batch {stat} (raw)", raw.x, raw.y, BATCH_COLOUR, opacity=0.25,
                             width=1.0, behind=True))
        shown = min_max(steps, smooth(batch, smoothing), max_points=max_points)
        curves.append(_Curve(f"batch {stat} (smoothed {smoothing:.2f})", shown.x, shown.y,
                             BATCH_COLOUR))
    else:
        curves.append(_Curve(f"batch {stat}", raw.x, raw.y, BATCH_COLOUR))
    kept = min_max(steps, ema, max_points=max_points)
    curves.append(_Curve(f"EMA {stat}", kept.x, kept.y, EMA_COLOUR, width=2.5))
    warmed = warmup_step is not None and len(steps) > 0
    rule = f"warmup ends ({warmup} updates)"
    layers, legend, datasets = _curve_layers(
        curves, y=position("value", title=f"TD error {stat}", scale={"nice": True}),
        y_format=".4~g", rules=[(rule, WARMUP_COLOUR)] if warmed else [],
    )
    if warmup_step is not None and warmed:
        layers = [_warmup_shade(float(steps[0]), float(warmup_step)), *layers,
                  vertical_rule(float(warmup_step), colour=WARMUP_COLOUR, label=rule,
                                legend=legend)]
    return legend_columns(chart(layers, title=f"TD error {stat}: EMA vs each batch",
                                note=raw.caption(), datasets=datasets), 2)


def weight_histogram_figure(
    weights: np.ndarray,
    *,
    min_weight: float,
    max_weight: float,
    step: int,
    empirical: bool,
    bins: int = 60,
) -> Spec:
    """Histogram of previewed weights at ``step``, with the clip bounds as dashed lines named
    in the legend; the note says whether they come from the logged distribution
    (``empirical``) or from the Normal assumption."""
    counts, edges = histogram(weights, bins=bins)
    axis_title = "weight (after clipping)"
    bounds = [(f"min weight {min_weight:g}", min_weight, MIN_COLOUR),
              (f"max weight {max_weight:g}", max_weight, MAX_COLOUR)]
    legend = (["TD errors", *(label for label, _, _ in bounds)],
              [BATCH_COLOUR, *(colour for _, _, colour in bounds)])
    layers, data = [], {}
    if counts.size:
        data["bins"] = frame(left=edges[:-1], right=edges[1:],
                             share=counts / max(int(counts.sum()), 1))
        share = position("share", title="share of TD errors", axis={"format": "~%"})
        layers.append(layer(
            {"type": "rect", "stroke": "white", "strokeWidth": 0.5}, data="bins",
            params=[zoom("x")],
            encoding={"x": position("left", title=axis_title, scale={"nice": True}),
                      "x2": {"field": "right"}, "y": share, "y2": {"datum": 0},
                      "color": colours(*legend, datum="TD errors"),
                      "tooltip": tooltip(("left", "from", ".3~g"), ("right", "to", ".3~g"),
                                         ("share", "share", ".2%"))}))
    for label, bound, colour in bounds:
        rule = vertical_rule(bound, colour=colour, label=label, legend=legend)
        # The axis's title even when no bar was drawn (no finite weight).
        rule["encoding"]["x"]["title"] = axis_title
        layers.append(rule)
    return chart(
        layers,
        title=f"Previewed TD weights at step {step}",
        note=f"{len(weights):,} evenly spaced levels of "
        + ("the logged TD error distribution" if empirical
           else "Normal(batch mean, batch std): no distribution logged"),
        datasets=data,
    )


def clip_figure(
    preview: WeightPreview,
    series: TDSeries,
    *,
    logged: bool,
    smoothing: float = 0.0,
    warmup_step: int | None = None,
) -> Spec:
    """Fraction of weights clipped at each bound over training: the preview, and (with
    ``logged``) the fractions training logged at the run's own settings; both smoothed with
    ``smoothing`` (see :func:`app.td_view.smooth`).

    The first batches, normalised with the prior or a young EMA, clip far more than the rest;
    with ``warmup_step`` the warmup is shaded and the y axis fits the curves after it (the
    note gives the warmup's peak, drawn off the axis).

    Raises:
        ValueError: ``smoothing`` outside [0, 1).
    """
    curves = []
    if logged:
        # Drawn behind, wide and pale, so the preview on top does not hide them where they agree.
        all_steps = series.steps.astype(np.float64)
        for values, name, colour in ((series.clip_min, "min", MIN_COLOUR),
                                     (series.clip_max, "max", MAX_COLOUR)):
            kept = min_max(all_steps, smooth(values, smoothing))
            curves.append(_Curve(f"logged: clipped at {name}", kept.x, kept.y, colour,
                                 opacity=0.3, width=6.0, behind=True))
    steps = preview.steps.astype(np.float64)
    for values, name, colour in ((preview.clip_min, "min", MIN_COLOUR),
                                 (preview.clip_max, "max", MAX_COLOUR)):
        curves.append(_Curve(f"preview: clipped at {name}", steps, smooth(values, smoothing),
                             colour, width=1.5))
    notes = [f"preview at {len(steps):,} logged steps"]
    if smoothing:
        notes.append(f"smoothed {smoothing:.2f}")
    top = _fitted_top([(c.x, c.y) for c in curves], warmup_step)
    title = "share of TD weights clipped"
    if top is not None and warmup_step is not None:
        after, peak = top
        share = position("share", title=title, scale={"domain": [0.0, after]})
        if peak > after:
            notes.append(f"warmup (shaded) peaks at {peak:.0%}, off the axis")
    else:
        share = position("share", title=title, scale={"zero": True, "nice": True})
    share["axis"]["format"] = ".1%"
    layers, _, datasets = _curve_layers(curves, y=share, y_format=".2%", rules=[])
    if top is not None and warmup_step is not None:
        layers.insert(0, _warmup_shade(float(series.steps[0]), float(warmup_step)))
    return legend_columns(chart(layers, title="Fraction of TD weights clipped at each bound",
                                note="; ".join(notes), datasets=datasets), 2)


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

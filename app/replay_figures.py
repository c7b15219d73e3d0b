"""Figures of the Replay statistics view: log-scale histograms of priorities and importance
weights with the drawn batch marked, use and staleness histograms with their limits, the logged
replay figures over training, and the trajectories prioritized window draws favour (numpy
arrays in, Vega-Lite specs out, drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from app.replay_view import CountHistogram, Dominance, LogHistogram, ReplaySeries
from app.vega import (
    Spec,
    band,
    bin_bars,
    chart,
    colours,
    frame,
    group,
    hover_points,
    layer,
    legend_columns,
    log_position,
    position,
    tooltip,
    vertical_rule,
    zoom,
)

HELD = "#4c78a8"
EXPECTED = "#6b7280"
DRAWN = "#e45756"
LIMIT = "#d62728"
BAND = "rgba(76, 120, 168, 0.18)"
INNER_BAND = "rgba(76, 120, 168, 0.35)"
PUSH = "#4c78a8"
SAMPLE = "#f58518"
# Dash patterns (pixels on, off): the promised share and a maximum dotted, a minimum dashed.
DOTTED = [2, 3]
DASHED = [6, 4]
SOLID = [1, 0]
# What each quantile key of a quantile chart is called in its tooltip, by the keys' count.
QUANTILE_NAMES = {3: ("min", "median", "max"), 5: ("min", "25 %", "median", "75 %", "max")}
# Legend columns of a chart drawn in half the page's width (longer entries would be cut off).
HALF_WIDTH_COLUMNS = 2
# Trajectories the dominance chart names at most.
TOP_TRAJECTORIES = 20


def log_histogram_figure(
    hist: LogHistogram,
    *,
    title: str,
    x: str,
    unit: str,
    expected_label: str = "share of draws the sampler promises",
) -> Spec:
    """Shares per log-scale bin: the held ``unit`` s (bars), the draws the sampler promises
    (a dotted step line, where known) and the drawn batch (red bars over the others). The
    note counts what a log axis cannot show (values 0 or not finite)."""
    held = f"held {unit}s"
    # Not the seed (the page's caption gives it): a spec that stays the same across a
    # Resample lets the browser swap the chart's data in place instead of drawing it anew.
    drawn = "drawn batch"
    names, palette = [held], [HELD]
    if hist.drawn is not None:
        names, palette = [*names, drawn], [*palette, DRAWN]
    if hist.expected is not None:
        names, palette = [*names, expected_label], [*palette, EXPECTED]
    legend = (names, palette)
    bins = len(hist.edges) - 1
    low, high = math.log10(hist.edges[0]), math.log10(hist.edges[-1])
    pad = (high - low) / max(bins, 1)  # one bin each side: edge bars stay visible
    axis = log_position("left", title=x, low=10.0 ** (low - pad), high=10.0 ** (high + pad))
    share = f"% of {unit}s (or draws)"
    missing = np.full(bins, math.nan)
    columns = {
        "left": hist.edges[:-1], "right": hist.edges[1:], "held": 100 * hist.held,
        "drawn": missing if hist.drawn is None else 100 * hist.drawn,
        "expected": missing if hist.expected is None else 100 * hist.expected,
    }
    fields = [("left", "from", ".4~g"), ("right", "to", ".4~g"), ("held", f"% of {held}", ".1f")]
    if hist.drawn is not None:
        fields.append(("drawn", "% of the drawn batch", ".1f"))
    if hist.expected is not None:
        fields.append(("expected", "% of draws promised", ".1f"))
    layers = [bin_bars("bins", x=axis, right="right", y=position("held", title=share),
                       colour=colours(*legend, datum=held), fields=fields, opacity=0.55)]
    if hist.drawn is not None:
        layers.append(bin_bars("bins", x=axis, right="right", y=position("drawn", title=share),
                               colour=colours(*legend, datum=drawn), fields=fields,
                               opacity=0.65))
    if hist.expected is not None:
        # A step over the bin edges: the promised share of each bin, flat across it.
        layers.append(layer(
            {"type": "line", "interpolate": "step-after", "strokeWidth": 2,
             "strokeDash": DOTTED, "tooltip": None},
            data="steps", encoding={"x": {**axis, "field": "edge"},
                                    "y": position("expected", title=share),
                                    "color": colours(*legend, datum=expected_label)}))
    notes = []
    if hist.drawn is not None:
        notes.append(f"drawn batch: {hist.drawn_count:,} {unit}s")
    if hist.left_out:
        notes.append(f"{hist.left_out:,} {unit}s at 0 (never drawn) not on the log axis")
    datasets = {"bins": frame(**columns)}
    if hist.expected is not None:
        datasets["steps"] = frame(edge=hist.edges,
                                  expected=100 * np.append(hist.expected, hist.expected[-1:]))
    return legend_columns(chart(layers, title=title, note="; ".join(notes) or None,
                                datasets=datasets), HALF_WIDTH_COLUMNS)


def count_histogram_figure(
    hist: CountHistogram,
    *,
    title: str,
    x: str,
    unit: str,
    limit: float | None = None,
    limit_label: str = "",
) -> Spec:
    """Items per whole value (or bin), with ``limit`` as a dashed line named in the legend
    where it is finite; the note counts the items without a value."""
    bars = f"{unit}s"
    limit = limit if limit is not None and math.isfinite(limit) else None
    legend = ([bars], [HELD]) if limit is None else ([bars, limit_label], [HELD, LIMIT])
    # One value per bar: centred on it, with a gap; a bin: spanning its values.
    if hist.per_value:
        left, right = hist.left - 0.4, hist.left + 0.4
        fields = [("value", x, ",d"), ("count", bars, ",d")]
    else:
        left, right = hist.left, hist.left + hist.width
        fields = [("value", f"{x} from", ",d"), ("last", "to", ",d"), ("count", bars, ",d")]
    # Not from 0: staleness may sit far from it.
    layers = [bin_bars("counts", x=position("left", title=x, whole=True, scale={}),
                       right="right",
                       y=position("count", title=bars, whole=True),
                       colour=colours(*legend, datum=bars), fields=fields)]
    if limit is not None:
        layers.append(vertical_rule(limit, colour=LIMIT, label=limit_label, legend=legend))
    note = f"{hist.missing:,} {unit}s without a value not shown" if hist.missing else None
    # A bin's first and last whole value (bins of several values may have fractional edges).
    counts = frame(left=left, right=right, value=np.ceil(hist.left),
                   last=np.ceil(hist.left + hist.width) - 1, count=hist.counts)
    return legend_columns(chart(layers, title=title, note=note, datasets={"counts": counts}),
                          HALF_WIDTH_COLUMNS)


def _step() -> Spec:
    """The x channel of every chart over training."""
    return position("step", title="training step", whole=True, scale={})


# A line over training: its name in the legend, colour and dash pattern.
Line = tuple[str, str, list[int]]


def _legend(lines: Sequence[Line]) -> Spec:
    """The colour and dash channels of the ``series`` field over ``lines``: one legend, whose
    symbols are drawn as the lines are (a dashed limit reads as one)."""
    names = [name for name, _, _ in lines]
    return {"color": colours(names, [colour for _, colour, _ in lines], field="series"),
            "strokeDash": {"field": "series", "type": "nominal", "legend": {"title": ""},
                           "scale": {"domain": names, "range": [dash for *_, dash in lines]}}}


def _lines(
    lines: Sequence[Line], *, y: Spec, fmt: str, steps: bool = False, only: str | None = None,
    pan: bool = True,
) -> list[Spec]:
    """The ``series`` dataset (:func:`_long`) as ``lines`` (``only``: that one of them), with a
    tooltip on each point; ``steps``: counters drawn as steps; ``pan``: these layers carry the
    chart's zoom (one layer per chart may)."""
    mark: Spec = {"type": "line", "strokeWidth": 2}
    if steps:
        mark["interpolate"] = "step-after"
    keep = [] if only is None else [{"filter": {"field": "series", "equal": only}}]
    value = {**y, "field": "value"}
    return [
        layer(mark, data="series", transform=keep, params=[zoom("x")] if pan else (),
              encoding={"x": _step(), "y": value, **_legend(lines)}),
        hover_points("series", x=_step(), y=value, transform=keep,
                     fields=[("step", "step", ",d"), ("series", "line", None),
                             ("value", "value", fmt)]),
    ]


def _long(steps: np.ndarray, columns: Sequence[tuple[str, np.ndarray]]) -> pd.DataFrame:
    """The ``series`` dataset: a row per step and named column (``step``, ``series``,
    ``value``; NaN where a record lacks the value, so the line breaks there)."""
    return frame(step=np.tile(steps, len(columns)),
                 series=np.repeat([name for name, _ in columns], len(steps)),
                 value=np.concatenate([values for _, values in columns]) if columns else [])


def _series_chart(
    series: ReplaySeries, lines: Sequence[tuple[str, str, str, list[int]]], *, title: str,
    y: Spec, note: str | None = None, fmt: str = ".4~g", steps: bool = False,
    limit: tuple[str, float] | None = None,
) -> Spec:
    """A chart over training of the ``(key, name, colour, dashes)`` lines of ``series`` the
    records hold, and ``limit`` (its name and value) as a dashed line across."""
    shown = [line for line in lines if series.has(line[0])]
    columns = [(name, series.column(key)) for key, name, _, _ in shown]
    legend = [(name, colour, dash) for _, name, colour, dash in shown]
    if limit is not None:
        columns.append((limit[0], np.full(len(series), limit[1])))
        legend.append((limit[0], LIMIT, DASHED))
    return legend_columns(
        chart(_lines(legend, y=y, fmt=fmt, steps=steps), title=title,
              note=note or _points(series), datasets={"series": _long(series.steps, columns)}),
        HALF_WIDTH_COLUMNS)


def quantile_figure(
    series: ReplaySeries,
    keys: Sequence[str],
    *,
    title: str,
    y: str,
    log_y: bool,
) -> Spec:
    """Quantiles over training: ``keys`` are (min, q25, median, q75, max) or (min, median,
    max); the outer pair as a pale band, the inner pair as a darker one, the median as a
    line. Missing keys are left out; on a log axis, values at or below 0 too (counted in the
    note)."""
    columns = {key: series.column(key) for key in keys if series.has(key)}
    notes = [_points(series)]
    channel = position("", title=y)
    if log_y and columns:
        values = np.concatenate(list(columns.values()))
        positive = values[np.isfinite(values) & (values > 0)]
        if len(positive):
            # Written out in full: a log axis left alone labels 0.5 and 50 alike as "5".
            channel = log_position("", title=y, low=float(positive.min()),
                                   high=float(positive.max()))
            dropped = int((np.isfinite(values) & (values <= 0)).sum())
            if dropped:
                notes.append(f"{dropped:,} values at or below 0 not on the log axis")
            columns = {key: np.where(column > 0, column, math.nan)
                       for key, column in columns.items()}
    pairs = [(keys[0], keys[-1], "min to max", BAND)]
    if len(keys) == 5:
        pairs.append((keys[1], keys[3], "25 % to 75 %", INNER_BAND))
    pairs = [pair for pair in pairs if pair[0] in columns and pair[1] in columns]
    median = keys[len(keys) // 2]
    names = [name for _, _, name, _ in pairs] + (["median"] if median in columns else [])
    palette = [colour for *_, colour in pairs] + ([HELD] if median in columns else [])
    legend = (names, palette)
    layers: list[Spec] = [
        band("series", x=_step(), low={**channel, "field": low}, high=high,
             colour=colours(*legend, datum=name))
        for low, high, name, _ in pairs
    ]
    if median in columns:
        layers.append(layer({"type": "line", "strokeWidth": 2}, data="series",
                            encoding={"x": _step(), "y": {**channel, "field": median},
                                      "color": colours(*legend, datum="median")}))
    if layers:
        layers[0]["params"] = [zoom("x")]
        # One tooltip per record giving every quantile, on the median (or the band's foot).
        anchor = median if median in columns else pairs[0][0]
        labels = zip(keys, QUANTILE_NAMES.get(len(keys), keys), strict=True)
        layers.append(hover_points("series", x=_step(), y={**channel, "field": anchor},
                                   fields=[("step", "step", ",d")] + [
                                       (key, label, ".4~g") for key, label in labels
                                       if key in columns]))
    else:
        layers.append(layer({"type": "line"}, data="series",
                            encoding={"x": _step(), "y": {**channel, "field": keys[0]}}))
    data = frame(step=series.steps, **{key: series.column(key) for key in keys} | columns)
    return chart(layers, title=title, note="; ".join(notes), datasets={"series": data})


def top_share_figure(series: ReplaySeries, *, top: str) -> Spec:
    """The share of each interval's drawn windows that came from its ``top`` (e.g. "5")
    most-drawn trajectories, and how many distinct trajectories were drawn (right axis), over
    training."""
    share_name, drawn_name = f"top {top} trajectories' share (%)", "trajectories drawn"
    has_share, has_drawn = series.has("top_share"), series.has("trajectories_drawn")
    lines = [line for line, has in (((share_name, HELD, SOLID), has_share),
                                    ((drawn_name, SAMPLE, DOTTED), has_drawn)) if has]
    layers = []
    if has_share:
        share = position("", title=f"% of windows from the top {top}")
        layers.append(group(*_lines(lines, y=share, fmt=".1f", only=share_name)))
    if has_drawn:
        counted = position("", title=drawn_name, whole=True,
                           axis={"orient": "right", "grid": False})
        layers.append(group(*_lines(lines, y=counted, fmt=",d", only=drawn_name,
                                    pan=not has_share)))
    columns = [(share_name, 100 * series.column("top_share")),
               (drawn_name, series.column("trajectories_drawn"))]
    return chart(layers, title="Top trajectories' share of the window draws",
                 note="per interval between records; " + _points(series),
                 datasets={"series": _long(series.steps, columns)},
                 independent_y=has_share and has_drawn)


def rates_figure(series: ReplaySeries) -> Spec:
    """Push and sample rates (items per second) over training."""
    return _series_chart(series, [("push_rate", "pushed items/s", PUSH, SOLID),
                                  ("sample_rate", "sampled items/s", SAMPLE, SOLID)],
                         title="Push and sample rates", y=position("", title="items per second"))


def thruput_figure(series: ReplaySeries) -> Spec:
    """The push/sample ratio over training against its ``[thruput_min, thruput_max]`` band:
    above the max the buffer refuses pushes, below the min it refuses samples."""
    notes = [_points(series)]
    if not series.has("thruput_max"):
        notes.append("no max (unlimited: pushes are never refused)")
    return _series_chart(
        series,
        [("thruput_min", "min: samples refused below", LIMIT, DASHED),
         ("thruput_max", "max: pushes refused above", LIMIT, DOTTED),
         ("thruput_ratio", "pushed / sampled", HELD, SOLID)],
        title="Throughput ratio (pushed / sampled items)", y=position("", title="ratio"),
        note="; ".join(notes),
    )


def refusals_figure(series: ReplaySeries) -> Spec:
    """Refused pushes and samples so far, over training (the counters as logged)."""
    return _series_chart(series, [("refused_pushes", "refused pushes", PUSH, SOLID),
                                  ("refused_samples", "refused samples", SAMPLE, SOLID)],
                         title="Refused pushes and samples (so far)",
                         y=position("", title="refusals", whole=True), fmt=",d", steps=True)


def mean_max_figure(
    series: ReplaySeries, name: str, *, limit: float | None = None
) -> Spec:
    """``<name>_mean`` and ``<name>_max`` of recent samples over training (``use`` or
    ``staleness``), with the buffer's limit as a dashed line named in the legend where it is
    finite."""
    lines = [(f"{name}_mean", f"mean {name}", HELD, SOLID),
             (f"{name}_max", f"max {name}", SAMPLE, SOLID)]
    line = None if limit is None or not math.isfinite(limit) else (f"max_{name}", limit)
    return _series_chart(series, lines, title=f"{name.capitalize()} of the sampled items",
                         y=position("", title=name), limit=line)


def scalar_figure(series: ReplaySeries, key: str) -> Spec:
    """Any other logged figure ``key`` over training."""
    step = _step()
    value = position("value", title=key)
    return chart(
        [layer({"type": "line", "strokeWidth": 2, "color": HELD}, data="series",
               params=[zoom("x")], encoding={"x": step, "y": value}),
         hover_points("series", x=step, y=value,
                      fields=[("step", "step", ",d"), ("value", key, ".4~g")])],
        title=key, note=_points(series),
        datasets={"series": frame(step=series.steps, value=series.column(key))},
    )


def _points(series: ReplaySeries) -> str:
    if series.total > len(series):
        return f"{series.total:,} records, {len(series):,} drawn (evenly spread)"
    return f"{series.total:,} records"


def dominance_figure(ranking: Dominance, drawn: np.ndarray | None, *, windows: int) -> Spec:
    """The :data:`TOP_TRAJECTORIES` trajectories with the largest share of window draws:
    their share, their share if every valid window were equally likely, and (``drawn``, per
    trajectory in table order) the drawn batch's share of its ``windows`` windows, side by
    side per trajectory."""
    chosen = ranking.order[:TOP_TRAJECTORIES]
    labels = [f"#{int(i)}" for i in chosen]
    bars = [("share of draws", HELD, 100 * ranking.share[chosen]),
            ("without priorities (every window alike)", EXPECTED, 100 * ranking.uniform[chosen])]
    if drawn is not None and windows > 0:
        bars.append(("drawn batch", DRAWN, 100 * drawn[chosen] / windows))
    names = [name for name, _, _ in bars]
    legend = colours(names, [colour for _, colour, _ in bars], field="series")
    shown = len(chosen)
    note = (f"the {shown} largest of {ranking.eligible:,} trajectories holding a window; "
            f"worth {ranking.effective:.1f} equally likely ones")
    data = frame(trajectory=labels * len(bars),
                 series=[name for name, _, _ in bars for _ in labels],
                 share=np.concatenate([values for _, _, values in bars]))
    return chart(
        [layer({"type": "bar"}, data="shares", encoding={
            "x": {"field": "trajectory", "type": "nominal", "sort": labels,
                  "axis": {"title": "trajectory (position in trajectories())", "labelAngle": 0}},
            "xOffset": {"field": "series", "type": "nominal", "sort": names},
            "y": position("share", title="% of windows drawn"),
            "color": legend,
            "tooltip": tooltip(("trajectory", "trajectory", None), ("series", "bar", None),
                               ("share", "% of windows", ".2f")),
        })],
        title="Which trajectories the window draws favour", note=note,
        datasets={"shares": data},
    )

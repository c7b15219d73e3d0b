"""Vega-Lite specs for every dashboard chart, drawn with ``st.vega_lite_chart``. Streamlit ships
Vega-Lite, so no page loads a second chart library: Plotly's bundle, which the dashboard drew
with until issue 19, cost about 1 s of every fresh tab.

A spec is a plain dict. Its data travel as named pandas frames in ``spec["datasets"]`` (Streamlit
sends them to the browser as Arrow, not JSON) and each layer names the frame it draws; a few
single rows (a reference line's position) stay inline. The helpers give every chart one look: a
title with a note under it (such as a downsampling label), axis titles, the legend under the
plot, whole-number ticks on axes that count things, reference lines named in the legend rather
than written over the data, tooltips, and wheel zoom / drag pan (double-click resets).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

Spec = dict[str, Any]

# The look every chart shares; the legend sits under the plot as Plotly's did. No ARIA
# attributes per mark: Vega-Lite would build a description string for every drawn point (a
# formatted expression per datum, which Streamlit's CSP-safe interpreter evaluates slowly);
# Streamlit itself turns them off only past 5,000 points.
CONFIG: Spec = {
    "legend": {"orient": "bottom", "direction": "horizontal", "labelLimit": 400,
               "symbolLimit": 20, "columns": 4},
    "title": {"anchor": "start", "subtitleFontSize": 11, "subtitlePadding": 4},
    "aria": False,
}
# Streamlit draws a chart of fewer than 2,000 points as SVG, a DOM node per point; canvas draws
# the same marks without them. With both, TD-EMA's first render spends about 0.45 s less in
# the browser (bench.dashboard_browser's page rows; CPU profile of a fresh tab).
EMBED_OPTIONS: Spec = {"renderer": "canvas"}
# A tooltip-only point is this large (square pixels, ~10 px across): easy to hit, never seen.
HOVER_SIZE = 300
# Tooltip points per curve at most (:func:`hover_rows`): one every ~4 px of a half-page chart,
# closer than a point's width, so the whole curve answers a hover.
HOVER_POINTS = 150


def chart(
    layers: Sequence[Spec], *, title: str, note: str | None = None, height: int = 360,
    width: int | None = None, datasets: Mapping[str, pd.DataFrame] | None = None,
    independent_y: bool = False,
) -> Spec:
    """A layered chart: ``layers`` over the shared axes, titled, with ``note`` under the title.

    ``height`` is the chart's height in pixels, title, axes and legend included (as Plotly's
    ``height``); without ``width`` the chart takes its container's width
    (``st.vega_lite_chart(spec, width="stretch")``). ``independent_y`` gives each layer its own
    y axis (a second quantity on the right).

    Raises:
        ValueError: no layers, or a layer naming a dataset that ``datasets`` lacks.
    """
    if not layers:
        raise ValueError("layers: expected at least one layer, got none")
    named = dict(datasets or {})
    for index, one in enumerate(layers):
        name = one.get("data", {}).get("name")
        if name is not None and name not in named:
            raise ValueError(f"layers[{index}]: expected a dataset in {sorted(named)}, "
                             f"got {name!r}")
    heading: Spec = {"text": title}
    if note:
        heading["subtitle"] = note
    spec: Spec = {"title": heading, "height": height, "layer": list(layers), "config": CONFIG,
                  "usermeta": {"embedOptions": EMBED_OPTIONS}}
    if width is not None:
        spec["width"] = width
    if named:
        spec["datasets"] = named
    if independent_y:
        spec["resolve"] = {"scale": {"y": "independent"}}
    return spec


def layer(
    mark: str | Spec, *, data: str | Sequence[Mapping[str, Any]], encoding: Spec,
    transform: Sequence[Spec] = (), params: Sequence[Spec] = (),
) -> Spec:
    """One layer: ``mark`` drawing the dataset named ``data`` (or these inline rows)."""
    spec: Spec = {
        "data": {"name": data} if isinstance(data, str) else {"values": [dict(r) for r in data]},
        "mark": mark,
        "encoding": encoding,
    }
    if transform:
        spec["transform"] = list(transform)
    if params:
        spec["params"] = list(params)
    return spec


def frame(**columns: np.ndarray | Sequence[Any]) -> pd.DataFrame:
    """A dataset: named columns of one length (NaN reaches the browser as null, which marks
    skip and lines break at)."""
    return pd.DataFrame({name: np.asarray(values) for name, values in columns.items()})


def position(
    field: str, *, title: str | None, whole: bool = False, scale: Spec | None = None,
    axis: Spec | None = None,
) -> Spec:
    """A quantitative position channel on ``field``: axis titled ``title`` (``None``: no axis),
    ticked on whole numbers with thousands separators when ``whole`` (counted things: slots,
    rows, envs, steps, ids), never ``nice``-extended beyond ``scale``'s domain."""
    channel: Spec = {"field": field, "type": "quantitative"}
    if title is None:
        channel["axis"] = None
    else:
        channel["axis"] = {"title": title, **(whole_number_axis() if whole else {}), **(axis or {})}
    if scale is not None:
        channel["scale"] = {"nice": False, "zero": False, **scale}
    return channel


def whole_number_axis() -> Spec:
    """Axis settings for a count: integer ticks only (``tickMinStep`` 1; left alone Vega-Lite
    ticks a span of 3 at 0.5) printed with thousands separators."""
    return {"format": ",d", "tickMinStep": 1}


def colours(domain: Sequence[str], palette: Sequence[str], *, field: str | None = None,
            datum: str | None = None) -> Spec:
    """A colour channel from ``field`` (or the constant ``datum``) over the named series of
    ``domain``, drawn in ``palette``; listed in the legend under the plot, in that order.
    Layers that pass the same ``domain`` and ``palette`` share one legend.

    Raises:
        ValueError: ``domain`` and ``palette`` differ in length, or not exactly one of ``field``
            and ``datum``.
    """
    if len(domain) != len(palette):
        raise ValueError(f"palette: expected {len(domain)} colours, got {len(palette)}")
    if (field is None) == (datum is None):
        raise ValueError(f"field, datum: expected exactly one, got {field!r}, {datum!r}")
    channel: Spec = {"field": field, "type": "nominal"} if field is not None else {"datum": datum}
    channel["scale"] = {"domain": list(domain), "range": list(palette)}
    channel["legend"] = {"title": ""}
    return channel


def tooltip(*fields: tuple[str, str, str | None]) -> list[Spec]:
    """A tooltip listing ``(field, title, format)``; format ``None`` for text fields."""
    out = []
    for name, title, fmt in fields:
        item: Spec = {"field": name, "title": title}
        if fmt is None:
            item["type"] = "nominal"
        else:
            item.update(type="quantitative", format=fmt)
        out.append(item)
    return out


def zoom(*encodings: str) -> Spec:
    """A parameter for one layer: wheel zoom and drag pan over ``encodings`` (``"x"``,
    ``"y"``); a double-click resets. Streamlit leaves it client-side (no rerun)."""
    return {"name": "zoom", "select": {"type": "interval", "encodings": list(encodings)},
            "bind": "scales"}


def vertical_rule(x: float, *, colour: str, label: str | None = None,
                  legend: tuple[Sequence[str], Sequence[str]] | None = None,
                  dashed: bool = True) -> Spec:
    """A line across the plot at ``x`` (a cursor, a threshold). With ``legend``, the
    ``(domain, palette)`` of the chart's colour channel (:func:`colours`), whose domain holds
    ``label``, the line is named in the legend: a label written on the plot lands on the data
    wherever it is put.

    Raises:
        ValueError: ``legend`` without ``label``, or a ``label`` its domain lacks.
    """
    return _rule("x", x, colour=colour, label=label, legend=legend, dashed=dashed,
                 show_value=False)


def horizontal_rule(y: float, *, colour: str, label: str | None = None,
                    legend: tuple[Sequence[str], Sequence[str]] | None = None,
                    dashed: bool = True) -> Spec:
    """A line across the plot at ``y`` (a uniform level, a target), as :func:`vertical_rule`:
    with ``legend`` it is named in the legend as ``label`` and its tooltip gives its value.

    Raises:
        ValueError: ``legend`` without ``label``, or a ``label`` its domain lacks.
    """
    return _rule("y", y, colour=colour, label=label, legend=legend, dashed=dashed,
                 show_value=True)


def _rule(channel: str, value: float, *, colour: str, label: str | None,
          legend: tuple[Sequence[str], Sequence[str]] | None, dashed: bool,
          show_value: bool) -> Spec:
    """The rule of :func:`vertical_rule` (``channel`` ``"x"``) and :func:`horizontal_rule`
    (``"y"``); ``show_value`` adds the line's position to its tooltip."""
    encoding: Spec = {channel: {"field": channel, "type": "quantitative"}}
    mark: Spec = {"type": "rule", "strokeWidth": 2, "color": colour}
    if dashed:
        mark["strokeDash"] = [6, 4]
    if legend is None:
        mark["tooltip"] = None  # the theme's default tooltip would read "x: 499.5"
    else:
        if label is None or label not in legend[0]:
            raise ValueError(f"label: expected one of {list(legend[0])}, got {label!r}")
        encoding["color"] = colours(*legend, field="label")
        fields: list[tuple[str, str, str | None]] = [("label", "line", None)]
        if show_value:
            fields.append((channel, "at", ".4~g"))
        encoding["tooltip"] = tooltip(*fields)
    return layer(mark, data=[{channel: value, "label": label or ""}], encoding=encoding)


def hover_points(data: str, *, x: Spec, y: Spec, fields: Sequence[tuple[str, str, str | None]],
                 transform: Sequence[Spec] = ()) -> Spec:
    """Invisible points at every ``(x, y)`` of ``data`` (the line's own position channels)
    carrying a tooltip: a line mark has one tooltip for its whole path, these give each point
    its own."""
    return layer(
        {"type": "point", "opacity": 0, "size": HOVER_SIZE, "filled": True},
        data=data, transform=transform, encoding={"x": x, "y": y, "tooltip": tooltip(*fields)},
    )


def hover_rows(data: pd.DataFrame, *, field: str = "label",
               most: int = HOVER_POINTS) -> pd.DataFrame:
    """The rows of a :func:`long_frame` that carry tooltips (:func:`hover_points`): per curve
    (the rows sharing ``field``), at most ``most`` evenly spaced rows, its first and last
    among them, in their order.

    An invisible point costs the browser as much as a drawn one, and a chart's first render
    grows with its points (``bench.dashboard_browser``): a tooltip point per logged step
    doubled what a long curve cost to draw. The lines keep every point.

    Raises:
        ValueError: ``most < 2``, or ``data`` has no column ``field``.
    """
    if most < 2:
        raise ValueError(f"most: expected >= 2, got {most}")
    if field not in data.columns:
        raise ValueError(f"field: expected a column of data {list(data.columns)}, got {field!r}")
    codes, _ = pd.factorize(data[field], use_na_sentinel=False)
    kept = []
    for code in range(int(codes.max()) + 1 if len(codes) else 0):
        rows = np.flatnonzero(codes == code)
        if len(rows) > most:
            rows = rows[np.unique(np.linspace(0, len(rows) - 1, most).round().astype(np.int64))]
        kept.append(rows)
    order = np.sort(np.concatenate(kept)) if kept else np.zeros(0, dtype=np.int64)
    return data.iloc[order].reset_index(drop=True)


def group(*layers: Spec) -> Spec:
    """Layers sharing their scales inside a chart whose y scales are independent (a line and
    its tooltip points on one axis, another quantity on the other)."""
    return {"layer": list(layers)}


def log_ticks(low: float, high: float, *, most: int = 9) -> list[float]:
    """Ticks for a log axis over ``[low, high]`` (both > 0), to be written in full: 1, 2 and 5
    times each power of ten, the powers of ten alone when that gives more than ``most``, or
    the two ends and their geometric middle when no such value lies inside (a log axis left
    alone labels 0.5 and 50 alike as "5")."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))

    def inside(factors: tuple[float, ...]) -> list[float]:
        return [factor * 10.0 ** power for power in range(first, last + 1)
                for factor in factors if low <= factor * 10.0 ** power <= high]

    ticks = inside((1.0, 2.0, 5.0))
    if len(ticks) > most:
        ticks = inside((1.0,))
    return ticks or [low, math.sqrt(low * high), high]


def log_position(
    field: str, *, title: str, low: float, high: float, whole: bool = False,
) -> Spec:
    """A log-scale position channel on ``field`` over ``[low, high]`` (both > 0), ticked at
    :func:`log_ticks` written in full (``whole``: with thousands separators, for counts).
    Values at or below 0 cannot be drawn on it: leave them out and say how many in the note.

    Raises:
        ValueError: ``low`` or ``high`` not finite and positive, or ``low > high``.
    """
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        raise ValueError(f"low, high: expected finite 0 < low <= high, got {low!r}, {high!r}")
    return {
        "field": field, "type": "quantitative",
        "scale": {"type": "log", "domain": [low, high], "nice": False},
        "axis": {"title": title, "values": log_ticks(low, high),
                 "format": ",d" if whole else "~g"},
    }


def category_position(field: str, *, title: str, order: str | None = None) -> Spec:
    """A discrete position channel on ``field`` (motion ids, env ids: things named by a
    number, one band each, even when the numbers skip), in the order of the values of the
    field ``order`` (else the values' own order, numbers as numbers). Labels stay
    horizontal, and are thinned out rather than drawn over each other when there are many.
    """
    channel: Spec = {"field": field, "type": "ordinal",
                     "axis": {"title": title, "labelAngle": 0, "labelOverlap": "greedy"}}
    if order is not None:
        channel["sort"] = {"field": order, "op": "min"}
    return channel


def bar_spans(
    left: np.ndarray, right: np.ndarray, *, fill: float = 0.9
) -> tuple[np.ndarray, np.ndarray]:
    """Where each bar of the bins ``[left, right]`` is drawn: ``fill`` of its bin, centred in
    it, so neighbouring bars keep a gap (bars as ``rect`` marks from one end to the other).

    Raises:
        ValueError: ``fill`` outside ``(0, 1]``, or ``left`` and ``right`` differ in length.
    """
    if not 0 < fill <= 1:
        raise ValueError(f"fill: expected a fraction in (0, 1], got {fill!r}")
    low, high = np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64)
    if low.shape != high.shape:
        raise ValueError(f"right: expected one per left ({low.shape}), got {high.shape}")
    margin = (1 - fill) / 2 * (high - low)
    return low + margin, high - margin


def lines(
    data: str, *, x: Spec, y: Spec, names: Sequence[str], palette: Sequence[str],
    opacity: Sequence[float] | None = None, width: Sequence[float] | None = None,
    draw: Sequence[str] | None = None, field: str = "label", mark: Spec | None = None,
    params: Sequence[Spec] = (),
) -> Spec:
    """Named lines over one dataset: ``data`` holds a row per point, ``field`` naming the line
    it belongs to, and each of ``names`` is drawn in its ``palette`` colour, ``opacity`` and
    ``width`` (default 1 and 2 px), all three shown by its one legend entry (a faint raw curve
    reads as faint there too). ``draw`` keeps only those lines (default: all); layers are drawn
    in order, so a raw curve drawn by a first call lies faint behind its smoothed one drawn by
    a second. ``mark`` adds line mark settings (``{"interpolate": "step-after"}``). Rules named
    in the legend (:func:`vertical_rule`, :func:`horizontal_rule`) pass ``(names, palette)`` as
    their ``legend``, their label among ``names``; they name it in the field ``label``, this
    ``field``'s default, which keeps the chart's legend one.

    Raises:
        ValueError: ``palette``, ``opacity`` or ``width`` differs in length from ``names``, or
            ``draw`` names a line ``names`` lacks.
    """
    shades = [1.0] * len(names) if opacity is None else list(opacity)
    widths = [2.0] * len(names) if width is None else list(width)
    for what, values in (("opacity", shades), ("width", widths)):
        if len(values) != len(names):
            raise ValueError(f"{what}: expected {len(names)} values, got {len(values)}")
    unknown = [name for name in draw or () if name not in names]
    if unknown:
        raise ValueError(f"draw: expected names among {list(names)}, got {unknown}")
    # The same explicit domain on the three channels: Vega-Lite merges their legends into one.
    # An ordinal scale maps the i-th name to the i-th value (a nominal field's default scale
    # for opacity or width spreads the names between the first two values).
    colour = colours(names, palette, field=field)
    colour["legend"] = {**colour["legend"], "symbolType": "stroke"}

    def by_name(values: list[float]) -> Spec:
        return {"field": field, "type": "nominal", "legend": colour["legend"],
                "scale": {"type": "ordinal", "domain": list(names), "range": values}}

    encoding = {"x": x, "y": y, "color": colour, "opacity": by_name(shades),
                "strokeWidth": by_name(widths)}
    transform = [] if draw is None else [{"filter": {"field": field, "oneOf": list(draw)}}]
    return layer({"type": "line", "clip": True, "tooltip": None, **(mark or {})}, data=data,
                 encoding=encoding, transform=transform, params=params)


def note_as_data(spec: Spec, *, name: str = "note") -> Spec:
    """``spec`` (from :func:`chart`) with its note read from a one-row dataset ``name`` instead
    of written in the spec. A chart redrawn every few seconds with new data (the Live page)
    then keeps one spec while its note counts the new points: Streamlit swaps the data of a
    chart whose spec is unchanged in place, but draws a changed spec anew (a blank frame, the
    page's height jumping).

    Raises:
        ValueError: ``spec`` has no note, or already a dataset ``name``.
    """
    title = dict(spec["title"])
    note = title.get("subtitle")
    if note is None:
        raise ValueError("spec: expected a chart with a note, got none")
    datasets = dict(spec.get("datasets", {}))
    if name in datasets:
        raise ValueError(f"name: expected a dataset name the chart lacks, got {name!r}")
    datasets[name] = pd.DataFrame({"note": [note]})
    rows = f"data('{name}')"
    title["subtitle"] = {"expr": f"length({rows}) ? {rows}[0].note : ''"}
    # Vega-Lite compiles a dataset only where a layer reads it: this one does, drawing nothing.
    reader = layer({"type": "text", "opacity": 0, "tooltip": None}, data=name,
                   encoding={"x": {"value": 0}, "y": {"value": 0}, "text": {"field": "note"}})
    return {**spec, "title": title, "layer": [*spec["layer"], reader], "datasets": datasets}


def long_frame(
    curves: Sequence[tuple[str, np.ndarray, np.ndarray]], *, x: str, y: str,
    field: str = "label",
) -> pd.DataFrame:
    """One dataset of several named curves (``(name, xs, ys)``), a row per point in curve
    order with columns ``field``, ``x`` and ``y``, as :func:`lines` draws them."""
    def joined(index: int) -> np.ndarray:
        parts = [np.asarray(curve[index], dtype=np.float64) for curve in curves]
        return np.concatenate(parts) if parts else np.zeros(0)

    names = [np.full(len(xs), name, dtype=object) for name, xs, _ in curves]
    return frame(**{field: np.concatenate(names) if names else np.zeros(0, dtype=object),
                    x: joined(1), y: joined(2)})


def bin_bars(
    data: str, *, x: Spec, right: str, y: Spec, colour: Spec,
    fields: Sequence[tuple[str, str, str | None]], opacity: float = 1.0,
) -> Spec:
    """A histogram's bars: each row of ``data`` a bar from its ``x`` field (the bin's left
    edge; ``x`` is the channel, axis and scale included) to its ``right`` field, rising from 0
    to ``y``; bars of several layers over one set of bins overlap (``opacity`` < 1 keeps the
    lower ones visible). A bar's tooltip lists ``fields`` (:func:`tooltip`)."""
    return layer({"type": "bar", "opacity": opacity}, data=data,
                 encoding={"x": x, "x2": {"field": right}, "y": y, "y2": {"datum": 0},
                           "color": colour, "tooltip": tooltip(*fields)})


def band(data: str, *, x: Spec, low: Spec, high: str, colour: Spec) -> Spec:
    """A filled band over ``x`` between the ``low`` field (its channel: axis and scale) and the
    ``high`` field, such as a quantile range over training; a row where either is null (NaN)
    leaves a gap. Give it a translucent colour (``rgba``) to keep what lies under it visible."""
    return layer({"type": "area", "tooltip": None}, data=data,
                 encoding={"x": x, "y": low, "y2": {"field": high}, "color": colour})


def legend_columns(spec: Spec, columns: int) -> Spec:
    """``spec`` with its legend entries in ``columns`` columns: a chart in a narrow page column
    would otherwise cut long entries off at its right edge.

    Raises:
        ValueError: ``columns < 1``.
    """
    if columns < 1:
        raise ValueError(f"columns: expected >= 1, got {columns}")
    config = spec.get("config", CONFIG)
    return {**spec, "config": {**config, "legend": {**config.get("legend", {}),
                                                    "columns": columns}}}

"""Figures of the Z-buffer view: the 2D PCA scatter (coloured by age or source), explained
variance per component, and histograms of norms and cosine similarities (numpy in, Vega-Lite
specs out, drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

import numpy as np

from app.downsample import histogram
from app.vega import Spec, bin_bars, chart, colours, frame, layer, position, tooltip, zoom

SOURCE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")
VARIANCE = "#1f77b4"
CUMULATIVE = "#d62728"
# Components drawn in the explained-variance chart.
MAX_COMPONENTS = 20


def _axis(explained: np.ndarray, k: int) -> str:
    share = explained[k] if k < len(explained) else 0.0
    return f"PC{k + 1} ({share:.1%} of variance)"


def projection_figure(
    coords: np.ndarray,
    explained: np.ndarray,
    *,
    slots: np.ndarray,
    ages: np.ndarray,
    sources: np.ndarray | None = None,
) -> Spec:
    """Scatter of ``coords`` (``[n, 2]``), coloured by ``sources`` (one colour per label, in
    order of first appearance) when given, else by ``ages`` (newest yellow, oldest dark, with a
    colour bar). Hovering a dot shows its slot and age (and source); the wheel zooms."""
    count = len(coords)
    columns = {"x": coords[:, 0], "y": coords[:, 1], "slot": np.asarray(slots),
               "age": np.asarray(ages)}
    fields: list[tuple[str, str, str | None]] = [("slot", "slot", ",d"),
                                                 ("age", "age (writes)", ",d")]
    if sources is not None:
        names = [str(label) for label in dict.fromkeys(np.asarray(sources, dtype=object).tolist())]
        palette = [SOURCE_COLOURS[i % len(SOURCE_COLOURS)] for i in range(len(names))]
        columns["source"] = np.asarray([str(label) for label in sources])
        colour = colours(names, palette, field="source")
        fields.append(("source", "source", None))
        opacity = 0.7
    else:
        colour = {"field": "age", "type": "quantitative",
                  "scale": {"scheme": "viridis", "reverse": True},
                  "legend": {"title": "age (writes)", "format": ",d", "tickMinStep": 1,
                             "gradientLength": 240}}
        opacity = 0.75
    dots = layer(
        {"type": "circle", "size": 22, "opacity": opacity}, data="z", params=[zoom("x", "y")],
        encoding={"x": position("x", title=_axis(explained, 0)),
                  "y": position("y", title=_axis(explained, 1)),
                  "color": colour, "tooltip": tooltip(*fields)},
    )
    return chart([dots], title="z projected on its first two principal components",
                 note=f"{count:,} vectors", height=480, datasets={"z": frame(**columns)})


def variance_figure(explained: np.ndarray) -> Spec:
    """Explained variance per principal component (bars) and cumulated (a line with dots)."""
    shown = np.asarray(explained, dtype=np.float64)[:MAX_COMPONENTS]
    components = np.arange(1, len(shown) + 1)
    names = ["per component", "cumulative"]
    legend = (names, [VARIANCE, CUMULATIVE])
    component = position("component", title="principal component", whole=True,
                         scale={"domain": [0.5, max(len(shown), 1) + 0.5]})
    share = position("share", title="share of variance", scale={"domain": [0, 1.05]},
                     axis={"format": ".0%"})
    hover = tooltip(("component", "component", ",d"), ("share", "share", ".1%"),
                    ("cumulative", "cumulative", ".1%"))
    layers = [
        layer({"type": "bar"}, data="variance",
              transform=[{"calculate": "datum.component - 0.4", "as": "left"},
                         {"calculate": "datum.component + 0.4", "as": "right"}],
              encoding={"x": {**component, "field": "left"}, "x2": {"field": "right"},
                        "y": share, "y2": {"datum": 0}, "color": colours(*legend, datum=names[0]),
                        "tooltip": hover}),
        layer({"type": "line", "strokeWidth": 2, "point": {"filled": True, "size": 40}},
              data="variance",
              encoding={"x": component, "y": {**share, "field": "cumulative"},
                        "color": colours(*legend, datum=names[1]), "tooltip": hover}),
    ]
    note = None if len(explained) <= MAX_COMPONENTS else (
        f"first {MAX_COMPONENTS} of {len(explained)} components"
    )
    return chart(layers, title="Explained variance", note=note, height=480,
                 datasets={"variance": frame(component=components, share=shown,
                                             cumulative=np.cumsum(shown))})


def histogram_figure(
    values: np.ndarray,
    *,
    title: str,
    x: str,
    groups: np.ndarray | None = None,
    bins: int = 40,
) -> Spec:
    """Histogram of ``values`` (counted server-side); with ``groups`` one overlaid histogram
    per group over shared bins."""
    data = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(data)
    _, edges = histogram(data, bins=bins)
    labels = ["all"] if groups is None else [
        str(label) for label in dict.fromkeys(np.asarray(groups).tolist())]
    palette = [SOURCE_COLOURS[i % len(SOURCE_COLOURS)] for i in range(len(labels))]
    names, lefts, rights, counts = [], [], [], []
    if edges.size:
        for label in labels:
            pick = finite if groups is None else finite & (np.asarray(groups).astype(str) == label)
            counted, _ = np.histogram(data[pick], bins=edges)
            names += [label] * len(counted)
            lefts.append(edges[:-1])
            rights.append(edges[1:])
            counts.append(counted)
    bars = frame(group=np.asarray(names, dtype=str),
                 left=np.concatenate(lefts) if lefts else np.zeros(0),
                 right=np.concatenate(rights) if rights else np.zeros(0),
                 count=np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64))
    fields: list[tuple[str, str, str | None]] = [
        ("left", "from", ".3~g"), ("right", "to", ".3~g"), ("count", "vectors", ",d")]
    if groups is not None:
        fields.insert(0, ("group", "source", None))
    layers = [bin_bars("bins", x=position("left", title=x, scale={}),
                       right="right", y=position("count", title="vectors", whole=True),
                       colour=colours(labels, palette, field="group"), fields=fields,
                       opacity=0.6 if groups is not None else 1.0)]
    missing = int((~finite).sum())
    note = f"{int(finite.sum()):,} vectors" + (f", {missing:,} undefined" if missing else "")
    spec = chart(layers, title=title, note=note, datasets={"bins": bars})
    if groups is None:
        # One population: the legend would only say "all".
        spec["layer"][0]["encoding"]["color"]["legend"] = None
    return spec

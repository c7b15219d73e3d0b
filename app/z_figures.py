"""Figures of the Z-buffer view: the 2D PCA scatter (coloured by age or source), explained
variance per component, and histograms of norms and cosine similarities (numpy in, plotly
out)."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go

from app.downsample import histogram
from app.figures import WEBGL_POINTS, styled, whole_number_ticks

SOURCE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b")
# Components drawn in the explained-variance chart.
MAX_COMPONENTS = 20


def _scatter(count: int) -> Any:
    """WebGL only for many points: browsers allow a page few WebGL contexts."""
    if count > WEBGL_POINTS:
        return go.Scattergl
    return go.Scatter


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
) -> go.Figure:
    """Scatter of ``coords`` (``[n, 2]``), coloured by ``sources`` (one trace per label) when
    given, else by ``ages`` (newest yellow, oldest dark). Hovering shows slot and age."""
    count = len(coords)
    kind = _scatter(count)
    custom = np.stack([np.asarray(slots), np.asarray(ages)], axis=1)
    hover = "slot %{customdata[0]}<br>age %{customdata[1]} writes"
    figure = go.Figure()
    if sources is not None:
        names = np.asarray(sources, dtype=object)
        for i, label in enumerate(dict.fromkeys(names.tolist())):
            pick = names == label
            colour = SOURCE_COLOURS[i % len(SOURCE_COLOURS)]
            figure.add_trace(kind(
                x=coords[pick, 0], y=coords[pick, 1], mode="markers", name=str(label),
                marker={"size": 5, "opacity": 0.7, "color": colour}, customdata=custom[pick],
                hovertemplate=f"{hover}<br>{label}<extra></extra>",
            ))
    else:
        figure.add_trace(kind(
            x=coords[:, 0], y=coords[:, 1], mode="markers", name="z",
            marker={"size": 5, "opacity": 0.75, "color": ages, "colorscale": "Viridis_r",
                    "showscale": True, "colorbar": {"title": {"text": "age<br>(writes)"}}},
            customdata=custom, hovertemplate=f"{hover}<extra></extra>",
        ))
    figure = styled(
        figure,
        title="z projected on its first two principal components",
        x=_axis(explained, 0),
        y=_axis(explained, 1),
        height=480,
        note=f"{count:,} vectors",
    )
    figure.update_layout(legend={"orientation": "h", "y": 1.02, "x": 1.0, "xanchor": "right",
                                 "yanchor": "bottom"})
    return figure


def variance_figure(explained: np.ndarray) -> go.Figure:
    """Explained variance per principal component (bars) and cumulated (line)."""
    shown = np.asarray(explained, dtype=np.float64)[:MAX_COMPONENTS]
    components = np.arange(1, len(shown) + 1)
    figure = go.Figure()
    figure.add_trace(go.Bar(x=components, y=shown, name="per component",
                            marker={"color": "#1f77b4"}))
    figure.add_trace(go.Scatter(x=components, y=np.cumsum(shown), name="cumulative",
                                mode="lines+markers", line={"color": "#d62728"}))
    figure.update_yaxes(tickformat=".0%", range=[0, 1.05])
    figure.update_xaxes(**whole_number_ticks(len(shown)))
    note = None if len(explained) <= MAX_COMPONENTS else (
        f"first {MAX_COMPONENTS} of {len(explained)} components"
    )
    return styled(figure, title="Explained variance", x="principal component",
                  y="share of variance", height=480, note=note)


def histogram_figure(
    values: np.ndarray,
    *,
    title: str,
    x: str,
    groups: np.ndarray | None = None,
    bins: int = 40,
) -> go.Figure:
    """Histogram of ``values`` (counted server-side); with ``groups`` one overlaid histogram
    per group over shared bins."""
    data = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(data)
    figure = go.Figure()
    _, edges = histogram(data, bins=bins)
    tallest = 0
    if edges.size:
        centres, widths = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
        labels = ["all"] if groups is None else list(dict.fromkeys(np.asarray(groups).tolist()))
        for i, label in enumerate(labels):
            pick = finite if groups is None else finite & (np.asarray(groups) == label)
            counts, _ = np.histogram(data[pick], bins=edges)
            tallest = max(tallest, int(counts.max()))
            figure.add_trace(go.Bar(x=centres, y=counts, width=widths, name=str(label),
                                    opacity=0.6 if groups is not None else 1.0,
                                    marker={"color": SOURCE_COLOURS[i % len(SOURCE_COLOURS)]}))
        figure.update_layout(barmode="overlay")
    figure.update_yaxes(**whole_number_ticks(tallest))
    missing = int((~finite).sum())
    note = f"{int(finite.sum()):,} vectors" + (f", {missing:,} undefined" if missing else "")
    return styled(figure, title=title, x=x, y="vectors", note=note)

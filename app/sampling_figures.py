"""Figures of the Sampling lab: where a batch landed and empirical against expected frequency
(numpy arrays in, plotly figures out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.downsample import MAX_POINTS
from app.figures import styled
from app.ring import BinnedMap, window_runs
from app.ring_figures import CURSOR, boundary_map_figure

DRAWN = "#e45756"
EXPECTED = "#9ca3af"
EMPIRICAL = "#4c78a8"
# How far a window's bar reaches into its first and last cell (cells are 1 row wide).
RUN_EDGE = 0.4


def landing_map_figure(
    binned: BinnedMap, cursor: int, starts: np.ndarray, envs: np.ndarray, seq_length: int,
    *, end_key: str, full: bool,
) -> go.Figure:
    """The episode-boundary map with each drawn window as a red bar over the time rows it
    covers (in its env), a dot at its start. A window that runs past the ring's last slot
    continues at slot 0: it is drawn as two bars (:func:`app.ring.window_runs`).

    Raises:
        ValueError: ``starts`` and ``envs`` differ in length, or as :func:`window_runs`.
    """
    starts = np.asarray(starts, dtype=np.int64)
    envs = np.asarray(envs, dtype=np.int64)
    if starts.shape != envs.shape:
        raise ValueError(f"envs: expected one per start ({starts.shape}), got {envs.shape}")
    figure = boundary_map_figure(binned, cursor, end_key=end_key, full=full)
    window, first, last = window_runs(starts, seq_length, binned.time_rows)
    # Each bar spans its cells (a slot's cell is [slot - 0.5, slot + 0.5]), so a run of one
    # slot stays visible; None breaks the line between bars.
    xs = np.column_stack([first - RUN_EDGE, last + RUN_EDGE, np.full(len(first), np.nan)])
    ys = np.column_stack([envs[window], envs[window], np.full(len(first), np.nan)])
    wraps = int((np.bincount(window, minlength=len(starts)) > 1).sum())
    figure.add_trace(
        go.Scatter(x=xs.reshape(-1), y=ys.reshape(-1).astype(np.float64), mode="lines",
                   line={"color": DRAWN, "width": 3}, connectgaps=False,
                   name=f"drawn window ({seq_length} rows)", hoverinfo="skip")
    )
    figure.add_trace(
        go.Scatter(x=starts, y=envs, mode="markers", marker={"color": DRAWN, "size": 6},
                   name="window start", hovertemplate="start row %{x}<br>env %{y}<extra></extra>")
    )
    wrapped = (f"; {wraps:,} run past the last slot and continue at slot 0" if wraps else "")
    figure.update_layout(
        title={"text": f"Where the batch landed: {len(starts):,} windows on the episode map"
               f"<br><sup>{binned.caption()}; dark cells end an episode, red = drawn windows"
               f"{wrapped}; no window crosses a dark cell or the cursor</sup>"},
        showlegend=True,
    )
    return figure


def row_landing_figure(rows: np.ndarray, length: int, *, unit: str = "row") -> go.Figure:
    """Drawn rows along the row axis ``[0, length)``, one tick per draw (ticks stack)."""
    bins = int(min(length, 200))
    counts, edges = np.histogram(rows, bins=bins, range=(0, length))
    figure = go.Figure(
        go.Bar(x=edges[:-1], y=counts, width=np.diff(edges), offset=0, marker={"color": DRAWN},
               name="draws", hovertemplate=f"{unit}s %{{x:.0f}}+<br>draws %{{y}}<extra></extra>")
    )
    figure.update_xaxes(range=[0, length])
    return styled(
        figure,
        title=f"Where the batch landed: {len(rows):,} draws along the {length:,} filled {unit}s",
        x=f"{unit} (physical storage index)",
        y="draws",
        height=300,
        note=f"{bins} bins" if bins < length else None,
    )


def frequency_figure(
    labels: np.ndarray, expected: np.ndarray, observed: np.ndarray, *, unit: str
) -> go.Figure:
    """Empirical against expected frequency per bin: bars for up to 100 bins, else a scatter
    of empirical against expected with the diagonal (points on it match the sampler)."""
    total = observed.sum()
    empirical = observed / total if total else observed
    if len(labels) <= 100:
        text = [str(v) for v in labels.tolist()]
        figure = go.Figure([
            go.Bar(x=text, y=expected, name="expected", marker={"color": EXPECTED}),
            go.Bar(x=text, y=empirical, name="empirical", marker={"color": EMPIRICAL}),
        ])
        figure.update_layout(barmode="group")
        figure.update_xaxes(type="category")
        return styled(figure, title=f"Empirical vs expected frequency per {unit}",
                      x=unit, y="fraction of draws")
    shown = np.arange(len(labels))
    note = f"{len(labels):,} {unit}s"
    if len(labels) > MAX_POINTS:
        # Deterministic stride: every bin is equally likely to be shown.
        shown = np.linspace(0, len(labels) - 1, MAX_POINTS).round().astype(np.int64)
        note = f"{len(labels):,} -> {len(shown):,} {unit}s (evenly spaced)"
    top = float(max(expected.max(), empirical.max())) * 1.05
    scatter = go.Scattergl if len(shown) > 5_000 else go.Scatter
    figure = go.Figure([
        scatter(x=expected[shown], y=empirical[shown], mode="markers",
                marker={"color": EMPIRICAL, "size": 5, "opacity": 0.6}, name=unit,
                text=[str(v) for v in labels[shown].tolist()],
                hovertemplate=f"{unit} %{{text}}<br>expected %{{x:.4g}}<br>empirical %{{y:.4g}}"
                "<extra></extra>"),
        go.Scatter(x=[0, top], y=[0, top], mode="lines", name="empirical = expected",
                   line={"color": CURSOR, "dash": "dash"}),
    ])
    return styled(figure, title=f"Empirical vs expected frequency, one point per {unit}",
                  x="expected probability", y="empirical frequency", note=note)

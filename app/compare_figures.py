"""Plotly figures of the Compare page: two sides overlaid (numpy in, figures out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.compare import length_fractions, shared_length_bins
from app.figures import styled

COLOURS = ("#1f77b4", "#d62728")


def length_overlay(a: np.ndarray, b: np.ndarray, labels: tuple[str, str]) -> go.Figure:
    """Both sides' trajectory length distributions on the same bins, as fractions."""
    edges = shared_length_bins(a, b)
    centre = (edges[:-1] + edges[1:] - 1) / 2
    figure = go.Figure()
    for lengths, label, colour in zip((a, b), labels, COLOURS, strict=True):
        figure.add_bar(
            x=centre, y=length_fractions(lengths, edges), width=(edges[1:] - edges[:-1]) * 0.9,
            name=f"{label} ({len(lengths):,} trajectories)", marker_color=colour, opacity=0.55,
        )
    figure.update_layout(barmode="overlay")
    return styled(figure, title="Online trajectory lengths", x="trajectory length (rows)",
                  y="fraction of trajectories")


def motion_bars(
    ids: np.ndarray, a: np.ndarray, b: np.ndarray, labels: tuple[str, str], *, title: str, y: str
) -> go.Figure:
    """One value per motion for each side, as grouped bars (a gap where a side lacks it)."""
    figure = go.Figure()
    for values, label, colour in zip((a, b), labels, COLOURS, strict=True):
        figure.add_bar(x=[str(m) for m in ids], y=values, name=label, marker_color=colour)
    figure.update_layout(barmode="group")
    figure.update_xaxes(type="category")
    return styled(figure, title=title, x="motion id", y=y)


def difference_bars(
    ids: np.ndarray, a: np.ndarray, b: np.ndarray, labels: tuple[str, str], *, title: str, y: str
) -> go.Figure:
    """``b - a`` per motion, red where B is higher."""
    diff = b - a
    figure = go.Figure(go.Bar(
        x=[str(m) for m in ids], y=diff,
        marker_color=np.where(diff > 0, COLOURS[1], COLOURS[0]).tolist(),
        name=f"{labels[1]} minus {labels[0]}",
    ))
    figure.update_xaxes(type="category")
    return styled(figure, title=title, x="motion id", y=y)

"""Plotly figures of the Trajectories page: length histograms, per-env lengths, per-motion
lengths and the samplable fraction against the window length (numpy in, figures out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.figures import line_trace, reference_line, styled, whole_number_ticks
from app.trajectory_stats import (
    MotionLengths,
    SamplableCurve,
    Trajectories,
    env_length_counts,
    length_bins,
    length_counts,
)

SAMPLABLE = "#1f77b4"
TOO_SHORT = "#c7c7c7"
NEED = "#d62728"


def _need_line(figure: go.Figure, need: int, *, vertical: bool) -> None:
    """A dashed line at the window need, named in the legend (not written over the bars)."""
    label = f"window needs {need} rows"
    if vertical:
        reference_line(figure, x=need - 0.5, label=label, colour=NEED)
    else:
        reference_line(figure, y=need - 0.5, label=label, colour=NEED)


def length_histogram(traj: Trajectories, *, need: int, title: str) -> go.Figure:
    """Trajectories per length bin, bins below ``need`` grey (never sampled)."""
    edges = length_bins(traj.length)
    counts = length_counts(traj.length, edges)
    low, high = edges[:-1], edges[1:] - 1
    centre = (edges[:-1] + edges[1:] - 1) / 2
    width = edges[1:] - edges[:-1]
    labels = [f"{a}" if a == b else f"{a}-{b}" for a, b in zip(low, high, strict=True)]
    figure = go.Figure()
    for name, mask, colour in (
        (f"long enough (>= {need} rows)", high >= need, SAMPLABLE),
        (f"too short (< {need} rows)", high < need, TOO_SHORT),
    ):
        figure.add_bar(
            x=centre[mask], y=counts[mask], width=width[mask] * 0.9, name=name,
            marker_color=colour, customdata=np.array(labels)[mask],
            hovertemplate="length %{customdata}: %{y} trajectories<extra></extra>",
        )
    _need_line(figure, need, vertical=True)
    figure.update_xaxes(**whole_number_ticks(float(edges[-1] - edges[0])))
    figure.update_yaxes(**whole_number_ticks(float(counts.max()) if len(counts) else 0.0))
    note = f"{len(traj):,} trajectories, {int(traj.length.sum()):,} rows"
    return styled(figure, title=title, x="trajectory length (rows)", y="trajectories", note=note)


def env_length_heatmap(traj: Trajectories, env_count: int, *, need: int) -> go.Figure:
    """Trajectories per env (rows) and length bin (columns)."""
    edges = length_bins(traj.length)
    counts = env_length_counts(traj, env_count, edges)
    centre = (edges[:-1] + edges[1:] - 1) / 2
    figure = go.Figure(
        go.Heatmap(
            z=counts, x=centre, y=np.arange(env_count), colorscale="Blues",
            colorbar={"title": "trajectories",
                      **whole_number_ticks(float(counts.max()) if counts.size else 0.0)},
            hovertemplate="env %{y}, length ~%{x}: %{z} trajectories<extra></extra>",
        )
    )
    _need_line(figure, need, vertical=True)
    figure.update_xaxes(**whole_number_ticks(float(edges[-1] - edges[0])))
    figure.update_yaxes(**whole_number_ticks(env_count))
    height = int(min(700, max(300, 14 * env_count + 120)))
    return styled(
        figure, title="Trajectory lengths per env", x="trajectory length (rows)", y="env",
        height=height, note="each row is one env; darker = more trajectories of that length",
    )


def motion_length_bars(motions: MotionLengths, *, need: int) -> go.Figure:
    """One bar per expert trajectory (motion), grey when shorter than ``need``."""
    order = np.argsort(motions.motion_id, kind="stable")
    ids, lengths = motions.motion_id[order], motions.length[order]
    colours = np.where(lengths >= need, SAMPLABLE, TOO_SHORT)
    figure = go.Figure(
        go.Bar(
            x=[str(m) for m in ids], y=lengths, marker_color=colours, showlegend=False,
            hovertemplate="motion %{x}: %{y} rows<extra></extra>",
        )
    )
    _need_line(figure, need, vertical=False)
    figure.update_yaxes(**whole_number_ticks(float(lengths.max()) if len(lengths) else 0.0))
    short = int((lengths < need).sum())
    note = f"{len(ids)} trajectories; {short} shorter than the window (grey) are never sampled"
    figure.update_xaxes(type="category")
    return styled(figure, title="Expert trajectory length per motion", x="motion id",
                  y="length (rows)", note=note)


def samplable_figure(curves: dict[str, SamplableCurve], *, seq_length: int) -> go.Figure:
    """Samplable fraction of trajectories (solid) and transitions (dotted) vs window length."""
    figure = go.Figure()
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c")
    for (name, curve), colour in zip(curves.items(), palette, strict=False):
        figure.add_trace(line_trace(curve.seq_length, curve.trajectory_fraction,
                                    name=f"{name}: trajectories", line={"color": colour}))
        figure.add_trace(line_trace(curve.seq_length, curve.transition_fraction,
                                    name=f"{name}: transitions",
                                    line={"color": colour, "dash": "dot"}))
    reference_line(figure, x=seq_length, label=f"seq_length {seq_length}", colour=NEED)
    longest = max((float(c.seq_length.max()) for c in curves.values() if len(c.seq_length)),
                  default=0.0)
    figure.update_xaxes(**whole_number_ticks(longest))
    figure.update_yaxes(range=[0, 1.05], tickformat=".0%")
    return styled(figure, title="What a window length can still sample", x="seq_length",
                  y="fraction samplable",
                  note="solid: trajectories long enough; dotted: rows a window can return")

"""Figures of the FIFO occupancy page: the ring, slot age, the episode-boundary map and
occupancy over training (numpy arrays in, plotly figures out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.downsample import Reduced
from app.figures import line_trace, reference_line, styled, whole_number_ticks
from app.ring import BinnedMap, Occupancy, RingState, ring_segments

FILLED = "#4c78a8"
EMPTY = "#e5e7eb"
CURSOR = "#d62728"
OLDEST = "#ff7f0e"
NEWEST = "#2ca02c"
# Up to this many slots the slot age is one bar per slot; above, one marker per slot.
AGE_BARS = 200


def _angle(slot: float, capacity: int) -> float:
    return 360.0 * slot / capacity


def ring_figure(state: RingState) -> go.Figure:
    """The ring as a clock: slot 0 at the top, slots running clockwise, filled arcs blue,
    and markers at the cursor (next write), the oldest and the newest row."""
    starts, filled = ring_segments(state)
    width = 360.0 / len(starts)
    colours = [FILLED if f >= 0.5 else EMPTY for f in filled]
    figure = go.Figure(
        go.Barpolar(
            r=np.ones(len(starts)),
            theta=starts * 360.0 / state.capacity + width / 2,
            width=np.full(len(starts), width),
            base=np.full(len(starts), 1.0),
            marker={"color": colours, "line": {"width": 0}},
            hovertext=[
                f"slots {s:,}..: {f:.0%} filled" for s, f in zip(starts, filled, strict=True)
            ],
            hoverinfo="text",
            showlegend=False,
        )
    )
    # The cursor is a spoke across the band; the oldest row is marked outside the band and
    # the newest inside it, so they stay apart even when they are neighbours.
    cursor_angle = _angle(state.cursor, state.capacity)
    figure.add_trace(
        go.Scatterpolar(
            r=[0.75, 2.3], theta=[cursor_angle, cursor_angle], mode="lines",
            line={"color": CURSOR, "width": 3}, name=f"cursor (next write): slot {state.cursor:,}",
        )
    )
    if state.oldest is not None and state.newest is not None:
        for name, slot, radius, colour, symbol in (
            ("oldest row", state.oldest, 2.35, OLDEST, "circle"),
            ("newest row", state.newest, 0.65, NEWEST, "diamond"),
        ):
            figure.add_trace(
                go.Scatterpolar(
                    r=[radius], theta=[_angle(slot + 0.5, state.capacity)], mode="markers",
                    marker={"color": colour, "size": 12, "symbol": symbol},
                    name=f"{name}: slot {slot:,}",
                )
            )
    figure.update_layout(
        polar={
            "radialaxis": {"visible": False, "range": [0, 2.5]},
            "angularaxis": {
                "showgrid": False,
                "showline": False,
                "direction": "clockwise",
                "rotation": 90,
                "tickmode": "array",
                "tickvals": [_angle(v, state.capacity) for v in _ticks(state.capacity)],
                "ticktext": [f"{v:,}" for v in _ticks(state.capacity)],
            },
        },
    )
    note = f"{state.length:,} of {state.capacity:,} slots filled ({state.fill:.0%}); wraps: " + (
        state.wraps_text()
    )
    return styled(figure, title="Ring", x="", y="", height=420, note=note)


def _ticks(capacity: int) -> list[int]:
    return sorted({round(capacity * k / 4) % capacity for k in range(4)})


def slot_age_figure(age: Reduced, capacity: int, cursor: int) -> go.Figure:
    """Age of each slot (writes since written) against the slot, with the cursor marked.

    Slots are separate things, so each gets a bar (up to :data:`AGE_BARS` slots) or a marker,
    never a line joining neighbours. The ages fall to 0 at the newest row, just left of the
    cursor; empty slots have none.
    """
    if len(age.x) <= AGE_BARS:
        trace: go.Bar | go.Scatter | go.Scattergl = go.Bar(
            x=age.x, y=age.y, name="age", marker={"color": FILLED},
            hovertemplate="slot %{x:.0f}: age %{y:.0f}<extra></extra>",
        )
    else:
        scatter = go.Scattergl if len(age.x) > 5_000 else go.Scatter
        trace = scatter(
            x=age.x, y=age.y, name="age", mode="markers", marker={"color": FILLED, "size": 3},
            hovertemplate="slot %{x:.0f}: age %{y:.0f}<extra></extra>",
        )
    figure = go.Figure(trace)
    reference_line(figure, x=cursor - 0.5, label=f"cursor (next write): slot {cursor:,}",
                   colour=CURSOR)
    figure.update_xaxes(range=[-0.5, max(capacity, 1) - 0.5], **whole_number_ticks(capacity))
    figure.update_yaxes(**whole_number_ticks(capacity))
    return styled(
        figure,
        title="Slot age: writes since each slot was written (0 = newest; none = empty)",
        x="slot (time row)",
        y="age (writes)",
        note=age.caption(),
    )


def boundary_map_figure(
    binned: BinnedMap, cursor: int, *, end_key: str, full: bool
) -> go.Figure:
    """Time x env heatmap of episode ends (dark = an end flag in the cell) with the cursor.

    Left of the cursor are the newest rows; right of it, once the ring is ``full``, the
    oldest (before the first wrap nothing lies right of it). The label saying so sits above
    the map, where no cell can hide it.
    """
    time_width = binned.time_rows / max(len(binned.time_starts), 1)
    figure = go.Figure(
        go.Heatmap(
            # uint8: the flags go to the browser as 1 byte per cell, not 8.
            z=binned.cells.T.astype(np.uint8),
            x=binned.time_starts + time_width / 2 - 0.5,
            y=binned.env_starts,
            colorscale=[[0.0, "#f7fbff"], [1.0, "#08306b"]],
            zmin=0,
            zmax=1,
            showscale=False,
            hovertemplate="time row %{x:.0f}<br>env %{y}<br>end flag: %{z}<extra></extra>",
        )
    )
    figure.add_vline(x=cursor - 0.5, line={"color": CURSOR, "width": 2})
    sides = []
    if cursor > 0:
        sides.append(("\u2190 newest rows", "right"))
    if full:
        sides.append(("oldest rows \u2192", "left"))
    for text, anchor in sides:
        figure.add_annotation(
            text=text, x=cursor - 0.5, xanchor=anchor, yref="paper", y=1.0, yanchor="bottom",
            showarrow=False, font={"color": CURSOR}, xshift=-4 if anchor == "right" else 4,
        )
    figure.update_xaxes(**whole_number_ticks(binned.time_rows))
    figure.update_yaxes(**whole_number_ticks(binned.envs))
    styled(
        figure,
        title=f"Episode ends (the {end_key} flag): a dark cell ends an episode",
        x="time row (physical slot)",
        y="env",
        height=420,
        note=binned.caption() + "; episodes run left to right in each env row, "
        "and wrap at the cursor",
    )
    # Room between the note and the map for the cursor's label.
    figure.update_layout(margin={"t": 95})
    return figure


def occupancy_figure(series: Occupancy) -> go.Figure:
    """Fill fraction over training steps, and the wrap count on a second axis."""
    figure = go.Figure(
        line_trace(series.step, series.fill * 100, name="filled (% of capacity)",
                   line={"color": FILLED})
    )
    if np.isfinite(series.wraps).any():
        trace = line_trace(series.step, series.wraps, name="wraps", line={"color": OLDEST})
        trace.update(yaxis="y2", line_shape="hv")
        figure.add_trace(trace)
    figure.update_xaxes(**whole_number_ticks(float(np.ptp(series.step)) if len(series.step) else 0))
    styled(
        figure,
        title="Occupancy over training (from the log's buffer records)",
        x="training step",
        y="filled (% of capacity)",
        note=f"{len(series.step):,} records",
    )
    figure.update_layout(yaxis={"range": [0, 105]})
    if np.isfinite(series.wraps).any():
        # styled titles every y axis alike; the wrap axis gets its own title after it.
        figure.update_layout(
            yaxis2={
                "title": {"text": "wraps"}, "overlaying": "y", "side": "right",
                "rangemode": "tozero", "showgrid": False, "tickformat": ",d",
                "dtick": max(1, int(np.ceil(np.nanmax(series.wraps) / 5))),
            }
        )
    return figure

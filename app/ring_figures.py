"""Figures of the FIFO occupancy page: the ring, slot age, the episode-end map and occupancy
over training (numpy arrays in, Vega-Lite specs out, drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

import numpy as np

from app.downsample import Reduced
from app.ring import BinnedMap, Occupancy, RingState, ring_segments
from app.vega import (
    Spec,
    chart,
    colours,
    frame,
    group,
    hover_points,
    layer,
    position,
    tooltip,
    vertical_rule,
    zoom,
)

FILLED = "#4c78a8"
EMPTY = "#e5e7eb"
CURSOR = "#d62728"
OLDEST = "#ff7f0e"
NEWEST = "#2ca02c"
MAP_EMPTY = "#f7fbff"
MAP_END = "#08306b"
# Up to this many slots the slot age is one bar per slot; above, one dot per slot.
AGE_BARS = 200
# The radius the ring's outer labels reach (the band runs from 1 to 2).
RING_EXTENT = 2.7
# Half the cursor spoke's width, as a fraction of the ring.
SPOKE = 0.002


def ring_figure(state: RingState) -> Spec:
    """The ring as a clock: slot 0 at the top, slots running clockwise, filled arcs blue,
    and marks at the cursor (next write, a red spoke), the oldest (outside the band) and the
    newest row (inside it), so the two stay apart even when they are neighbours."""
    starts, ends, filled = _runs(state)
    cursor = f"cursor (next write): slot {state.cursor:,}"
    names = ["filled", "empty", cursor]
    palette = [FILLED, EMPTY, CURSOR]
    marks = []
    if state.oldest is not None and state.newest is not None:
        for what, slot, at, colour, glyph in (
            ("oldest row", state.oldest, 2.35, OLDEST, "\u25cf"),
            ("newest row", state.newest, 0.7, NEWEST, "\u25c6"),
        ):
            names.append(f"{what}: slot {slot:,}")
            palette.append(colour)
            marks.append({"slot": slot + 0.5, "r": at, "label": names[-1], "glyph": glyph})
    legend = colours(names, palette, field="label")
    theta: Spec = {
        "type": "quantitative",
        "scale": {"type": "linear", "domain": [0, state.capacity], "range": [0, 2 * np.pi],
                  "zero": False, "nice": False},
    }
    radius: Spec = {
        "type": "quantitative",
        # The plot's size once the title and legend took theirs.
        "scale": {"type": "linear", "domain": [0, RING_EXTENT],
                  "range": [0, {"expr": "min(width, height) / 2 - 14"}], "zero": True,
                  "nice": False},
    }
    layers = [
        layer({"type": "arc"}, data="arcs", encoding={
            "theta": {"field": "start", **theta}, "theta2": {"field": "end"},
            "radius": {"datum": 1, **radius}, "radius2": {"datum": 2},
            "color": legend,
            "tooltip": tooltip(("slots", "slots", None), ("filled", "filled", ".0%")),
        }),
        layer({"type": "arc"}, data=[{"a": state.cursor - SPOKE * state.capacity,
                                      "b": state.cursor + SPOKE * state.capacity,
                                      "label": cursor}], encoding={
            "theta": {"field": "a", **theta}, "theta2": {"field": "b"},
            "radius": {"datum": 0.75, **radius}, "radius2": {"datum": 2.3},
            "color": legend, "tooltip": tooltip(("label", "cursor", None)),
        }),
        layer({"type": "text", "fontSize": 11, "color": "#6b7280", "tooltip": None},
              data=[{"slot": v, "text": f"{v:,}"} for v in _ticks(state.capacity)], encoding={
            "theta": {"field": "slot", **theta}, "radius": {"datum": 2.6, **radius},
            "text": {"field": "text"},
        }),
    ]
    if marks:
        layers.append(layer({"type": "text", "fontSize": 17}, data=marks, encoding={
            "theta": {"field": "slot", **theta}, "radius": {"field": "r", **radius},
            "text": {"field": "glyph"}, "color": legend,
            "tooltip": tooltip(("label", "row", None)),
        }))
    slots = [f"{a:,}..{b - 1:,} ({b - a:,} slots)" if b - a > 1 else f"{a:,}"
             for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    note = f"{state.length:,} of {state.capacity:,} slots filled ({state.fill:.0%}); wraps: " + (
        state.wraps_text()
    )
    spec = chart(
        layers, title="Ring", note=note, height=460,
        datasets={"arcs": frame(start=starts, end=ends, filled=filled, slots=slots,
                                label=np.where(filled >= 0.5, "filled", "empty"))},
    )
    # Two legend entries a line: the entries name slots, and the column is narrow.
    spec["config"] = {**spec["config"], "legend": {**spec["config"]["legend"], "columns": 2}}
    return spec


def _runs(state: RingState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ring's arcs (:func:`app.ring.ring_segments`) merged into runs drawn alike (filled or
    empty): each run's first slot, its end (exclusive) and the fraction of its slots filled.
    One arc per run leaves no seams between neighbouring arcs of one colour."""
    starts, filled = ring_segments(state)
    ends = np.append(starts[1:], state.capacity)
    drawn = filled >= 0.5
    first = np.flatnonzero(np.append(True, drawn[1:] != drawn[:-1]))
    last = np.append(first[1:], len(starts)) - 1
    held = np.add.reduceat(filled * (ends - starts), first)
    run_starts, run_ends = starts[first], ends[last]
    return run_starts, run_ends, held / (run_ends - run_starts)


def _ticks(capacity: int) -> list[int]:
    return sorted({round(capacity * k / 4) % capacity for k in range(4)})


def slot_age_figure(age: Reduced, capacity: int, cursor: int) -> Spec:
    """Age of each slot (writes since written) against the slot, with the cursor marked.

    Slots are separate things, so each gets a bar (up to :data:`AGE_BARS` slots) or a dot,
    never a line joining neighbours. The ages fall to 0 at the newest row, just left of the
    cursor; empty slots have none (no bar).
    """
    label = f"cursor (next write): slot {cursor:,}"
    series = (["age", label], [FILLED, CURSOR])
    slot_axis = position("slot", title="slot (time row)", whole=True,
                         scale={"domain": [-0.5, max(capacity, 1) - 0.5]})
    age_axis = position("age", title="age (writes)", whole=True)
    hover = tooltip(("slot", "slot", ",d"), ("age", "age", ",d"))
    if len(age.x) <= AGE_BARS:
        ages = layer({"type": "bar"}, data="age", params=[zoom("x")],
                     transform=[{"calculate": "datum.slot - 0.4", "as": "left"},
                                {"calculate": "datum.slot + 0.4", "as": "right"}],
                     encoding={"x": {**slot_axis, "field": "left"}, "x2": {"field": "right"},
                               "y": age_axis, "color": colours(*series, datum="age"),
                               "tooltip": hover})
    else:
        ages = layer({"type": "circle", "size": 6, "opacity": 0.9}, data="age",
                     params=[zoom("x")],
                     encoding={"x": slot_axis, "y": age_axis,
                               "color": colours(*series, datum="age"), "tooltip": hover})
    return chart(
        [ages, vertical_rule(cursor - 0.5, colour=CURSOR, label=label, legend=series)],
        title="Slot age: writes since each slot was written (0 = newest; none = empty)",
        note=age.caption(), datasets={"age": frame(slot=age.x, age=age.y)},
    )


def boundary_map_figure(binned: BinnedMap, cursor: int, *, end_key: str, full: bool) -> Spec:
    """Time x env map of episode ends (dark = an end flag in the cell) with the cursor.

    Only the cells holding a flag are sent and drawn, over a pale plot: a map of 50,000 cells
    costs the browser little. Left of the cursor are the newest rows; right of it, once the
    ring is ``full``, the oldest (before the first wrap nothing lies right of it). The labels
    saying so sit above the map, where no cell can hide them.
    """
    time_bin = int(binned.time_starts[1] - binned.time_starts[0]) if len(
        binned.time_starts) > 1 else max(binned.time_rows, 1)
    env_bin = int(binned.env_starts[1] - binned.env_starts[0]) if len(
        binned.env_starts) > 1 else max(binned.envs, 1)
    time_index, env_index = np.nonzero(binned.cells)
    cells = frame(time=binned.time_starts[time_index].astype(np.int32),
                  env=binned.env_starts[env_index].astype(np.int32))
    # A bin's last row and env, clipped at the map's edge (the last bin may be short).
    calculate = [
        {"calculate": "datum.time - 0.5", "as": "t0"},
        {"calculate": f"min(datum.time + {time_bin}, {binned.time_rows}) - 0.5", "as": "t1"},
        {"calculate": "datum.env - 0.5", "as": "e0"},
        {"calculate": f"min(datum.env + {env_bin}, {binned.envs}) - 0.5", "as": "e1"},
        {"calculate": _span("time", time_bin, binned.time_rows), "as": "rows"},
        {"calculate": _span("env", env_bin, binned.envs), "as": "envs"},
    ]
    time_axis = position("t0", title="time row (physical slot)", whole=True,
                         scale={"domain": [-0.5, binned.time_rows - 0.5]}, axis={"grid": False})
    env_axis = position("e0", title="env", whole=True,
                        scale={"domain": [-0.5, max(binned.envs, 1) - 0.5]}, axis={"grid": False})
    layers = [
        layer({"type": "rect", "color": MAP_END}, data="ends", transform=calculate,
              params=[zoom("x", "y")],
              encoding={"x": time_axis, "x2": {"field": "t1"}, "y": env_axis,
                        "y2": {"field": "e1"},
                        "tooltip": tooltip(("rows", "time row", None), ("envs", "env", None))}),
        vertical_rule(cursor - 0.5, colour=CURSOR, dashed=False),
    ]
    sides = []
    if cursor > 0:
        sides.append({"x": cursor - 0.5, "text": "\u2190 newest rows", "align": "right", "dx": -4})
    if full:
        sides.append({"x": cursor - 0.5, "text": "oldest rows \u2192", "align": "left", "dx": 4})
    for side in sides:
        layers.append(layer(
            # Zooming clips marks to the plot; these labels live above it.
            {"type": "text", "align": side["align"], "dx": side["dx"], "baseline": "bottom",
             "color": CURSOR, "fontSize": 12, "clip": False, "tooltip": None},
            data=[{"x": side["x"], "text": side["text"]}],
            encoding={"x": {"field": "x", "type": "quantitative"}, "y": {"value": -4},
                      "text": {"field": "text"}}))
    spec = chart(
        layers,
        title=f"Episode ends (the {end_key} flag): a dark cell ends an episode",
        note=binned.caption() + "; episodes run left to right in each env row, "
        "and wrap at the cursor; hover a dark cell for its row and env",
        height=420, datasets={"ends": cells},
    )
    spec["view"] = {"fill": MAP_EMPTY, "stroke": None}
    # Room between the note and the map for the cursor's labels.
    spec["title"]["offset"] = 22
    return spec


def _span(column: str, width: int, limit: int) -> str:
    """A Vega expression naming a cell's rows (or envs): ``"12"`` or ``"10..19"``."""
    if width == 1:
        return f"format(datum.{column}, ',d')"
    return (f"format(datum.{column}, ',d') + '..' + "
            f"format(min(datum.{column} + {width}, {limit}) - 1, ',d')")


def occupancy_figure(series: Occupancy) -> Spec:
    """Fill fraction over training steps, and the wrap count on a second axis (right)."""
    fill_name, wraps_name = "filled (% of capacity)", "wraps"
    has_wraps = bool(np.isfinite(series.wraps).any())
    names = [fill_name, wraps_name] if has_wraps else [fill_name]
    palette = [FILLED, OLDEST] if has_wraps else [FILLED]
    step = position("step", title="training step", whole=True, scale={})
    filled = position("filled", title=fill_name, scale={"domain": [0, 105]})
    layers = [group(
        layer({"type": "line", "strokeWidth": 2}, data="occupancy", params=[zoom("x")],
              encoding={"x": step, "y": filled,
                        "color": colours(names, palette, datum=fill_name)}),
        hover_points("occupancy", x=step, y=filled,
                     fields=[("step", "step", ",d"), ("filled", "filled (%)", ".1f")]),
    )]
    if has_wraps:
        # From 0, and never a flat line at mid-height while the ring has not wrapped.
        top = max(1.0, float(np.nanmax(series.wraps)))
        wraps = position("wraps", title=wraps_name, scale={"domain": [0, top]}, whole=True,
                         axis={"orient": "right", "grid": False})
        layers.append(group(
            layer({"type": "line", "interpolate": "step-after", "strokeWidth": 2},
                  data="occupancy",
                  encoding={"x": step, "y": wraps,
                            "color": colours(names, palette, datum=wraps_name)}),
            hover_points("occupancy", x=step, y=wraps,
                         fields=[("step", "step", ",d"), ("wraps", "wraps", ",d")]),
        ))
    return chart(
        layers, title="Occupancy over training (from the log's buffer records)",
        note=f"{len(series.step):,} records",
        datasets={"occupancy": frame(step=series.step, filled=series.fill * 100,
                                     wraps=series.wraps)},
        independent_y=has_wraps,
    )

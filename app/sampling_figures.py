"""Figures of the Sampling lab: where a batch landed and empirical against expected frequency
(numpy arrays in, Vega-Lite specs out, drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

import numpy as np

from app.ring import BinnedMap, window_runs
from app.ring_figures import CURSOR, boundary_map_figure
from app.vega import (
    Spec,
    bar_spans,
    chart,
    colours,
    frame,
    hover_points,
    layer,
    position,
    tooltip,
    zoom,
)

DRAWN = "#e45756"
EXPECTED = "#9ca3af"
EMPIRICAL = "#4c78a8"
BOUNDARY = "#6b7280"
# How far a window's bar reaches into its first and last cell (cells are 1 row wide).
RUN_EDGE = 0.4
# Up to this many bins the frequencies are bars, one pair per bin.
BAR_BINS = 100
# Up to this many motions the landing chart names them along its top.
SEGMENT_LABELS = 40


def landing_map_figure(
    binned: BinnedMap, cursor: int, starts: np.ndarray, envs: np.ndarray, seq_length: int,
    *, end_key: str, full: bool,
) -> Spec:
    """The episode-end map (a Vega-Lite spec, :func:`app.ring_figures.boundary_map_figure`)
    with each drawn window as a red bar over the time rows it covers (in its env), a dot at
    its start. A window that runs past the ring's last slot continues at slot 0: it is drawn
    as two bars (:func:`app.ring.window_runs`).

    Raises:
        ValueError: ``starts`` and ``envs`` differ in length, or as :func:`window_runs`.
    """
    starts = np.asarray(starts, dtype=np.int64)
    envs = np.asarray(envs, dtype=np.int64)
    if starts.shape != envs.shape:
        raise ValueError(f"envs: expected one per start ({starts.shape}), got {envs.shape}")
    spec = boundary_map_figure(binned, cursor, end_key=end_key, full=full)
    window, first, last = window_runs(starts, seq_length, binned.time_rows)
    wraps = int((np.bincount(window, minlength=len(starts)) > 1).sum())
    bar, dot = f"drawn window ({seq_length} rows)", "window start"
    legend = ([bar, dot], [DRAWN, DRAWN])
    time = position("left", title="time row (physical slot)", whole=True)
    env = position("env", title="env", whole=True)
    # Each bar spans its cells (a slot's cell is [slot - 0.5, slot + 0.5]), so a run of one
    # slot stays visible.
    spec["layer"] += [
        layer({"type": "rule", "strokeWidth": 3, "tooltip": None}, data="runs",
              encoding={"x": time, "x2": {"field": "right"}, "y": env,
                        "color": colours(*legend, datum=bar)}),
        layer({"type": "circle", "size": 36, "opacity": 1}, data="starts",
              encoding={"x": {**time, "field": "start"}, "y": env,
                        "color": colours(*legend, datum=dot),
                        "tooltip": tooltip(("start", "start row", ",d"), ("env", "env", ",d"))}),
    ]
    spec["datasets"] = {
        **spec["datasets"],
        "runs": frame(left=first - RUN_EDGE, right=last + RUN_EDGE, env=envs[window]),
        "starts": frame(start=starts, env=envs),
    }
    wrapped = (f"; {wraps:,} run past the last slot and continue at slot 0" if wraps else "")
    spec["title"] = {
        **spec["title"],
        "text": f"Where the batch landed: {len(starts):,} windows on the episode map",
        "subtitle": f"{binned.caption()}; dark cells end an episode, red = drawn windows"
        f"{wrapped}; no window crosses a dark cell or the cursor",
    }
    return spec


def row_landing_figure(
    rows: np.ndarray, length: int, *, unit: str = "row",
    segments: tuple[np.ndarray, np.ndarray] | None = None,
) -> Spec:
    """Drawn rows along the row axis ``[0, length)``, counted in at most 200 bins (row r spans
    ``[r, r + 1]``).

    ``segments`` (each segment's first row and its label, e.g. an expert buffer's motions)
    draws a boundary before every segment but the first, and names the segments along the top
    when there are at most :data:`SEGMENT_LABELS`.
    """
    bins = int(min(length, 200))
    counts, edges = np.histogram(rows, bins=bins, range=(0, length))
    # np.histogram's bin i holds the rows r with edges[i] <= r < edges[i + 1].
    first = np.ceil(edges[:-1]).astype(np.int64)
    last = np.ceil(edges[1:]).astype(np.int64) - 1
    left, right = bar_spans(edges[:-1], edges[1:])
    x = position("left", title=f"{unit} (physical storage index)", whole=True,
                 scale={"domain": [0, max(length, 1)]})
    layers = [layer(
        {"type": "rect", "color": DRAWN}, data="bins", params=[zoom("x")],
        encoding={"x": x, "x2": {"field": "right"},
                  "y": position("count", title="draws", whole=True), "y2": {"datum": 0},
                  "tooltip": tooltip(("rows", f"{unit}s", None), ("count", "draws", ",d"))})]
    datasets = {"bins": frame(left=left, right=right, count=counts, rows=[
        f"{a:,}" if a >= b else f"{a:,}..{b:,}" for a, b in zip(first.tolist(), last.tolist(),
                                                               strict=True)])}
    note = f"{bins} bins" if bins < length else None
    named = False
    if segments is not None:
        starts, labels = np.asarray(segments[0], dtype=np.int64), np.asarray(segments[1])
        layers.append(layer({"type": "rule", "color": BOUNDARY, "strokeWidth": 1,
                             "tooltip": None}, data="boundaries",
                            encoding={"x": {"field": "x", "type": "quantitative"}}))
        datasets["boundaries"] = frame(x=starts[starts > 0])
        named = len(starts) <= SEGMENT_LABELS
        if named:
            ends = np.append(starts[1:], length)
            layers.append(layer(
                # Above the plot, where no bar hides them; those zoomed out of view are left
                # out ("left" as the bars' x, which the zoom's interval tests).
                {"type": "text", "baseline": "bottom", "dy": -4, "fontSize": 10,
                 "color": "#6b7280", "clip": False},
                data="motions", transform=[{"filter": {"param": "zoom"}}],
                encoding={"x": {"field": "left", "type": "quantitative"}, "y": {"value": 0},
                          "text": {"field": "label"},
                          "tooltip": tooltip(("label", "motion", None))}))
            datasets["motions"] = frame(left=(starts + ends) / 2,
                                        label=[str(v) for v in labels.tolist()])
        note = ((note + "; " if note else "") + f"grey lines: {len(starts):,} motions"
                + ("; motion ids along the top" if named else ""))
    spec = chart(
        layers,
        title=f"Where the batch landed: {len(rows):,} draws along the {length:,} filled {unit}s",
        note=note, height=340 if segments is not None else 300, datasets=datasets,
    )
    if named:
        spec["title"]["offset"] = 22  # room for the motion ids between the note and the plot
    return spec


def frequency_figure(
    labels: np.ndarray, expected: np.ndarray, observed: np.ndarray, *, unit: str, units: str
) -> Spec:
    """Empirical against expected frequency per bin: bars for up to :data:`BAR_BINS` bins;
    above, the distribution of each bin's standardized deviation
    ``(drawn - expected) / sd`` against the standard normal a correct sampler gives.
    ``unit`` names one bin, ``units`` several.

    A scatter of empirical against expected says nothing when every bin expects the same (a
    vertical stripe, as with ``"trajectory"`` weighting); the deviations' histogram does.

    Raises:
        ValueError: no draws, or ``labels``, ``expected`` and ``observed`` differ in length.
    """
    if not len(labels) == len(expected) == len(observed):
        raise ValueError(f"labels, expected, observed: expected one length, got "
                         f"{len(labels)}, {len(expected)}, {len(observed)}")
    total = float(np.sum(observed))
    if total <= 0:
        raise ValueError("observed: expected at least one draw")
    if len(labels) <= BAR_BINS:
        return _frequency_bars([str(v) for v in labels.tolist()], np.asarray(expected),
                               np.asarray(observed) / total, unit=unit)
    deviation, left_out = standardized_deviations(expected, observed)
    # Half-sd bins: finer ones leave gaps, as counts are whole numbers.
    edges = np.linspace(-5.0, 5.0, 21)
    counts, _ = np.histogram(np.clip(deviation, -5.0, 5.0), bins=edges)
    width = float(edges[1] - edges[0])
    grid = np.linspace(-5.0, 5.0, 201)
    normal = len(deviation) * width * np.exp(-grid**2 / 2) / np.sqrt(2 * np.pi)
    bell = "a correct sampler"
    legend = ([units, bell], [EMPIRICAL, CURSOR])
    x = position("left", title="(drawn - expected) / sd", scale={"domain": [-5.0, 5.0]})
    y = position("count", title=units, whole=True)
    left, right = bar_spans(edges[:-1], edges[1:], fill=0.95)
    layers = [
        layer({"type": "rect"}, data="bins",
              encoding={"x": x, "x2": {"field": "right"}, "y": y, "y2": {"datum": 0},
                        "color": colours(*legend, datum=units),
                        "tooltip": tooltip(("span", "deviation", None),
                                           ("count", units, ",d"))}),
        layer({"type": "line", "strokeWidth": 2, "strokeDash": [6, 4]}, data="bell",
              encoding={"x": {**x, "field": "deviation"}, "y": {**y, "field": "count"},
                        "color": colours(*legend, datum=bell)}),
        hover_points("bell", x={**x, "field": "deviation"}, y={**y, "field": "count"},
                     fields=[("deviation", "deviation", ".2f"),
                             ("count", f"{units} expected", ".1f")]),
    ]
    note = (f"{len(deviation):,} {units}; the bell is the standard normal; outside +/-5 "
            "counted at the edge")
    if left_out:
        note += f"; {left_out:,} {units} that cannot be drawn left out"
    return chart(
        layers, title=f"How far each {unit}'s draws are from the expected count", note=note,
        datasets={"bins": frame(left=left, right=right, count=counts,
                                span=[f"{a:+.1f} to {b:+.1f}" for a, b in
                                      zip(edges[:-1].tolist(), edges[1:].tolist(),
                                          strict=True)]),
                  "bell": frame(deviation=grid, count=normal)},
    )


def _frequency_bars(labels: list[str], expected: np.ndarray, empirical: np.ndarray, *,
                    unit: str) -> Spec:
    """Expected and empirical fraction of draws side by side for each bin (in ``labels``'
    order)."""
    series = (["expected", "empirical"], [EXPECTED, EMPIRICAL])
    count = len(labels)
    bars = layer(
        {"type": "bar"}, data="frequencies",
        encoding={
            "x": {"field": "label", "type": "ordinal",
                  "scale": {"domain": list(dict.fromkeys(labels))},
                  "axis": {"title": unit, "labelAngle": 0, "labelOverlap": "greedy"}},
            "xOffset": {"field": "series", "type": "nominal",
                        "scale": {"domain": series[0]}},
            "y": {**position("fraction", title="fraction of draws"), "stack": None},
            "color": colours(*series, field="series"),
            "tooltip": tooltip(("label", unit, None), ("series", "frequency", None),
                               ("fraction", "fraction of draws", ".2%")),
        })
    return chart(
        [bars], title=f"Empirical vs expected frequency per {unit}",
        datasets={"frequencies": frame(label=labels * 2,
                                       series=["expected"] * count + ["empirical"] * count,
                                       fraction=np.concatenate([expected, empirical]))},
    )


def standardized_deviations(
    expected: np.ndarray, observed: np.ndarray
) -> tuple[np.ndarray, int]:
    """Each bin's ``(observed - n p) / sqrt(n p (1 - p))`` over the bins that can be drawn
    (``0 < p < 1``), and how many bins were left out. With a correct sampler and enough draws
    these follow the standard normal.
    """
    probability = np.asarray(expected, dtype=np.float64)
    counts = np.asarray(observed, dtype=np.float64)
    total = counts.sum()
    keep = (probability > 0) & (probability < 1)
    p = probability[keep]
    deviation = (counts[keep] - total * p) / np.sqrt(total * p * (1 - p))
    return deviation, int((~keep).sum())

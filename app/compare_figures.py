"""Figures of the Compare page: two sides overlaid (numpy arrays in, Vega-Lite specs out,
drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.compare import length_fractions, shared_length_bins
from app.vega import Spec, category_position, chart, colours, frame, layer, position, tooltip, zoom

COLOURS = ("#1f77b4", "#d62728")


def length_overlay(a: np.ndarray, b: np.ndarray, labels: tuple[str, str]) -> Spec:
    """Both sides' trajectory length distributions on the same bins, as fractions, the bars
    of one side seen through the other's."""
    edges = shared_length_bins(a, b)
    names = [f"{label} ({len(lengths):,} trajectories)"
             for lengths, label in zip((a, b), labels, strict=True)]
    low, high = edges[:-1], edges[1:]
    # A bin holds the lengths low..high-1; its bar spans 90% of the bin around them.
    centre = (low + high - 1) / 2
    half = (high - low) * 0.45
    spans = [f"{lo:,}" if hi - lo == 1 else f"{lo:,}..{hi - 1:,}"
             for lo, hi in zip(low.tolist(), high.tolist(), strict=True)]
    bins = frame(
        side=np.repeat(names, len(low)),
        left=np.tile(centre - half, 2), right=np.tile(centre + half, 2),
        lengths=np.tile(spans, 2),
        count=np.concatenate([np.histogram(lengths, bins=edges)[0] for lengths in (a, b)]),
        fraction=np.concatenate([length_fractions(lengths, edges) for lengths in (a, b)]),
    )
    bars = layer(
        {"type": "bar", "opacity": 0.55}, data="bins", params=[zoom("x")],
        encoding={
            "x": position("left", title="trajectory length (rows)", whole=True,
                          scale={"domain": [float(low[0]) - 0.5, float(high[-1]) - 0.5]}),
            "x2": {"field": "right"},
            # y2 at 0: with x and x2 alone a bar would lie on its side.
            "y": position("fraction", title="fraction of trajectories"), "y2": {"datum": 0},
            "color": colours(names, COLOURS, field="side"),
            "tooltip": tooltip(("side", "side", None), ("lengths", "length (rows)", None),
                               ("count", "trajectories", ",d"), ("fraction", "fraction", ".3f")),
        },
    )
    return chart([bars], title="Online trajectory lengths", datasets={"bins": bins})


def _sides(ids: np.ndarray, a: np.ndarray, b: np.ndarray, names: list[str]) -> pd.DataFrame:
    """Both sides' values per motion, one row per (motion, side)."""
    return frame(
        motion=np.tile(np.asarray(ids, dtype=np.int64), 2), side=np.repeat(names, len(ids)),
        value=np.concatenate([np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)]),
    )


def motion_bars(
    ids: np.ndarray, a: np.ndarray, b: np.ndarray, labels: tuple[str, str], *, title: str,
    y: str, whole: bool = False,
) -> Spec:
    """One value per motion for each side, as grouped bars (a gap where a side lacks it);
    ``whole``: the values are counts (rows), ticked on whole numbers."""
    names = list(labels)
    fmt = ",d" if whole else ".4~g"
    bars = layer({"type": "bar"}, data="sides", encoding={
        "x": category_position("motion", title="motion id"),
        "xOffset": {"field": "side", "type": "nominal", "sort": names},
        "y": position("value", title=y, whole=whole),
        "color": colours(names, COLOURS, field="side"),
        "tooltip": tooltip(("motion", "motion", ",d"), ("side", "side", None),
                           ("value", y, fmt)),
    })
    return chart([bars], title=title, datasets={"sides": _sides(ids, a, b, names)})


def difference_bars(
    ids: np.ndarray, a: np.ndarray, b: np.ndarray, labels: tuple[str, str], *, title: str, y: str
) -> Spec:
    """``b - a`` per motion, red where B is higher (blue where A is), both values on hover."""
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    higher = ["A higher", "B higher"]
    data = frame(motion=np.asarray(ids, dtype=np.int64), a=a, b=b, diff=diff,
                 higher=np.where(diff > 0, higher[1], higher[0]))
    bars = layer({"type": "bar"}, data="diff", encoding={
        "x": category_position("motion", title="motion id"),
        "y": position("diff", title=y),
        "color": colours(higher, COLOURS, field="higher"),
        "tooltip": tooltip(("motion", "motion", ",d"), ("diff", "difference", "+.4~g"),
                           ("a", labels[0], ".4~g"), ("b", labels[1], ".4~g")),
    })
    return chart([bars], title=title, note=f"{labels[1]} minus {labels[0]}",
                 datasets={"diff": data})

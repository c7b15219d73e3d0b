"""The Live page's figures: buffer occupancy, TD-EMA's running statistics and the latest
evaluation round (series from :mod:`app.live` in, Vega-Lite specs out, drawn with
``st.vega_lite_chart``).

The page redraws every few seconds while the run writes. The occupancy and TD charts keep
their note (the point count) in a dataset (:func:`app.vega.note_as_data`), so their spec stays
the same while the run grows and Streamlit swaps their data in place: no blank frame between
refreshes (a zoom still resets when new data arrive, as it did with Plotly).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.downsample import Reduced, min_max
from app.live import Series, eval_round
from app.vega import (
    Spec,
    chart,
    colours,
    frame,
    horizontal_rule,
    hover_points,
    hover_rows,
    layer,
    legend_columns,
    lines,
    long_frame,
    note_as_data,
    position,
    tooltip,
    zoom,
)

# One colour per buffer, in the order the log names them (Vega's tableau10).
BUFFER_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2")
BATCH_COLOUR = "#636efa"
EMA_COLOUR = "#ef553b"
BAR_COLOUR = "#636efa"
MEAN_COLOUR = "#444444"
STEP_TITLE = "training step"


def _reduce(series: Series) -> Reduced:
    return min_max(series.x, series.y)


def _note(reduced: Sequence[Reduced]) -> str:
    """The largest series' point count (``"n -> m points"`` when it was reduced)."""
    return max(reduced, key=lambda r: r.total).caption()


def occupancy_figure(series: Sequence[Series]) -> Spec:
    """Each buffer's fill level (percent of its capacity) over training steps, a step line per
    buffer.

    Raises:
        ValueError: ``series`` is empty.
    """
    if not series:
        raise ValueError("series: expected at least one buffer's occupancy, got none")
    reduced = [_reduce(s) for s in series]
    names = [s.name for s in series]
    palette = [BUFFER_COLOURS[i % len(BUFFER_COLOURS)] for i in range(len(series))]
    step = position("step", title=STEP_TITLE, whole=True, scale={})
    filled = position("filled", title="filled (% of capacity)", scale={"domain": [0, 105]})
    layers = [
        lines("occupancy", x=step, y=filled, names=names, palette=palette,
              mark={"interpolate": "step-after"}, params=[zoom("x")]),
        hover_points("occupancy", x=step, y=filled, fields=[
            ("label", "buffer", None), ("step", "step", ",d"), ("filled", "filled (%)", ".1f")]),
    ]
    data = long_frame([(s.name, r.x, r.y) for s, r in zip(series, reduced, strict=True)],
                      x="step", y="filled")
    return legend_columns(note_as_data(chart(layers, title="Buffer occupancy",
                                             note=_note(reduced),
                                             datasets={"occupancy": data})), 3)


def td_figure(series: dict[str, Series]) -> Spec:
    """TD-EMA's running mean with a +/- one std band, the batch means faint behind.

    Raises:
        ValueError: the EMA mean is missing from ``series``.
    """
    if "td/ema_mean" not in series:
        raise ValueError("series: expected 'td/ema_mean' (train records with TD-EMA fields)")
    mean = _reduce(series["td/ema_mean"])
    notes = [mean]
    curves: list[tuple[str, np.ndarray, np.ndarray]] = []
    look: list[tuple[str, str, float, float]] = []  # name, colour, opacity, width
    if "td/batch_mean" in series:
        batch = _reduce(series["td/batch_mean"])
        notes.append(batch)
        curves.append(("batch mean", batch.x, batch.y))
        look.append(("batch mean", BATCH_COLOUR, 0.3, 1.0))
    band_name = "EMA mean \u00b1 std"
    std = series.get("td/ema_std")
    # The band only when every point is kept: min/max keeps different steps per series.
    band = std is not None and len(std.x) == len(series["td/ema_mean"].x) and not mean.reduced
    if band:
        look.append((band_name, EMA_COLOUR, 0.15, 8.0))  # the legend's swatch of the band
    curves.append(("EMA mean", mean.x, mean.y))
    look.append(("EMA mean", EMA_COLOUR, 1.0, 2.0))
    names = [name for name, _, _, _ in look]
    palette = [colour for _, colour, _, _ in look]
    step = position("step", title=STEP_TITLE, whole=True, scale={})
    value = position("value", title="TD error", scale={"nice": True})

    def drawn(which: list[str], params: list[Spec]) -> Spec:
        return lines("curves", x=step, y=value, names=names, palette=palette,
                     opacity=[o for _, _, o, _ in look], width=[w for _, _, _, w in look],
                     draw=which, params=params)

    layers = []
    if "batch mean" in names:
        layers.append(drawn(["batch mean"], []))
    data = long_frame(curves, x="step", y="value")
    datasets = {"curves": data, "hover": hover_rows(data)}
    if band and std is not None:
        datasets["band"] = frame(step=mean.x, low=mean.y - std.y, high=mean.y + std.y)
        layers.append(layer(
            {"type": "area", "opacity": 0.15, "clip": True, "tooltip": None}, data="band",
            encoding={"x": step, "y": {**value, "field": "low"}, "y2": {"field": "high"},
                      "color": colours(names, palette, datum=band_name)}))
    layers.append(drawn(["EMA mean"], [zoom("x", "y")]))
    layers.append(hover_points("hover", x=step, y=value, fields=[
        ("label", "curve", None), ("step", "step", ",d"), ("value", "TD error", ".4~g")]))
    return legend_columns(note_as_data(chart(layers, title="TD error: running EMA vs each batch",
                                             note=_note(notes), datasets=datasets)), 3)


def eval_figure(record: dict[str, Any]) -> Spec:
    """The evaluation round's EMD per motion (bars), the round's mean as a dashed line named
    in the legend.

    Raises:
        ValueError: ``record`` lacks ``motion_ids`` and ``emd`` lists of one length, or an
            ``emd`` value is neither a number nor null.
    """
    evaluation = eval_round(record)
    finite = np.isfinite(evaluation.emd)
    mean = float(evaluation.emd[finite].mean()) if finite.any() else None
    names, palette = ["EMD"], [BAR_COLOUR]
    if mean is not None:
        names.append(f"mean {mean:.3f}")
        palette.append(MEAN_COLOUR)
    hover = [("motion", "motion", None), ("emd", "EMD", ".3f")]
    columns: dict[str, Any] = {"motion": evaluation.motions, "emd": evaluation.emd}
    if evaluation.probability is not None:
        columns["probability"] = evaluation.probability
        hover.append(("probability", "sampling probability now", ".3f"))
    layers = [layer("bar", data="eval", encoding={
        # Motions in the record's order, each label upright.
        "x": {"field": "motion", "type": "ordinal", "sort": None,
              "axis": {"title": "motion id", "labelAngle": 0}},
        "y": position("emd", title="EMD to the expert (lower is better)"),
        "color": colours(names, palette, datum="EMD"),
        "tooltip": tooltip(*hover),
    })]
    if mean is not None:
        layers.append(horizontal_rule(mean, colour=MEAN_COLOUR, label=names[-1],
                                      legend=(names, palette)))
    return chart(layers, title=f"Evaluation round {evaluation.round} at step {evaluation.step}",
                 note="distance between each motion's tracked path and its expert frames",
                 # Tall enough for the y axis's long title.
                 height=420, datasets={"eval": frame(**columns)})

"""Figures of the Curriculum page: EMD heatmap, priority evolution, current priorities,
entropy and effective sample size, and the re-prioritize preview (numpy arrays in, Vega-Lite
specs out, drawn with ``st.vega_lite_chart``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.curriculum_history import CurriculumHistory
from app.vega import (
    Spec,
    category_position,
    chart,
    colours,
    frame,
    group,
    horizontal_rule,
    hover_points,
    layer,
    position,
    tooltip,
    zoom,
)

# Lines drawn in the priority-evolution chart (the highest current priorities).
TOP_LINES = 10
# One colour per line of the priority evolution (no grey: the uniform level is grey).
LINE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                "#bcbd22", "#17becf", "#393b79")
PRIORITY = "#1f77b4"
SECOND = "#ff7f0e"
UNIFORM = "#7f7f7f"
NOW, AFTER = "#9ecae1", "#d62728"
# The heatmap's height outside its rows (title, note, round axis), and the least height of a
# row that fits its label.
HEATMAP_MARGIN = 140
LABEL_PX = 14


def _round_axis(rounds: int) -> Spec:
    """The evaluation rounds (1..R) on whole-number ticks, half a round of room around a lone
    round so its point is not drawn on the plot's edge."""
    domain = {"domain": [0.5, 1.5]} if rounds <= 1 else {}
    return position("round", title="evaluation round", whole=True, scale=domain)


def emd_heatmap(history: CurriculumHistory, order: np.ndarray, *, sort: str) -> Spec:
    """EMD per motion (rows, in ``order``) and round (columns): one cell each, coloured by
    its EMD on the legend's scale; hover a cell for its motion, round, step and EMD."""
    motions, rounds = len(order), history.rounds
    # One row per cell, motion-major; ``rank`` keeps the rows in ``order``.
    labels = np.array([f"motion {m}" for m in history.motion_ids[order]])
    cells = frame(
        motion=np.repeat(labels, rounds),
        rank=np.repeat(np.arange(motions), rounds),
        round=np.tile(np.arange(1, rounds + 1), motions),
        step=np.tile(history.steps, motions),
        emd=history.emd[:, order].T.reshape(-1),
    )
    # About 18 px a motion leaves room for every motion's label; past 900 px, labels that
    # would overlap are left out (every cell keeps its tooltip).
    height = int(min(900, max(320, 18 * motions + 140)))
    crowded = (height - HEATMAP_MARGIN) / max(motions, 1) < LABEL_PX
    x = position("left", title="evaluation round", whole=True,
                 scale={"domain": [0.5, rounds + 0.5]}, axis={"grid": False})
    heat = layer(
        {"type": "rect"}, data="cells", params=[zoom("x")],
        transform=[{"calculate": "datum.round - 0.5", "as": "left"},
                   {"calculate": "datum.round + 0.5", "as": "right"}],
        encoding={
            "x": x, "x2": {"field": "right"},
            "y": {"field": "motion", "type": "nominal", "sort": {"field": "rank", "op": "min"},
                  "axis": {"title": f"motion (sorted by {sort})",
                           "labelOverlap": "greedy" if crowded else False}},
            "color": {"field": "emd", "type": "quantitative",
                      "scale": {"scheme": "yelloworangered"},
                      "legend": {"title": "EMD", "orient": "right", "direction": "vertical",
                                 "format": ".2f"}},
            "tooltip": tooltip(("motion", "motion", None), ("round", "round", ",d"),
                               ("step", "step", ",d"), ("emd", "EMD", ".3f")),
        },
    )
    return chart(
        [heat], title="Tracking error (EMD) per motion across rounds", height=height,
        note="darker = tracked worse; the curriculum samples high-EMD motions more",
        datasets={"cells": cells},
    )


def priority_lines(history: CurriculumHistory, *, top: int = TOP_LINES) -> Spec:
    """Sampling probability per round of the motions most likely now, with the uniform level
    named in the legend."""
    current = history.probability[-1]
    chosen = np.lexsort((history.motion_ids, -current))[:top]
    names = [f"motion {history.motion_ids[c]}" for c in chosen]
    rounds = history.rounds
    lines = frame(
        motion=np.repeat(names, rounds),
        round=np.tile(np.arange(1, rounds + 1), len(chosen)),
        step=np.tile(history.steps, len(chosen)),
        probability=history.probability[:, chosen].T.reshape(-1),
    )
    legend = ([*names, "uniform"], [*LINE_COLOURS[:len(names)], UNIFORM])
    x = _round_axis(rounds)
    # Rounded out to ticks, not from 0: the lines differ by a few hundredths.
    y = position("probability", title="normalised priority", scale={"nice": True})
    layers = [
        layer({"type": "line", "strokeWidth": 2, "point": rounds == 1}, data="lines",
              params=[zoom("x")],
              encoding={"x": x, "y": y, "color": colours(*legend, field="motion")}),
        hover_points("lines", x=x, y=y, fields=[
            ("motion", "motion", None), ("round", "round", ",d"), ("step", "step", ",d"),
            ("probability", "priority", ".4f")]),
        horizontal_rule(1.0 / len(history.motion_ids), colour=UNIFORM, label="uniform",
                        legend=legend),
    ]
    note = f"the {len(chosen)} motions with the highest priority now, of {len(history.motion_ids)}"
    return chart(layers, title="Priority evolution", note=note, datasets={"lines": lines})


def motion_history(history: CurriculumHistory, motion: int) -> Spec:
    """One motion across rounds: its EMD (left axis) and sampling probability (right axis,
    from 0, on ticks of its own).

    Raises:
        ValueError: ``motion`` is not one of the history's motion ids.
    """
    matches = np.flatnonzero(history.motion_ids == motion)
    if matches.size == 0:
        raise ValueError(f"motion: expected one of the recorded motion ids, got {motion}")
    column = int(matches[0])
    emd_name, probability_name = "EMD (left)", "sampling probability (right)"
    legend = ([emd_name, probability_name], [PRIORITY, SECOND])
    x = _round_axis(history.rounds)
    emd = position("emd", title="EMD", scale={"nice": True}, axis={"titleColor": PRIORITY})
    # Left to Vega-Lite's own scale: from 0, rounded out to readable ticks.
    probability = position("probability", title="sampling probability",
                           axis={"orient": "right", "grid": False, "format": ".3f",
                                 "titleColor": SECOND})
    hover = [("round", "round", ",d"), ("step", "step", ",d"), ("emd", "EMD", ".3f"),
             ("probability", "probability", ".4f")]
    point = history.rounds == 1
    layers = [
        group(layer({"type": "line", "strokeWidth": 2, "point": point}, data="motion",
                    params=[zoom("x")],
                    encoding={"x": x, "y": emd, "color": colours(*legend, datum=emd_name)}),
              hover_points("motion", x=x, y=emd, fields=hover)),
        group(layer({"type": "line", "strokeWidth": 2, "point": point}, data="motion",
                    encoding={"x": x, "y": probability,
                              "color": colours(*legend, datum=probability_name)}),
              hover_points("motion", x=x, y=probability, fields=hover)),
    ]
    data = frame(round=np.arange(1, history.rounds + 1), step=history.steps,
                 emd=history.emd[:, column], probability=history.probability[:, column])
    return chart(layers, title=f"Motion {motion} across rounds", datasets={"motion": data},
                 independent_y=True)


def _motion_bars(
    motion_ids: np.ndarray, series: Sequence[tuple[str, np.ndarray, str]], *, title: str,
    y: str, uniform: str | None,
) -> Spec:
    """One bar per motion (in the order given) for each ``(name, values, colour)`` of
    ``series``, side by side; with ``uniform``, the uniform level ``1 / len(motion_ids)``
    named so in the legend."""
    count = len(motion_ids)
    names = [name for name, _, _ in series]
    palette = [colour for _, _, colour in series]
    legend = ([*names, uniform], [*palette, UNIFORM]) if uniform else (names, palette)
    bars = frame(
        motion=np.tile(np.asarray(motion_ids, dtype=np.int64), len(series)),
        rank=np.tile(np.arange(count), len(series)),
        series=np.repeat(names, count),
        p=np.concatenate([np.asarray(values, dtype=np.float64) for _, values, _ in series]),
    )
    encoding: Spec = {
        "x": category_position("motion", title="motion id", order="rank"),
        "y": position("p", title=y),
        "color": colours(*legend, field="series"),
    }
    hover: list[tuple[str, str, str | None]] = [("motion", "motion", ",d"), ("p", y, ".4f")]
    if len(series) > 1:
        encoding["xOffset"] = {"field": "series", "type": "nominal", "sort": names}
        hover.insert(1, ("series", "which", None))
    encoding["tooltip"] = tooltip(*hover)
    layers = [layer({"type": "bar"}, data="bars", encoding=encoding)]
    if uniform:
        layers.append(horizontal_rule(1.0 / max(count, 1), colour=UNIFORM, label=uniform,
                                      legend=legend))
    return chart(layers, title=title, datasets={"bars": bars})


def current_priority_bars(history: CurriculumHistory, order: np.ndarray) -> Spec:
    """The normalised priorities after the last round, one bar per motion in ``order``."""
    return _motion_bars(
        history.motion_ids[order], [("priority", history.probability[-1, order], PRIORITY)],
        title=f"Current priorities (after round {history.rounds})", y="normalised priority",
        uniform="uniform",
    )


def spread_figure(history: CurriculumHistory) -> Spec:
    """Entropy (left axis, nats) and effective number of motions (right axis, whole numbers)
    per round, each axis from 0 to a little above its uniform maximum (``log N`` nats, ``N``
    motions) so that one line marks uniform sampling for both.

    Each axis has its own scale and ticks (in Plotly, ticks shared over one plot landed on
    numbers such as 7.55 effective motions).
    """
    count = len(history.motion_ids)
    top = max(float(np.log(count)), 1e-9)
    entropy_name, effective_name = "entropy (nats)", "effective motions 1/sum(p^2)"
    uniform = f"uniform over {count} motions"
    legend = ([entropy_name, effective_name, uniform], [PRIORITY, SECOND, UNIFORM])
    x = _round_axis(history.rounds)
    entropy = position("entropy", title="entropy (nats)", scale={"domain": [0, top * 1.08]},
                       axis={"titleColor": PRIORITY})
    effective = position("effective", title="effective motions", whole=True,
                         scale={"domain": [0, count * 1.08]},
                         axis={"orient": "right", "grid": False, "titleColor": SECOND})
    hover = [("round", "round", ",d"), ("step", "step", ",d"), ("entropy", "entropy", ".3f"),
             ("effective", "effective motions", ".1f")]
    point = history.rounds == 1
    layers = [
        group(layer({"type": "line", "strokeWidth": 2, "point": point}, data="spread",
                    params=[zoom("x")],
                    encoding={"x": x, "y": entropy,
                              "color": colours(*legend, datum=entropy_name)}),
              hover_points("spread", x=x, y=entropy, fields=hover),
              horizontal_rule(top, colour=UNIFORM, label=uniform, legend=legend)),
        group(layer({"type": "line", "strokeWidth": 2, "point": point}, data="spread",
                    encoding={"x": x, "y": effective,
                              "color": colours(*legend, datum=effective_name)}),
              hover_points("spread", x=x, y=effective, fields=hover)),
    ]
    data = frame(round=np.arange(1, history.rounds + 1), step=history.steps,
                 entropy=history.entropy, effective=history.effective_motions)
    spec = chart(
        layers, title="How spread the sampling is", height=420,
        note=f"grey dashed line: uniform over {count} motions (entropy log {count} = {top:.2f}, "
        f"{count} effective motions)",
        datasets={"spread": data}, independent_y=True,
    )
    # One legend entry a line: the chart shares a row with another, and the names are long.
    spec["config"] = {**spec["config"], "legend": {**spec["config"]["legend"], "columns": 1}}
    return spec


def preview_figure(motion_ids: np.ndarray, now: np.ndarray, new: np.ndarray) -> Spec:
    """The probability that a sampled window comes from each motion, now and after
    re-prioritizing, side by side (what the preview table lists, drawn)."""
    return _motion_bars(
        motion_ids, [("now", now, NOW), ("after re-prioritizing", new, AFTER)],
        title="P(a sampled window comes from the motion): now vs new",
        y="P(window from motion)", uniform=None,
    )


def saved_probability_bars(motion_ids: np.ndarray, probability: np.ndarray) -> Spec:
    """The probability that a sampled window comes from each motion under the priorities an
    expert buffer saved (no evaluation round needed), with the uniform level."""
    return _motion_bars(
        motion_ids, [("saved", probability, PRIORITY)],
        title="Sampling probability per motion, as saved in the buffer",
        y="P(window from motion)", uniform=f"uniform over {len(motion_ids)} motions",
    )

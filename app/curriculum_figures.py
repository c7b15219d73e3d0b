"""Plotly figures of the Curriculum page: EMD heatmap, priority evolution, current priorities,
entropy and effective sample size, and the re-prioritize preview (numpy in, figures out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.curriculum_history import CurriculumHistory
from app.figures import line_trace, styled

# Lines drawn in the priority-evolution chart (the highest current priorities).
TOP_LINES = 10


def _labels(ids: np.ndarray) -> list[str]:
    return [f"motion {m}" for m in ids]


def emd_heatmap(history: CurriculumHistory, order: np.ndarray, *, sort: str) -> go.Figure:
    """EMD per motion (rows, in ``order``) and round (columns)."""
    rounds = np.arange(1, history.rounds + 1)
    figure = go.Figure(
        go.Heatmap(
            z=history.emd[:, order].T, x=rounds, y=_labels(history.motion_ids[order]),
            customdata=np.broadcast_to(history.steps, (len(order), history.rounds)),
            colorscale="YlOrRd", colorbar={"title": "EMD"},
            hovertemplate="%{y}, round %{x} (step %{customdata}): EMD %{z:.3f}<extra></extra>",
        )
    )
    figure.update_yaxes(autorange="reversed", type="category")
    figure.update_xaxes(dtick=1 if history.rounds <= 30 else None)
    height = int(min(900, max(320, 16 * len(order) + 120)))
    return styled(
        figure, title="Tracking error (EMD) per motion across rounds", x="evaluation round",
        y=f"motion (sorted by {sort})", height=height,
        note="darker = tracked worse; the curriculum samples high-EMD motions more",
    )


def priority_lines(history: CurriculumHistory, *, top: int = TOP_LINES) -> go.Figure:
    """Sampling probability per round of the motions most likely now, with the uniform level."""
    rounds = np.arange(1, history.rounds + 1, dtype=np.float64)
    current = history.probability[-1]
    chosen = np.lexsort((history.motion_ids, -current))[:top]
    figure = go.Figure()
    for column in chosen:
        figure.add_trace(line_trace(rounds, history.probability[:, column],
                                    name=f"motion {history.motion_ids[column]}"))
    uniform = 1.0 / len(history.motion_ids)
    figure.add_hline(y=uniform, line_dash="dot", line_color="grey",
                     annotation_text="uniform", annotation_position="bottom right")
    shown = min(top, len(chosen))
    note = f"the {shown} motions with the highest priority now, of {len(history.motion_ids)}"
    return styled(figure, title="Priority evolution", x="evaluation round",
                  y="normalised priority", note=note)


def motion_history(history: CurriculumHistory, motion: int) -> go.Figure:
    """One motion across rounds: its EMD (left axis) and sampling probability (right axis).

    Raises:
        ValueError: ``motion`` is not one of the history's motion ids.
    """
    matches = np.flatnonzero(history.motion_ids == motion)
    if matches.size == 0:
        raise ValueError(f"motion: expected one of the recorded motion ids, got {motion}")
    column = int(matches[0])
    rounds = np.arange(1, history.rounds + 1, dtype=np.float64)
    figure = go.Figure()
    figure.add_trace(line_trace(rounds, history.emd[:, column], name="EMD (left)"))
    figure.add_trace(line_trace(rounds, history.probability[:, column],
                                name="sampling probability (right)", yaxis="y2"))
    # Auto ticks of its own: ticks synced to the EMD grid land on odd probabilities.
    figure.update_layout(yaxis2={"title": {"text": "sampling probability"}, "overlaying": "y",
                                 "side": "right", "rangemode": "tozero", "tickmode": "auto",
                                 "showgrid": False, "tickformat": ".3f"})
    return styled(figure, title=f"Motion {motion} across rounds", x="evaluation round",
                  y="EMD")


def current_priority_bars(history: CurriculumHistory, order: np.ndarray) -> go.Figure:
    """The normalised priorities after the last round, one bar per motion in ``order``."""
    figure = go.Figure(
        go.Bar(x=[str(m) for m in history.motion_ids[order]], y=history.probability[-1, order],
               marker_color="#1f77b4",
               hovertemplate="motion %{x}: %{y:.4f}<extra></extra>")
    )
    figure.add_hline(y=1.0 / len(order), line_dash="dot", line_color="grey",
                     annotation_text="uniform")
    figure.update_xaxes(type="category")
    return styled(figure, title=f"Current priorities (after round {history.rounds})",
                  x="motion id", y="normalised priority")


def spread_figure(history: CurriculumHistory) -> go.Figure:
    """Entropy (left axis) and effective sample size (right axis) per round."""
    rounds = np.arange(1, history.rounds + 1, dtype=np.float64)
    count = len(history.motion_ids)
    figure = go.Figure()
    figure.add_trace(line_trace(rounds, history.entropy, name="entropy (nats, left)",
                                line={"color": "#1f77b4"}))
    figure.add_trace(line_trace(rounds, history.effective_motions,
                                name="effective motions 1/sum(p^2) (right)",
                                line={"color": "#ff7f0e"}, yaxis="y2"))
    figure.update_layout(
        yaxis={"range": [0, max(float(np.log(count)), 1e-9) * 1.05]},
        yaxis2={"title": {"text": "effective motions"}, "overlaying": "y", "side": "right",
                "range": [0, count * 1.05], "showgrid": False},
    )
    return styled(figure, title="How spread the sampling is", x="evaluation round",
                  y="entropy (nats)",
                  note=f"top of each axis = uniform over {count} motions "
                  f"(entropy log {count} = {np.log(count):.2f})")


def preview_bars(
    motion_ids: np.ndarray, current: np.ndarray, new: np.ndarray, *, what: str
) -> go.Figure:
    """Current vs re-prioritized values per motion, side by side."""
    labels = [str(m) for m in motion_ids]
    figure = go.Figure()
    figure.add_bar(x=labels, y=current, name="current", marker_color="#9ecae1")
    figure.add_bar(x=labels, y=new, name="after re-prioritizing", marker_color="#d62728")
    figure.update_layout(barmode="group")
    figure.update_xaxes(type="category")
    return styled(figure, title=f"{what}: current vs new", x="motion id", y=what)


def saved_probability_bars(motion_ids: np.ndarray, probability: np.ndarray) -> go.Figure:
    """The probability that a sampled window comes from each motion under the priorities an
    expert buffer saved (no evaluation round needed), with the uniform level."""
    figure = go.Figure(
        go.Bar(x=[str(m) for m in motion_ids], y=probability, marker_color="#1f77b4",
               hovertemplate="motion %{x}: %{y:.4f}<extra></extra>")
    )
    figure.add_hline(y=1.0 / max(len(motion_ids), 1), line_dash="dot", line_color="grey",
                     annotation_text="uniform")
    figure.update_xaxes(type="category")
    return styled(figure, title="Sampling probability per motion, as saved in the buffer",
                  x="motion id", y="P(window from motion)")

"""Plotly figures of the Curriculum page: EMD heatmap, priority evolution, current priorities,
entropy and effective sample size, and the re-prioritize preview (numpy in, figures out)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.curriculum_history import CurriculumHistory
from app.figures import line_trace, reference_line, styled, whole_number_ticks

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
    reference_line(figure, y=uniform, label="uniform", colour="grey", dash="dot")
    shown = min(top, len(chosen))
    note = f"the {shown} motions with the highest priority now, of {len(history.motion_ids)}"
    figure.update_xaxes(**whole_number_ticks(history.rounds - 1))
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
    figure.update_xaxes(**whole_number_ticks(history.rounds - 1))
    return styled(figure, title=f"Motion {motion} across rounds", x="evaluation round",
                  y="EMD")


def current_priority_bars(history: CurriculumHistory, order: np.ndarray) -> go.Figure:
    """The normalised priorities after the last round, one bar per motion in ``order``."""
    figure = go.Figure(
        go.Bar(x=[str(m) for m in history.motion_ids[order]], y=history.probability[-1, order],
               marker_color="#1f77b4", name="priority",
               hovertemplate="motion %{x}: %{y:.4f}<extra></extra>")
    )
    reference_line(figure, y=1.0 / len(order), label="uniform", colour="grey", dash="dot")
    figure.update_xaxes(type="category")
    return styled(figure, title=f"Current priorities (after round {history.rounds})",
                  x="motion id", y="normalised priority")


def spread_figure(history: CurriculumHistory) -> go.Figure:
    """Entropy (top) and effective number of motions (bottom) per round, each on its own axis
    from 0 to its uniform maximum (``log N`` nats; ``N`` motions, ticked on whole numbers).

    Two panels, not two axes over one plot: their units differ, and ticks shared across one
    plot land on numbers such as 7.55 effective motions.
    """
    rounds = np.arange(1, history.rounds + 1, dtype=np.float64)
    count = len(history.motion_ids)
    top = max(float(np.log(count)), 1e-9)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.14)
    figure.add_trace(line_trace(rounds, history.entropy, name="entropy (nats)",
                                line={"color": "#1f77b4"}), row=1, col=1)
    figure.add_trace(line_trace(rounds, history.effective_motions,
                                name="effective motions 1/sum(p^2)",
                                line={"color": "#ff7f0e"}), row=2, col=1)
    for row, level in ((1, top), (2, float(count))):
        figure.add_hline(y=level, row=row, col=1, line={"color": "grey", "dash": "dot"},
                         name=f"uniform over {count} motions", showlegend=row == 1)
    styled(figure, title="How spread the sampling is", x="evaluation round", y="",
           height=420,
           note=f"dotted: uniform over {count} motions (entropy log {count} = {top:.2f})")
    figure.update_xaxes(**whole_number_ticks(history.rounds - 1))
    figure.update_xaxes(title_text="", row=1, col=1)
    figure.update_yaxes(title_text="entropy (nats)", range=[0, top * 1.08], row=1, col=1)
    figure.update_yaxes(title_text="effective motions", range=[0, count * 1.08],
                        **whole_number_ticks(count), row=2, col=1)
    return figure


def preview_figure(motion_ids: np.ndarray, now: np.ndarray, new: np.ndarray) -> go.Figure:
    """The probability that a sampled window comes from each motion, now and after
    re-prioritizing, side by side (what the preview table lists, drawn)."""
    labels = [str(m) for m in motion_ids]
    figure = go.Figure()
    figure.add_bar(x=labels, y=now, name="now", marker_color="#9ecae1",
                   hovertemplate="motion %{x}: %{y:.4f} now<extra></extra>")
    figure.add_bar(x=labels, y=new, name="after re-prioritizing", marker_color="#d62728",
                   hovertemplate="motion %{x}: %{y:.4f} after<extra></extra>")
    figure.update_layout(barmode="group")
    figure.update_xaxes(type="category")
    return styled(figure, title="P(a sampled window comes from the motion): now vs new",
                  x="motion id", y="P(window from motion)")


def saved_probability_bars(motion_ids: np.ndarray, probability: np.ndarray) -> go.Figure:
    """The probability that a sampled window comes from each motion under the priorities an
    expert buffer saved (no evaluation round needed), with the uniform level."""
    figure = go.Figure(
        go.Bar(x=[str(m) for m in motion_ids], y=probability, marker_color="#1f77b4",
               name="saved", hovertemplate="motion %{x}: %{y:.4f}<extra></extra>")
    )
    reference_line(figure, label=f"uniform over {len(motion_ids)} motions", colour="grey",
                   y=1.0 / max(len(motion_ids), 1), dash="dot")
    figure.update_xaxes(type="category")
    return styled(figure, title="Sampling probability per motion, as saved in the buffer",
                  x="motion id", y="P(window from motion)")

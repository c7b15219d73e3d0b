"""Replay statistics of a buffer checkpoint: each held item's priority, the chance one draw
picks it, the importance weight it would carry if drawn now, how often it was used and when it
was collected; and how a prioritized buffer's window draws spread over its trajectories.

:func:`replay_items` reads a checkpoint lazily: its summary and the few leaves that hold these
figures (``_sampler-priority`` of a buffer with a
:class:`~bufcore.sampling.prioritized.PrioritizedSampler`; ``_ding-live``, ``_ding-use``,
``_ding-collect_iter`` and ``_ding-priority`` of DI-engine's naive and advanced buffers), each
verified as :func:`~bufcore.runs.leaf_read.read_leaf` verifies. Weights and importance weights
come from a sampler rebuilt with the saved options, draw count and priorities, so they are the
sampler's own maths (:meth:`~bufcore.sampling.prioritized.PrioritizedSampler.row_weights`,
:meth:`~bufcore.sampling.prioritized.PrioritizedSampler.importance_weights`), never a copy of
it. :func:`window_shares` does the same for the windows of a loaded trajectory buffer
(:meth:`~bufcore.sampling.prioritized.PrioritizedSampler.window_weights`).

An ``EpisodeReplayBuffer`` keeps its per-episode use and ``collect_iter`` in state.json, parsed
by the buffer's own load only; it has no figures here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bufcore.buffers.base import Buffer
from bufcore.buffers.ding.advanced import AdvancedReplayBuffer
from bufcore.buffers.ding.inputs import MISSING
from bufcore.buffers.ding.naive import NaiveReplayBuffer
from bufcore.buffers.ding.saving import META_KEY
from bufcore.buffers.prioritized import SAMPLER_KEY
from bufcore.runs.leaf_read import read_leaf
from bufcore.runs.summary import CheckpointSummary, summarize_checkpoint, window_settings
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import RingPosition
from bufcore.sampling.windows import TrajectoryTable, start_counts

# The DI-engine kinds whose checkpoints hold per-item bookkeeping rows (_ding-*).
_DING_ITEM_KINDS = (NaiveReplayBuffer.__name__, AdvancedReplayBuffer.__name__)


@dataclass(frozen=True)
class ReplayItems:
    """What a buffer checkpoint says about each item it holds (see the module docstring).

    Attributes:
        kind: The buffer's class name.
        unit: ``"row"`` (a bufcore buffer's stored rows, every env's) or ``"item"`` (a
            DI-engine buffer's valid items).
        rows: int64 ``[n]``: each item's flat storage row (``time * envs + env``) or
            DI-engine slot (``replay_buffer_idx``).
        priority: float64 ``[n]``: its priority as the sampler stores it (an update's
            ``p + eps``, or the max priority a new row got), or None without a prioritized
            sampler.
        probability: float64 ``[n]``: the chance one row draw picks it, or None (no
            priorities, or a buffer that draws windows: see :func:`window_shares`).
        importance: float64 ``[n]``: the importance weight it would carry if drawn now (at
            :attr:`beta`; ``inf`` for an item of weight 0, never drawn), or None as for
            ``probability``.
        use: int64 ``[n]``: how often it was sampled (DI-engine buffers), else None.
        collect_iter: float64 ``[n]``: the learner iteration it was collected at (NaN for an
            item pushed without one), DI-engine buffers, else None.
        alpha: The sampler's ``alpha``, or None.
        beta: The importance-weight exponent of the next draw, or None.
        max_use: An advanced buffer's ``max_use`` (``inf``: unlimited), else None.
        max_staleness: An advanced buffer's ``max_staleness`` (``inf``: unlimited), else None.
        windowed: Whether the buffer draws windows of trajectories.
    """

    kind: str
    unit: str
    rows: np.ndarray
    priority: np.ndarray | None
    probability: np.ndarray | None
    importance: np.ndarray | None
    use: np.ndarray | None
    collect_iter: np.ndarray | None
    alpha: float | None
    beta: float | None
    max_use: float | None
    max_staleness: float | None
    windowed: bool

    def __len__(self) -> int:
        return len(self.rows)

    def staleness(self, learner_iter: int) -> np.ndarray | None:
        """``learner_iter - collect_iter`` per item (NaN where it gave no ``collect_iter``),
        as DI-engine measures staleness at that learner iteration; None without
        ``collect_iter``."""
        if self.collect_iter is None:
            return None
        return learner_iter - self.collect_iter


def has_replay_items(summary: CheckpointSummary) -> bool:
    """Whether :func:`replay_items` has figures for the checkpoint ``summary`` describes: it
    saved a prioritized sampler, or it is a DI-engine naive or advanced buffer."""
    return summary.sampler is not None or summary.kind in _DING_ITEM_KINDS


def replay_items(path: str | os.PathLike[str]) -> ReplayItems:
    """The per-item replay figures of the buffer checkpoint at ``path`` (see
    :class:`ReplayItems`), read lazily.

    Raises:
        ValueError: the checkpoint has no such figures (no prioritized sampler and not a
            DI-engine naive or advanced buffer; :func:`has_replay_items` says it first), or
            config.json names an unknown ``__target__``.
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file or a leaf read is damaged (names it).
        StateError: saved priorities the sampler refuses (negative, not finite).
    """
    summary = summarize_checkpoint(path)
    if not has_replay_items(summary):
        raise ValueError(
            f"{summary.path}: a {summary.kind} saved no priorities and no DI-engine "
            "bookkeeping (it was built without a PrioritizedSampler)"
        )
    if summary.ding is not None:
        return _ding_items(path, summary)
    envs = summary.env_count or 1
    held = summary.length * envs
    stored = (
        read_leaf(path, (SAMPLER_KEY, "priority")).reshape(-1).astype(np.float64)
        if held else np.zeros(0)
    )
    sampler = _rebuilt(summary, stored, envs)
    windowed = summary.end_key is not None
    probability = importance = None
    if not windowed:
        probability, importance = _row_figures(sampler, np.arange(held))
    return ReplayItems(
        kind=summary.kind, unit="row", rows=np.arange(held), priority=stored,
        probability=probability, importance=importance, use=None, collect_iter=None,
        alpha=sampler.alpha, beta=sampler.beta, max_use=None, max_staleness=None,
        windowed=windowed,
    )


def _ding_items(path: str | os.PathLike[str], summary: CheckpointSummary) -> ReplayItems:
    """A DI-engine naive or advanced buffer's valid items."""
    filled = summary.length
    columns: dict[str, np.ndarray] = {}
    names = ["live", "use", "collect_iter"]
    if summary.sampler is not None:
        names.append("priority")
    for name in names:
        columns[name] = read_leaf(path, (META_KEY, name)) if filled else np.zeros(0)
    slots = np.flatnonzero(columns["live"].astype(bool))
    collect = columns["collect_iter"].astype(np.int64)[slots]
    collect_iter = np.where(collect == MISSING, math.nan, collect.astype(np.float64))
    priority = probability = importance = None
    alpha = beta = None
    if summary.sampler is not None:
        stored = columns["priority"].astype(np.float64)
        sampler = _rebuilt(summary, stored, 1)
        priority = stored[slots]
        probability, importance = _row_figures(sampler, slots)
        alpha, beta = sampler.alpha, sampler.beta
    config = summary.ding.config if summary.ding is not None else {}
    return ReplayItems(
        kind=summary.kind, unit="item", rows=slots, priority=priority,
        probability=probability, importance=importance,
        use=columns["use"].astype(np.int64)[slots], collect_iter=collect_iter,
        alpha=alpha, beta=beta, max_use=_limit(config.get("max_use")),
        max_staleness=_limit(config.get("max_staleness")), windowed=False,
    )


def _limit(value: Any) -> float | None:
    """A saved DI-engine limit (a number, or ``"inf"``) as a float; None when absent."""
    return None if value is None else float(value)


def _rebuilt(summary: CheckpointSummary, stored: np.ndarray, envs: int) -> PrioritizedSampler:
    """The checkpoint's sampler, rebuilt from its saved options, draw count and ``stored``
    priorities (flat physical rows).

    Raises:
        StateError: priorities the sampler refuses.
    """
    saved = summary.sampler
    if saved is None:
        raise ValueError(f"{summary.path}: no prioritized sampler saved")
    sampler = PrioritizedSampler(**saved.options)
    sampler.steps = saved.steps
    sampler.bind(summary.capacity, envs)
    rows = len(stored) // envs
    sampler.load_rows(RingPosition(rows, summary.capacity, envs),
                      {"priority": torch.from_numpy(stored)})
    return sampler


def _row_figures(sampler: PrioritizedSampler, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of ``rows``' single-draw probability and importance weight."""
    every = sampler.row_weights().numpy()
    total = every.sum()
    weights = every[rows]
    probability = weights / total if total > 0 else np.zeros(len(rows))
    return probability, sampler.importance_weights(weights).numpy()


@dataclass(frozen=True)
class WindowShares:
    """How a prioritized trajectory buffer's window draws spread over its trajectories.

    Attributes:
        table: The trajectories (the buffer's ``trajectories()``).
        need: Rows one window reads.
        windows: int64 ``[trajectories]``: valid windows in each.
        share: float64 ``[trajectories]``: the chance a drawn window comes from each (sums to
            1 when any window weighs more than 0).
        trajectory: int64 ``[valid windows]``: the position in ``table`` of each valid window's
            trajectory.
        start: int64 ``[valid windows]``: each window's first time row (absolute).
        probability: float64 ``[valid windows]``: the chance one window draw picks it.
        importance: float64 ``[valid windows]``: the importance weight it would carry if drawn
            now (``inf`` for a window of weight 0, never drawn).
    """

    table: TrajectoryTable
    need: int
    windows: np.ndarray
    share: np.ndarray
    trajectory: np.ndarray
    start: np.ndarray
    probability: np.ndarray
    importance: np.ndarray


def window_shares(buffer: Buffer, seq_length: int) -> WindowShares:
    """How draws of windows of ``seq_length`` rows from ``buffer`` (a trajectory buffer with a
    prioritized sampler, loaded: ``load_buffer(path, leaves=[])`` is enough) spread over its
    trajectories, from the sampler's weight of every valid window. Nothing in ``buffer``
    changes.

    Raises:
        TypeError: ``buffer`` samples windows with another sampler, or samples no windows.
        ValueError: ``seq_length < 1``, or no trajectory holds a window.
    """
    sampler = buffer.sampler
    trajectories = getattr(buffer, "trajectories", None)
    if not isinstance(sampler, PrioritizedSampler) or trajectories is None:
        raise TypeError(
            f"buffer: expected a trajectory buffer with a PrioritizedSampler, got a "
            f"{type(buffer).__name__} sampling with {type(sampler).__name__}"
        )
    need = window_settings(buffer).need_for(seq_length)
    table: TrajectoryTable = trajectories()
    windows = start_counts(table.lengths, need).cpu().numpy()
    if not windows.any():
        raise ValueError(
            f"seq_length: no trajectory holds a window of {need} rows (the longest has "
            f"{int(table.lengths.max()) if len(windows) else 0})"
        )
    start, _, weight = sampler.window_weights(table, length=seq_length, need=need)
    trajectory = np.repeat(np.arange(len(windows)), windows)
    total = weight.sum()
    probability = weight / total if total > 0 else np.zeros(len(weight))
    share = np.bincount(trajectory, weights=probability, minlength=len(windows))
    return WindowShares(
        table=table, need=need, windows=windows.astype(np.int64), share=share,
        trajectory=trajectory, start=start, probability=probability,
        importance=sampler.importance_weights(weight).numpy(),
    )

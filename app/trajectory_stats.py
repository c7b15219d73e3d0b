"""Trajectory lengths of the trajectory buffers and how much of them a window length can sample.

A window of ``seq_length`` rows needs ``need`` rows of one trajectory
(:meth:`bufcore.inspect.WindowSettings.need_for`: one more when windows also read the row
after each one, ``next``). A trajectory of length ``L`` then holds ``max(0, L - need + 1)``
window starts (:func:`bufcore.inspect.start_counts`); one shorter than ``need`` can never be
sampled. Its rows that a window can return as ``t`` rows are the first ``L - offset`` (the last
one is only ever a ``next`` row).

Everything here takes numpy arrays (or a buffer's trajectory table) and returns numpy arrays
or small dataclasses, so it is tested without Streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bufcore import find_start_stop_traj
from bufcore.inspect import WindowSettings, start_counts

# At most this many seq_length values on the samplable-fraction curve.
CURVE_POINTS = 400


@dataclass(frozen=True)
class Trajectories:
    """Trajectories as parallel int64 vectors ``[n]``.

    Attributes:
        env: The env column each one lives in (all 0 for ``[time]`` rows and expert buffers).
        length: Rows per trajectory.
    """

    env: np.ndarray
    length: np.ndarray

    def __len__(self) -> int:
        return len(self.length)


def end_matrix(end: np.ndarray) -> np.ndarray:
    """Stored end flags as bool, one axis per batch dimension: a trailing width-1 axis of a
    ``[rows, envs, 1]`` leaf is dropped (``[rows, 1]`` of a ``[time]`` buffer stays as it is:
    its second axis is read as one env)."""
    flags = np.asarray(end)
    if flags.ndim == 3 and flags.shape[2] == 1:
        flags = flags[:, :, 0]
    return np.ascontiguousarray(flags != 0)


def from_end_flags(end: np.ndarray, *, cursor: int, full: bool) -> Trajectories:
    """The trajectories of an online ring from its physical end flags.

    The ring's rows are in *physical* order: once it has wrapped, the oldest row is at
    ``cursor`` and the newest at ``cursor - 1``, whose trajectory is cut there (it is still
    being written). That cut is what separates the newest trajectory from the oldest one, so a
    trajectory is never counted across the write position.

    Args:
        end: End flags ``[rows]`` or ``[rows, envs]`` (nonzero ends a trajectory) of the
            filled rows, physical order.
        cursor: The ring's next write row (``_idx``).
        full: Whether the ring has wrapped.

    Raises:
        ValueError: ``end`` has no rows or more than two axes, or ``cursor`` is outside the
            rows of a full ring.
    """
    flags = end_matrix(end)
    if flags.ndim not in (1, 2) or flags.shape[0] == 0:
        raise ValueError(f"end: expected flags [rows] or [rows, envs], got shape {flags.shape}")
    rows = flags.shape[0]
    if full and not 0 <= cursor < rows:
        raise ValueError(f"cursor: expected a row in [0, {rows}), got {cursor}")
    newest = cursor - 1 if full else None
    start, _, lengths = find_start_stop_traj(np.ascontiguousarray(flags != 0), full, newest)
    env = np.zeros(len(lengths), dtype=np.int64) if flags.ndim == 1 else start[:, 1].numpy()
    return Trajectories(env=env.astype(np.int64), length=lengths.numpy().astype(np.int64))


def window_counts(lengths: np.ndarray, need: int) -> np.ndarray:
    """Valid window starts per trajectory (:func:`bufcore.inspect.start_counts`), as int64."""
    return start_counts(torch.as_tensor(np.asarray(lengths, dtype=np.int64)), need).numpy()


@dataclass(frozen=True)
class Samplability:
    """How much of a buffer windows of one length can reach.

    Attributes:
        need: Rows one window reads.
        trajectories: Trajectories stored.
        samplable_trajectories: Those with at least ``need`` rows.
        transitions: Rows stored (all trajectories).
        samplable_transitions: Rows some window can return as a ``t`` row.
        windows: Distinct windows that can be drawn.
    """

    need: int
    trajectories: int
    samplable_trajectories: int
    transitions: int
    samplable_transitions: int
    windows: int

    @property
    def trajectory_fraction(self) -> float:
        """Samplable trajectories / trajectories (0 when there are none)."""
        return self.samplable_trajectories / self.trajectories if self.trajectories else 0.0

    @property
    def transition_fraction(self) -> float:
        """Samplable transitions / transitions (0 when there are none)."""
        return self.samplable_transitions / self.transitions if self.transitions else 0.0


def samplability(lengths: np.ndarray, settings: WindowSettings, seq_length: int) -> Samplability:
    """What windows of ``seq_length`` rows of a buffer sampling with ``settings`` can reach.

    Raises:
        TypeError, ValueError: ``seq_length`` is not an int >= 1.
    """
    need = settings.need_for(seq_length)
    offset = settings.offset
    lengths = np.asarray(lengths, dtype=np.int64)
    eligible = lengths >= need
    return Samplability(
        need=need,
        trajectories=len(lengths),
        samplable_trajectories=int(eligible.sum()),
        transitions=int(lengths.sum()),
        samplable_transitions=int((lengths[eligible] - offset).sum()),
        windows=int(window_counts(lengths, need).sum()),
    )


@dataclass(frozen=True)
class SamplableCurve:
    """Samplable fractions as the window length grows.

    Attributes:
        seq_length: Window lengths (increasing).
        trajectory_fraction: Fraction of trajectories samplable at each.
        transition_fraction: Fraction of transitions samplable at each.
    """

    seq_length: np.ndarray
    trajectory_fraction: np.ndarray
    transition_fraction: np.ndarray


def samplable_curve(
    lengths: np.ndarray, settings: WindowSettings, *, max_points: int = CURVE_POINTS
) -> SamplableCurve:
    """The samplable fractions for every ``seq_length`` from 1 to the longest trajectory, for
    a buffer sampling with ``settings``.

    With more lengths than ``max_points`` an evenly spread subset is computed (always
    including 1 and the longest). O(n log n) in the trajectories.

    Raises:
        ValueError: ``max_points < 2``.
    """
    offset = settings.offset
    if max_points < 2:
        raise ValueError(f"max_points: expected >= 2, got {max_points}")
    ordered = np.sort(np.asarray(lengths, dtype=np.int64))
    longest = max(int(ordered[-1]) - offset, 1) if len(ordered) else 1
    seq = np.unique(np.linspace(1, longest, min(longest, max_points)).round().astype(np.int64))
    if len(ordered) == 0:
        zeros = np.zeros(len(seq))
        return SamplableCurve(seq, zeros, zeros)
    # Trajectories with L >= need are the tail of the sorted lengths.
    need = np.array([settings.need_for(int(length)) for length in seq], dtype=np.int64)
    first = np.searchsorted(ordered, need, side="left")
    tail_rows = np.concatenate([np.cumsum((ordered - offset)[::-1])[::-1], [0]])
    count = len(ordered)
    total = int(ordered.sum())
    return SamplableCurve(
        seq_length=seq,
        trajectory_fraction=(count - first) / count,
        transition_fraction=tail_rows[first] / total if total else np.zeros(len(seq)),
    )


def length_bins(lengths: np.ndarray, *, max_bins: int = 60) -> np.ndarray:
    """Integer-aligned bin edges covering ``lengths``: at most ``max_bins`` equal-width bins.

    Each bin ``[edges[i], edges[i+1])`` holds whole lengths, so a bar never splits a length.

    Raises:
        ValueError: ``max_bins < 1``.
    """
    if max_bins < 1:
        raise ValueError(f"max_bins: expected >= 1, got {max_bins}")
    values = np.asarray(lengths, dtype=np.int64)
    if values.size == 0:
        return np.array([0, 1], dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    width = max(1, -(-(high - low + 1) // max_bins))
    bins = -(-(high - low + 1) // width)
    return low + width * np.arange(bins + 1, dtype=np.int64)


def length_counts(lengths: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Trajectories per bin ``[edges[i], edges[i+1])``."""
    counts, _ = np.histogram(np.asarray(lengths, dtype=np.int64), bins=edges)
    return counts


def env_length_counts(traj: Trajectories, env_count: int, edges: np.ndarray) -> np.ndarray:
    """Trajectories per env and length bin: ``[env_count, bins]``.

    Raises:
        ValueError: an env id outside ``[0, env_count)``.
    """
    if len(traj) and (traj.env.min() < 0 or traj.env.max() >= env_count):
        raise ValueError(f"traj.env: expected env ids in [0, {env_count})")
    bins = len(edges) - 1
    column = np.clip(np.searchsorted(edges, traj.length, side="right") - 1, 0, bins - 1)
    counts = np.zeros((env_count, bins), dtype=np.int64)
    np.add.at(counts, (traj.env, column), 1)
    return counts


@dataclass(frozen=True)
class MotionLengths:
    """An expert buffer's trajectories: one per episode, each with its motion id.

    Attributes:
        motion_id: ``[n]`` motion id of each trajectory.
        length: ``[n]`` rows of each trajectory.
    """

    motion_id: np.ndarray
    length: np.ndarray


def expert_from_leaves(end: np.ndarray, motion: np.ndarray) -> MotionLengths:
    """An expert buffer's trajectories from its stored end flags and motion-id column.

    As the buffer indexes them: the last row always ends a trajectory, and each trajectory's
    motion id is the one on its first row.

    Raises:
        ValueError: no rows, or the two leaves differ in rows.
    """
    flags = np.asarray(end).reshape(len(end), -1)
    ids = np.asarray(motion).reshape(len(motion), -1)
    if flags.shape[0] == 0 or flags.shape[0] != ids.shape[0]:
        raise ValueError(
            f"end, motion: expected leaves of one length >= 1, got {flags.shape[0]} and "
            f"{ids.shape[0]} rows"
        )
    column = flags[:, 0] != 0
    column[-1] = True
    start, _, lengths = find_start_stop_traj(column, True)
    first = start[:, 0].numpy()
    return MotionLengths(
        motion_id=ids[first, 0].astype(np.int64), length=lengths.numpy().astype(np.int64)
    )

"""The Compare page's data: two runs or checkpoints side by side.

Each side is summarised as a :class:`Side` (online trajectory lengths, the expert buffer's
priorities per motion, the last round's EMD per motion); :func:`align` lines two per-motion
mappings up on the union of their motion ids and :func:`shared_length_bins` gives two length
samples the same bins, so overlaid charts compare like with like.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.curriculum_history import CurriculumHistory, normalised
from app.curriculum_view import per_motion
from app.trajectory_stats import MotionLengths
from bufcore.inspect import WindowSettings


@dataclass(frozen=True)
class Side:
    """What one side of a comparison holds (None where the source has no such data).

    Attributes:
        label: The run or checkpoint (and expert buffer, when it has several) this side shows.
        online_lengths: Lengths of the online buffer's trajectories.
        expert_lengths: Length per motion of the expert buffer.
        priorities: Normalised sampling priority per motion id of the expert buffer.
        emd: The last evaluation round's EMD per motion id.
        emd_round: Which round ``emd`` is from.
    """

    label: str
    online_lengths: np.ndarray | None = None
    expert_lengths: Mapping[int, int] | None = None
    priorities: Mapping[int, float] | None = None
    emd: Mapping[int, float] | None = None
    emd_round: int | None = None


def motion_priorities(settings: WindowSettings, motions: MotionLengths) -> dict[int, float]:
    """The expert buffer's saved priorities summed per motion and normalised to sum 1.

    Raises:
        ValueError: the buffer saved no priorities, or not one per trajectory.
    """
    if settings.priorities is None:
        raise ValueError("priorities: this buffer saved none (not an expert buffer)")
    if len(settings.priorities) != len(motions.motion_id):
        raise ValueError(
            f"priorities: expected one per trajectory ({len(motions.motion_id)}), got "
            f"{len(settings.priorities)}"
        )
    ids = np.unique(motions.motion_id)
    summed = normalised(per_motion(settings.priorities, motions.motion_id, ids))
    return {int(m): float(p) for m, p in zip(ids, summed, strict=True)}


def motion_lengths(motions: MotionLengths) -> dict[int, int]:
    """Rows per motion id (a motion stored as several episodes sums them)."""
    ids = np.unique(motions.motion_id)
    totals = per_motion(motions.length, motions.motion_id, ids)
    return {int(m): int(t) for m, t in zip(ids, totals, strict=True)}


def last_emd(history: CurriculumHistory) -> tuple[dict[int, float], int]:
    """The last round's EMD per motion id, and that round's number (1-based)."""
    row = history.emd[-1]
    return (
        {int(m): float(e) for m, e in zip(history.motion_ids, row, strict=True)},
        len(history.emd),
    )


def align(
    a: Mapping[int, float] | Mapping[int, int] | None,
    b: Mapping[int, float] | Mapping[int, int] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Motion ids of either side (sorted) and each side's value per id (NaN where absent)."""
    left, right = dict(a or {}), dict(b or {})
    ids = np.array(sorted(set(left) | set(right)), dtype=np.int64)
    return (
        ids,
        np.array([left.get(int(m), np.nan) for m in ids], dtype=np.float64),
        np.array([right.get(int(m), np.nan) for m in ids], dtype=np.float64),
    )


def shared_length_bins(a: np.ndarray, b: np.ndarray, *, max_bins: int = 60) -> np.ndarray:
    """Integer bin edges covering both length samples: one bin per length when the range is
    small, else at most ``max_bins`` equal bins.

    Raises:
        ValueError: both samples are empty.
    """
    both = np.concatenate([np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)])
    if both.size == 0:
        raise ValueError("a, b: expected at least one trajectory length, got none")
    low, high = int(both.min()), int(both.max()) + 1
    width = max(1, -(-(high - low) // max_bins))
    return np.arange(low, high + width, width, dtype=np.int64)


def length_fractions(lengths: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Fraction of the trajectories in each bin (so samples of different sizes compare)."""
    counts, _ = np.histogram(np.asarray(lengths), bins=edges)
    total = counts.sum()
    return counts / total if total else counts.astype(np.float64)

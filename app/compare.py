"""The Compare page's data: two runs or checkpoints side by side.

Either side can show any source under the roots, a path typed under "Open a path", or an earlier
checkpoint a run kept (:func:`comparable`); B starts on the latest other checkpoint of A's run
(:func:`latest_other`), so the page never opens on a run compared with itself when there is
something else to show. Each side is summarised as a :class:`Side` (online trajectory lengths,
the expert buffer's priorities per motion, the last round's EMD per motion); :func:`align` lines
two per-motion mappings up on the union of their motion ids and :func:`shared_length_bins`
gives two length samples the same bins, so overlaid charts compare like with like.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.curriculum_history import CurriculumHistory, normalised
from app.curriculum_view import per_motion
from app.run_data import REPRIORITIZED_DIR, BufferEntry
from app.sources import Source
from app.trajectory_stats import MotionLengths
from bufcore.inspect import (
    HISTORY_DIR,
    RUN_CHECKPOINT,
    RUN_DIRECTORY,
    WindowSettings,
    earlier_checkpoints,
    owning_run,
)


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


def comparable(sources: Sequence[Source], current: Source | None) -> list[Source]:
    """What either side may show: ``current`` first when it is not among ``sources`` (a
    typed path), then every source, each run directory followed by the checkpoints it kept
    (``<run>/checkpoints/step-<step>``), newest first. Only directory names are read."""
    listed = list(sources)
    if current is not None and all(s.path != current.path for s in listed):
        listed.insert(0, current)
    found: list[Source] = []
    for source in listed:
        found.append(source)
        if source.kind == RUN_DIRECTORY:
            found += [
                Source(path, RUN_CHECKPOINT, f"{source.label}/{HISTORY_DIR}/{path.name}")
                for _, path in reversed(earlier_checkpoints(source.path))
            ]
    return list({source.path: source for source in found}.values())


def _run_of(source: Source) -> Path:
    return owning_run(source.path) or source.path


def latest_other(choices: Sequence[Source], a: int) -> int | None:
    """Index of the latest checkpoint of the run of ``choices[a]`` other than itself: the run's
    newest kept checkpoint when A is the run (whose ``checkpoint/`` is its latest), the run
    itself when A is one it kept. None when the run has no other (or A is no run's).

    Raises:
        IndexError: ``a`` is not an index of ``choices``.
    """
    run = _run_of(choices[a])
    family = [i for i, source in enumerate(choices) if i != a and _run_of(source) == run]
    # comparable() lists a run, then its kept checkpoints newest first; a kept checkpoint
    # listed before its run (typed) is older than the run's own.
    family.sort(key=lambda i: (choices[i].path != run, -_step(choices[i])))
    return family[0] if family else None


def _step(source: Source) -> int:
    name = source.path.name
    return int(name.removeprefix("step-")) if owning_run(source.path) is not None else 0


def newest_save(experts: Sequence[BufferEntry]) -> int | None:
    """Index of the expert buffer saved last from the Curriculum page (``reprioritized/...``,
    by the time its directory was written), or None when there is none."""
    saved = [i for i, e in enumerate(experts) if e.name.startswith(f"{REPRIORITIZED_DIR}/")]
    return max(saved, key=lambda i: experts[i].path.stat().st_mtime_ns) if saved else None

"""What re-prioritizing a run's curriculum would change, and saving it as a new version.

Re-prioritizing maps the last round's EMDs (:mod:`app.curriculum_history`) through
:func:`bufcore.emd_to_priorities` with other options. What a motion really gets is not its
priority but its *sampling probability*: with ``"trajectory"`` weighting a trajectory is drawn
in proportion to its priority if it has at least ``need`` rows (else never); with ``"window"``
weighting in proportion to priority times its number of window starts.
:func:`sampling_probability` normalises :func:`bufcore.inspect.window_weights`, the weights the
sampler itself draws from. Saving writes a *new* expert checkpoint
through bufcore (load, ``update_priorities``, ``save(replace=False)``) as the next free version;
the source checkpoint and every other version are never touched, even by sessions saving at the
same moment. A save that would repeat a checkpoint already there (the same rows, the same
priorities: :func:`duplicate_version`) is not made.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import cast

import numpy as np
import torch

from app.curriculum_history import normalised
from app.run_data import REPRIORITIZED_DIR
from bufcore import emd_to_priorities, load_buffer
from bufcore.inspect import PRIORITY_MODES, Weighting, window_settings, window_weights

# The EMD -> priority modes the page offers (all of the curriculum's).
MODES = list(PRIORITY_MODES)
# Decimals the page's tables show probabilities and priorities with.
SHOWN_DECIMALS = 4


def sampling_probability(
    priorities: np.ndarray, lengths: np.ndarray, *, need: int, weighting: str
) -> np.ndarray:
    """The exact probability that a sampled window comes from each trajectory:
    :func:`bufcore.inspect.window_weights` (``"trajectory"`` weighting: ``p_i * [L_i >=
    need]``; ``"window"``: ``p_i * max(0, L_i - need + 1)``), normalised. All zero when
    nothing can be sampled.

    Raises:
        ValueError: lengths and priorities differ in size, or an unknown weighting.
    """
    weights = window_weights(
        torch.as_tensor(np.asarray(lengths, dtype=np.int64)),
        need=need,
        weighting=cast(Weighting, weighting),
        priorities=torch.as_tensor(np.asarray(priorities, dtype=np.float64)),
    )
    return normalised(weights.numpy())


def per_motion(
    values: np.ndarray, trajectory_motions: np.ndarray, motions: np.ndarray
) -> np.ndarray:
    """Per-trajectory ``values`` summed per motion, in the order of ``motions`` (0 if absent)."""
    ids = np.asarray(trajectory_motions, dtype=np.int64)
    out = np.zeros(len(motions), dtype=np.float64)
    index = {int(m): i for i, m in enumerate(motions)}
    flat = np.asarray(values, dtype=np.float64).tolist()
    for motion, value in zip(ids.tolist(), flat, strict=True):
        if motion in index:
            out[index[motion]] += value
    return out


def new_priorities(
    emd: np.ndarray, *, mode: str, min_val: float, max_val: float, scale: float
) -> np.ndarray:
    """Normalised priorities for per-motion EMDs under other options (the transform is
    :func:`bufcore.emd_to_priorities`, as the curriculum applies it).

    Raises:
        ValueError, TypeError: invalid options or EMDs (bufcore's messages).
    """
    raw = emd_to_priorities(
        np.asarray(emd, dtype=np.float64), min_val=min_val, max_val=max_val, scale=scale, mode=mode
    )
    return normalised(raw.numpy().astype(np.float64))


def trajectory_priorities(
    motion_priorities: np.ndarray, motions: np.ndarray, trajectory_motions: np.ndarray
) -> np.ndarray:
    """Each trajectory gets its motion's priority, normalised (as ``Curriculum.apply`` sets).

    Raises:
        ValueError: a trajectory's motion has no priority.
    """
    lookup = {int(m): float(p) for m, p in zip(motions, motion_priorities, strict=True)}
    missing = sorted({int(m) for m in trajectory_motions} - set(lookup))
    if missing:
        raise ValueError(f"motion_priorities: no priority for motions {missing[:10]}")
    return normalised(np.array([lookup[int(m)] for m in trajectory_motions]))


def version_path(run_dir: Path, mode: str, n: int) -> Path:
    """``run_dir/reprioritized/expert-<mode>-<n>``: where version ``n`` of a re-prioritized
    expert buffer is saved."""
    return run_dir / REPRIORITIZED_DIR / f"expert-{mode}-{n}"


def next_version(run_dir: Path, mode: str) -> int:
    """The smallest ``n >= 1`` whose :func:`version_path` is free now.

    Only a first guess: another session may take it before this one saves, which is why
    :func:`save_reprioritized` creates without replacing and moves on to the next ``n``.
    """
    n = 1
    while version_path(run_dir, mode, n).exists():
        n += 1
    return n


# Versions tried past the first guess before giving up (other sessions saving at once).
SAVE_ATTEMPTS = 100
# Saved priorities are float32 (relative rounding ~6e-8); closer than this they are the same.
SAME_PRIORITY_RTOL = 1e-6


def duplicate_version(
    priorities: np.ndarray, rows_digest: str | None,
    checkpoints: Iterable[tuple[Path, str | None]],
) -> Path | None:
    """The first of ``checkpoints`` (``(path, rows digest)`` pairs, see
    :attr:`bufcore.inspect.CheckpointSummary.rows_digest`) that holds the rows ``rows_digest``
    names with ``priorities`` (one per trajectory), so that saving them would write an
    identical checkpoint; None when there is none, or when the rows have no digest (a
    checkpoint without a manifest cannot be compared).

    Only the small files of a checkpoint whose rows match are read.

    Raises:
        OSError, ValueError: a checkpoint whose rows match cannot be read.
    """
    if rows_digest is None:
        return None
    wanted = np.asarray(priorities, dtype=np.float64)
    for path, rows in checkpoints:
        if rows != rows_digest:
            continue
        held = window_settings(path).priorities
        if held is not None and held.shape == wanted.shape and np.allclose(
            held, wanted, rtol=SAME_PRIORITY_RTOL, atol=0.0
        ):
            return path
    return None


def save_reprioritized(
    source: Path, run_dir: Path, mode: str, priorities: np.ndarray
) -> Path:
    """Load the expert checkpoint ``source`` afresh, set ``priorities`` (one per trajectory)
    and save it as a new version under ``run_dir/reprioritized/`` (:func:`version_path`).

    The save only creates (bufcore's ``save(..., replace=False)``, atomic): when another
    session took the version meanwhile, the next one is tried, so two sessions saving at
    once both keep their checkpoint and nothing is ever overwritten.

    Returns:
        The new checkpoint's directory.

    Raises:
        FileExistsError: :data:`SAVE_ATTEMPTS` versions in a row were taken meanwhile.
        ValueError, IndexError, TypeError: the buffer refuses the priorities.
        OSError, CorruptCheckpointError: ``source`` cannot be read or the version written.
    """
    buffer = load_buffer(source, device="cpu")
    values = torch.as_tensor(np.asarray(priorities, dtype=np.float64))
    if values.shape != (len(buffer.motion_ids),):
        raise ValueError(
            f"priorities: expected {len(buffer.motion_ids)} (one per trajectory), "
            f"got shape {list(values.shape)}"
        )
    buffer.update_priorities(values, torch.arange(len(values)))
    first = next_version(run_dir, mode)
    for n in range(first, first + SAVE_ATTEMPTS):
        target = version_path(run_dir, mode, n)
        try:
            buffer.save(target, replace=False)
        except FileExistsError:
            continue  # taken since it was picked: another session saved it
        return target
    raise FileExistsError(
        f"{version_path(run_dir, mode, first)}: this version and the next "
        f"{SAVE_ATTEMPTS - 1} were all taken while saving; nothing was written"
    )


def same_when_shown(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` print alike at :data:`SHOWN_DECIMALS` decimals (within half
    a unit of the last), so a table need not show both."""
    first, second = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return first.shape == second.shape and bool(
        np.allclose(first, second, rtol=0.0, atol=0.5 * 10.0**-SHOWN_DECIMALS)
    )


def format_options(mode: str, min_val: float, max_val: float, scale: float) -> str:
    """``"exp, EMD clamped to [0.5, 2], x2"``: options in one phrase."""
    def short(value: float) -> str:
        return f"{value:g}" if math.isfinite(value) else str(value)

    return f"{mode}, EMD clamped to [{short(min_val)}, {short(max_val)}], x{short(scale)}"


def motion_view(
    priorities: np.ndarray,
    lengths: np.ndarray,
    trajectory_motions: np.ndarray,
    motions: np.ndarray,
    *,
    need: int,
    weighting: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Per motion (in the order of ``motions``): the normalised priority and the probability
    that a sampled window comes from it (see :func:`sampling_probability`).

    Raises:
        ValueError: as :func:`sampling_probability`.
    """
    probability = sampling_probability(priorities, lengths, need=need, weighting=weighting)
    return (
        per_motion(normalised(priorities), trajectory_motions, motions),
        per_motion(probability, trajectory_motions, motions),
    )

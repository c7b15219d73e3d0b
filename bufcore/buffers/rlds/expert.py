"""RLDS episodes as an expert buffer, so that an RLDS dataset can feed the EMD curriculum.

:func:`expert_buffer_from_rlds` lays each RLDS episode's steps end to end in one
:class:`~bufcore.buffers.expert.TrajectoryDictBuffer`: one episode is one trajectory with one
motion id, whose priority the :class:`~bufcore.curriculum.curriculum.Curriculum` then sets. The
rows are the steps themselves (not transitions): the seven step features, nested as given, plus
``motion_id``; ``is_last`` ends each trajectory, so a window's ``next`` row is the step after.
The episodes are checked as for conversion (DESIGN §2 decision 9) before anything is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.buffers.rlds.steps import IS_LAST, STEPS, read_steps
from bufcore.buffers.windowed import DEFAULT_KEYS
from bufcore.checks import check_int
from bufcore.sampling.windows import Weighting
from bufcore.tree import Key, unflatten

MOTION_ID = "motion_id"


def expert_buffer_from_rlds(
    rlds_data: Iterable[Any],
    *,
    motion_ids: Sequence[int] | None = None,
    seq_length: int = 1,
    device: str | torch.device = "cpu",
    output_key_t: Sequence[Key] = DEFAULT_KEYS,
    output_key_tp1: Sequence[Key] = DEFAULT_KEYS,
    weighting: Weighting = "trajectory",
    seed: int | None = None,
) -> TrajectoryDictBuffer:
    """Build a read-only expert buffer with one trajectory per RLDS episode.

    Args:
        rlds_data: An iterable of RLDS episodes (see :mod:`bufcore.buffers.rlds.steps`), each
            holding exactly one episode: a first step, then steps that are not last, then a
            last step (or one step that is both).
        motion_ids: One int per episode (``motion_ids[i]`` for ``rlds_data[i]``); ``None`` for
            the episodes' positions ``0, 1, ...``.
        seq_length: Default window length.
        device: Where the rows live.
        output_key_t: Keys sampled for the window rows (``observation`` by default; any of
            the step features, as str or tuple paths).
        output_key_tp1: Keys sampled under ``"next"``.
        weighting: ``"trajectory"`` (the reference's) or ``"window"``.
        seed: Seed of the buffer's generator; ``None`` for a nondeterministic one.

    Returns:
        A :class:`~bufcore.buffers.expert.TrajectoryDictBuffer` whose ``motion_ids[i]`` is
        episode ``i``'s, ``end_key="is_last"`` and ``motion_id_key="motion_id"``.

    Raises:
        ValueError: no episode; an episode without steps, or holding more than one episode
            (a last step before its end); a bad episode (see
            :meth:`~bufcore.buffers.rlds.steps.Steps.check_sequence` and
            :func:`~bufcore.buffers.rlds.steps.read_steps`); ``motion_ids`` not one per
            episode; or a bad buffer option.
        TypeError: as :func:`~bufcore.buffers.rlds.steps.read_steps`, non-int motion ids, or
            a bad buffer option.
        KeyError: an output key matches no step feature.
    """
    steps = read_steps(rlds_data)
    episodes = len(steps.offsets) - 1
    if episodes == 0:
        raise ValueError("rlds_data: expected at least one episode, got none")
    ids = _motion_ids(motion_ids, episodes)
    for index, (start, end) in enumerate(steps.spans()):
        if end == start:
            raise ValueError(
                f"rlds_data[{index}][{STEPS!r}]: holds no step; an expert trajectory needs one"
            )
    steps.check_sequence()
    last = steps.flag(IS_LAST)
    rows = []
    for motion, (start, end) in zip(ids, steps.spans(), strict=True):
        early = last[start : end - 1].nonzero()
        if len(early):
            raise ValueError(
                f"{steps.where(start + int(early[0, 0]))}: a last step before the end of its "
                "RLDS episode; each RLDS episode must hold exactly one episode (one motion)"
            )
        episode = unflatten({path: column[start:end] for path, column in steps.columns.items()})
        episode[MOTION_ID] = torch.full((end - start,), motion, dtype=torch.int64)
        rows.append(episode)
    return TrajectoryDictBuffer(
        rows,
        device=device,
        seq_length=seq_length,
        output_key_t=output_key_t,
        output_key_tp1=output_key_tp1,
        end_key=IS_LAST,
        motion_id_key=MOTION_ID,
        weighting=weighting,
        seed=seed,
    )


def _motion_ids(motion_ids: Sequence[int] | None, episodes: int) -> list[int]:
    """One motion id per episode.

    Raises:
        TypeError: not a sequence of ints.
        ValueError: not one per episode.
    """
    if motion_ids is None:
        return list(range(episodes))
    if isinstance(motion_ids, str | bytes) or not isinstance(motion_ids, Sequence):
        raise TypeError(
            f"motion_ids: expected a list of ints, got {type(motion_ids).__name__}"
        )
    ids = [check_int(value, f"motion_ids[{i}]") for i, value in enumerate(motion_ids)]
    if len(ids) != episodes:
        raise ValueError(
            f"motion_ids: expected one per episode ({episodes}), got {len(ids)}"
        )
    return ids

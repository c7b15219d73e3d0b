"""A run's EMD curriculum as arrays: every evaluation round, in one motion order.

History comes from the ``eval`` records of ``metrics.jsonl`` (round, motion_ids, emd,
priority, probability) or, for a checkpoint without its log, from ``run.json``'s curriculum
state (:mod:`bufcore.curriculum.history` parses it). Either becomes a
:class:`CurriculumHistory`: ``[rounds, motions]`` matrices in one motion order. An expert
buffer with several episodes per motion logs one entry per episode; those are folded into one
column per motion (:func:`per_motion_columns`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.text import literal
from bufcore.inspect import options_from_state, read_run_state, rounds_from_state

# Ways to order the motions of the heatmap and the tables (the page's cur_sort choices).
SORTS = ("motion id", "last EMD", "mean EMD", "priority")


@dataclass(frozen=True)
class CurriculumHistory:
    """Every evaluation round of a run's curriculum.

    Attributes:
        steps: ``[R]`` training step of each round.
        motion_ids: ``[M]`` the motions, in the order of the matrices' columns.
        emd: ``[R, M]`` EMD of each motion per round.
        priority: ``[R, M]`` priority given to each motion (before normalising).
        probability: ``[R, M]`` the expert buffer's normalised priorities after each round.
        source: Where it was read (``"metrics.jsonl"`` or ``"run.json"``).
        problems: Records that were skipped, one message each.
        per_episode: The records listed motions once per episode (several episodes of a
            motion); the columns are per motion (:func:`per_motion_columns`).
    """

    steps: np.ndarray
    motion_ids: np.ndarray
    emd: np.ndarray
    priority: np.ndarray
    probability: np.ndarray
    source: str
    problems: tuple[str, ...] = ()
    per_episode: bool = False

    @property
    def rounds(self) -> int:
        """Rounds recorded."""
        return len(self.steps)

    @property
    def entropy(self) -> np.ndarray:
        """``[R]`` entropy of the normalised priorities per round, in nats."""
        return entropy(self.probability)

    @property
    def effective_motions(self) -> np.ndarray:
        """``[R]`` effective sample size ``1 / sum(p**2)`` per round."""
        return effective_size(self.probability)


def normalised(values: np.ndarray) -> np.ndarray:
    """``values / sum`` along the last axis (rows summing to 0 stay 0)."""
    data = np.asarray(values, dtype=np.float64)
    total = data.sum(axis=-1, keepdims=True)
    return np.asarray(np.divide(data, total, out=np.zeros_like(data), where=total > 0))


def entropy(probability: np.ndarray) -> np.ndarray:
    """Entropy in nats along the last axis (``log(M)`` when uniform, 0 for one motion)."""
    p = np.asarray(probability, dtype=np.float64)
    logs = np.log(np.where(p > 0, p, 1.0))
    return np.asarray(-(p * logs).sum(axis=-1))


def effective_size(probability: np.ndarray) -> np.ndarray:
    """``1 / sum(p**2)`` along the last axis: how many equally likely motions it is worth."""
    squares = (np.asarray(probability, dtype=np.float64) ** 2).sum(axis=-1)
    return np.asarray(np.divide(1.0, squares, out=np.zeros_like(squares), where=squares > 0))


class UnmappedRecords(ValueError):
    """A log holds ``eval`` records but none of them can be mapped to motions."""


def per_motion_columns(
    ids: Sequence[int], columns: Mapping[str, np.ndarray]
) -> tuple[list[int], dict[str, np.ndarray], np.ndarray]:
    """One entry per motion from a record with one entry per *trajectory*.

    An expert buffer may hold several episodes of one motion; its ``eval`` records then list
    a motion once per episode (as ``buffer.motion_ids`` does). Per motion: the EMD and the
    priority are the mean over its episodes (each episode gets its motion's values, so the
    mean is that value), the probability the sum (the chance a draw comes from the motion).

    Returns:
        ``(motions, columns, episodes)``: motions in order of first appearance, the columns per
        motion, and the number of entries each motion had.
    """
    motions, inverse, episodes = np.unique(
        np.asarray(ids, dtype=np.int64), return_inverse=True, return_counts=True
    )
    first = np.full(len(motions), len(ids))
    np.minimum.at(first, inverse, np.arange(len(ids)))
    order = np.argsort(first, kind="stable")  # keep the record's own motion order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    slot = rank[inverse]
    grouped = {}
    for key, column in columns.items():
        sums = np.bincount(slot, weights=column, minlength=len(motions))
        grouped[key] = sums if key == "probability" else sums / episodes[order]
    return motions[order].tolist(), grouped, episodes[order]


def history_from_records(records: Sequence[Mapping[str, Any]]) -> CurriculumHistory | None:
    """The history in the ``eval`` records of a metrics log (None when there is none).

    A record listing a motion several times (an expert buffer with several episodes per
    motion) is reduced to one column per motion (:func:`per_motion_columns`). Columns follow
    the first valid record's motion order; a later record with other motions or malformed
    fields is skipped, with a message in ``problems``.

    Raises:
        UnmappedRecords: there are ``eval`` records but none is usable (the message says why,
            from the first few).
    """
    problems: list[str] = []
    steps: list[int] = []
    rows: dict[str, list[np.ndarray]] = {"emd": [], "priority": [], "probability": []}
    order: list[int] | None = None
    repeated = False
    for record in records:
        if record.get("kind") != "eval":
            continue
        where = f"eval record at step {record.get('step')!r}"
        try:
            ids = [int(m) for m in record["motion_ids"]]
            np.asarray(ids, dtype=np.int64)  # an id beyond 64 bits raises OverflowError here
            columns = {k: np.asarray(record[k], dtype=np.float64) for k in ("emd", "priority")}
            probability = record.get("probability")
            columns["probability"] = (
                normalised(columns["priority"])
                if probability is None
                else np.asarray(probability, dtype=np.float64)
            )
            step = int(record["step"])
        except (KeyError, TypeError, ValueError, OverflowError) as err:
            problems.append(f"{literal(where)}: unreadable ({literal(err)})")
            continue
        if any(column.shape != (len(ids),) for column in columns.values()):
            problems.append(f"{where}: emd/priority/probability do not match motion_ids")
            continue
        if not ids:
            problems.append(f"{where}: lists no motions")
            continue
        motions, columns, episodes = per_motion_columns(ids, columns)
        repeated = repeated or bool((episodes > 1).any())
        if order is None:
            order = motions
        if sorted(motions) != sorted(order):
            problems.append(f"{where}: holds other motions than the first round")
            continue
        position = np.argsort(motions)[np.searchsorted(np.sort(motions), order)]
        steps.append(step)
        for key, column in columns.items():
            rows[key].append(column[position])
    if not steps or order is None:
        if problems:
            shown = "; ".join(problems[:3])
            raise UnmappedRecords(
                f"{len(problems)} eval records, none usable: {shown}"
                + (" ..." if len(problems) > 3 else "")
            )
        return None
    return CurriculumHistory(
        steps=np.asarray(steps, dtype=np.int64),
        motion_ids=np.asarray(order, dtype=np.int64),
        emd=np.stack(rows["emd"]),
        priority=np.stack(rows["priority"]),
        probability=np.stack(rows["probability"]),
        source="metrics.jsonl",
        problems=tuple(problems),
        per_episode=repeated,
    )


def history_from_state(curriculum_state: Mapping[str, Any]) -> CurriculumHistory | None:
    """The history saved in ``run.json``'s ``curriculum`` (None without rounds).

    The probability per round is the round's priorities normalised (what the buffer held
    right after it, since every round sets every motion).

    Raises:
        StateError: the state is malformed (names the key path).
    """
    rounds_field = curriculum_state.get("rounds") if isinstance(curriculum_state, Mapping) else None
    options_from_state(curriculum_state)  # checks format and version first
    if not rounds_field:
        return None
    motions = {int(m) for m in rounds_field[0].get("motion_ids", [])}
    rounds = rounds_from_state(curriculum_state, motions)
    order = sorted(motions)
    emd = np.array([[r.emd[m] for m in order] for r in rounds], dtype=np.float64)
    priority = np.array([[r.priority[m] for m in order] for r in rounds], dtype=np.float64)
    return CurriculumHistory(
        steps=np.array([r.step for r in rounds], dtype=np.int64),
        motion_ids=np.asarray(order, dtype=np.int64),
        emd=emd,
        priority=priority,
        probability=normalised(priority),
        source="run.json",
    )


def history_from_checkpoint(checkpoint: Path) -> CurriculumHistory | None:
    """The history in the run checkpoint ``checkpoint``'s run.json (None without a curriculum).

    Raises:
        FileNotFoundError: ``checkpoint`` is not a directory.
        CorruptCheckpointError, StateError: run.json or its curriculum is malformed.
    """
    state = read_run_state(checkpoint)
    curriculum = state.get("curriculum")
    if curriculum is None:
        return None
    return history_from_state(curriculum)


def motion_order(history: CurriculumHistory, by: str) -> np.ndarray:
    """Column indices of ``history`` in display order: by motion id (ascending), or by the
    last EMD, the mean EMD or the current priority (highest first, ties by motion id).

    Raises:
        ValueError: ``by`` is not one of :data:`SORTS`.
    """
    if by not in SORTS:
        raise ValueError(f"by: expected one of {list(SORTS)}, got {by!r}")
    ids = history.motion_ids
    if by == "motion id":
        return np.argsort(ids, kind="stable")
    key = {
        "last EMD": history.emd[-1],
        "mean EMD": history.emd.mean(axis=0),
        "priority": history.probability[-1],
    }[by]
    return np.lexsort((ids, -key))

"""A training run's checkpoint: every buffer plus the run's own state, published as one directory.

Layout (DESIGN §3 "Runs"), BFM-Zero's ``checkpoint/`` with the run state beside the buffers::

    RUN/checkpoint/
    ├── buffers/
    │   ├── train/    a buffer checkpoint directory each (config.json, buffer.hdf5, ...)
    │   ├── expert/
    │   └── z/
    └── run.json      {"format": "bufcore-run-checkpoint", "version": 1, "step": ..., ...}

The whole directory is staged and swapped in with one rename (:mod:`bufcore.persist.atomic`),
so a reader sees the previous checkpoint or the new one, never buffers from one save and run
state from another. What ``run.json`` holds beyond ``format`` and ``version`` is the run's
business (the demo writes its step, round, options, curriculum, TD-EMA and agent state).

Needed by (DESIGN rule 5): ``tests/persist/test_run_checkpoint.py`` (one directory published
whole, replacing only a run checkpoint; README Guarantees).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.atomic import publish_directory
from bufcore.persist.checkpoint.format import parse_json, replaceable_checkpoint
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.persist.syscalls import fsync_path

# A run directory's layout: RUN/metrics.jsonl and RUN/checkpoint/{run.json, buffers/<name>/}.
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoint"
RUN_FORMAT = "bufcore-run-checkpoint"
RUN_VERSION = 1
RUN_STATE = "run.json"
BUFFERS = "buffers"
# BFM-Zero's own record of its checkpoint's moment, beside its buffers: {"time": <env steps>}.
TRAIN_STATUS = "train_status.json"


def save_run_checkpoint(
    path: str | os.PathLike[str],
    *,
    buffers: Mapping[str, Callable[[Path], None]],
    state: Mapping[str, Any],
) -> None:
    """Write a run checkpoint at ``path`` atomically.

    Args:
        path: The checkpoint directory (``RUN/checkpoint``).
        buffers: Buffer name -> a function saving that buffer to the directory it is given
            (``buffer.save``); each lands in ``buffers/<name>/``.
        state: JSON-ready run state for ``run.json`` (``format`` and ``version`` are added).

    Raises:
        ValueError: ``path`` is empty; a buffer name is not a plain directory name, or
            ``state`` holds ``format``/``version`` or is not JSON-ready (checked before
            anything is written).
        FileExistsError: ``path`` exists and is not a run checkpoint (it is left untouched).
    """
    for name in buffers:
        if not name or name in (".", "..") or "/" in name or name.startswith("."):
            raise ValueError(f"buffers: {name!r} is not a usable directory name")
    clash = {"format", "version"} & set(state)
    if clash:
        raise ValueError(f"state: {sorted(clash)} are written by save_run_checkpoint itself")
    try:
        text = json.dumps({"format": RUN_FORMAT, "version": RUN_VERSION, **state}, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"state: not plain JSON data ({err})") from None

    def write(staging: Path) -> None:
        for name, save in buffers.items():
            save(staging / BUFFERS / name)
        (staging / RUN_STATE).write_text(text + "\n", encoding="utf-8")
        fsync_path(staging / RUN_STATE)

    publish_directory(
        path, write, replaceable=replaceable_run_checkpoint, kind="run checkpoint directory"
    )


def replaceable_run_checkpoint(path: Path) -> bool:
    """Whether a save may replace the directory at ``path``: empty, or a run checkpoint that
    holds nothing but ``run.json`` of this format and buffer checkpoints under ``buffers/``."""
    entries = {entry.name: entry for entry in path.iterdir()}
    if not entries:
        return True
    if set(entries) - {RUN_STATE, BUFFERS} or RUN_STATE not in entries:
        return False
    state_file, buffers = entries[RUN_STATE], entries.get(BUFFERS)
    if state_file.is_symlink() or not state_file.is_file():
        return False
    try:
        state = parse_json(state_file.read_bytes(), state_file)
    except (CorruptCheckpointError, OSError):
        return False
    if state.get("format") != RUN_FORMAT:
        return False
    if buffers is None:
        return True
    if buffers.is_symlink() or not buffers.is_dir():
        return False
    return all(
        not b.is_symlink() and b.is_dir() and replaceable_checkpoint(b)
        for b in buffers.iterdir()
    )


def read_run_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``run.json`` of the run checkpoint directory ``path``, format and version checked.

    It is read through the directory handle as checkpoint files are (no symbolic link is
    followed, a FIFO is refused).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: ``run.json`` is missing, not a regular file, not a JSON object,
            or of another format or version (the message names the field).
    """
    with CheckpointSnapshot(Path(path)) as snapshot:
        where = snapshot.path / RUN_STATE
        state = parse_json(snapshot.read(RUN_STATE), where)
    for field, expected in (("format", RUN_FORMAT), ("version", RUN_VERSION)):
        found = state.get(field)
        if found != expected or isinstance(found, bool):
            raise CorruptCheckpointError(
                where, f"run[{field!r}]: expected {expected!r}, got {found!r:.80}"
            )
    return state


def read_train_status(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``train_status.json`` BFM-Zero writes in its checkpoint directory ``path``.

    Read through the directory handle as checkpoint files are (no symbolic link is followed,
    a FIFO is refused); what its fields mean is the summary's business.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: the file is missing, not a regular file or not a JSON object.
    """
    with CheckpointSnapshot(Path(path)) as snapshot:
        return parse_json(snapshot.read(TRAIN_STATUS), snapshot.path / TRAIN_STATUS)

"""A training run's checkpoint: every buffer plus the run's own state, published as one directory.

Layout (DESIGN §3 "Runs"), BFM-Zero's ``checkpoint/`` with the run state beside the buffers::

    RUN/checkpoint/
    ├── buffers/
    │   ├── train/    a buffer checkpoint directory each (config.json, buffer.hdf5, ...)
    │   ├── expert/
    │   └── z/
    ├── loop/         a training loop's own state per rank, when it saves one (rank_0.hdf5, ...)
    └── run.json      {"format": "bufcore-run-checkpoint", "version": 1, "step": ..., ...}

A run that keeps its earlier checkpoints puts each under ``RUN/checkpoints/step-<step>/`` (six
digits or more, so names sort by step) with :func:`keep_run_checkpoint`, which hard-links the
files rather than writing them again; :func:`earlier_checkpoints` lists them and
:func:`owning_run` names the run of one.

The whole directory is staged and swapped in with one rename (:mod:`bufcore.persist.atomic`),
so a reader sees the previous checkpoint or the new one, never buffers from one save and run
state from another. What ``run.json`` holds beyond ``format`` and ``version`` is the run's
business (the demo writes its step, round, options, curriculum, TD-EMA and agent state).
``loop/rank_<r>.hdf5`` holds what rank ``r``'s loop needs beyond that to resume exactly (its
generators, environments, optimizers: :mod:`bufcore.persist.loop_state`); a checkpoint without
it loads as before, and :func:`bufcore.resume` refuses it.

Needed by (DESIGN rule 5): ``tests/persist/test_run_checkpoint.py`` (one directory published
whole, replacing only a run checkpoint; README Guarantees).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bufcore.checks import check_int
from bufcore.errors import CorruptCheckpointError, NewerFormatError
from bufcore.persist.atomic import publish_directory
from bufcore.persist.checkpoint.format import parse_json, replaceable_checkpoint
from bufcore.persist.loop_state import LOOP_DIR, EncodedLoopState, loop_file, write_loop_state
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
# Earlier checkpoints a run keeps, RUN/checkpoints/step-000450/ (see keep_run_checkpoint).
HISTORY_DIR = "checkpoints"
_KEPT = re.compile(r"step-(?P<step>[0-9]{6,})")
_LOOP_FILE = re.compile(r"rank_(0|[1-9][0-9]*)\.hdf5")


def save_run_checkpoint(
    path: str | os.PathLike[str],
    *,
    buffers: Mapping[str, Callable[[Path], None]],
    state: Mapping[str, Any],
    loop: Mapping[int, Mapping[str, Any]] | None = None,
) -> None:
    """Write a run checkpoint at ``path`` atomically.

    Args:
        path: The checkpoint directory (``RUN/checkpoint``).
        buffers: Buffer name -> a function saving that buffer to the directory it is given
            (``buffer.save``); each lands in ``buffers/<name>/``.
        state: JSON-ready run state for ``run.json`` (``format`` and ``version`` are added).
        loop: Rank -> that rank's loop state (plain data whose leaves may be tensors: see
            :class:`~bufcore.persist.loop_state.EncodedLoopState`), each written to
            ``loop/rank_<r>.hdf5``; None writes no ``loop/`` (the checkpoint then cannot be
            resumed by :func:`bufcore.resume`).

    Raises:
        ValueError: ``path`` is empty; a buffer name is not a plain directory name, or
            ``state`` holds ``format``/``version`` or is not JSON-ready, or a rank is not an
            int >= 0, or a loop state holds what a file cannot (checked before anything is
            written).
        TypeError: a loop state holds a value that is neither plain data nor a tensor.
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
    loops = {}
    for rank, loop_state in (loop or {}).items():
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise ValueError(f"loop: expected ranks as ints >= 0, got {rank!r}")
        loops[rank] = EncodedLoopState(loop_state)

    def write(staging: Path) -> None:
        for name, save in buffers.items():
            save(staging / BUFFERS / name)
        if loops:
            (staging / LOOP_DIR).mkdir()
            for rank, encoded in loops.items():
                write_loop_state(staging / LOOP_DIR / loop_file(rank), encoded)
            fsync_path(staging / LOOP_DIR, directory=True)
        (staging / RUN_STATE).write_text(text + "\n", encoding="utf-8")
        fsync_path(staging / RUN_STATE)

    publish_directory(
        path, write, replaceable=replaceable_run_checkpoint, kind="run checkpoint directory"
    )


def replaceable_run_checkpoint(path: Path) -> bool:
    """Whether a save may replace the directory at ``path``: empty, or a run checkpoint that
    holds nothing but ``run.json`` of this format, buffer checkpoints under ``buffers/`` and
    loop states under ``loop/``."""
    entries = {entry.name: entry for entry in path.iterdir()}
    if not entries:
        return True
    if set(entries) - {RUN_STATE, BUFFERS, LOOP_DIR} or RUN_STATE not in entries:
        return False
    loops = entries.get(LOOP_DIR)
    if loops is not None and (loops.is_symlink() or not loops.is_dir() or not all(
        _LOOP_FILE.fullmatch(f.name) and not f.is_symlink() and f.is_file()
        for f in loops.iterdir()
    )):
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
            or of another format or version (the message names the field); a
            :class:`~bufcore.errors.NewerFormatError` when its version is above this bufcore's.
    """
    with CheckpointSnapshot(Path(path)) as snapshot:
        where = snapshot.path / RUN_STATE
        state = parse_json(snapshot.read(RUN_STATE), where)
    version = state.get("version")
    if state.get("format") == RUN_FORMAT and _newer(version):
        raise NewerFormatError(where, f"run['version']: expected {RUN_VERSION}, got {version}: "
                                      "written by a newer bufcore; upgrade bufcore to read it")
    for field, expected in (("format", RUN_FORMAT), ("version", RUN_VERSION)):
        found = state.get(field)
        if found != expected or isinstance(found, bool):
            raise CorruptCheckpointError(
                where, f"run[{field!r}]: expected {expected!r}, got {found!r:.80}"
            )
    return state


def _newer(version: Any) -> bool:
    return isinstance(version, int) and not isinstance(version, bool) and version > RUN_VERSION


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
def kept_name(step: int) -> str:
    """``step-000450``: the name under ``RUN/checkpoints/`` of the checkpoint taken at ``step``.

    Raises:
        ValueError: ``step`` is negative.
        TypeError: ``step`` is not an int.
    """
    return f"step-{check_int(step, 'step', minimum=0):06d}"


def keep_run_checkpoint(
    path: str | os.PathLike[str], destination: str | os.PathLike[str]
) -> None:
    """Publish a copy of the run checkpoint at ``path`` as ``destination`` (create-only).

    The files are hard links: bufcore never edits a published file (a save replaces the
    directory), so the copy costs neither time nor space until ``path`` is saved over, and
    then keeps the old files alive. Where the file system has no hard links they are copied
    (``tests/persist/test_run_checkpoint.py::
    test_a_kept_checkpoint_is_copied_where_the_file_system_has_no_hard_links``).
    Nobody may save to ``path`` meanwhile (the demo keeps its own checkpoint before it saves
    the next one).

    Raises:
        FileNotFoundError: ``path`` holds no ``run.json``.
        FileExistsError: anything is at ``destination``, or ``path`` is not a run checkpoint
            (a directory holding anything else).
    """
    source = Path(path)
    if not (source / RUN_STATE).is_file():
        raise FileNotFoundError(f"path: {source} holds no {RUN_STATE}; not a run checkpoint")
    if not replaceable_run_checkpoint(source):
        raise FileExistsError(f"path: {source} holds more than a run checkpoint")

    def write(staging: Path) -> None:
        try:
            shutil.copytree(source, staging, symlinks=True, copy_function=os.link,
                            dirs_exist_ok=True)
        except OSError:
            # No hard links here (FAT, some network file systems): copy instead, into an
            # empty staging directory (copying over a link would write into the original).
            shutil.rmtree(staging)
            shutil.copytree(source, staging, symlinks=True, copy_function=_copy_durably)

    publish_directory(destination, write, replaceable=lambda _: False,
                      kind="kept run checkpoint", replace=False)


def discard_kept_checkpoint(run_dir: str | os.PathLike[str], step: int) -> bool:
    """Remove ``run_dir/checkpoints/step-<step>/`` if it is there; whether it was.

    A run killed between keeping its checkpoint (:func:`keep_run_checkpoint`) and saving the
    next leaves that copy behind; resumed from that checkpoint, the run keeps it again at its
    next save, which would refuse to replace it (``tests/runs/test_resume.py::
    test_a_kept_copy_of_the_checkpoint_left_by_the_killed_run_is_replaced``).

    Raises:
        FileExistsError: the entry is not a run checkpoint (it is left alone).
    """
    kept = Path(run_dir) / HISTORY_DIR / kept_name(step)
    if not kept.is_symlink() and not kept.exists():
        return False
    if kept.is_symlink() or not kept.is_dir() or not replaceable_run_checkpoint(kept):
        raise FileExistsError(f"{kept}: not a kept run checkpoint; left alone")
    shutil.rmtree(kept)
    fsync_path(kept.parent, directory=True)
    return True


def _copy_durably(source: str, destination: str) -> None:
    shutil.copy2(source, destination)
    fsync_path(Path(destination))


def earlier_checkpoints(run_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(step, directory)`` of each checkpoint kept under ``run_dir/checkpoints/``, by step.

    Only names are looked at (nothing is read); entries that are not ``step-<digits>``
    directories (symbolic links included) are left out.
    """
    folder = Path(run_dir) / HISTORY_DIR
    if folder.is_symlink() or not folder.is_dir():
        return []
    kept = []
    for entry in folder.iterdir():
        match = _KEPT.fullmatch(entry.name)
        if match and not entry.is_symlink() and entry.is_dir():
            kept.append((int(match["step"]), entry))
    return sorted(kept)


def owning_run(checkpoint: str | os.PathLike[str]) -> Path | None:
    """The run directory that keeps ``checkpoint`` among its earlier checkpoints (it is
    ``RUN/checkpoints/step-<step>``), or None. Only the path's names are looked at."""
    path = Path(checkpoint)
    if _KEPT.fullmatch(path.name) and path.parent.name == HISTORY_DIR:
        return path.parent.parent
    return None

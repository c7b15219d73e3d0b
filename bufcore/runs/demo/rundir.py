"""The demo's run directory: which directories a demo run may write into, and its motion files.

A demo run writes ``metrics.jsonl``, ``motions/``, ``checkpoint/`` and ``checkpoints/`` (its
earlier checkpoints) and replaces them when they are a previous demo run's. Everything is
checked before the first byte is written, so a refused directory is left exactly as it was.
:func:`start_fresh` (``bufcore demo --dashboard``, ``make demo``) clears a previous demo run
first, moving it aside whole when it holds checkpoints saved from the dashboard.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Collection
from pathlib import Path

import torch

from bufcore.errors import CorruptFileError
from bufcore.persist.atomic import move_aside, publish_directory, staged_name
from bufcore.persist.episodes import save_episodes, write_motion_list
from bufcore.persist.jsonl import read_lines
from bufcore.persist.run_checkpoint import (
    CHECKPOINT_DIR,
    HISTORY_DIR,
    METRICS_FILE,
    read_run_state,
    replaceable_run_checkpoint,
)
from bufcore.runs.demo.motions import Motion
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.sources import human_bytes

# Marks what the demo wrote (its first log record and run.json), so that it replaces only a
# previous demo run, never a run of yours logged with RunLogger and save_run_checkpoint.
WRITER = "bufcore demo"

MOTIONS_DIR = "motions"
MOTION_LIST = "motions.txt"
MOTIONS_PER_FILE = 8
# The names write_motions gives its files (the number grows past three digits if it must).
_MOTION_FILE = re.compile(r"motions_[0-9]{3,}\.h5")
# A kept checkpoint (kept_name) or the staging of one that a killed run left behind.
_KEPT_ENTRY = re.compile(r"step-[0-9]{6,}|\.step-[0-9]{6,}\.staging-[0-9]+-.+")
# Where the dashboard saves re-prioritized expert checkpoints into a run (app/run_data.py).
SAVED_DIR = "reprioritized"


def check_run_dir(run: Path, *, also: Collection[str] = ()) -> None:
    """Refuse a directory a demo run would overwrite anything but a previous demo run in.

    Only the demo's own names and the staging entries a killed save of them leaves
    (``.checkpoint.staging-<pid>-...``) may be there: hidden entries (``.git/``, ``.env``) are
    no exception. ``also`` names further entries to let pass unchecked (:func:`start_fresh`
    moves a run holding the dashboard's ``reprioritized/`` aside whole).

    Raises:
        NotADirectoryError: ``run`` exists and is not a directory.
        FileExistsError: ``run`` is a dangling symbolic link; it holds an entry a demo run
            does not write (hidden ones included); or one of the demo's names holds something
            else:
            ``metrics.jsonl`` not a regular file or not a demo log, ``motions/`` not a
            directory of motion files and ``motions.txt``, ``checkpoint/`` not a run
            checkpoint or not the demo's (its ``run.json`` lacks ``"writer": "bufcore demo"``),
            ``checkpoints/`` holding anything but the demo's ``step-<step>/`` checkpoints,
            or a symbolic link in place of any of them.
    """
    if not run.exists():
        if run.is_symlink():
            raise FileExistsError(f"{run}: a symbolic link to {os.readlink(run)}, which is missing")
        return
    if not run.is_dir():
        raise NotADirectoryError(f"{run}: not a directory")
    ours = {METRICS_FILE, MOTIONS_DIR, CHECKPOINT_DIR, HISTORY_DIR, *also}
    # A save killed halfway leaves its staging entry, which the next save removes.
    foreign = sorted(
        e.name for e in run.iterdir() if e.name not in ours and staged_name(e.name) not in ours
    )
    if foreign:
        raise FileExistsError(
            f"{run}: holds {', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}, which "
            "a demo run does not write; choose an empty or new directory (or a previous demo "
            "run's) with --out"
        )
    for name, ok in (
        (METRICS_FILE, _is_demo_log),
        (MOTIONS_DIR, _is_motions_dir),
        (CHECKPOINT_DIR, _is_run_checkpoint),
        (HISTORY_DIR, _is_history),
    ):
        entry = run / name
        if (entry.is_symlink() or entry.exists()) and not ok(entry):
            raise FileExistsError(
                f"{entry}: not what a demo run writes there; choose an empty or new directory "
                "(or a previous demo run's) with --out"
            )


def _is_file(path: Path) -> bool:
    return not path.is_symlink() and path.is_file()


def _is_demo_log(path: Path) -> bool:
    if not _is_file(path):
        return False
    # An empty log (a run stopped before its first record) holds nothing to lose.
    if path.stat().st_size == 0:
        return True
    try:
        lines = read_lines(path, 0, max_bytes=1).lines  # the first line only, however long
        first = json.loads(lines[0].data) if lines and lines[0].data is not None else None
    except (ValueError, OSError):
        return False
    return isinstance(first, dict) and first.get("kind") == "run" and first.get("writer") == WRITER


def _is_motions_dir(path: Path) -> bool:
    if path.is_symlink() or not path.is_dir():
        return False
    return all(
        _is_file(e) and (e.name == MOTION_LIST or _MOTION_FILE.fullmatch(e.name) is not None)
        for e in path.iterdir()
    )


def _is_run_checkpoint(path: Path) -> bool:
    if path.is_symlink() or not path.is_dir() or not replaceable_run_checkpoint(path):
        return False
    if not any(path.iterdir()):
        return True
    try:
        return read_run_state(path).get("writer") == WRITER
    except (OSError, CorruptFileError):
        return False


def _is_history(path: Path) -> bool:
    if path.is_symlink() or not path.is_dir():
        return False
    return all(
        _KEPT_ENTRY.fullmatch(e.name) is not None
        and (e.name.startswith(".") or _is_run_checkpoint(e))
        for e in path.iterdir()
    )


def _is_previous_run(run: Path) -> bool:
    try:
        check_run_dir(run)
    except OSError:
        return False
    return True


def clear_history(run: Path) -> None:
    """Empty a previous demo run's ``checkpoints/`` (its earlier checkpoints are not this run's).

    Call it after :func:`check_run_dir` passed.
    """
    if (run / HISTORY_DIR).exists():
        publish_directory(run / HISTORY_DIR, lambda staging: None, replaceable=_is_history,
                          kind="demo run's checkpoints/ directory")


def start_fresh(run: Path) -> Path | None:
    """Leave nothing at ``run`` that a new demo run's files could be mistaken for.

    A previous demo run there is removed (a new run would replace it anyway), so whatever
    appears at ``run`` afterwards is the new run's. One holding re-prioritized checkpoints
    saved from the dashboard (``reprioritized/``) is moved aside whole instead, to
    ``RUN.<date>-<time>`` beside it, so those saves stay with the run they were made from.

    Returns:
        Where the previous run was moved, or None when nothing was moved.

    Raises:
        FileExistsError, NotADirectoryError: as :func:`check_run_dir`, for a directory
            holding anything else (nothing is touched).
    """
    check_run_dir(run, also=(SAVED_DIR,))
    if not run.exists():
        return None
    if (run / SAVED_DIR).is_symlink() or (run / SAVED_DIR).exists():
        return move_aside(run, time.strftime("%Y%m%d-%H%M%S"))
    # Swapped for an empty directory in one rename; the old one is then deleted.
    publish_directory(run, lambda staging: None, replaceable=_is_previous_run,
                      kind="previous demo run")
    return None


def write_motions(directory: Path, motions: list[Motion]) -> Path:
    """Write the motions as episode files plus a motion list; returns the list's path."""
    directory.mkdir(parents=True, exist_ok=True)
    names = []
    for first in range(0, len(motions), MOTIONS_PER_FILE):
        part = motions[first : first + MOTIONS_PER_FILE]
        name = f"motions_{first // MOTIONS_PER_FILE:03d}.h5"
        save_episodes(
            directory / name,
            [
                {
                    "observation": {"state": m.frames.numpy()},
                    "motion_id": torch.full((m.frames.shape[0],), m.motion_id).numpy(),
                }
                for m in part
            ],
        )
        names.append(name)
    write_motion_list(directory / MOTION_LIST, names)
    return directory / MOTION_LIST


def check_memory(options: DemoOptions) -> None:
    """Refuse options whose buffers alone would not fit in this machine's memory.

    Raises:
        ValueError: ``envs x capacity`` rows (plus the z buffer) need more bytes than the
            machine has (the message gives both).
    """
    need = options.buffer_bytes()
    have = _physical_memory()
    if have is not None and need > have:
        raise ValueError(
            f"envs x capacity: {options.envs} x {options.capacity} rows need about "
            f"{human_bytes(need)} of buffer memory, more than this machine's "
            f"{human_bytes(have)}; lower --envs or --capacity"
        )


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None  # not known here: nothing to refuse against

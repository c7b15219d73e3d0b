"""What a demo run may write into: its directory is checked whole before a byte is written.

A run directory holds ``metrics.jsonl``, ``motions/`` and ``checkpoint/``. A new run replaces a
previous demo run's, so each entry present must be what a demo run wrote; anything else (a user
file, a link to one, a checkpoint with other files in it) is refused up front, instead of being
overwritten or of failing halfway through the run with the log already replaced.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from bufcore.persist.jsonl import read_lines
from bufcore.persist.run_checkpoint import CHECKPOINT_DIR, METRICS_FILE, replaceable_run_checkpoint
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.inspect import human_bytes

MOTIONS_DIR = "motions"
MOTION_LIST = "motions.txt"
_MOTION_FILE = re.compile(r"^motions_\d{3,}\.h5$")


def check_run_dir(run: Path) -> None:
    """Refuse a directory a demo run would overwrite user files in.

    Raises:
        NotADirectoryError: ``run`` exists and is not a directory.
        FileExistsError: ``run`` is a dangling symbolic link, or holds an entry a demo run does
            not write, or a ``metrics.jsonl``, ``motions/`` or ``checkpoint/`` that is not a
            demo run's (the message names it).
    """
    if not run.exists():
        if run.is_symlink():
            raise FileExistsError(f"{run}: a symbolic link to {os.readlink(run)}, which is missing")
        return
    if not run.is_dir():
        raise NotADirectoryError(f"{run}: not a directory")
    ours = {METRICS_FILE, MOTIONS_DIR, CHECKPOINT_DIR}
    # A save killed halfway leaves its staging entry, which the next save removes.
    foreign = sorted(
        e.name for e in run.iterdir() if e.name not in ours and not e.name.startswith(".")
    )
    if foreign:
        raise FileExistsError(
            f"{run}: holds {_few(foreign)}, which a demo run does not write; choose an empty or "
            "new directory (or a previous demo run's) with --out"
        )
    _check_metrics(run / METRICS_FILE)
    _check_motions(run / MOTIONS_DIR)
    checkpoint = run / CHECKPOINT_DIR
    if os.path.lexists(checkpoint) and (
        not checkpoint.is_dir() or not replaceable_run_checkpoint(checkpoint)
    ):
        raise FileExistsError(
            f"{checkpoint}: not a demo run's checkpoint (it holds other files); refusing to "
            "replace it"
        )


def _few(names: list[str]) -> str:
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def _check_metrics(path: Path) -> None:
    """A previous run's log is empty or starts with its ``run`` record; a link is followed."""
    if not os.path.lexists(path):
        return
    refusal = FileExistsError(
        f"{path}: not a demo run's metrics log (it does not start with a 'run' record); "
        "refusing to replace it"
    )
    try:
        # A budget of one byte: the first line only, however long.
        lines = read_lines(path, 0, max_bytes=1).lines
    except (ValueError, OSError):
        raise refusal from None
    if not lines and path.stat().st_size == 0:
        return
    try:
        first = json.loads(lines[0].data) if lines and lines[0].data is not None else None
    except ValueError:
        first = None
    if not isinstance(first, dict) or first.get("kind") != "run" or "options" not in first:
        raise refusal


def _check_motions(path: Path) -> None:
    if not os.path.lexists(path):
        return
    if not path.is_dir():
        raise FileExistsError(f"{path}: not a directory; refusing to replace it")
    foreign = sorted(
        e.name
        for e in path.iterdir()
        if not (_MOTION_FILE.match(e.name) or e.name == MOTION_LIST or e.name.startswith("."))
    )
    if foreign:
        raise FileExistsError(
            f"{path}: holds {_few(foreign)}, which a demo run does not write; refusing to "
            "write motions there"
        )


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

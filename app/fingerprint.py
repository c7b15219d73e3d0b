"""Cache keys for what is on disk: a directory's files with their modification time and size.

Streamlit caches are keyed on function arguments. Passing ``fingerprint(path)`` beside the path
makes a cached summary go stale exactly when a file under the path changes: a checkpoint save
publishes a new directory (new mtimes), an appending run grows ``metrics.jsonl`` (new size).
Stat calls only; nothing is read.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

# Fingerprint = ((relative path, mtime in ns, size), ...), sorted.
Fingerprint = tuple[tuple[str, int, int], ...]

# Deep enough for run/checkpoint/buffers/<name>/<file>.
_MAX_DEPTH = 4


def fingerprint(path: str | os.PathLike[str], *, skip: Collection[str] = ()) -> Fingerprint:
    """The files under ``path`` (or ``path`` itself when a file) with their mtime and size.

    Args:
        path: A file or directory; a missing one gives ``()``.
        skip: Entry names left out anywhere below ``path`` (``metrics.jsonl``, so that buffer
            caches survive a run appending to its log).
    """
    root = Path(path)
    entries: list[tuple[str, int, int]] = []
    _collect(root, root, skip, 0, entries)
    return tuple(sorted(entries))


def _collect(
    root: Path, here: Path, skip: Collection[str], depth: int, out: list[tuple[str, int, int]]
) -> None:
    try:
        info = os.stat(here)
    except OSError:
        return
    name = "." if here == root else str(here.relative_to(root))
    out.append((name, info.st_mtime_ns, info.st_size))
    if depth >= _MAX_DEPTH or not os.path.isdir(here):
        return
    try:
        children = list(os.scandir(here))
    except OSError:
        return
    for child in children:
        if child.name not in skip and not child.is_symlink():
            _collect(root, Path(child.path), skip, depth + 1, out)

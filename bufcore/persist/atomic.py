"""Atomic publish: a file or directory appears whole at its path, or not at all.

Everything bufcore writes goes through here (checkpoint directories, episode files). The content
is written into a *staging* entry beside the destination, named
``.<name>.staging-<pid>-<random>``, fsynced, and then put in place with one rename:

- a file with ``os.replace`` (atomic on POSIX);
- a directory with ``renameat2(RENAME_EXCHANGE)``, which swaps it with the old one, so a reader
  sees the old or the new directory and never a missing path or a mix; where the system cannot
  exchange, the old directory is moved aside first (a brief window without the path).

The parent directory is fsynced afterwards, so the rename survives a crash. A writer killed
halfway leaves its staging entry behind; the next publish of the same name removes the entries
whose process is gone.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bufcore.persist.syscalls import exchange, fsync_path

_STAGING = re.compile(r"^\.(?P<name>.+)\.(?:staging|old)-(?P<pid>\d+)-")


def _staging_prefix(path: Path, kind: str = "staging") -> str:
    return f".{path.name}.{kind}-{os.getpid()}-"


def _umask_mode(mode: int) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def remove_stale_staging(parent: Path, name: str) -> None:
    """Remove staging entries for ``name`` in ``parent`` whose writer process is gone."""
    for entry in parent.iterdir():
        match = _STAGING.match(entry.name)
        if not match or match["name"] != name:
            continue
        pid = int(match["pid"])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        except PermissionError:
            continue


def resolve_destination(path: str | os.PathLike[str]) -> Path:
    """The absolute path a publish writes to: a symbolic link at ``path`` is written through.

    ``latest -> ckpt_100``: saving to ``latest`` replaces ``ckpt_100`` and keeps the link (a
    dangling link's target is created). Replacing the link itself would leave ``ckpt_100``
    stale and the link gone.

    Raises:
        FileExistsError: ``path`` is a symbolic link that never resolves (a loop).
    """
    destination = Path(path).absolute()
    if destination.is_symlink():
        destination = Path(os.path.realpath(destination))
        if destination.is_symlink():
            raise FileExistsError(f"path: {path} is a symbolic link loop; refusing to follow it")
    return destination


def publish_file(path: str | os.PathLike[str], write: Callable[[Path], None]) -> None:
    """Run ``write(staging)`` to create a file beside ``path``, then rename it over ``path``.

    The file gets the usual umask-derived mode. Nothing is left behind when ``write`` raises.
    A symbolic link at ``path`` is written through (:func:`resolve_destination`).

    Raises:
        FileNotFoundError: the parent directory does not exist.
        IsADirectoryError: ``path`` is a directory.
        FileExistsError: ``path`` is a symbolic link loop.
    """
    destination = resolve_destination(path)
    parent = destination.parent
    if not parent.is_dir():  # a file's directory is the caller's; checkpoints create theirs
        raise FileNotFoundError(f"path: directory {parent} does not exist")
    if destination.is_dir():
        raise IsADirectoryError(f"path: {destination} is a directory; refusing to replace it")
    remove_stale_staging(parent, destination.name)
    # A fresh name rather than mkstemp: the writer creates the file (h5py insists), with the
    # usual umask-derived mode instead of mkstemp's private one.
    staging = parent / f"{_staging_prefix(destination)}{secrets.token_hex(8)}"
    try:
        write(staging)
        fsync_path(staging)
        os.replace(staging, destination)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    fsync_path(parent, directory=True)


def publish_directory(
    path: str | os.PathLike[str],
    write: Callable[[Path], None],
    *,
    replaceable: Callable[[Path], bool],
    kind: str = "directory that may be replaced",
) -> None:
    """Run ``write(staging)`` to fill a directory beside ``path``, then swap it into place.

    A symbolic link at ``path`` is written through (:func:`resolve_destination`).

    Args:
        path: Where the directory appears; missing parents are created.
        write: Fills the staging directory (its files need not be fsynced; this does not do it
            for them either: ``write`` decides how each file reaches the disk).
        replaceable: Whether an existing directory at ``path`` may be replaced (and deleted).
        kind: What such a directory is, for the refusal (``"checkpoint directory"``).

    Raises:
        FileExistsError: ``path`` is a file, a symbolic link loop, or a directory
            ``replaceable`` refuses (refusing protects user data from being swapped out and
            deleted).
    """
    destination = resolve_destination(path)
    parent = destination.parent
    if destination.exists() and (not destination.is_dir() or not replaceable(destination)):
        raise FileExistsError(
            f"path: {destination} exists and is not a {kind}; refusing to replace it"
        )
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(parent, destination.name)
    staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(destination), dir=parent))
    try:
        # mkdtemp makes the directory private (0700); a published one gets the usual mode.
        staging.chmod(_umask_mode(0o777))
        write(staging)
        fsync_path(staging, directory=True)
        if not destination.exists():
            os.rename(staging, destination)
        elif not exchange(staging, destination):
            old = Path(tempfile.mkdtemp(prefix=_staging_prefix(destination, "old"), dir=parent))
            os.rename(destination, old / "previous")
            os.rename(staging, destination)
            shutil.rmtree(old, ignore_errors=True)
        fsync_path(parent, directory=True)
    finally:
        # After an exchange the staging name holds the previous directory.
        shutil.rmtree(staging, ignore_errors=True)

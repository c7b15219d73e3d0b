"""Atomic publish: a file or directory appears whole at its path, or not at all.

Everything bufcore writes goes through here (checkpoint directories, episode files). The content
is written into a *staging* entry beside the destination, named
``.<name>.staging-<pid>-<random>``, fsynced, and then put in place with one rename:

- a file with ``os.replace`` (atomic on POSIX);
- a directory with ``renameat2(RENAME_EXCHANGE)``, which swaps it with the old one, so a reader
  sees the old or the new directory and never a missing path or a mix; where the system cannot
  exchange, the old directory is moved aside first (a brief window without the path).

Several writers may publish one path at once (two savers of one checkpoint): each retries
until its rename or swap succeeds, so none fails and the last one's directory stays. A writer
that must create and never replace (``replace=False``: a new version that nobody may overwrite)
renames with ``renameat2(RENAME_NOREPLACE)`` instead, or where the system lacks it claims the
name with ``mkdir`` first; either way the kernel decides in one step, so of two such writers one
wins and the other gets ``FileExistsError``.

:func:`move_aside` renames a directory out of the way with the same create-only rename.

The parent directory is fsynced afterwards, so the rename survives a crash. A writer killed
halfway leaves its staging entry behind; the next publish of the same name removes the entries
whose process is gone.

What needs each mechanism (DESIGN rule 5):

- staging + fsync + one rename or swap: ``tests/fault/test_crash_safety.py`` (SIGKILL at any
  moment leaves the old or the new checkpoint) and ``tests/fault/test_load_save_race.py``;
- the retry of :func:`_put_in_place`: ``tests/persist/test_atomic.py::
  test_a_directory_published_by_another_writer_just_before_the_rename_is_replaced`` and
  ``::test_a_destination_moved_away_before_the_swap_is_published_into_again`` (two savers of one
  path both succeed, README Guarantees);
- :func:`_put_new`: ``tests/persist/test_create_only.py`` (of two create-only savers exactly one
  wins);
- :func:`_keep_if_changed`: ``tests/persist/test_atomic.py::
  test_a_directory_another_writer_published_meanwhile_is_kept_when_not_replaceable`` (a save
  replaces only a verifiable checkpoint, README Guarantees);
- :func:`remove_stale_staging` (the pid in a staging name tells a dead writer's leftovers, up
  to the size of a checkpoint, from a live writer's): ``tests/fault/test_crash_safety.py::
  test_staging_left_by_a_killed_saver_is_removed_by_the_next_save`` and
  ``::test_staging_of_a_writer_that_is_still_alive_is_left_alone`` (README "Checkpoints").
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

from bufcore.checks import check_bool, check_path
from bufcore.persist.syscalls import exchange, fsync_path, rename_new

# As many links as the kernel follows in one path (Linux's MAXSYMLINKS).
_MAX_LINK_HOPS = 40
# How often a publish retries when other writers keep moving its destination (each retry
# means another writer published in between; a bound only so that it cannot spin forever).
_PUBLISH_ATTEMPTS = 100
_STAGING = re.compile(r"^\.(?P<name>.+)\.(?:staging|old)-(?P<pid>\d+)-")


def _staging_prefix(path: Path, kind: str = "staging") -> str:
    return f".{path.name}.{kind}-{os.getpid()}-"


def _umask_mode(mode: int) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def staged_name(entry: str) -> str | None:
    """The name a publish was putting in place when it left the entry named ``entry`` behind
    (``.ckpt.staging-41-ab`` -> ``ckpt``), or None when ``entry`` is no staging entry."""
    match = _STAGING.match(entry)
    return None if match is None else match["name"]


def remove_stale_staging(parent: Path, name: str) -> None:
    """Remove staging entries for ``name`` in ``parent`` whose writer process is gone."""
    for entry in stale_staging(parent, lambda staged: staged == name):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def stale_staging(parent: Path, wanted: Callable[[str], bool]) -> list[Path]:
    """The staging entries in ``parent`` for names ``wanted(name)`` accepts whose writer
    process is gone (a live writer's, this process's included, are left out)."""
    found = []
    for entry in parent.iterdir():
        match = _STAGING.match(entry.name)
        if not match or not wanted(match["name"]):
            continue
        pid = int(match["pid"])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            found.append(entry)
        except PermissionError:
            continue
    return found


def resolve_destination(path: str | os.PathLike[str]) -> Path:
    """The absolute path a publish writes to: a symbolic link at ``path`` is written through.

    ``latest -> ckpt_100``: saving to ``latest`` replaces ``ckpt_100`` and keeps the link (a
    dangling link's target is created). Replacing the link itself would leave ``ckpt_100``
    stale and the link gone. Links are followed hop by hop as the kernel would, so a target
    the kernel cannot reach (``missing/../x``: ``missing`` does not exist) is refused rather
    than resolved on paper to a place the link never leads to.

    Raises:
        TypeError: ``path`` is not a str or ``os.PathLike``.
        ValueError: ``path`` is empty (``""`` would mean the working directory).
        FileExistsError: ``path`` is a symbolic link loop.
        FileNotFoundError: a link's target lies in a directory that does not exist.
    """
    destination = check_path(path).absolute()
    for _ in range(_MAX_LINK_HOPS):
        if not destination.is_symlink():
            return Path(os.path.realpath(destination))
        following = destination.parent / os.readlink(destination)
        if not following.parent.is_dir():
            raise FileNotFoundError(
                f"path: {path} links to {following}, whose directory does not exist"
            )
        destination = following
    raise FileExistsError(f"path: {path} is a symbolic link loop; refusing to follow it")


def publish_file(
    path: str | os.PathLike[str],
    write: Callable[[Path], None],
    *,
    remove_stale: bool = True,
    sync_file: bool = True,
    sync_parent: bool = True,
) -> None:
    """Run ``write(staging)`` to create a file beside ``path``, then rename it over ``path``.

    The file gets the usual umask-derived mode. Nothing is left behind when ``write`` raises.
    A symbolic link at ``path`` is written through (:func:`resolve_destination`).

    ``remove_stale=False`` skips :func:`remove_stale_staging`, which scans the whole parent
    directory: a writer that publishes many files into one directory (the disk trajectory
    buffer) would pay for every file already there on each write, and removes dead writers'
    leftovers by its own call instead (``bufcore.persist.rlinf.directory.orphans``).

    ``sync_file=False`` skips the fsync of the file before its rename: after a crash of the
    machine (not of the process) the file may be there but not whole, so the caller must fsync
    it before anything names it. The disk trajectory buffer fsyncs its files in one go before
    the index that names them (:class:`bufcore.persist.rlinf.store.TrajectoryStore`).

    ``sync_parent=False`` skips the fsync of the parent directory after the rename: the file's
    content is on disk, but the rename survives a crash only once something fsyncs that
    directory. For a writer that publishes many files and then a file naming them (the disk
    trajectory buffer's index, whose directory is fsynced before the index is renamed), one
    directory fsync per index replaces one per file.

    Raises:
        ValueError: ``path`` is empty (``""``).
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
    if remove_stale:
        remove_stale_staging(parent, destination.name)
    # A fresh name rather than mkstemp: the writer creates the file (h5py insists), with the
    # usual umask-derived mode instead of mkstemp's private one.
    staging = parent / f"{_staging_prefix(destination)}{secrets.token_hex(8)}"
    try:
        write(staging)
        if sync_file:
            fsync_path(staging)
        os.replace(staging, destination)
    except BaseException:
        staging.unlink(missing_ok=True)
        raise
    if sync_parent:
        fsync_path(parent, directory=True)


def publish_directory(
    path: str | os.PathLike[str],
    write: Callable[[Path], None],
    *,
    replaceable: Callable[[Path], bool],
    kind: str = "directory that may be replaced",
    replace: bool = True,
) -> None:
    """Run ``write(staging)`` to fill a directory beside ``path``, then swap it into place.

    A symbolic link at ``path`` is written through (:func:`resolve_destination`).

    Args:
        path: Where the directory appears; missing parents are created.
        write: Fills the staging directory (its files need not be fsynced; this does not do it
            for them either: ``write`` decides how each file reaches the disk).
        replaceable: Whether an existing directory at ``path`` may be replaced (and deleted).
        kind: What such a directory is, for the refusal (``"checkpoint directory"``).
        replace: False: only create. Anything at ``path`` (even an empty directory or a
            link), before the write or appearing during it, makes this raise and stay away
            from it; checked atomically with the final rename.

    Raises:
        FileExistsError: ``path`` is a file, a symbolic link loop, or a directory
            ``replaceable`` refuses (refusing protects user data from being swapped out and
            deleted); with ``replace=False``, anything exists at ``path``.
        TypeError: ``replace`` is not a bool (checked before anything is touched).
        ValueError: ``path`` is empty (``""``).
    """
    staged = StagedDirectory(path, replaceable=replaceable, kind=kind, replace=replace)
    try:
        write(staged.path)
        staged.publish()
    finally:
        staged.discard()


class StagedDirectory:
    """:func:`publish_directory` in two steps, for writers that fill the staging directory
    across other work: the ranks of a process group each write their part between barriers
    (:func:`bufcore.persist.run_checkpoint.save_rank_checkpoint`).

    Made, it has checked the destination and created the staging directory (``path``);
    :meth:`publish` swaps it into place; :meth:`discard` (always call it, in a ``finally``)
    removes what is left: the staging directory of a torn write, or the replaced directory.

    Raises:
        FileExistsError: as :func:`publish_directory`, on making it or on publishing.
        TypeError: ``replace`` is not a bool (checked before anything is touched).
        ValueError: ``path`` is empty (``""``).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        replaceable: Callable[[Path], bool],
        kind: str = "directory that may be replaced",
        replace: bool = True,
    ) -> None:
        if not check_bool(replace, "replace") and os.path.lexists(path):
            raise FileExistsError(f"path: {path} exists; refusing to replace it (replace=False)")
        destination = resolve_destination(path)
        parent = destination.parent
        if destination.exists() and (not destination.is_dir() or not replaceable(destination)):
            raise FileExistsError(
                f"path: {destination} exists and is not a {kind}; refusing to replace it"
            )
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(parent, destination.name)
        staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(destination), dir=parent))
        # mkdtemp makes the directory private (0700); a published one gets the usual mode.
        staging.chmod(_umask_mode(0o777))
        self.path, self.destination = staging, destination
        self._replaceable, self._replace = replaceable, replace

    def publish(self) -> None:
        """fsync the staging directory and put it in place (see :func:`publish_directory`)."""
        fsync_path(self.path, directory=True)
        if self._replace:
            _put_in_place(self.path, self.destination, self._replaceable)
        else:
            _put_new(self.path, self.destination)
        fsync_path(self.destination.parent, directory=True)

    def discard(self) -> None:
        """Remove the staging directory (after an exchange it holds the previous directory)."""
        shutil.rmtree(self.path, ignore_errors=True)


def _put_new(staging: Path, destination: Path) -> None:
    """Rename ``staging`` to ``destination`` if nothing is there, in one atomic step.

    Without ``RENAME_NOREPLACE`` the name is claimed with ``mkdir`` (atomic: it fails if
    anything is there) and ``staging`` renamed over that empty claim; a directory put into
    the claim meanwhile makes the rename fail (``ENOTEMPTY``) rather than replace it.

    Raises:
        FileExistsError: something is at ``destination`` (left untouched).
    """
    refusal = f"path: {destination} exists; refusing to replace it (replace=False)"
    try:
        if rename_new(staging, destination):
            return
    except FileExistsError:
        raise FileExistsError(refusal) from None
    try:
        os.mkdir(destination)
    except FileExistsError:
        raise FileExistsError(refusal) from None
    try:
        os.rename(staging, destination)
    except OSError as err:
        if err.errno in (errno.ENOTEMPTY, errno.EEXIST):
            raise FileExistsError(refusal) from None
        with contextlib.suppress(OSError):  # our empty claim; never another's directory
            os.rmdir(destination)
        raise


def _put_in_place(staging: Path, destination: Path, replaceable: Callable[[Path], bool]) -> None:
    """Move ``staging`` to ``destination``, swapping out whatever directory is there by then.

    Another writer may publish or move the destination at any moment (two savers of one path),
    so nothing is decided on an earlier look: a plain rename is tried first (it fails on a
    non-empty directory), then a swap with the directory found; a destination that vanishes
    or appears in between sends it round again. The last writer's directory wins; one that
    stopped being ``replaceable`` is kept beside it (:func:`_keep_if_changed`).
    """
    for _ in range(_PUBLISH_ATTEMPTS):
        try:
            previous = _try_put_in_place(staging, destination, replaceable)
        except FileNotFoundError:
            continue  # the destination was moved away meanwhile: try the rename again
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            continue  # another writer's directory appeared meanwhile: swap with that one
        # Published. Only now is the replaced directory looked at, outside the retries: an
        # error here must not send the loop round again (it would swap the old one back).
        if previous is not None:
            try:
                _keep_if_changed(previous, destination, replaceable)
            finally:
                if previous != staging:  # moved aside (staging is removed by the caller)
                    shutil.rmtree(previous.parent, ignore_errors=True)
        return
    message = f"other writers kept replacing it; gave up after {_PUBLISH_ATTEMPTS} tries"
    raise OSError(errno.EBUSY, message, str(destination))


def _try_put_in_place(
    staging: Path, destination: Path, replaceable: Callable[[Path], bool]
) -> Path | None:
    """One attempt of :func:`_put_in_place`: the directory replaced (None: there was none).

    After a swap that is ``staging``; after a move aside, ``previous`` in a private directory
    beside it (the caller removes that directory).

    Raises:
        FileNotFoundError: the destination vanished before it could be swapped or moved.
        OSError: ``ENOTEMPTY`` or ``EEXIST``: a directory appeared at the destination
            (nothing changed); other errors as the system gives them.
    """
    try:
        os.rename(staging, destination)  # nothing there, or an empty directory
        return None
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    if exchange(staging, destination):
        return staging
    # No swap on this system: move the old one aside (a brief window without the path).
    aside = Path(tempfile.mkdtemp(prefix=_staging_prefix(destination, "old"), dir=staging.parent))
    previous = aside / "previous"
    try:
        os.rename(destination, previous)
        try:
            os.rename(staging, destination)
        except OSError:
            try:
                os.rename(previous, destination)  # put it back
            except OSError:  # a newer writer's is there; ours goes round again over it
                _keep_if_changed(previous, destination, replaceable)
            raise
    except BaseException:
        shutil.rmtree(aside, ignore_errors=True)
        raise
    return previous


def _keep_if_changed(
    previous: Path, destination: Path, replaceable: Callable[[Path], bool]
) -> None:
    """Keep the directory just replaced if it stopped being replaceable during the write.

    The check before writing can be overtaken: someone may add a file to the old directory
    while the new one is written. Then the old one is not deleted but moved beside the
    destination as ``<name>.kept-<random>``, with a warning naming it.
    """
    if replaceable(previous):
        return
    kept = destination.with_name(f"{destination.name}.kept-{secrets.token_hex(4)}")
    os.rename(previous, kept)
    warnings.warn(
        f"{destination}: files were added to the previous directory while it was being "
        f"replaced; it is kept at {kept}",
        RuntimeWarning,
        stacklevel=4,
    )


def move_aside(path: str | os.PathLike[str], suffix: str) -> Path:
    """Rename ``path`` to ``<name>.<suffix>`` beside it (``-2``, ``-3``, ... while that is
    taken), never over anything (the same atomic create-only rename as ``replace=False``).

    Returns:
        The new path.

    Raises:
        FileNotFoundError: nothing is at ``path``.
        FileExistsError: the first 100 such names are all taken.
    """
    source = Path(path)
    if not os.path.lexists(source):
        raise FileNotFoundError(f"path: {source} does not exist")
    for attempt in range(1, 101):
        aside = source.with_name(f"{source.name}.{suffix}" + (f"-{attempt}" if attempt > 1 else ""))
        try:
            _put_new(source, aside)
        except FileExistsError:
            continue
        fsync_path(source.parent, directory=True)
        return aside
    raise FileExistsError(f"path: {source}.{suffix} and 99 more names beside it are taken")

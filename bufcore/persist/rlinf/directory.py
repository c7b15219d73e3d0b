"""An RLinf buffer directory as a whole: opened and checked, saved as a checkpoint, cleaned.

- :func:`open_directory` reads ``metadata.json`` and ``trajectory_index.json`` (bounded sizes,
  no links followed, :mod:`bufcore.persist.rlinf.layout` parses them) and checks that every
  file the index names is a regular file of the directory, not a symbolic link. What a file
  holds is checked when it is read (:mod:`bufcore.persist.rlinf.payload`).
- :func:`save_directory` publishes a checkpoint directory atomically (staged beside it and
  swapped in, :func:`bufcore.persist.atomic.publish_directory`): trajectory files taken from
  another directory are hard links where the file system allows (the files are never written
  in place, only replaced by rename) and fsynced copies elsewhere.
- :func:`orphans` lists what a crash or a clear leaves: trajectory files the index does not
  name, and staging entries of writers that are gone.

Needed by (DESIGN rule 5): hard links, ``tests/buffers/rlinf/test_checkpoints.py::test_
checkpoint_files_are_hard_links_of_the_auto_saved_ones``; the copy where linking fails,
``tests/persist/test_rlinf_directory.py::test_a_file_is_copied_where_the_file_system_cannot_
link``; the size bounds on the JSON files, ``tests/buffers/rlinf/test_hostile_dirs.py::test_
oversized_metadata_is_refused_before_it_is_read``.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.atomic import publish_directory, publish_file, staged_name, stale_staging
from bufcore.persist.rlinf.layout import (
    INDEX,
    MAX_INDEX_BYTES,
    MAX_METADATA_BYTES,
    METADATA,
    IndexEntry,
    Metadata,
    index_bytes,
    is_trajectory_file_name,
    metadata_bytes,
    parse_index,
    parse_metadata,
)
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.persist.syscalls import fsync_path


@dataclass(frozen=True)
class SavedDirectory:
    """An opened buffer directory.

    Attributes:
        path: The directory.
        metadata: Its metadata.json.
        entries: Every index entry, in id-list order.
        absent: The ids of ``entries`` whose file is not in the directory (RLinf's
            checkpoints index trajectories they hold no file for: without ``auto_save`` only
            the cached ones are written, with it only the last sampled window).
        file_bytes: The size of the indexed files that are there.
    """

    path: Path
    metadata: Metadata
    entries: list[IndexEntry]
    absent: frozenset[int]
    file_bytes: int


def holds_buffer(path: Path) -> bool:
    """Whether ``path`` has a ``trajectory_index.json`` (a ``metadata.json`` alone is what a
    writer killed before its first index leaves: it commits nothing)."""
    return os.path.lexists(path / INDEX)


def open_directory(path: Path) -> SavedDirectory:
    """Read and check the buffer directory ``path`` (see :class:`SavedDirectory`); no
    trajectory file is read (a loader checks the format may be read:
    :func:`bufcore.persist.rlinf.payload.check_pickle_allowed`).

    Raises:
        FileNotFoundError: ``path`` is no directory, or lacks ``metadata.json`` or
            ``trajectory_index.json`` (RLinf's messages).
        CorruptCheckpointError: either JSON file is a link, too large or malformed; or a file
            the index names is a symbolic link or anything but a regular file.
    """
    with CheckpointSnapshot(path) as snapshot:
        if not snapshot.has(METADATA):
            raise FileNotFoundError(f"Metadata not found at {path / METADATA}")
        if not snapshot.has(INDEX):
            raise FileNotFoundError(f"Trajectory index not found at {path / INDEX}")
        metadata = parse_metadata(_read(snapshot, METADATA, MAX_METADATA_BYTES), path / METADATA)
        raw_index = _read(snapshot, INDEX, MAX_INDEX_BYTES)
        entries = parse_index(raw_index, path / INDEX, metadata.trajectory_format)
        sizes = {
            entry.trajectory_id: _member_size(snapshot, entry.file_name(metadata.trajectory_format))
            for entry in entries
        }
    absent = frozenset(i for i, size in sizes.items() if size is None)
    file_bytes = sum(size for size in sizes.values() if size is not None)
    return SavedDirectory(path, metadata, entries, absent, file_bytes)


def _read(snapshot: CheckpointSnapshot, name: str, limit: int) -> bytes:
    fd = snapshot.open(name)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise CorruptCheckpointError(
                snapshot.path / name, f"is {size} bytes; more than the {limit} read at most"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _member_size(snapshot: CheckpointSnapshot, name: str) -> int | None:
    """The size of the indexed trajectory file ``name``, None when it is absent.

    Raises:
        CorruptCheckpointError: it is a symbolic link or anything but a regular file.
    """
    status = snapshot.lstat(name)
    if status is None:
        return None
    if stat.S_ISLNK(status.st_mode):
        raise CorruptCheckpointError(
            snapshot.path / name, "is a symbolic link; only the directory's own files are read"
        )
    if not stat.S_ISREG(status.st_mode):
        raise CorruptCheckpointError(snapshot.path / name, "is not a regular file")
    return status.st_size


def publish_json(directory: Path, name: str, data: bytes) -> None:
    """Replace ``directory/name`` by ``data`` atomically."""

    def write(staging: Path) -> None:
        staging.write_bytes(data)

    publish_file(directory / name, write, remove_stale=False)


def publish_index(directory: Path, entries: Sequence[IndexEntry], metadata: Metadata) -> None:
    """Replace the metadata, then the index, of ``directory`` (each atomically).

    The index is the commit point: it is published after the files it names and after the
    metadata, so a directory with an index always has a metadata.json too. A crash in between
    leaves metadata counts ahead of the index, which a load does not trust (it counts the
    index, and gives out ids past both).

    Publishing metadata.json fsyncs the directory after its rename, so every trajectory file
    renamed into it before (whose publish leaves the directory unsynced) is durably in place
    before the index is renamed.
    """
    publish_json(directory, METADATA, metadata_bytes(metadata))
    publish_json(directory, INDEX, index_bytes(entries))


def link_or_copy(source: Path, target: Path) -> None:
    """Make ``target`` (which must not exist) a hard link to ``source``, or a copy of it
    (fsynced) where the file system cannot link."""
    try:
        os.link(source, target, follow_symlinks=False)
        return
    except OSError as err:
        if err.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EACCES):
            raise
    shutil.copyfile(source, target, follow_symlinks=False)
    fsync_path(target)


def place_file(source: Path, target: Path) -> None:
    """Put a link to (or copy of) ``source`` at ``target`` atomically, replacing what is
    there."""
    publish_file(target, lambda staging: link_or_copy(source, staging), remove_stale=False)


def same_directory(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one existing directory."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def replaceable(path: Path) -> bool:
    """Whether a save may replace the directory ``path``: it holds nothing but what a buffer
    directory holds (the two JSON files, trajectory files, staging entries)."""
    return all(
        entry.name in (METADATA, INDEX)
        or is_trajectory_file_name(entry.name)
        or staged_name(entry.name) is not None
        for entry in path.iterdir()
    )


def save_directory(
    path: Path,
    entries: Sequence[IndexEntry],
    metadata: Metadata,
    write_file: Callable[[IndexEntry, Path], None],
) -> None:
    """Publish a buffer directory at ``path`` holding ``entries``: ``write_file(entry,
    target)`` creates each trajectory file (fsynced), then the index and metadata follow.

    Raises:
        FileExistsError: ``path`` exists and holds anything a buffer directory does not.
    """

    def fill(staging: Path) -> None:
        for entry in entries:
            write_file(entry, staging / entry.file_name(metadata.trajectory_format))
        for name, data in ((METADATA, metadata_bytes(metadata)), (INDEX, index_bytes(entries))):
            (staging / name).write_bytes(data)
            fsync_path(staging / name)

    publish_directory(path, fill, replaceable=replaceable, kind="buffer directory")


def orphans(directory: Path, named: Iterable[str]) -> list[Path]:
    """Trajectory files of ``directory`` that ``named`` leaves out, and staging entries of
    trajectory or JSON files whose writer is gone, sorted."""
    keep = set(named)
    found = [
        entry
        for entry in directory.iterdir()
        if is_trajectory_file_name(entry.name) and entry.name not in keep
    ]
    found += stale_staging(
        directory, lambda name: name in (METADATA, INDEX) or is_trajectory_file_name(name)
    )
    return sorted(found)


def remove_files(paths: Iterable[Path]) -> None:
    """Delete ``paths`` (files; one already gone counts as deleted)."""
    for path in paths:
        path.unlink(missing_ok=True)

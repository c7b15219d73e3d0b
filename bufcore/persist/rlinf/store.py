"""The disk trajectory store: one buffer directory, written by one FIFO thread, read on demand.

:class:`TrajectoryStore` is the storage half of the disk trajectory buffer (the window sampler
is the other, DESIGN §1). It owns its directory (RLinf's ``auto_save_path``) and a
:class:`~bufcore.persist.rlinf.writer.FifoWriter`; the buffer hands it trajectories, index
snapshots and clean-ups, in the order they must reach the disk:

- :meth:`TrajectoryStore.put` serialises a trajectory in the caller's thread and queues its
  file, :meth:`TrajectoryStore.adopt` a link to (or copy of) a file of another directory (a
  loaded checkpoint's), and :meth:`TrajectoryStore.publish` the metadata then the index of a
  snapshot taken by the buffer after queueing the files it names: files reach the disk before
  any index naming them. A trajectory file of :data:`SYNC_LATER_BYTES` or more is renamed
  into place unsynced, its writeback started, and the next publish fsyncs every such file
  written since the last one, then the directory, then renames the index. If such an fsync
  fails, the trajectories whose files were not fsynced are reported lost
  (:meth:`TrajectoryStore.take_failure`). A smaller file is fsynced by its own job, before its
  rename.

Needed by (DESIGN rule 5): the deferred fsync, the bench row ``python -m bench --only rlinf``
(``write``, 17 MB files: an fsync right after each file left the disk idle while the writer
wrote the next, ~0.5x of the batched way here); fsyncing small files at once, its ``memory``
row (``[8, 4]`` trajectories of 133 KB, added 50 at a time: an fsync each costs a journal
commit either way, and deferring them made the adds ~1.7x slower).
- :meth:`TrajectoryStore.read` returns a trajectory file's content, first waiting for its
  write when that is still queued (RLinf raises ``FileNotFoundError`` or reads a partial file
  there, REFERENCE §9.5).
- :meth:`TrajectoryStore.remove` queues deletions, run after the index that stopped naming
  the files.

A failure of a queued job is kept until the buffer takes it (:meth:`TrajectoryStore.take_failure`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bufcore.persist.rlinf.directory import (
    orphans,
    place_file,
    publish_index,
    remove_files,
)
from bufcore.persist.rlinf.layout import Format, IndexEntry, Metadata
from bufcore.persist.rlinf.payload import Serializer, publish_trajectory, read_trajectory
from bufcore.persist.rlinf.writer import FifoWriter
from bufcore.persist.syscalls import fsync_path

SYNC_LATER_BYTES = 1 << 20
"""Trajectory files this large or larger are fsynced by the next index publish, not at once."""


class TrajectoryStore:
    """A buffer directory and its writer thread; see the module docstring.

    Args:
        directory: The directory (created with its parents if missing).
        trajectory_format: The format of the files written (``"pt"`` or ``"pkl"``).
        allow_pickle: Whether ``pkl`` files may be read.
    """

    def __init__(self, directory: Path, trajectory_format: Format, *, allow_pickle: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.trajectory_format: Format = trajectory_format
        self.allow_pickle = allow_pickle
        self._writer = FifoWriter(f"bufcore-trajectory-writer:{directory}")
        self._pending: dict[str, int] = {}  # file name -> the ticket that writes it
        # Files renamed into place but not yet fsynced, and their trajectory ids: touched only
        # by jobs on the writer thread, and by take_failure once a failure has stopped it.
        self._unsynced: deque[tuple[Path, int]] = deque()
        self._unsynced_lost: list[int] = []
        self._serializer = Serializer()

    def put(self, entry: IndexEntry, data: dict[str, Any]) -> None:
        """Serialise ``data`` (here, in the caller's thread: later changes to its tensors do
        not reach the file) and queue the file of ``entry`` holding it."""
        target = self.directory / entry.file_name(self.trajectory_format)
        blob = self._serializer.serialize(data, self.trajectory_format)
        trajectory_id = entry.trajectory_id

        later = len(blob) >= SYNC_LATER_BYTES

        def write() -> None:
            publish_trajectory(target, blob, sync=not later)
            if later:
                self._unsynced.append((target, trajectory_id))
            self._serializer.recycle(blob)

        self._queued(
            target.name,
            self._writer.submit(write, nbytes=len(blob), tag=trajectory_id),
        )

    def adopt(self, source: Path, entry: IndexEntry) -> None:
        """Queue a link to (or copy of) ``entry``'s file in ``source`` into this directory."""
        name = entry.file_name(self.trajectory_format)
        self._queued(
            name,
            self._writer.submit(
                lambda: place_file(source / name, self.directory / name), tag=entry.trajectory_id
            ),
        )

    def publish(self, log: list[IndexEntry], count: int, metadata: Metadata) -> None:
        """Queue the index of the first ``count`` entries of ``log`` and ``metadata``, after
        every file queued so far. The caller may append to ``log`` meanwhile but never changes
        its first ``count`` entries (it makes a new list instead)."""
        directory = self.directory

        def run() -> None:
            self._sync_files()
            publish_index(directory, log[:count], metadata)

        self._writer.submit(run, latest_only=True)

    def remove(self, names: Sequence[str]) -> None:
        """Queue the deletion of these files of the directory."""
        paths = [self.directory / name for name in names]

        def run() -> None:
            gone = set(paths)
            kept = [(path, i) for path, i in self._unsynced if path not in gone]
            self._unsynced = deque(kept)
            remove_files(paths)

        self._writer.submit(run)

    def wait(self, entry: IndexEntry) -> None:
        """Block until the queued write of ``entry``'s file, if any, has finished (whether it
        succeeded is for :meth:`take_failure` to say)."""
        ticket = self._pending.get(entry.file_name(self.trajectory_format))
        if ticket is not None:
            self._writer.wait(ticket)

    def read(self, entry: IndexEntry) -> Any:
        """The content of ``entry``'s file, once its queued write (if any) has run.

        Raises:
            ValueError: the ``pkl`` format without ``allow_pickle``.
            CorruptCheckpointError: the file is missing or damaged (see
                :func:`bufcore.persist.rlinf.payload.read_trajectory`).
        """
        self.wait(entry)
        name = entry.file_name(self.trajectory_format)
        return read_trajectory(
            self.directory, name, self.trajectory_format, allow_pickle=self.allow_pickle
        )

    def flush(self) -> None:
        """Wait for every queued job."""
        self._writer.flush()
        self._pending.clear()

    def take_failure(self) -> tuple[BaseException, list[int]] | None:
        """The first failed job since the last call and the ids whose files never made it
        (see :meth:`bufcore.persist.rlinf.writer.FifoWriter.take_failure`), with those whose
        files were written but could not be fsynced."""
        failure = self._writer.take_failure()
        if failure is None:
            return None
        error, lost = failure
        lost = [*self._unsynced_lost, *lost]
        self._unsynced_lost = []
        return error, lost

    def close(self, *, wait: bool = True) -> None:
        """Let the thread finish the queue and stop; with ``wait``, block until it has."""
        self._writer.close(wait=wait)
        if wait:
            self._pending.clear()

    def orphans(self, named: Sequence[str]) -> list[Path]:
        """Files of the directory no index entry names (call after :meth:`flush`)."""
        return orphans(self.directory, named)

    def _sync_files(self) -> None:
        """fsync the files written since the last publish (on the writer thread). When one
        fails, it and the rest are lost: the failure is raised, and take_failure names them."""
        while self._unsynced:
            path, _ = self._unsynced[0]
            try:
                fsync_path(path)
            except BaseException:
                self._unsynced_lost.extend(i for _, i in self._unsynced)
                self._unsynced.clear()
                raise
            self._unsynced.popleft()

    def _queued(self, name: str, ticket: int) -> None:
        """Record that ``name`` is written by ``ticket``; forget the writes already done."""
        done = self._writer.done
        while self._pending:
            first = next(iter(self._pending))
            if self._pending[first] > done:
                break
            del self._pending[first]
        self._pending.pop(name, None)  # re-inserted last: the dict stays in ticket order
        self._pending[name] = ticket

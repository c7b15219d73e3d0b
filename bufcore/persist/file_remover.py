"""Deleting the files of items that left a buffer, on one background thread (DI-engine's
``UsedDataRemover``, REFERENCE §11.6).

In DI-engine's meta-data mode a buffer holds small items whose ``data_id`` names a file with the
full data; when an item leaves the buffer (overwritten, removed, cleared) its file must go too.
:class:`FileRemover` takes those paths (:meth:`FileRemover.add`) and deletes them in the order
given, on a thread started by :meth:`FileRemover.start`, so a push that overwrites items never
waits for the disk. :meth:`FileRemover.close` deletes whatever is still queued (started or not),
stops the thread and raises the first deletion that failed; :meth:`FileRemover.flush` waits for
the queue to empty without stopping.

A path that is already gone counts as deleted (another process, or the user, got there first).
A path that is a directory, or whose deletion fails otherwise, is recorded and raised by the
next :meth:`~FileRemover.flush` or :meth:`~FileRemover.close`, never silently dropped.

Needed by (DESIGN rule 5): the thread, so that pushes do not wait on deletions:
``tests/buffers/ding/test_meta_data.py::test_files_of_overwritten_items_go_and_live_ones_stay``
(which drains it with ``close()``) and
``tests/persist/test_file_remover.py::test_a_started_remover_deletes_in_the_background``.
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path

from bufcore.checks import check_path


class FileRemover:
    """A FIFO of file paths to delete, emptied by one background thread once started.

    Not thread-safe for several producers beyond what :class:`queue.Queue` gives: one buffer
    adds, its thread deletes.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[Path | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._failures: list[OSError] = []
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        """Whether the background thread is deleting."""
        return self._thread is not None

    @property
    def pending(self) -> int:
        """Paths queued and not yet deleted (approximate while the thread runs)."""
        return self._queue.qsize()

    def add(self, path: str | os.PathLike[str]) -> None:
        """Queue ``path`` for deletion.

        Raises:
            TypeError: ``path`` is not a str or ``os.PathLike``.
            ValueError: ``path`` is empty.
        """
        self._queue.put(check_path(path, "data_id"))

    def start(self) -> None:
        """Start deleting queued paths in the background (nothing happens if already started)."""
        if self._thread is not None:
            return
        thread = threading.Thread(target=self._run, name="bufcore-file-remover", daemon=True)
        thread.start()
        self._thread = thread

    def flush(self) -> None:
        """Wait until every path queued so far is deleted (deleting them here when the thread
        is not running).

        Raises:
            OSError: a deletion failed (the first one; the others are dropped).
        """
        if self._thread is None:
            self._drain()
        else:
            self._queue.join()
        self._raise_failures()

    def close(self) -> None:
        """Delete every queued path, stop the thread (a later :meth:`start` starts a new one).

        Raises:
            OSError: a deletion failed (the first one; the others are dropped). The remover is
                closed all the same.
        """
        thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
        self._drain()
        self._raise_failures()

    # ---------------------------------------------------------------- internals
    def _run(self) -> None:
        while True:
            path = self._queue.get()
            try:
                if path is None:
                    return
                self._delete(path)
            finally:
                self._queue.task_done()

    def _drain(self) -> None:
        while True:
            try:
                path = self._queue.get_nowait()
            except queue.Empty:
                return
            try:
                if path is not None:
                    self._delete(path)
            finally:
                self._queue.task_done()

    def _delete(self, path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            pass  # gone already: what was asked for
        except OSError as err:
            with self._lock:
                self._failures.append(err)

    def _raise_failures(self) -> None:
        with self._lock:
            failures, self._failures = self._failures, []
        if failures:
            first = failures[0]
            more = f" ({len(failures) - 1} more failed)" if len(failures) > 1 else ""
            raise OSError(first.errno, f"deleting a used data file: {first.strerror}{more}",
                          first.filename)

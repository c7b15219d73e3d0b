"""One FIFO writer thread: the disk trajectory buffer's files reach the disk in the order given.

DESIGN §2 decision 8 (RLinf's buffer writes on up to 20 threads since its PR #693, so its
index can name files not yet written, REFERENCE §9.5). :class:`FifoWriter` runs jobs one at a
time, in submission order, on one daemon thread started on the first job:

- A job's *ticket* (1, 2, ...) says when it is done: :meth:`FifoWriter.wait` blocks until
  every job up to a ticket has run (how a read of a trajectory whose file is still queued
  waits for it instead of missing it), :meth:`FifoWriter.flush` until all have.
- A job that raises stops the line: every job after it is dropped, not run, until the owner
  takes the failure (:meth:`FifoWriter.take_failure`), which also drops what is still queued
  and returns the exception with the *tags* (trajectory ids) of the file jobs that never
  completed. So an index queued after a failed file is never published, and the owner learns
  exactly which trajectories did not reach the disk.
- A job marked ``latest_only`` (an index publish) is skipped when a later such job is already
  queued, unless none has run for ``latest_every_s``: the later one publishes a newer index
  after the same files and more, and under a steady stream of adds an index still reaches the
  disk at least that often (skipping every one would leave files no index names).
- Queued jobs may hold at most ``max_pending_bytes`` of payload: :meth:`FifoWriter.submit`
  blocks beyond that (a writer slower than its producer bounds memory instead of growing it).
- At interpreter exit, every live writer runs what is queued (an ``atexit`` hook), so a
  process that ends without ``close()`` still leaves whole files and a matching index.

Needed by (DESIGN rule 5): the thread and FIFO order, ``tests/persist/test_fifo_writer.py``
and ``tests/buffers/rlinf/test_crash_safety.py`` (the index names only complete files);
the drop-after-failure and the tags, ``tests/buffers/rlinf/test_writer_failures.py``; the
skipping and its interval, ``tests/persist/test_fifo_writer.py::test_a_latest_only_job_is_
skipped_when_a_later_one_is_queued`` and ``::test_latest_only_jobs_still_run_once_per_interval_
under_a_steady_stream``; the byte
bound, ``tests/persist/test_fifo_writer.py::test_submit_blocks_while_the_queued_bytes_exceed_
the_bound``; the exit hook, ``tests/buffers/rlinf/test_disk_buffer.py::test_a_process_ending_
without_close_leaves_every_queued_trajectory_on_disk``.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from bufcore.checks import check_int, check_real

DEFAULT_PENDING_BYTES = 256 << 20
DEFAULT_LATEST_EVERY_S = 0.5


@dataclass(frozen=True)
class _Job:
    ticket: int
    run: Callable[[], None]
    nbytes: int
    tag: int | None
    latest_only: bool


class FifoWriter:
    """Runs submitted jobs one at a time, in order, on one background thread.

    Args:
        name: The thread's name.
        max_pending_bytes: The payload bytes queued jobs may hold before :meth:`submit` waits.
        latest_every_s: The longest a ``latest_only`` job is skipped for a later one.

    Raises:
        TypeError: ``max_pending_bytes`` is not an int.
        ValueError: ``max_pending_bytes < 1`` or ``latest_every_s < 0``.
    """

    def __init__(
        self,
        name: str,
        *,
        max_pending_bytes: int = DEFAULT_PENDING_BYTES,
        latest_every_s: float = DEFAULT_LATEST_EVERY_S,
    ) -> None:
        self.name = name
        self.max_pending_bytes = check_int(max_pending_bytes, "max_pending_bytes", minimum=1)
        self.latest_every_s = check_real(latest_every_s, "latest_every_s", minimum=0.0)
        self._latest_ran = -float("inf")  # the first one is never skipped
        self._cond = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._issued = 0  # the last ticket handed out
        self._done = 0  # every ticket up to this one has run, been skipped or dropped
        self._pending_bytes = 0
        self._latest_queued = 0  # latest_only jobs in the queue
        self._failure: BaseException | None = None
        self._lost: list[int] = []
        self._thread: threading.Thread | None = None
        self._stopping = False
        _LIVE.add(self)

    # ------------------------------------------------------------------ the owner's side
    @property
    def done(self) -> int:
        """Every job up to this ticket is finished (run, skipped or dropped)."""
        return self._done

    @property
    def pending_bytes(self) -> int:
        """Payload bytes held by queued jobs."""
        return self._pending_bytes

    def submit(
        self,
        run: Callable[[], None],
        *,
        nbytes: int = 0,
        tag: int | None = None,
        latest_only: bool = False,
    ) -> int:
        """Queue ``run`` (waiting while the queue holds too many bytes); its ticket.

        Args:
            run: The job.
            nbytes: Payload bytes it holds until it has run.
            tag: Reported by :meth:`take_failure` if the job never completes.
            latest_only: Skip it when a later ``latest_only`` job is queued by then.
        """
        with self._cond:
            self._stopping = False
            self._start()
            while self._queue and self._pending_bytes + nbytes > self.max_pending_bytes:
                self._cond.wait()
            self._issued += 1
            self._queue.append(_Job(self._issued, run, nbytes, tag, latest_only))
            self._pending_bytes += nbytes
            self._latest_queued += latest_only
            self._cond.notify_all()
            return self._issued

    def wait(self, ticket: int) -> None:
        """Block until every job up to ``ticket`` is finished (see :meth:`take_failure` for
        whether they succeeded)."""
        with self._cond:
            if ticket > self._done:
                self._start()
            while self._done < ticket:
                self._cond.wait()

    def flush(self) -> None:
        """Block until every job submitted so far is finished."""
        self.wait(self._issued)

    def take_failure(self) -> tuple[BaseException, list[int]] | None:
        """The first failure since the last call, with the tags of every job that did not
        complete (the failed one, those dropped after it, and those still queued, which are
        dropped now); None when nothing failed. Later jobs run again."""
        with self._cond:
            if self._failure is None:
                return None
            while self._queue:
                job = self._queue.popleft()
                self._latest_queued -= job.latest_only
                self._finish(job, lost=True)
            failure, lost = self._failure, self._lost
            self._failure, self._lost = None, []
            self._cond.notify_all()
            return failure, lost

    def close(self, *, wait: bool = True) -> None:
        """Stop the thread once the queue is empty; with ``wait``, block until then. A later
        :meth:`submit` starts a new thread."""
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify_all()
        if wait and thread is not None:
            thread.join()

    # ------------------------------------------------------------------ the thread
    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    self._thread = None
                    self._cond.notify_all()
                    return
                job = self._queue.popleft()
                self._latest_queued -= job.latest_only
                if self._failure is not None:  # the line is stopped: drop it
                    self._finish(job, lost=True)
                    continue
                skip = (
                    job.latest_only
                    and self._latest_queued > 0
                    and time.monotonic() - self._latest_ran < self.latest_every_s
                )
            failure: BaseException | None = None
            if not skip:
                if job.latest_only:
                    self._latest_ran = time.monotonic()
                try:
                    job.run()
                except BaseException as err:  # handed to the owner by take_failure
                    failure = err
            with self._cond:
                if failure is not None:
                    self._failure = failure
                self._finish(job, lost=failure is not None)

    def _finish(self, job: _Job, *, lost: bool) -> None:
        """Mark ``job`` finished (the lock is held; it has left the queue)."""
        if lost and job.tag is not None:
            self._lost.append(job.tag)
        self._pending_bytes -= job.nbytes
        self._done = max(self._done, job.ticket)
        self._cond.notify_all()


_LIVE: weakref.WeakSet[FifoWriter] = weakref.WeakSet()


@atexit.register
def _finish_at_exit() -> None:
    """Run what every live writer has queued before the interpreter goes."""
    for writer in list(_LIVE):
        writer.flush()
        failure = writer.take_failure()
        if failure is not None:
            err, lost = failure
            print(
                f"bufcore: {writer.name}: a queued write failed at exit ({err!r}); "
                f"trajectories {lost} were not written",
                file=sys.stderr,
            )

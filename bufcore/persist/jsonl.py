"""Line files that one process appends to while others tail them (a run's ``metrics.jsonl``).

The bytes only; what a line means is :mod:`bufcore.runs.runlog`'s business.

- :class:`LineAppender` writes each line, newline last, with one ``write`` call on a descriptor
  opened with ``O_APPEND`` and no buffer in between, so every line reaches the kernel (and any
  reader) as soon as it is written. A reader may catch a line half copied, but never sees its
  newline before the rest of it, so "complete" (ends with a newline) means "whole".
- :func:`read_lines` reads the complete lines from a byte offset on. A trailing line without its
  newline is left for the next call. One writer per file is assumed.

A last line without its newline is either still being written or *torn*: its writer stopped
mid-line (killed, a crash, a writer other than :class:`LineAppender` that wrote part of a line).
The two are told apart by a lock: every :class:`LineAppender` holds a shared ``flock`` on its
file while it is open, and :func:`read_lines` reports the line torn only when it can take an
exclusive one, that is when no appender has the file open. A resumed appender (``fresh=False``)
closes a torn line off with a newline; it is then an ordinary complete line.

A new run replaces the file (``fresh=True``): a new, empty file is renamed over the old one, so a
reader holding an old offset finds the file shorter than that offset, or finds that the byte
before its offset is not a newline, and :func:`read_lines` reports a restart. A new run that has
already written past the old offset with a newline exactly at that place goes unnoticed; its first
line is then read from the middle (and is reported as invalid by the record layer).

What needs each mechanism (DESIGN rule 5): one unbuffered ``O_APPEND`` write per line and the
restart check of :func:`read_lines`: ``tests/runs/test_tailing.py`` (every record once, in order,
never torn, across a new run; README Guarantees); the cut-off of a half-failed write:
``tests/persist/test_jsonl.py::test_a_write_that_fails_halfway_removes_the_part_written``; the
line limit: ``::test_write_line_refuses_a_line_longer_than_readers_accept``; the shared lock an
open appender holds (a torn last line is reported only once no writer has the file open):
``tests/runs/test_runlog.py`` and ``tests/persist/test_jsonl.py``; cutting a log back to a
prefix in one rename (:func:`keep_prefix`, a resumed run drops what its killed predecessor logged
past its checkpoint): ``tests/runs/test_resume.py`` (README "Resume a run").
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from bufcore.persist.atomic import publish_file

# A line longer than this (newline excluded) is skipped by readers and refused by writers: a
# reader must not hold a line that never ends.
MAX_LINE_BYTES = 16 * 2**20
# Bytes of complete lines one read_lines call returns, about (it finishes the line it is in).
MAX_READ_BYTES = 8 * 2**20
_BLOCK = 2**20


class LineAppender:
    """Appends whole lines to a file, each with one unbuffered ``write``.

    Args:
        path: The file. Missing parent directories are created.
        fresh: True: start a new, empty file, replacing any file at ``path`` (renamed over it,
            so a reader tailing the old one sees a new file). False: append to the file at
            ``path`` (created if missing); if its last line was torn (no newline, a writer
            killed mid-line), a newline is written first so the torn line stays one line of its
            own, which readers report and skip, instead of gluing it to the next.

    While open, the appender holds a shared ``flock`` on the file: readers take it as the sign
    that a last line without its newline is still being written, not torn.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        FileExistsError: a parent of ``path`` is a file.
    """

    def __init__(self, path: Path, *, fresh: bool) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_APPEND | os.O_CLOEXEC
        if fresh:
            # The descriptor is opened on the staging file, which then becomes ``path``.
            created: list[int] = []

            def create(staging: Path) -> None:
                created.append(os.open(staging, flags | os.O_CREAT | os.O_EXCL, 0o666))
                fcntl.flock(created[0], fcntl.LOCK_SH)  # held before a reader can see the file

            try:
                publish_file(path, create)
            except BaseException:
                for fd in created:
                    os.close(fd)
                raise
            self._fd: int | None = created[0]
        else:
            self._fd = os.open(path, flags | os.O_CREAT, 0o666)
            try:
                fcntl.flock(self._fd, fcntl.LOCK_SH)
                size = os.fstat(self._fd).st_size
                if size and os.pread(self._fd, 1, size - 1) != b"\n":
                    self._write(b"\n")
            except BaseException:
                self.close()
                raise

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._fd is None

    def write_line(self, line: bytes) -> None:
        """Append ``line``, which ends with its only newline.

        On a failed write (a full disk, a file size limit) the bytes of this line that did land
        are cut off again, so the file ends with the last whole line, as before the call.

        Raises:
            ValueError: the appender is closed, ``line`` does not end with its only newline, or
                it is longer than :data:`MAX_LINE_BYTES`.
            OSError: the write failed.
        """
        if not line.endswith(b"\n") or line.find(b"\n") != len(line) - 1:
            raise ValueError("line: expected bytes ending with their only newline")
        if len(line) - 1 > MAX_LINE_BYTES:
            raise ValueError(
                f"line: {len(line) - 1} bytes is longer than readers accept "
                f"({MAX_LINE_BYTES} bytes)"
            )
        self._write(line)

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            raise ValueError(f"{self.path}: the appender is closed")
        fd = self._fd
        view = memoryview(data)
        written = 0
        try:
            # One call writes it all on a local file; the loop covers a short write.
            while written < len(data):
                written += os.write(fd, view[written:])
        except BaseException:
            if written:
                # With O_APPEND the position is the end of what this call wrote.
                os.ftruncate(fd, os.lseek(fd, 0, os.SEEK_CUR) - written)
            raise

    def close(self) -> None:
        """fsync and close the file (so the log survives a system crash); idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


@dataclass(frozen=True)
class Line:
    """One complete line: ``[start, end)`` in the file (newline included) and its bytes without
    the newline, or None when it is longer than the limit and was skipped unread."""

    start: int
    end: int
    data: bytes | None


@dataclass(frozen=True)
class Tail:
    """What :func:`read_lines` found.

    Attributes:
        lines: The complete lines, in file order.
        end: The offset after the last complete line (the next call's ``offset``).
        restarted: The file is shorter than the offset asked for, or the byte before that
            offset is not a newline: it was replaced (a new run). ``lines`` is empty and
            ``end`` is 0.
        first_line: The 1-based line number of ``lines[0]`` when the read started at byte 0,
            else None (the number of lines before the offset is not known).
        torn: The read reached the end of the file, which ends in a line without its newline
            (starting at ``end``), and no :class:`LineAppender` has the file open: its writer
            stopped mid-line.
    """

    lines: list[Line] = field(default_factory=list)
    end: int = 0
    restarted: bool = False
    first_line: int | None = None
    torn: bool = False


def read_lines(
    path: Path,
    offset: int,
    *,
    max_bytes: int = MAX_READ_BYTES,
    max_line: int = MAX_LINE_BYTES,
) -> Tail:
    """The complete lines of ``path`` from byte ``offset`` on.

    Reads until about ``max_bytes`` of complete lines are found (the line under way is
    finished), or the end of the file. A line longer than ``max_line`` bytes is passed over
    without being held (its ``data`` is None); if the file ends inside it, it is left for a later
    call like any line still being written. A last line without its newline is never returned;
    :attr:`Tail.torn` says whether it is torn (no appender has the file open). A missing file has
    no lines (and means a restart if ``offset`` is not 0: the run was removed).

    Raises:
        ValueError: ``path`` exists but is not a regular file (a directory, a FIFO, a
            symbolic link, ...).
        OSError: the file cannot be read.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked next.
        # O_NOFOLLOW: a log that is a link could point anywhere (outside a dashboard's roots).
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        return Tail(restarted=offset > 0)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ValueError(
                f"path: {path} is a symbolic link; only a run's own log is read"
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"path: {path} is not a regular file")
        if offset > info.st_size or (offset > 0 and os.pread(fd, 1, offset - 1) != b"\n"):
            return Tail(restarted=True)
        return _complete_lines(fd, offset, max_bytes, max_line)
    finally:
        os.close(fd)


def _complete_lines(fd: int, offset: int, max_bytes: int, max_line: int) -> Tail:
    lines: list[Line] = []
    first_line = 1 if offset == 0 else None
    pending = bytearray()  # the line under way, unless it is too long (then dropped)
    too_long = False
    consumed = position = offset
    while True:
        # Up to the budget; past it (finishing the line under way) a block at a time.
        budget_left = offset + max_bytes - position
        block = os.pread(fd, min(_BLOCK, budget_left) if budget_left > 0 else _BLOCK, position)
        if not block:
            torn = position > consumed and not _held_by_appender(fd)
            return Tail(lines, consumed, first_line=first_line, torn=torn)
        block_start = position
        position += len(block)
        start = 0
        while (newline := block.find(b"\n", start)) != -1:
            piece = block[start:newline]
            end = block_start + newline + 1
            fits = not too_long and len(pending) + len(piece) <= max_line
            lines.append(Line(consumed, end, bytes(pending + piece) if fits else None))
            pending.clear()
            too_long = False
            consumed, start = end, newline + 1
            if consumed - offset >= max_bytes:
                return Tail(lines, consumed, first_line=first_line)
        if not too_long:
            pending += block[start:]
            if len(pending) > max_line:
                too_long = True
                pending.clear()


def _held_by_appender(fd: int) -> bool:
    """Whether a :class:`LineAppender` has the file of ``fd`` open (it holds a shared lock)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def appender_holds(path: Path) -> bool:
    """Whether a :class:`LineAppender` (a running writer) has the file at ``path`` open; False
    when there is no such file. Needed by ``tests/runs/test_resume.py::
    test_a_run_still_writing_its_log_is_not_resumed`` (a resume never cuts a live run's log)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return _held_by_appender(fd)
    finally:
        os.close(fd)


def keep_prefix(path: Path, end: int) -> None:
    """Replace the file at ``path`` by its first ``end`` bytes (whole lines) in one rename, so a
    reader tailing it sees a new file and reads it again from the start.

    Raises:
        ValueError: ``end`` is negative, beyond the file, or does not follow a newline.
        OSError: the file cannot be read or the copy written.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        size = os.fstat(fd).st_size
        if end < 0 or end > size or (end > 0 and os.pread(fd, 1, end - 1) != b"\n"):
            raise ValueError(f"end: {end} is not the end of a whole line of {path} ({size} bytes)")

        def write(staging: Path) -> None:
            out = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            try:
                done = 0
                while done < end:
                    block = os.pread(fd, min(_BLOCK, end - done), done)
                    if not block:
                        raise OSError(f"{path}: shorter than {end} bytes while copied")
                    view = memoryview(block)
                    while view:  # a short write goes on where it stopped
                        view = view[os.write(out, view):]
                    done += len(block)
            finally:
                os.close(out)

        publish_file(path, write)
    finally:
        os.close(fd)

"""Line files: whole-line appends, and a reader that returns complete lines from an offset."""

from __future__ import annotations

import os
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from bufcore.persist.jsonl import MAX_LINE_BYTES, LineAppender, read_lines


@pytest.fixture
def appender(tmp_path: Path) -> Iterator[LineAppender]:
    writer = LineAppender(tmp_path / "log.jsonl", fresh=True)
    yield writer
    writer.close()


def datas(path: Path, offset: int = 0, **limits: int) -> list[bytes | None]:
    return [line.data for line in read_lines(path, offset, **limits).lines]


# ------------------------------------------------------------------------------ the writer
def test_a_fresh_appender_replaces_the_old_file_with_a_new_empty_one(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"old\n")
    old_inode = path.stat().st_ino
    LineAppender(path, fresh=True).close()
    assert path.read_bytes() == b""
    assert path.stat().st_ino != old_inode
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]


def test_an_appender_that_is_not_fresh_keeps_the_lines_already_there(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"one\n")
    with_old = LineAppender(path, fresh=False)
    with_old.write_line(b"two\n")
    with_old.close()
    assert path.read_bytes() == b"one\ntwo\n"


def test_appending_after_a_torn_last_line_ends_that_line_first(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"one\ntor")
    resumed = LineAppender(path, fresh=False)
    resumed.write_line(b"two\n")
    resumed.close()
    assert datas(path) == [b"one", b"tor", b"two"]


@pytest.mark.parametrize("fresh", [True, False])
def test_the_appender_creates_missing_parent_directories(tmp_path: Path, fresh: bool) -> None:
    LineAppender(tmp_path / "a" / "b" / "log.jsonl", fresh=fresh).close()
    assert (tmp_path / "a" / "b" / "log.jsonl").read_bytes() == b""


def test_a_written_line_is_in_the_file_before_write_line_returns(
    appender: LineAppender,
) -> None:
    appender.write_line(b"one\n")
    assert appender.path.read_bytes() == b"one\n"


@pytest.mark.parametrize("line", [b"no newline", b"two\nlines\n", b"\nlate\n", b""])
def test_write_line_refuses_bytes_that_are_not_one_line_and_writes_nothing(
    appender: LineAppender, line: bytes
) -> None:
    appender.write_line(b"kept\n")
    with pytest.raises(ValueError, match="ending with their only newline"):
        appender.write_line(line)
    assert appender.path.read_bytes() == b"kept\n"


def test_write_line_refuses_a_line_longer_than_readers_accept(appender: LineAppender) -> None:
    with pytest.raises(ValueError, match="longer than readers accept"):
        appender.write_line(b"x" * (MAX_LINE_BYTES + 1) + b"\n")
    assert appender.path.read_bytes() == b""


def test_a_line_of_exactly_the_limit_is_written_and_read_back(appender: LineAppender) -> None:
    appender.write_line(b"x" * MAX_LINE_BYTES + b"\n")
    assert datas(appender.path) == [b"x" * MAX_LINE_BYTES]


def test_a_write_that_fails_halfway_removes_the_part_written(appender: LineAppender) -> None:
    appender.write_line(b"kept\n")
    # A file size limit lets the next write land in part, then fails it (EFBIG).
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (8, hard))
    try:
        with pytest.raises(OSError):
            appender.write_line(b"0123456789\n")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert appender.path.read_bytes() == b"kept\n"
    appender.write_line(b"next\n")
    assert datas(appender.path) == [b"kept", b"next"]


def test_writing_after_close_is_refused_and_close_is_idempotent(appender: LineAppender) -> None:
    appender.close()
    appender.close()
    assert appender.closed
    with pytest.raises(ValueError, match="closed"):
        appender.write_line(b"late\n")


# ------------------------------------------------------------------------------ the reader
def test_read_lines_returns_the_complete_lines_and_the_offset_after_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\nbb\n\nccc\n")
    tail = read_lines(path, 0)
    assert [(line.start, line.end, line.data) for line in tail.lines] == [
        (0, 2, b"a"),
        (2, 5, b"bb"),
        (5, 6, b""),
        (6, 10, b"ccc"),
    ]
    assert (tail.end, tail.restarted) == (10, False)


def test_read_lines_from_an_offset_returns_only_the_lines_after_it(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\nbb\nccc\n")
    tail = read_lines(path, 5)
    assert ([line.data for line in tail.lines], tail.end) == ([b"ccc"], 9)


def test_a_last_line_without_its_newline_waits_for_the_next_call(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\nhal")
    first = read_lines(path, 0)
    assert ([line.data for line in first.lines], first.end) == ([b"a"], 2)
    with path.open("ab") as file:
        file.write(b"f\n")
    second = read_lines(path, first.end)
    assert ([line.data for line in second.lines], second.end) == ([b"half"], 7)


@pytest.mark.parametrize("offset", [0, 2])
def test_a_last_line_without_its_newline_is_torn_when_no_appender_has_the_file_open(
    tmp_path: Path, offset: int
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\nhal")
    tail = read_lines(path, offset)
    assert (tail.end, tail.torn) == (2, True)


@pytest.mark.parametrize("fresh", [True, False])
def test_a_last_line_without_its_newline_is_not_torn_while_an_appender_has_the_file_open(
    tmp_path: Path, fresh: bool
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\n")
    with_writer = LineAppender(path, fresh=fresh)
    try:
        with path.open("ab") as file:
            file.write(b"hal")  # the writer's own line, caught half copied
        assert read_lines(path, 0).torn is False
    finally:
        with_writer.close()
    assert read_lines(path, 0).torn is True


def test_a_file_ending_with_a_newline_has_no_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\n")
    assert read_lines(path, 0).torn is False


def test_a_file_at_the_offset_has_no_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\n")
    tail = read_lines(path, 2)
    assert (tail.lines, tail.end, tail.restarted) == ([], 2, False)


def test_a_file_shorter_than_the_offset_is_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\n")
    tail = read_lines(path, 3)
    assert (tail.lines, tail.end, tail.restarted) == ([], 0, True)


def test_an_offset_that_does_not_follow_a_newline_is_a_restart(tmp_path: Path) -> None:
    # A new run wrote past the old offset before the reader looked again.
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a new run's longer line\n")
    tail = read_lines(path, 2)
    assert (tail.lines, tail.end, tail.restarted) == ([], 0, True)


@pytest.mark.parametrize(("offset", "restarted"), [(0, False), (5, True)])
def test_a_missing_file_has_no_lines_and_is_a_restart_past_offset_0(
    tmp_path: Path, offset: int, restarted: bool
) -> None:
    tail = read_lines(tmp_path / "missing.jsonl", offset)
    assert (tail.lines, tail.end, tail.restarted) == ([], 0, restarted)


@pytest.mark.parametrize("max_bytes", [1, 2, 3, 7, 64])
def test_read_lines_stops_after_about_max_bytes_and_the_next_call_goes_on(
    tmp_path: Path, max_bytes: int
) -> None:
    path = tmp_path / "log.jsonl"
    lines = [b"x" * (i % 5) for i in range(40)]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    offset, read, calls = 0, [], 0
    while offset < path.stat().st_size:
        tail = read_lines(path, offset, max_bytes=max_bytes)
        # At most max_bytes, plus the rest of the line under way when the budget ran out.
        assert tail.end - offset < max_bytes + 6
        read += [line.data for line in tail.lines]
        offset, calls = tail.end, calls + 1
    assert read == lines
    assert calls > 1


@pytest.mark.parametrize("max_line", [1, 2, 3, 10])
def test_a_line_longer_than_max_line_is_passed_over_unread(
    tmp_path: Path, max_line: int
) -> None:
    path = tmp_path / "log.jsonl"
    long = b"y" * (max_line + 1)
    path.write_bytes(b"a\n" + long + b"\nb\n")
    # max_bytes=3: the budget runs out inside the long line, so the call ends after it.
    tail = read_lines(path, 0, max_line=max_line, max_bytes=3)
    found = [(line.start, line.end, line.data) for line in tail.lines]
    assert found == [(0, 2, b"a"), (2, 3 + len(long), None)]


def test_a_long_line_still_being_written_is_left_for_a_later_call(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\n" + b"y" * 50)
    tail = read_lines(path, 0, max_line=10)
    assert ([line.data for line in tail.lines], tail.end) == ([b"a"], 2)


@pytest.mark.parametrize(("offset", "first_line"), [(0, 1), (2, None)])
def test_line_numbers_are_known_only_when_reading_from_the_start(
    tmp_path: Path, offset: int, first_line: int | None
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"a\nb\n")
    assert read_lines(path, offset).first_line == first_line


def test_read_lines_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a regular file"):
        read_lines(tmp_path, 0)


def test_read_lines_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ValueError, match="not a regular file"):
        read_lines(tmp_path / "pipe", 0)

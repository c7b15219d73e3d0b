"""FifoWriter: one thread, jobs in order, waits by ticket, failures stop the line until taken."""

from __future__ import annotations

import threading
import time

import pytest

from bufcore.persist.rlinf.writer import FifoWriter

GUARD_S = 30.0


def test_jobs_run_in_submission_order_on_one_background_thread() -> None:
    writer = FifoWriter("w")
    ran: list[tuple[int, int]] = []
    for number in range(50):
        writer.submit(lambda n=number: ran.append((n, threading.get_ident())))
    writer.flush()
    assert [n for n, _ in ran] == list(range(50))
    assert {ident for _, ident in ran} - {threading.get_ident()} == {ran[0][1]}
    writer.close()


def test_wait_blocks_until_the_job_of_that_ticket_has_run() -> None:
    writer = FifoWriter("w")
    gate = threading.Event()
    ran: list[str] = []
    writer.submit(lambda: gate.wait(GUARD_S))
    ticket = writer.submit(lambda: ran.append("second"))
    threading.Timer(0.05, gate.set).start()
    writer.wait(ticket)
    assert ran == ["second"]
    writer.close()


def test_a_failure_drops_every_later_job_and_reports_their_tags() -> None:
    writer = FifoWriter("w")
    gate = threading.Event()
    ran: list[int] = []
    writer.submit(lambda: gate.wait(GUARD_S), tag=0)
    writer.submit(lambda: ran.append(1), tag=1)

    def fail() -> None:
        raise OSError(28, "No space left on device")

    writer.submit(fail, tag=2)
    writer.submit(lambda: ran.append(3), tag=3)
    writer.submit(lambda: ran.append(4))  # no tag: nothing to report
    gate.set()
    writer.flush()
    failure = writer.take_failure()
    assert failure is not None
    error, lost = failure
    assert isinstance(error, OSError) and error.errno == 28
    assert (ran, lost) == ([1], [2, 3])
    assert writer.take_failure() is None
    writer.submit(lambda: ran.append(5))
    writer.flush()
    assert ran == [1, 5]
    writer.close()


def test_taking_a_failure_drops_the_jobs_still_queued() -> None:
    writer = FifoWriter("w")
    failed = threading.Event()

    def fail() -> None:
        failed.set()
        raise RuntimeError("boom")

    writer.submit(fail, tag=1)
    failed.wait(GUARD_S)
    writer.submit(lambda: None, tag=2)  # queued after the failure, before it was taken
    failure = writer.take_failure()
    writer.flush()
    assert failure is not None and sorted(failure[1]) == [1, 2]


def test_a_latest_only_job_is_skipped_when_a_later_one_is_queued() -> None:
    writer = FifoWriter("w", latest_every_s=GUARD_S)
    gate = threading.Event()
    ran: list[str] = []
    writer.submit(lambda: ran.append("index 0"), latest_only=True)  # the first always runs
    writer.flush()
    writer.submit(lambda: gate.wait(GUARD_S))
    writer.submit(lambda: ran.append("index 1"), latest_only=True)
    writer.submit(lambda: ran.append("file"))
    writer.submit(lambda: ran.append("index 2"), latest_only=True)
    gate.set()
    writer.flush()
    assert ran == ["index 0", "file", "index 2"]
    writer.close()


def test_submit_blocks_while_the_queued_bytes_exceed_the_bound() -> None:
    writer = FifoWriter("w", max_pending_bytes=100)
    gate = threading.Event()
    writer.submit(lambda: gate.wait(GUARD_S), nbytes=60)
    writer.submit(lambda: None, nbytes=30)
    started = time.monotonic()
    threading.Timer(0.2, gate.set).start()
    writer.submit(lambda: None, nbytes=30)  # 120 > 100: waits for the first job
    assert gate.is_set()
    assert time.monotonic() - started > 0.1
    writer.flush()
    assert writer.pending_bytes == 0
    writer.close()


def test_a_job_larger_than_the_bound_still_runs_alone() -> None:
    writer = FifoWriter("w", max_pending_bytes=10)
    ran: list[int] = []
    writer.submit(lambda: ran.append(1), nbytes=1000)
    writer.flush()
    assert ran == [1]
    writer.close()


def test_a_closed_writer_starts_again_on_the_next_job() -> None:
    writer = FifoWriter("w")
    ran: list[int] = []
    writer.submit(lambda: ran.append(1))
    writer.close(wait=False)
    writer.submit(lambda: ran.append(2))
    writer.flush()
    writer.close()
    assert ran == [1, 2]


@pytest.mark.parametrize("bound", [0, -5])
def test_the_byte_bound_must_be_positive(bound: int) -> None:
    with pytest.raises(ValueError, match="max_pending_bytes"):
        FifoWriter("w", max_pending_bytes=bound)


def test_latest_only_jobs_still_run_once_per_interval_under_a_steady_stream() -> None:
    writer = FifoWriter("w", latest_every_s=0.05)
    ran: list[int] = []
    for number in range(40):
        writer.submit(lambda: time.sleep(0.01))  # a file write
        writer.submit(lambda n=number: ran.append(n), latest_only=True)
    writer.flush()
    writer.close()
    assert ran[-1] == 39
    assert 3 <= len(ran) < 40

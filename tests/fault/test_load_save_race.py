"""A load that overlaps saves of the same path returns one whole checkpoint, never a mix.

Two saver processes write generations to one path as fast as they can (every part of a
generation, config.json's cursor, state.json's seed and every row, says which one it is) while
this process loads it again and again. Each load must hold a single generation.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from bufcore import DictBuffer
from bufcore.errors import CorruptCheckpointError
from tests.fault.test_crash_safety import Writer, generation_of, wait_until_logged, writer

__all__ = ["writer"]  # the fixture, used by name

LOADS = 30
TIME_LIMIT_S = 20.0


def test_loads_racing_two_savers_of_the_same_path_never_return_a_mixed_buffer(
    tmp_path: Path, writer: Writer
) -> None:
    path = tmp_path / "ckpt"
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    savers = [writer.start_loop(path, logs[0], 1), writer.start_loop(path, logs[1], 1_000_001)]
    try:
        wait_until_logged(logs[0], 1, writer)
        wait_until_logged(logs[1], 1_000_001, writer)
        seen, refused = set(), []
        deadline = time.monotonic() + TIME_LIMIT_S
        while len(seen) + len(refused) < LOADS and time.monotonic() < deadline:
            try:
                buffer = DictBuffer.load(path)
            except CorruptCheckpointError as err:  # acceptable only as a swap seen too often
                refused.append(err)
                continue
            seen.add(generation_of(buffer))  # fails on a mix
    finally:
        for pid in savers:
            os.kill(pid, signal.SIGKILL)
            writer.assert_killed(pid)
    assert not refused, f"{len(refused)} loads refused, e.g. {refused[0]}"
    assert len(seen) > 1, f"every load saw generation {seen}: the saves never overlapped them"

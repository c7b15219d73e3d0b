"""A checkpoint path holds a whole checkpoint whatever moment its writer dies or fails at.

The killing tests drive ``checkpoint_writer.py`` (one process that imported bufcore once and
forks savers on demand) and SIGKILL the savers at random moments or at chosen points.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import Any

import pytest
import torch

import bufcore.persist.atomic
import bufcore.persist.checkpoint.write
from bufcore import DictBuffer
from tests.fault.checkpoint_writer import CAPACITY, KILL_POINTS, generation, rows_of

WRITER = Path(__file__).with_name("checkpoint_writer.py")
REPO = WRITER.parents[2]
KILLS = 40
MAX_DELAY_S = 0.08
HANG_GUARD_S = 60.0


class Writer:
    """Client of one ``checkpoint_writer.py`` process."""

    def __init__(self, stderr: Path) -> None:
        self.stderr = stderr
        self._stderr_file = stderr.open("w")
        self._children: set[int] = set()
        paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        self._process = subprocess.Popen(
            [sys.executable, str(WRITER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr_file,
            text=True,
            cwd=REPO,
            env=env,
        )

    def _ask(self, *words: object) -> int:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(" ".join(map(str, words)) + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        assert answer, f"the writer process died:\n{self.stderr.read_text()}"
        return int(answer)

    def start_loop(self, path: Path, log: Path, first: int) -> int:
        """Fork a saver of generations ``first, first + 1, ...``; its pid."""
        pid = self._ask("loop", path, log, first)
        self._children.add(pid)
        return pid

    def start_dying_save(self, path: Path, point: str, k: int) -> int:
        """Fork a saver of generation ``k`` that kills itself at ``point``; its pid."""
        pid = self._ask("die", path, point, k)
        self._children.add(pid)
        return pid

    def reap(self, pid: int) -> int:
        """Wait for a forked saver to end; its wait status."""
        self._children.discard(pid)
        return self._ask("reap", pid)

    def assert_killed(self, pid: int) -> None:
        status = self.reap(pid)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
            f"saver {pid} ended with status {status}, not by SIGKILL:\n{self.stderr.read_text()}"
        )

    def close(self) -> None:
        """Kill savers a failed test left running, then end the writer process."""
        for pid in sorted(self._children):
            os.kill(pid, signal.SIGKILL)
            self.reap(pid)
        self._process.communicate(timeout=HANG_GUARD_S)  # closes stdin: the command loop ends
        self._stderr_file.close()


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Writer]:
    process = Writer(tmp_path_factory.mktemp("writer") / "stderr.txt")
    yield process
    process.close()


def logged(log: Path) -> list[int]:
    return [int(word) for word in log.read_text().split()] if log.exists() else []


def wait_until_logged(log: Path, k: int, writer: Writer) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while k not in logged(log):
        assert time.monotonic() < deadline, f"save {k} never finished:\n{writer.stderr.read_text()}"
        time.sleep(0.001)


def generation_of(buffer: DictBuffer) -> int:
    """The single generation every part of ``buffer`` agrees on (fails on a mix)."""
    k = buffer.seed
    assert isinstance(k, int), f"state.json holds seed {k!r}"
    rows = rows_of(k)
    expected = (rows, rows % CAPACITY, rows == CAPACITY, CAPACITY)
    assert (len(buffer), buffer.cursor, buffer.is_full, buffer.capacity) == expected
    storage = buffer.storage
    assert storage is not None
    leaves = {
        "observation.state": storage["observation"]["state"][:rows],
        "observation.deep.x": storage["observation"]["deep"]["x"][:rows],
        "action": storage["action"][:rows],
    }
    for name, leaf in leaves.items():
        assert torch.all(leaf == k), f"{name} holds {leaf.unique().tolist()}, seed says {k}"
    assert torch.all(storage["terminated"][:rows] == (k % 2 == 1))
    return k


def assert_holds_generation(path: Path, k: int) -> None:
    assert generation_of(DictBuffer.load(path)) == k


def test_a_saver_killed_at_random_moments_always_leaves_the_last_finished_checkpoint(
    tmp_path: Path, writer: Writer
) -> None:
    path, log = tmp_path / "ckpt", tmp_path / "saved.log"
    rng = random.Random(1234)
    first = 1
    for kill in range(KILLS):
        pid = writer.start_loop(path, log, first)
        wait_until_logged(log, first, writer)
        time.sleep(rng.uniform(0.0, MAX_DELAY_S))
        os.kill(pid, signal.SIGKILL)
        writer.assert_killed(pid)

        last = logged(log)[-1]
        k = generation_of(DictBuffer.load(path))
        # The last logged save, or the next one: published, killed before it was logged.
        assert k in (last, last + 1), f"kill {kill}: loaded generation {k}, last logged {last}"
        first = last + 2


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_a_saver_killed_mid_save_leaves_the_old_or_the_new_checkpoint(
    tmp_path: Path, writer: Writer, point: str
) -> None:
    path = tmp_path / "ckpt"
    generation(1).save(path)
    writer.assert_killed(writer.start_dying_save(path, point, 2))
    assert_holds_generation(path, 2 if point == "after-publish" else 1)


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_staging_left_by_a_killed_saver_is_removed_by_the_next_save(
    tmp_path: Path, writer: Writer, point: str
) -> None:
    path = tmp_path / "ckpt"
    generation(1).save(path)
    writer.assert_killed(writer.start_dying_save(path, point, 2))
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ckpt.staging-")]
    generation(3).save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]
    assert_holds_generation(path, 3)


def test_staging_of_a_writer_that_is_still_alive_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    busy = tmp_path / f".ckpt.staging-{os.getppid()}-busy"
    busy.mkdir()
    (busy / "buffer.hdf5").write_bytes(b"half written")
    generation(1).save(path)
    assert (busy / "buffer.hdf5").read_bytes() == b"half written"


# ------------------------------------------------------------- failures inside the process
class InjectedFault(Exception):
    """Raised by a patched step of a save."""


def fail_on_call(monkeypatch: pytest.MonkeyPatch, where: str, call: int) -> None:
    """Make ``bufcore.persist.<where>`` (``module.name``, the module possibly dotted) raise
    :class:`InjectedFault` on its ``call``-th call."""
    module_name, name = where.rsplit(".", 1)
    module = attrgetter(module_name)(bufcore.persist)
    original: Callable[..., Any] = getattr(module, name)
    calls = 0

    def failing(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call:
            raise InjectedFault(f"{name} call {call}")
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)


WRITE_FAULTS = [
    pytest.param("checkpoint.write._write_rows", 2, id="second-dataset"),
    pytest.param("checkpoint.write._write_json", 2, id="state-json"),
    pytest.param("checkpoint.write.seal_file", 4, id="sealing-the-manifest"),
    pytest.param("atomic.fsync_path", 1, id="fsync-of-staging"),
]


@pytest.mark.parametrize(
    ("name", "call"), [*WRITE_FAULTS, pytest.param("atomic.exchange", 1, id="the-swap")]
)
def test_a_save_failing_part_way_leaves_the_previous_checkpoint_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, call: int
) -> None:
    path = tmp_path / "ckpt"
    generation(1).save(path)
    fail_on_call(monkeypatch, name, call)
    with pytest.raises(InjectedFault):
        generation(2).save(path)
    assert_holds_generation(path, 1)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


@pytest.mark.parametrize(("name", "call"), WRITE_FAULTS)
def test_a_first_save_failing_part_way_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, call: int
) -> None:
    fail_on_call(monkeypatch, name, call)
    with pytest.raises(InjectedFault):
        generation(1).save(tmp_path / "ckpt")
    assert list(tmp_path.iterdir()) == []

"""A process adding trajectories with auto_save, killed at random moments, leaves a directory whose
index names only whole files and that loads; orphans are ignored, and removed by one call."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import TrajectoryReplayBuffer

WRITER = Path(__file__).with_name("rlinf_writer.py")
REPO = WRITER.parents[3]
KILLS = 36
MAX_DELAY_S = 0.3
GUARD_S = 60.0


class Writer:
    """Client of one ``rlinf_writer.py`` process."""

    def __init__(self, stderr: Path) -> None:
        self.stderr = stderr
        self._stderr_file = stderr.open("w")
        paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        self._process = subprocess.Popen(
            [sys.executable, str(WRITER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr_file, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        )
        self._children: set[int] = set()

    def ask(self, *words: object) -> int:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(" ".join(map(str, words)) + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        assert answer, f"the writer process died:\n{self.stderr.read_text()}"
        return int(answer)

    def start(self, path: Path) -> int:
        pid = self.ask("add", path)
        self._children.add(pid)
        return pid

    def kill(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        self._children.discard(pid)
        status = self.ask("reap", pid)
        assert os.WIFSIGNALED(status), f"child ended by itself:\n{self.stderr.read_text()}"

    def close(self) -> None:
        for pid in sorted(self._children):
            self.kill(pid)
        self._process.communicate(timeout=GUARD_S)
        self._stderr_file.close()


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Writer]:
    process = Writer(tmp_path_factory.mktemp("rlinf-writer") / "stderr.txt")
    yield process
    process.close()


def indexed(path: Path) -> dict[int, dict[str, Any]]:
    """The index entries by id, in id-list order."""
    if not (path / "trajectory_index.json").exists():
        return {}
    index = json.loads((path / "trajectory_index.json").read_text())
    return {i: index["trajectory_index"][str(i)] for i in index["trajectory_id_list"]}


def file_of(trajectory_id: int, entry: dict[str, Any]) -> str:
    return f"trajectory_{trajectory_id}_{entry['model_weights_id']}.pt"


def check_directory(path: Path) -> list[int]:
    """Load ``path`` (no warning: nothing indexed is missing) and check that every indexed
    file holds its generation whole, ids and generations increasing; the indexed ids."""
    entries = indexed(path)
    if not entries:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = TrajectoryReplayBuffer(sample_window_size=0)  # reads every file, checked
        loaded.load_checkpoint(path)
    assert len(loaded) == len(entries)
    ids = list(entries)
    generations = [entry["max_episode_length"] for entry in entries.values()]
    assert ids == sorted(set(ids)) and generations == sorted(set(generations))
    for trajectory_id, entry in entries.items():
        data = torch.load(path / file_of(trajectory_id, entry), weights_only=True)
        assert data["max_episode_length"] == entry["max_episode_length"]
        assert torch.all(data["curr_obs"]["state"] == entry["max_episode_length"])
    return ids


def orphans_by_hand(path: Path, ids: list[int]) -> set[str]:
    entries = indexed(path)
    named = {file_of(i, entries[i]) for i in ids}
    return {
        entry.name for entry in path.iterdir()
        if entry.name not in named and entry.name not in ("metadata.json", "trajectory_index.json")
    }


def test_kills_at_random_moments_leave_a_directory_that_loads_and_names_only_whole_files(
    tmp_path: Path, writer: Writer
) -> None:
    path = tmp_path / "buffer"
    rng = random.Random(21)
    before: list[int] = []
    for kill in range(KILLS):
        pid = writer.start(path)
        time.sleep(rng.uniform(0.0, MAX_DELAY_S))
        writer.kill(pid)
        ids = check_directory(path)
        assert ids[: len(before)] == before, f"kill {kill}: indexed trajectories were lost"
        before = ids
    assert len(before) >= 5  # the kills landed among adds, not only before the first

    leftovers = orphans_by_hand(path, before)
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(path))
    rb.load_checkpoint(path)
    removed = rb.remove_orphan_files()
    assert {p.name for p in removed} == leftovers
    assert orphans_by_hand(path, before) == set()
    assert check_directory(path) == before


def test_a_trajectory_file_written_before_its_index_is_an_ignored_orphan(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    rb.add_trajectories([torch_trajectory(0)])
    rb.close()
    # What a kill between a file and its index leaves: a file and a staging entry of a dead pid.
    (tmp_path / "trajectory_1_w.pt").write_bytes((tmp_path / "trajectory_0_w.pt").read_bytes())
    dead = tmp_path / ".trajectory_index.json.staging-999999999-abcd"
    dead.write_bytes(b"{")
    back = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    back.load_checkpoint(tmp_path)
    assert len(back) == 1
    assert sorted(p.name for p in back.remove_orphan_files()) == [dead.name, "trajectory_1_w.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "metadata.json", "trajectory_0_w.pt", "trajectory_index.json"]


def test_staging_of_a_live_writer_is_not_an_orphan(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    rb.add_trajectories([torch_trajectory(0)])
    busy = tmp_path / f".trajectory_5_w.pt.staging-{os.getppid()}-busy"
    busy.write_bytes(b"half")
    assert rb.remove_orphan_files() == []
    assert busy.exists()


def test_remove_orphan_files_needs_an_auto_save_path() -> None:
    with pytest.raises(ValueError, match="no auto_save_path"):
        TrajectoryReplayBuffer().remove_orphan_files()


def torch_trajectory(number: int) -> object:
    from tests.buffers.rlinf.rlinf_data import trajectory

    return trajectory(number)

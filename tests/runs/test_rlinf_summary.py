"""`bufcore inspect` recognises an RLinf buffer directory and summarizes it from its JSON."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bufcore import TrajectoryReplayBuffer
from bufcore.inspect import (
    RLINF_DIRECTORY,
    IdSpan,
    inspect_path,
    is_rlinf_directory,
    render,
    source_kind,
    summarize_rlinf_directory,
    to_json,
)
from tests.buffers.rlinf.rlinf_data import trajectory, write_rlinf_directory

REPO = Path(__file__).parents[2]


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path / "d"))
    rb.add_trajectories(
        [trajectory(i, 2 + i % 3, 2, weights=f"step_{i // 4}") for i in range(9)]
    )
    rb.close()
    return tmp_path / "d"


def test_a_directory_with_both_json_files_is_an_rlinf_buffer_directory(directory: Path) -> None:
    assert is_rlinf_directory(directory)
    assert inspect_path(directory).kind == RLINF_DIRECTORY
    assert source_kind(directory) == RLINF_DIRECTORY  # a source the dashboard lists
    (directory / "metadata.json").unlink()
    assert not is_rlinf_directory(directory)
    with pytest.raises(ValueError, match="or an RLinf buffer directory"):
        inspect_path(directory)


def test_the_summary_counts_trajectories_samples_shapes_and_weights(directory: Path) -> None:
    s = summarize_rlinf_directory(directory)
    assert (s.trajectory_format, s.trajectories, s.samples, s.seed) == ("pt", 9, 54, 1234)
    assert (s.steps, s.envs, s.trajectory_counter) == ((2, 4), (2, 2), 9)
    assert (s.weights_ids, s.weights_count) == (("step_0", "step_1", "step_2"), 3)
    assert (s.absent, s.orphans, s.metadata_counts) == (0, 0, (9, 54))
    assert s.file_bytes == sum(p.stat().st_size for p in directory.glob("trajectory_*.pt"))


def test_the_summary_shows_what_rlinfs_default_window_and_cache_hold(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "d", [trajectory(i, 1, 1) for i in range(120)])
    s = summarize_rlinf_directory(tmp_path / "d")
    assert (s.window_size, s.cache_size) == (100, 5)
    assert s.window == IdSpan(20, 119, 100, 100)
    assert s.cache == IdSpan(115, 119, 5, 5)


def test_absent_and_orphan_files_and_stale_metadata_are_reported(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "d", [trajectory(i) for i in range(4)], with_files=[2, 3])
    (tmp_path / "d" / "trajectory_9_w.pt").write_bytes(b"left by a crash")
    metadata = tmp_path / "d" / "metadata.json"
    metadata.write_text(json.dumps({**json.loads(metadata.read_text()), "size": 7}))
    s = summarize_rlinf_directory(tmp_path / "d")
    assert (s.absent, s.orphans, s.metadata_counts[0]) == (2, 1, 7)
    assert s.cache == IdSpan(2, 3, 2, 12)  # what a load keeps
    text = "\n".join(render(inspect_path(tmp_path / "d")))
    assert "2 indexed trajectories have no file" in text
    assert "1 files the index does not name" in text
    assert "says 7 trajectories" in text


def test_a_pickle_directory_is_summarized_without_unpickling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rb = TrajectoryReplayBuffer(trajectory_format="pkl", allow_pickle=True)
    rb.add_trajectories([trajectory(0)])
    rb.save_checkpoint(tmp_path / "d")

    def refused(*args: Any) -> None:
        raise AssertionError("unpickled")

    monkeypatch.setattr(pickle, "load", refused)
    assert summarize_rlinf_directory(tmp_path / "d").trajectory_format == "pkl"


def test_render_and_json_show_the_summary(directory: Path) -> None:
    inspection = inspect_path(directory)
    lines = render(inspection)
    assert lines[0] == f"RLinf buffer directory: {directory}"
    assert "9 trajectories, 54 samples; T 2..4 x B 2..2" in lines[2]
    data = to_json(inspection)
    assert data["kind"] == RLINF_DIRECTORY
    assert data["rlinf"]["window"] == {"first": 0, "last": 8, "count": 9, "rows": 54}
    json.dumps(data, allow_nan=False)


def test_the_command_inspects_an_rlinf_directory(directory: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bufcore.cli", "inspect", str(directory), "--json"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rlinf"]["trajectories"] == 9

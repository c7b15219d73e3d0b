"""The disk buffer's writer: queued reads wait, failures come back and leave a whole index."""

from __future__ import annotations

import errno
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import bufcore.persist.rlinf.store as store_module
from bufcore import TrajectoryReplayBuffer
from tests.buffers.rlinf.rlinf_data import assert_consistent, sampled_ids, trajectory

REAL_PUBLISH = store_module.publish_trajectory


def patch_writes(monkeypatch: pytest.MonkeyPatch, write: Callable[..., None]) -> None:
    monkeypatch.setattr(store_module, "publish_trajectory", write)


def failing_on(*ids: int) -> Callable[..., None]:
    def write(path: Path, blob: memoryview, *, sync: bool) -> None:
        if any(path.name.startswith(f"trajectory_{i}_") for i in ids):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        REAL_PUBLISH(path, blob, sync=sync)

    return write


def index_ids(path: Path) -> list[int]:
    return json.loads((path / "trajectory_index.json").read_text())["trajectory_id_list"]


def auto(path: Path, **options: object) -> TrajectoryReplayBuffer:
    return TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(path), **options)  # type: ignore[arg-type]


def test_a_read_of_a_trajectory_whose_write_is_queued_waits_for_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started = threading.Event()

    def slow(path: Path, blob: memoryview, *, sync: bool) -> None:
        started.set()
        time.sleep(0.2)
        REAL_PUBLISH(path, blob, sync=sync)

    patch_writes(monkeypatch, slow)
    rb = auto(tmp_path, enable_cache=False)
    rb.add_trajectories([trajectory(0), trajectory(1)])
    assert started.wait(10)
    assert not (tmp_path / "trajectory_1_w.pt").exists()  # still queued
    batch = rb.sample(200)  # RLinf: FileNotFoundError("Trajectory file not found at ...")
    assert set(sampled_ids(batch)) == {0, 1}
    assert_consistent(batch)


def test_flush_waits_for_every_queued_write(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def slow(path: Path, blob: memoryview, *, sync: bool) -> None:
        time.sleep(0.05)
        REAL_PUBLISH(path, blob, sync=sync)

    patch_writes(monkeypatch, slow)
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(i) for i in range(4)])
    rb.flush()
    assert index_ids(tmp_path) == [0, 1, 2, 3]
    assert len(list(tmp_path.glob("trajectory_*_w.pt"))) == 4


def test_a_failed_write_is_raised_by_flush_and_its_trajectories_leave_the_buffer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    patch_writes(monkeypatch, failing_on(1))
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(0), trajectory(1), trajectory(2)])
    with pytest.raises(OSError, match="No space left") as caught:
        rb.flush()
    if sys.version_info >= (3, 11):
        assert "trajectories [1, 2] were not written" in str(caught.value.__notes__)
    assert (len(rb), rb.total_samples) == (1, 6)
    rb.flush()  # the corrected index reaches the disk
    assert index_ids(tmp_path) == [0]
    assert set(sampled_ids(rb.sample(50))) == {0}


def test_a_failed_write_is_raised_by_the_next_add_which_adds_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    patch_writes(monkeypatch, failing_on(0))
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(0)])
    rb._store._writer.flush()  # type: ignore[union-attr]  # let the failure happen first
    with pytest.raises(OSError, match="No space left"):
        rb.add_trajectories([trajectory(1)])
    assert len(rb) == 0
    rb.add_trajectories([trajectory(1)])
    rb.flush()
    assert index_ids(tmp_path) == [1]


def test_a_failed_write_is_raised_by_close(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    patch_writes(monkeypatch, failing_on(0))
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(0)])
    with pytest.raises(OSError, match="No space left"):
        rb.close()


def test_a_sample_that_needs_a_failed_write_raises_the_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    patch_writes(monkeypatch, failing_on(0))
    rb = auto(tmp_path, enable_cache=False)
    rb.add_trajectories([trajectory(0)])
    with pytest.raises(OSError, match="No space left"):
        rb.sample(3)
    assert len(rb) == 0


def test_an_index_queued_behind_a_failed_file_is_never_published(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    patch_writes(monkeypatch, failing_on(1))
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(0)])
    rb.flush()
    rb.add_trajectories([trajectory(1)])
    rb._store._writer.flush()  # type: ignore[union-attr]
    assert index_ids(tmp_path) == [0]  # not [0, 1]: its file is missing
    with pytest.raises(OSError, match="No space left"):
        rb.flush()


def test_a_failed_fsync_before_the_index_is_raised_and_the_unsynced_trajectories_leave(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_fsync = store_module.fsync_path

    def failing(path: Path, *, directory: bool = False) -> None:
        if path.name.startswith("trajectory_1_"):
            raise OSError(errno.EIO, "Input/output error", str(path))
        real_fsync(path, directory=directory)

    monkeypatch.setattr(store_module, "fsync_path", failing)
    monkeypatch.setattr(store_module, "SYNC_LATER_BYTES", 0)  # every file fsynced by the index
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(0)])
    rb.flush()
    rb.add_trajectories([trajectory(1), trajectory(2)])  # both fsynced by the one index after
    with pytest.raises(OSError, match="Input/output error") as caught:
        rb.flush()
    if sys.version_info >= (3, 11):
        assert "trajectories [1, 2] were not written" in str(caught.value.__notes__)
    assert len(rb) == 1
    rb.flush()
    assert index_ids(tmp_path) == [0]
    assert set(sampled_ids(rb.sample(50))) == {0}

"""The disk buffer makes a trajectory file and its rename durable before any index naming it: the
file is fsynced after its rename and the directory after that, both before the index's rename
(once per index, not per file, for the directory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bufcore import TrajectoryReplayBuffer
from bufcore.persist import atomic
from bufcore.persist.rlinf import store
from tests.buffers.rlinf.rlinf_data import trajectory


@pytest.mark.parametrize("later", [0, 1 << 40], ids=["fsynced by the index", "fsynced at once"])
def test_the_files_then_the_directory_are_fsynced_before_the_index_naming_them(
    later: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str]] = []
    fsync, replace = atomic.fsync_path, os.replace
    auto = tmp_path / "auto"

    # Only this buffer's directory: writers of other tests may still be finishing.
    def recording_fsync(path: Path, *, directory: bool = False) -> None:
        fsync(path, directory=directory)
        if auto in (Path(path), Path(path).parent):
            events.append(("fsync directory" if directory else "fsync file", Path(path).name))

    def recording_replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        replace(source, target)
        if Path(target).parent == auto:
            events.append(("rename", Path(target).name))

    monkeypatch.setattr(atomic, "fsync_path", recording_fsync)
    monkeypatch.setattr(store, "fsync_path", recording_fsync)
    monkeypatch.setattr(store, "SYNC_LATER_BYTES", later)
    monkeypatch.setattr(atomic.os, "replace", recording_replace)
    buffer = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(auto))
    buffer.add_trajectories([trajectory(0), trajectory(1), trajectory(2)])
    buffer.close()
    renames = [i for i, (what, _) in enumerate(events) if what == "rename"]
    files = [i for i in renames if events[i][1].endswith(".pt")]
    index = next(i for i in renames if events[i][1] == "trajectory_index.json")
    assert len(files) == 3 and max(files) < index
    synced = [i for i, (what, name) in enumerate(events)
              if what == "fsync file" and "trajectory_index" not in name and "metadata" not in name]
    assert len(synced) == 3 and max(synced) < index
    if later == 0:  # the final names are fsynced, after their renames
        assert all(i < events.index(("fsync file", events[i][1])) for i in files)
    assert ("fsync directory", "auto") in events[max(*synced, *files) + 1 : index]
    # One directory fsync per published JSON file, none per trajectory file.
    assert sum(what == "fsync directory" for what, _ in events) == 2

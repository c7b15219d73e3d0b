"""Hostile buffer directories get clear errors naming the file, never a crash, code run or an
unbounded read."""

from __future__ import annotations

import json
import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import TrajectoryReplayBuffer
from bufcore.errors import CorruptCheckpointError
from tests.buffers.rlinf.rlinf_data import trajectory, write_rlinf_directory

RAN: list[str] = []


def record(what: str) -> None:
    RAN.append(what)


class Payload:
    """Unpickling this calls ``record``: a stand-in for code an attacker would run."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return record, ("payload ran",)


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    path = tmp_path / "dir"
    write_rlinf_directory(path, [trajectory(0), trajectory(1)])
    return path


def load(path: Path, **options: Any) -> TrajectoryReplayBuffer:
    rb = TrajectoryReplayBuffer(**options)
    rb.load_checkpoint(path)
    return rb


def edit_index(path: Path, change: Any) -> None:
    index_path = path / "trajectory_index.json"
    index = json.loads(index_path.read_text())
    change(index)
    index_path.write_text(json.dumps(index))


def test_an_index_naming_a_file_outside_the_directory_is_refused(
    directory: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.pt"
    torch.save({"rewards": torch.zeros(3, 2)}, outside)
    edit_index(directory, lambda i: i["trajectory_index"]["1"].update(
        model_weights_id="../../secret"))
    with pytest.raises(CorruptCheckpointError, match="contains '/'") as caught:
        load(directory)
    assert caught.value.path == directory / "trajectory_index.json"


def test_a_symlinked_trajectory_file_is_refused(directory: Path, tmp_path: Path) -> None:
    target = directory / "trajectory_1_w.pt"
    os.replace(target, tmp_path / "elsewhere.pt")
    target.symlink_to(tmp_path / "elsewhere.pt")
    with pytest.raises(CorruptCheckpointError, match="is a symbolic link") as caught:
        load(directory)
    assert caught.value.path == target


def test_a_pt_file_holding_a_pickle_payload_is_refused_without_running_it(
    directory: Path,
) -> None:
    fields = {"rewards": torch.zeros(3, 2), "prev_logprobs": torch.zeros(3, 2), "x": Payload()}
    torch.save(fields, directory / "trajectory_1_w.pt")
    RAN.clear()
    with pytest.raises(CorruptCheckpointError, match="a weights_only load refuses") as caught:
        load(directory)
    assert caught.value.path == directory / "trajectory_1_w.pt"
    assert RAN == []


def test_a_raw_pickle_named_pt_is_refused_without_running_it(directory: Path) -> None:
    (directory / "trajectory_1_w.pt").write_bytes(pickle.dumps(Payload()))
    RAN.clear()
    with pytest.raises(CorruptCheckpointError, match="is not a torch zip archive"):
        load(directory)
    assert RAN == []


def test_index_shapes_that_disagree_with_the_file_are_refused(directory: Path) -> None:
    edit_index(directory, lambda i: i["trajectory_index"]["1"].update(shape=[2, 3]))
    with pytest.raises(CorruptCheckpointError, match=r"shape \[3, 2\]; the index says \[2, 3\]"):
        load(directory)


def test_a_disagreeing_file_read_later_by_a_sample_is_refused(directory: Path) -> None:
    edit_index(directory, lambda i: i["trajectory_index"]["0"].update(shape=[6, 1]))
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(directory), cache_size=1,
                                sample_window_size=0)
    rb.load_checkpoint(directory)  # the newest (id 1) is sound and cached
    with pytest.raises(CorruptCheckpointError, match=r"trajectory_0_w\.pt: holds a trajectory"):
        rb.sample(500)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.95])
def test_a_truncated_file_is_refused(directory: Path, keep: float) -> None:
    path = directory / "trajectory_1_w.pt"
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CorruptCheckpointError, match="truncated") as caught:
        load(directory)
    assert caught.value.path == path


def test_a_fifo_in_place_of_a_file_is_refused_without_blocking(directory: Path) -> None:
    path = directory / "trajectory_1_w.pt"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(CorruptCheckpointError, match="is not a regular file"):
        load(directory)


def test_compressed_members_are_refused(directory: Path) -> None:
    path = directory / "trajectory_1_w.pt"
    with zipfile.ZipFile(path) as archive:
        members = [(info.filename, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    with pytest.raises(CorruptCheckpointError, match="holds compressed members"):
        load(directory)


def test_a_file_holding_something_else_than_a_trajectory_is_refused(directory: Path) -> None:
    torch.save([1, 2, 3], directory / "trajectory_1_w.pt")
    with pytest.raises(CorruptCheckpointError, match="expected a dict of trajectory fields"):
        load(directory)


def test_oversized_metadata_is_refused_before_it_is_read(directory: Path) -> None:
    (directory / "metadata.json").write_text(" " * (1 << 20) + "{}")
    with pytest.raises(CorruptCheckpointError, match="more than the 1048576 read at most"):
        load(directory)


def test_a_symlinked_index_is_refused(directory: Path, tmp_path: Path) -> None:
    os.replace(directory / "trajectory_index.json", tmp_path / "index.json")
    (directory / "trajectory_index.json").symlink_to(tmp_path / "index.json")
    with pytest.raises(CorruptCheckpointError, match="symbolic link"):
        load(directory)

"""The dashboard's read-only view of an RLinf directory: its index, draws with the disk buffer's
own sampler, one trajectory file's leaves and end flags (REFERENCE §9.3-9.4)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from bufcore import CorruptCheckpointError, Trajectory, TrajectoryReplayBuffer
from bufcore.inspect import draw_rlinf_chunks, read_rlinf_index, read_rlinf_trajectory
from tests.buffers.rlinf.rlinf_data import trajectory, write_rlinf_directory


def auto_saved(path: Path, count: int) -> Path:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(path))
    rb.add_trajectories([trajectory(i, 2 + i % 3, 2) for i in range(count)])
    rb.close()
    return path


@pytest.mark.parametrize("window", [0, 1, 3, 100])
def test_a_draw_names_the_rows_a_loaded_buffer_samples_with_the_same_seed(
    tmp_path: Path, window: int
) -> None:
    directory = auto_saved(tmp_path / "d", 7)
    drawn = draw_rlinf_chunks(read_rlinf_index(directory), window_size=window, count=64,
                              generator=torch.Generator().manual_seed(5))
    rb = TrajectoryReplayBuffer(sample_window_size=window)
    rb.load_checkpoint(directory)
    batch = rb.sample(64, generator=torch.Generator().manual_seed(5))
    rewards = batch["rewards"].long()
    assert drawn.trajectory_id.tolist() == (rewards // 1000).tolist()
    assert drawn.row.tolist() == (rewards % 1000).tolist()


def test_the_buffers_sample_index_is_the_same_draw(tmp_path: Path) -> None:
    directory = auto_saved(tmp_path / "d", 5)
    rb = TrajectoryReplayBuffer(sample_window_size=3)
    rb.load_checkpoint(directory)
    index = rb.sample_index(32, generator=torch.Generator().manual_seed(9))
    drawn = draw_rlinf_chunks(read_rlinf_index(directory), window_size=3, count=32,
                              generator=torch.Generator().manual_seed(9))
    assert torch.equal(index.trajectory_id, drawn.trajectory_id)
    assert torch.equal(index.row, drawn.row)
    assert set(index.trajectory_id.tolist()) <= {2, 3, 4}


def test_a_callers_generator_leaves_the_buffers_own_stream_where_it_was(tmp_path: Path) -> None:
    directory = auto_saved(tmp_path / "d", 4)
    first, second = TrajectoryReplayBuffer(), TrajectoryReplayBuffer()
    first.load_checkpoint(directory)
    second.load_checkpoint(directory)
    first.sample(16, generator=torch.Generator().manual_seed(1))
    assert torch.equal(first.sample(16)["rewards"], second.sample(16)["rewards"])


def test_absent_files_are_left_out_of_the_window_as_a_load_leaves_them_out(
    tmp_path: Path,
) -> None:
    write_rlinf_directory(tmp_path / "d", [trajectory(i) for i in range(6)],
                          with_files=[0, 1, 3, 5])
    index = read_rlinf_index(tmp_path / "d")
    assert index.positions(3).tolist() == [1, 3, 5]
    assert index.positions(0).tolist() == [0, 1, 3, 5]
    assert index.present.tolist() == [True, True, False, True, False, True]
    drawn = draw_rlinf_chunks(index, window_size=3, count=200,
                              generator=torch.Generator().manual_seed(0))
    assert set(drawn.trajectory_id.tolist()) == {1, 3, 5}
    rb = TrajectoryReplayBuffer(sample_window_size=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rb.load_checkpoint(tmp_path / "d")
    rows = rb.sample(200, generator=torch.Generator().manual_seed(0))["rewards"].long()
    assert drawn.trajectory_id.tolist() == (rows // 1000).tolist()


def test_the_index_arrays_follow_the_id_list(tmp_path: Path) -> None:
    index = read_rlinf_index(auto_saved(tmp_path / "d", 4))
    assert index.ids.tolist() == [0, 1, 2, 3]
    assert index.steps.tolist() == [2, 3, 4, 2]
    assert index.envs.tolist() == [2, 2, 2, 2]
    assert index.samples.tolist() == [4, 6, 8, 4]
    assert (index.trajectory_format, index.seed) == ("pt", 1234)


def test_dones_are_read_after_the_epoch_rows_are_dropped(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "d", [trajectory(0, 4, 3)])
    read = read_rlinf_trajectory(read_rlinf_index(tmp_path / "d"), 0)
    values = torch.arange(12).reshape(4, 3)
    assert (read.steps, read.envs, read.end_field) == (4, 3, "dones")
    assert read.ends is not None
    assert np.array_equal(read.ends, (values % 2 == 1).numpy())
    leaves = {leaf.key_path: (leaf.shape, leaf.dtype) for leaf in read.leaves}
    assert leaves[("curr_obs", "state")] == ((3,), "float32")
    assert leaves[("dones",)] == ((), "bool")


def test_terminations_or_truncations_end_episodes_without_dones(tmp_path: Path) -> None:
    term = torch.tensor([[0, 0], [1, 0], [0, 0]], dtype=torch.bool)
    trunc = torch.tensor([[0, 0], [0, 0], [0, 1]], dtype=torch.bool)
    item = Trajectory(rewards=torch.zeros(3, 2), terminations=term, truncations=trunc[..., None])
    write_rlinf_directory(tmp_path / "d", [item])
    read = read_rlinf_trajectory(read_rlinf_index(tmp_path / "d"), 0)
    assert read.end_field == "terminations|truncations"
    assert read.ends is not None
    assert read.ends.tolist() == [[False, False], [True, False], [False, True]]


def test_a_trajectory_without_end_flags_has_none(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "d", [Trajectory(rewards=torch.zeros(3, 2))])
    read = read_rlinf_trajectory(read_rlinf_index(tmp_path / "d"), 0)
    assert (read.end_field, read.ends) == (None, None)


def test_a_pkl_directory_is_never_unpickled(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "d", [trajectory(0)])
    metadata = tmp_path / "d" / "metadata.json"
    metadata.write_text(json.dumps({**json.loads(metadata.read_text()),
                                    "trajectory_format": "pkl"}))
    (tmp_path / "d" / "trajectory_0_w.pkl").write_bytes(b"not read")
    index = read_rlinf_index(tmp_path / "d")
    with pytest.raises(ValueError, match="pickle"):
        read_rlinf_trajectory(index, 0)


def test_a_file_that_disagrees_with_its_index_entry_is_refused(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "d", [trajectory(0, 3, 2)])
    torch.save({"rewards": torch.zeros(5, 2)}, tmp_path / "d" / "trajectory_0_w.pt")
    with pytest.raises(CorruptCheckpointError, match="the index says"):
        read_rlinf_trajectory(read_rlinf_index(tmp_path / "d"), 0)


def test_a_symlinked_trajectory_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "d", [trajectory(0)])
    target = tmp_path / "elsewhere.pt"
    (tmp_path / "d" / "trajectory_0_w.pt").rename(target)
    (tmp_path / "d" / "trajectory_0_w.pt").symlink_to(target)
    with pytest.raises(CorruptCheckpointError, match="symbolic link"):
        read_rlinf_index(tmp_path / "d")


def test_an_unknown_id_is_a_key_error(tmp_path: Path) -> None:
    index = read_rlinf_index(auto_saved(tmp_path / "d", 2))
    with pytest.raises(KeyError, match="7"):
        read_rlinf_trajectory(index, 7)

"""Disk buffer checkpoints: every trajectory saved, RLinf's layout both ways, sharded loading."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
import torch

from bufcore import TrajectoryReplayBuffer
from bufcore.errors import CorruptCheckpointError
from tests.buffers.rlinf.rlinf_data import (
    assert_consistent,
    sampled_ids,
    trajectory,
    write_rlinf_directory,
)


def auto(path: Path, **options: object) -> TrajectoryReplayBuffer:
    return TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(path), **options)  # type: ignore[arg-type]


def ids_in(path: Path) -> list[int]:
    return json.loads((path / "trajectory_index.json").read_text())["trajectory_id_list"]


def loaded(path: Path, **options: object) -> TrajectoryReplayBuffer:
    rb = TrajectoryReplayBuffer(sample_window_size=0, **options)  # type: ignore[arg-type]
    rb.load_checkpoint(path)
    return rb


def test_a_checkpoint_taken_before_any_sample_holds_every_trajectory(tmp_path: Path) -> None:
    rb = auto(tmp_path / "auto", cache_size=1)
    rb.add_trajectories([trajectory(i) for i in range(4)])
    rb.save_checkpoint(tmp_path / "ckpt")
    back = loaded(tmp_path / "ckpt")
    assert (len(back), back.total_samples) == (4, 24)
    assert set(sampled_ids(back.sample(1000))) == {0, 1, 2, 3}


def test_trajectories_added_after_the_last_sample_are_in_the_checkpoint(tmp_path: Path) -> None:
    rb = auto(tmp_path / "auto", sample_window_size=2)
    rb.add_trajectories([trajectory(i) for i in range(3)])
    rb.sample(5)
    rb.add_trajectories([trajectory(3), trajectory(4)])
    rb.save_checkpoint(tmp_path / "ckpt")
    assert ids_in(tmp_path / "ckpt") == [0, 1, 2, 3, 4]
    assert len(list((tmp_path / "ckpt").glob("trajectory_*.pt"))) == 5


def test_checkpoint_files_are_hard_links_of_the_auto_saved_ones(tmp_path: Path) -> None:
    rb = auto(tmp_path / "auto")
    rb.add_trajectories([trajectory(0)])
    rb.save_checkpoint(tmp_path / "ckpt")
    name = "trajectory_0_w.pt"
    assert os.stat(tmp_path / "ckpt" / name).st_ino == os.stat(tmp_path / "auto" / name).st_ino


@pytest.mark.parametrize("into", ["memory", "disk"])
def test_a_memory_only_checkpoint_loads_back_with_the_same_rows(into: str, tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(sample_window_size=3)
    rb.add_trajectories([trajectory(i) for i in range(5)])
    rb.save_checkpoint(tmp_path / "ckpt")
    assert ids_in(tmp_path / "ckpt") == [2, 3, 4]
    back = (
        loaded(tmp_path / "ckpt") if into == "memory"
        else auto(tmp_path / "auto", sample_window_size=0)
    )
    if into == "disk":
        back.load_checkpoint(tmp_path / "ckpt")
    batch = back.sample(600)
    assert set(sampled_ids(batch)) == {2, 3, 4}
    assert_consistent(batch)


def test_saving_into_the_auto_save_path_only_waits_for_it(tmp_path: Path) -> None:
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(0), trajectory(1)])
    rb.save_checkpoint(tmp_path)
    assert ids_in(tmp_path) == [0, 1]
    assert len(loaded(tmp_path)) == 2


def test_a_save_replaces_an_older_checkpoint_whole(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer()
    rb.add_trajectories([trajectory(0), trajectory(1)])
    rb.save_checkpoint(tmp_path / "ckpt")
    rb.clear()
    rb.add_trajectories([trajectory(7)])
    rb.save_checkpoint(tmp_path / "ckpt")
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "metadata.json", "trajectory_2_w.pt", "trajectory_index.json"]


def test_a_save_never_replaces_a_directory_holding_other_files(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "notes.txt").write_text("mine")
    rb = TrajectoryReplayBuffer()
    rb.add_trajectories([trajectory(0)])
    with pytest.raises(FileExistsError, match="not a buffer directory"):
        rb.save_checkpoint(tmp_path / "ckpt")
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["notes.txt"]


def test_loading_into_another_auto_save_path_makes_that_directory_whole(tmp_path: Path) -> None:
    source = TrajectoryReplayBuffer()
    source.add_trajectories([trajectory(i) for i in range(3)])
    source.save_checkpoint(tmp_path / "ckpt")
    rb = auto(tmp_path / "auto", cache_size=1)
    rb.load_checkpoint(tmp_path / "ckpt")
    rb.add_trajectories([trajectory(3)])
    rb.flush()
    assert ids_in(tmp_path / "auto") == [0, 1, 2, 3]
    back = loaded(tmp_path / "auto")
    assert set(sampled_ids(back.sample(800))) == {0, 1, 2, 3}


def test_a_load_trusts_the_index_over_the_metadata_counts(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer()
    rb.add_trajectories([trajectory(0), trajectory(1)])
    rb.save_checkpoint(tmp_path / "ckpt")
    metadata = tmp_path / "ckpt" / "metadata.json"
    stale = {**json.loads(metadata.read_text()), "size": 9, "total_samples": 1,
             "trajectory_counter": 1}
    metadata.write_text(json.dumps(stale))
    back = loaded(tmp_path / "ckpt")
    assert (len(back), back.total_samples) == (2, 12)
    back.add_trajectories([trajectory(2)])  # id 2: past the largest indexed id, not 1
    back.save_checkpoint(tmp_path / "again")
    assert ids_in(tmp_path / "again") == [0, 1, 2]


def test_a_load_restarts_the_sample_stream_from_the_saved_seed(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(seed=42)
    rb.add_trajectories([trajectory(i) for i in range(3)])
    rb.save_checkpoint(tmp_path / "ckpt")
    fresh = rb.sample(30)["rewards"]
    back = TrajectoryReplayBuffer(seed=1)
    back.load_checkpoint(tmp_path / "ckpt")
    assert back.seed == 42
    assert torch.equal(back.sample(30)["rewards"], fresh)


def test_a_directory_written_as_rlinf_writes_it_loads(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "rlinf", [trajectory(i) for i in range(3)])
    back = loaded(tmp_path / "rlinf", cache_size=1)
    batch = back.sample(500)
    assert set(sampled_ids(batch)) == {0, 1, 2}
    assert_consistent(batch)


def test_indexed_trajectories_without_files_are_left_out_with_a_warning(tmp_path: Path) -> None:
    # RLinf's checkpoint without auto_save: the index names all, files exist for cached ones.
    write_rlinf_directory(tmp_path / "rlinf", [trajectory(i) for i in range(5)], with_files=[3, 4])
    with pytest.warns(RuntimeWarning, match="names 3 trajectories whose files are not there"):
        back = loaded(tmp_path / "rlinf")
    assert (len(back), set(sampled_ids(back.sample(300)))) == (2, {3, 4})


def test_the_pickle_format_needs_allow_pickle_to_be_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="runs any code it holds"):
        TrajectoryReplayBuffer(trajectory_format="pkl")


def test_the_pickle_format_round_trips_when_allowed(tmp_path: Path) -> None:
    rb = auto(tmp_path / "auto", trajectory_format="pkl", allow_pickle=True, enable_cache=False)
    rb.add_trajectories([trajectory(0), trajectory(1)])
    assert_consistent(rb.sample(50))
    rb.save_checkpoint(tmp_path / "ckpt")
    files = (tmp_path / "ckpt").glob("trajectory_*_w.*")
    assert sorted(p.suffix for p in files) == [".pkl", ".pkl"]
    with (tmp_path / "ckpt" / "trajectory_1_w.pkl").open("rb") as stream:
        assert torch.equal(pickle.load(stream)["rewards"], trajectory(1).rewards)
    back = loaded(tmp_path / "ckpt", allow_pickle=True)
    assert (len(back), back.trajectory_format) == (2, "pkl")


def test_a_pickle_directory_is_refused_without_allow_pickle(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(trajectory_format="pkl", allow_pickle=True)
    rb.add_trajectories([trajectory(0)])
    rb.save_checkpoint(tmp_path / "ckpt")
    with pytest.raises(ValueError, match=r"pass allow_pickle=True only for files you trust"):
        loaded(tmp_path / "ckpt")


def test_a_failed_load_changes_nothing(tmp_path: Path) -> None:
    write_rlinf_directory(tmp_path / "bad", [trajectory(i) for i in range(2)])
    (tmp_path / "bad" / "trajectory_1_w.pt").write_bytes(b"not a zip")
    rb = TrajectoryReplayBuffer(seed=3)
    rb.add_trajectories([trajectory(9)])
    before = rb.sample(10)["rewards"]
    rb = TrajectoryReplayBuffer(seed=3)
    rb.add_trajectories([trajectory(9)])
    with pytest.raises(CorruptCheckpointError, match=r"trajectory_1_w\.pt"):
        rb.load_checkpoint(tmp_path / "bad")
    assert (len(rb), rb.seed) == (1, 3)
    assert torch.equal(rb.sample(10)["rewards"], before)


def test_missing_json_files_raise_rlinfs_messages(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="Metadata not found at"):
        loaded(tmp_path / "empty")
    (tmp_path / "empty" / "metadata.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="Trajectory index not found at"):
        loaded(tmp_path / "empty")


# ------------------------------------------------------------------ sharded loading
def sharded(path: Path, rank: int, ranks: int, **options: object) -> TrajectoryReplayBuffer:
    rb = TrajectoryReplayBuffer(sample_window_size=0, **options)  # type: ignore[arg-type]
    rb.load_checkpoint(path, is_distributed=True, local_rank=rank, world_size=ranks)
    return rb


@pytest.mark.parametrize(
    ("count", "ranks", "shares"),
    [(10, 3, [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]), (3, 3, [[0], [1], [2]]),
     (2, 3, [[0], [1], []]), (5, 1, [[0, 1, 2, 3, 4]])],
)
def test_each_rank_loads_its_contiguous_share(
    count: int, ranks: int, shares: list[list[int]], tmp_path: Path
) -> None:
    rb = TrajectoryReplayBuffer(sample_window_size=0)
    rb.add_trajectories([trajectory(i, 1 + i % 3, 2) for i in range(count)])
    rb.save_checkpoint(tmp_path / "ckpt")
    for rank, share in enumerate(shares):
        part = sharded(tmp_path / "ckpt", rank, ranks)
        assert len(part) == len(share)
        assert part.total_samples == sum(2 * (1 + i % 3) for i in share)
        if share:
            assert set(sampled_ids(part.sample(500))) == set(share)


def test_new_ids_stay_unique_across_ranks_and_past_every_loaded_id(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(sample_window_size=0)
    rb.add_trajectories([trajectory(i) for i in range(7)])
    rb.save_checkpoint(tmp_path / "ckpt")
    given: list[int] = []
    for rank in range(3):
        part = sharded(tmp_path / "ckpt", rank, 3)
        part.add_trajectories([trajectory(100 + k) for k in range(4)])
        part.save_checkpoint(tmp_path / f"rank_{rank}")
        given += ids_in(tmp_path / f"rank_{rank}")[-4:]
    assert len(set(given)) == 12
    assert min(given) >= 7
    assert given[:4] == [7, 10, 13, 16]  # rank 0: 7 + 3k


@pytest.mark.parametrize(
    ("rank", "ranks", "error", "match"),
    [(3, 3, ValueError, r"local_rank \(3\) must be in range \[0, 3\)"),
     (-1, 2, ValueError, r"local_rank \(-1\) must be in range"),
     (0, 0, ValueError, "world_size: expected an int >= 1"),
     (0.0, 2, TypeError, "local_rank: expected an int")],
)
def test_rank_arguments_are_checked(
    rank: object, ranks: object, error: type[Exception], match: str, tmp_path: Path
) -> None:
    with pytest.raises(error, match=match):
        TrajectoryReplayBuffer().load_checkpoint(
            tmp_path, is_distributed=True, local_rank=rank, world_size=ranks  # type: ignore[arg-type]
        )


def test_a_sharded_load_from_the_auto_save_path_itself_is_refused(tmp_path: Path) -> None:
    rb = auto(tmp_path)
    rb.add_trajectories([trajectory(0), trajectory(1)])
    with pytest.raises(ValueError, match="give each rank its own auto_save_path"):
        rb.load_checkpoint(tmp_path, is_distributed=True, local_rank=0, world_size=2)

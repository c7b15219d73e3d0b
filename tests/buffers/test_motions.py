"""load_expert_trajectories: motion list -> episode files -> one expert buffer (REFERENCE §5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.buffers.motions import load_expert_trajectories
from bufcore.persist.episodes import save_episodes


def episode(length: int, motion: int, *, obs_dim: int = 3) -> dict[str, Any]:
    steps = np.arange(length, dtype=np.float64)
    return {
        "observation": np.stack([steps + motion * 100 + k for k in range(obs_dim)], 1),
        "action": np.zeros((length, 2), np.float32),
        "motion_id": np.full(length, motion, dtype=np.int64),
    }


def write_list(root: Path, *lines: str) -> Path:
    listing = root / "motions.txt"
    listing.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return listing


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """Two files: walk.h5 (motions 0, 1) and sub/run.h5 (motion 2)."""
    (tmp_path / "sub").mkdir()
    save_episodes(tmp_path / "walk.h5", [episode(5, 0), episode(3, 1)])
    save_episodes(tmp_path / "sub" / "run.h5", [episode(10, 2)])
    return tmp_path


def test_episodes_of_every_listed_file_become_trajectories_in_list_order(library: Path) -> None:
    listing = write_list(library, "# experts", "", "walk.h5", "sub/run.h5")
    buffer = load_expert_trajectories(listing, library, seq_length=2, device="cpu")
    assert isinstance(buffer, TrajectoryDictBuffer)
    assert buffer.motion_ids == [0, 1, 2]
    assert buffer.lengths.tolist() == [5, 3, 10]
    assert buffer.start_idx[:, 0].tolist() == [0, 5, 8]
    assert buffer.seq_length == 2


def test_observations_are_cast_to_float32_and_keep_their_values(library: Path) -> None:
    listing = write_list(library, "sub/run.h5")
    buffer = load_expert_trajectories(listing, library, seq_length=1, device="cpu")
    observation = buffer.storage["observation"]
    assert observation.dtype == torch.float32
    np.testing.assert_array_equal(observation.numpy(), episode(10, 2)["observation"])


def test_nested_observation_leaves_are_all_cast_to_float32(tmp_path: Path) -> None:
    ep = episode(4, 7)
    ep["observation"] = {"state": ep["observation"], "phase": np.arange(4, dtype=np.int64)}
    save_episodes(tmp_path / "a.h5", [ep])
    buffer = load_expert_trajectories(write_list(tmp_path, "a.h5"), tmp_path, 1, "cpu")
    stored = buffer.storage["observation"]
    assert stored["state"].dtype == torch.float32
    assert stored["phase"].dtype == torch.float32


def test_the_mapper_replaces_the_float32_observation(library: Path) -> None:
    seen: list[np.dtype[Any]] = []

    def split(observation: np.ndarray[Any, Any]) -> dict[str, np.ndarray[Any, Any]]:
        seen.append(observation.dtype)
        return {"state": observation[:, :2], "privileged_state": observation[:, 2:]}

    listing = write_list(library, "walk.h5")
    buffer = load_expert_trajectories(listing, library, 1, "cpu", obs_dict_mapper=split)
    assert seen == [np.dtype(np.float32)] * 2
    assert buffer.storage["observation"]["state"].shape == (8, 2)
    assert buffer.storage["observation"]["privileged_state"].shape == (8, 1)


def test_a_file_name_dataset_is_dropped(tmp_path: Path) -> None:
    save_episodes(tmp_path / "a.h5", [episode(3, 0)])
    with h5py.File(tmp_path / "a.h5", "a") as h5:
        h5["ep_0"]["file_name"] = "walk_01.npz"
    buffer = load_expert_trajectories(write_list(tmp_path, "a.h5"), tmp_path, 1, "cpu")
    assert "file_name" not in buffer.storage


def test_the_buffer_samples_windows_inside_one_motion(library: Path) -> None:
    listing = write_list(library, "walk.h5", "sub/run.h5")
    buffer = load_expert_trajectories(listing, library, seq_length=3, device="cpu")
    batch = buffer.sample(30)
    windows = batch["observation"][:, 0].reshape(10, 3)
    motions = torch.div(windows, 100, rounding_mode="floor")
    assert bool((motions == motions[:, :1]).all())
    assert bool((windows[:, 1:] - windows[:, :-1] == 1).all())


def test_the_buffer_lives_on_the_requested_device(library: Path) -> None:
    listing = write_list(library, "walk.h5")
    buffer = load_expert_trajectories(listing, library, 1, torch.device("cpu"))
    assert buffer.storage["observation"].device == torch.device("cpu")


def test_a_missing_listed_file_is_named(library: Path) -> None:
    listing = write_list(library, "walk.h5", "fly.h5")
    with pytest.raises(FileNotFoundError, match=r"line 2: motion file .*fly\.h5"):
        load_expert_trajectories(listing, library, 1, "cpu")


def test_an_episode_without_motion_id_is_named_by_file_and_episode(tmp_path: Path) -> None:
    broken = episode(4, 1)
    del broken["motion_id"]
    save_episodes(tmp_path / "a.h5", [episode(3, 0)])
    save_episodes(tmp_path / "b.h5", [broken])
    listing = write_list(tmp_path, "a.h5", "b.h5")
    with pytest.raises(ValueError, match=r"b\.h5: ep_0: missing 'motion_id'"):
        load_expert_trajectories(listing, tmp_path, 1, "cpu")


def test_an_episode_without_observation_is_named_by_file_and_episode(tmp_path: Path) -> None:
    broken = episode(4, 1)
    del broken["observation"]
    save_episodes(tmp_path / "a.h5", [broken])
    with pytest.raises(ValueError, match=r"a\.h5: ep_0: missing 'observation'"):
        load_expert_trajectories(write_list(tmp_path, "a.h5"), tmp_path, 1, "cpu")


def test_keys_that_differ_across_files_name_both_episodes(tmp_path: Path) -> None:
    other = episode(4, 1)
    other["reward"] = np.zeros((4, 1), np.float32)
    save_episodes(tmp_path / "a.h5", [episode(3, 0)])
    save_episodes(tmp_path / "b.h5", [other])
    listing = write_list(tmp_path, "a.h5", "b.h5")
    match = r"b\.h5: ep_0: keys differ from .*a\.h5: ep_0's \(has extra \['reward'\]\)"
    with pytest.raises(ValueError, match=match):
        load_expert_trajectories(listing, tmp_path, 1, "cpu")


def test_a_string_leaf_other_than_file_name_is_refused(tmp_path: Path) -> None:
    save_episodes(tmp_path / "a.h5", [episode(3, 0)])
    with h5py.File(tmp_path / "a.h5", "a") as h5:
        h5["ep_0"]["label"] = "walk"
    with pytest.raises(TypeError, match=r"a\.h5: ep_0\['label'\]"):
        load_expert_trajectories(write_list(tmp_path, "a.h5"), tmp_path, 1, "cpu")


def test_an_error_found_by_the_buffer_names_the_file_and_episode(tmp_path: Path) -> None:
    bad = episode(4, 1)
    bad["done"] = np.zeros((4, 3), bool)  # an end column must be [T] or [T, 1]
    good = episode(3, 0)
    good["done"] = np.zeros((3, 1), bool)
    save_episodes(tmp_path / "a.h5", [good, bad])
    with pytest.raises(ValueError, match=r"a\.h5: ep_1\['done'\]: expected end flags"):
        load_expert_trajectories(write_list(tmp_path, "a.h5"), tmp_path, 1, "cpu")


def test_an_empty_motion_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="names no file"):
        load_expert_trajectories(write_list(tmp_path, "# nothing"), tmp_path, 1, "cpu")


def test_files_without_episodes_are_refused(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as h5:
        h5.attrs["num_episodes"] = 0
    with pytest.raises(ValueError, match="hold no episode"):
        load_expert_trajectories(write_list(tmp_path, "a.h5"), tmp_path, 1, "cpu")


def test_big_endian_episode_files_load_with_their_values(tmp_path: Path) -> None:
    big = {key: value.astype(value.dtype.newbyteorder(">")) for key, value in episode(4, 7).items()}
    save_episodes(tmp_path / "big.h5", [big])
    with h5py.File(tmp_path / "big.h5", "r") as file:
        assert file["ep_0"]["motion_id"].dtype.byteorder == ">"
    buffer = load_expert_trajectories(write_list(tmp_path, "big.h5"), tmp_path, 1, "cpu")
    assert buffer.motion_ids == [7]
    assert buffer.storage["motion_id"].tolist() == [7, 7, 7, 7]
    assert buffer.storage["action"].dtype == torch.float32


def test_observations_beyond_float32_are_refused_naming_the_file_and_leaf(tmp_path: Path) -> None:
    overflowing = episode(4, 7)
    overflowing["observation"] = np.full((4, 3), 1e300)
    save_episodes(tmp_path / "wild.h5", [overflowing])
    with pytest.raises(ValueError, match=r"wild\.h5.*\['observation'\]: values in .* do not fit"):
        load_expert_trajectories(write_list(tmp_path, "wild.h5"), tmp_path, 1, "cpu")


def test_a_seed_makes_the_expert_buffer_sample_the_same_windows(library: Path) -> None:
    listing = write_list(library, "walk.h5", "sub/run.h5")
    first, second = (
        load_expert_trajectories(listing, library, 2, "cpu", seed=7) for _ in range(2)
    )
    a, b = first.sample(8), second.sample(8)
    assert torch.equal(a["observation"], b["observation"])

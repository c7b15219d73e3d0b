"""BFM-Zero's remaining public names: ``load_hdf5``, ``save``'s separator, ``file_names``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

from bufcore import (
    DictBuffer,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    ZBuffer,
    load_buffer,
    load_expert_trajectories,
    save_episodes,
)
from bufcore.errors import CorruptCheckpointError, CorruptFileError
from tests.buffers.test_base import expert_buffer, rewrite


def rows(count: int, start: int = 0) -> dict[str, Any]:
    """``count`` transitions numbered from ``start``: a nested observation and a reward."""
    steps = torch.arange(start, start + count, dtype=torch.float32)
    return {"observation": {"state": steps[:, None].repeat(1, 2)}, "reward": steps[:, None]}


def saved_file(tmp_path: Path, count: int) -> Path:
    """The buffer.hdf5 of a checkpoint holding ``count`` rows numbered 0.."""
    buffer = DictBuffer(capacity=count)
    buffer.extend(rows(count))
    buffer.save(tmp_path / "ckpt")
    return tmp_path / "ckpt" / "buffer.hdf5"


def rewards(buffer: DictBuffer) -> list[float]:
    full = buffer.get_full_buffer()
    return full["reward"][:, 0].tolist() if full else []


def snapshot(buffer: DictBuffer) -> tuple[int, bool, dict[str, Any]]:
    return buffer.cursor, buffer.is_full, buffer.get_full_buffer()


# ------------------------------------------------------------------------ load_hdf5
@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_load_hdf5_appends_the_file_rows_in_order_as_one_extend(
    tmp_path: Path, capacity: int
) -> None:
    buffer = DictBuffer(capacity=capacity)
    buffer.load_hdf5(saved_file(tmp_path, 5))
    assert rewards(buffer) == [float(v) for v in range(5)][-capacity:]
    assert (len(buffer), buffer.cursor) == (min(5, capacity), 5 % capacity)


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_load_hdf5_into_a_filled_buffer_continues_at_its_cursor(
    tmp_path: Path, capacity: int
) -> None:
    buffer = DictBuffer(capacity=capacity)
    buffer.extend(rows(2, start=100))
    buffer.load_hdf5(saved_file(tmp_path, 3))
    assert rewards(buffer) == [100.0, 101.0, 0.0, 1.0, 2.0][-capacity:]
    assert buffer.cursor == 5 % capacity


def test_load_hdf5_reads_a_file_written_by_bfm_zero(tmp_path: Path) -> None:
    file = tmp_path / "buffer.hdf5"
    with h5py.File(file, "w") as h5:  # BFM-Zero's layout: one top-level dataset per leaf
        h5.create_dataset("observation-state", data=np.ones((3, 4), np.float64))
        h5.create_dataset("action", data=np.zeros((3, 2), np.float32))
    buffer = DictBuffer(capacity=8)
    buffer.load_hdf5(file)
    storage = buffer.storage
    assert storage is not None and storage["observation"]["state"].dtype == torch.float64
    assert len(buffer) == 3


def test_load_hdf5_splits_names_on_the_separator_given_or_the_buffer_own(tmp_path: Path) -> None:
    file = tmp_path / "buffer.hdf5"
    with h5py.File(file, "w") as h5:
        h5.create_dataset("obs|state", data=np.ones((2, 1), np.float32))
    given = DictBuffer(capacity=4)
    given.load_hdf5(file, "|")
    own = DictBuffer(capacity=4, nested_key_separator="|")
    own.load_hdf5(file)
    flat = DictBuffer(capacity=4)
    flat.load_hdf5(file)
    assert given.get_full_buffer().keys() == own.get_full_buffer().keys() == {"obs"}
    assert flat.get_full_buffer().keys() == {"obs|state"}


def test_load_hdf5_rows_that_do_not_match_the_spec_change_nothing(tmp_path: Path) -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"reward": torch.ones(3, 1)})
    before = snapshot(buffer)
    with pytest.raises(ValueError, match="observation"):
        buffer.load_hdf5(saved_file(tmp_path, 2))
    after = snapshot(buffer)
    assert after[:2] == before[:2] and torch.equal(after[2]["reward"], before[2]["reward"])


@pytest.mark.parametrize(
    ("separator", "error", "match"),
    [(7, TypeError, "nested_key_separator: expected"), ("a/b", ValueError, "'/' is HDF5's")],
)
def test_load_hdf5_refuses_a_bad_separator_before_reading(
    tmp_path: Path, separator: Any, error: type[Exception], match: str
) -> None:
    buffer = DictBuffer(capacity=4)
    with pytest.raises(error, match=match):
        buffer.load_hdf5(tmp_path / "absent.hdf5", separator)
    assert buffer.empty()


def test_load_hdf5_of_a_missing_or_corrupt_file_changes_nothing(tmp_path: Path) -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend(rows(2))
    with pytest.raises(FileNotFoundError):
        buffer.load_hdf5(tmp_path / "absent.hdf5")
    (tmp_path / "junk.hdf5").write_bytes(b"junk")
    with pytest.raises(CorruptFileError):
        buffer.load_hdf5(tmp_path / "junk.hdf5")
    assert rewards(buffer) == [0.0, 1.0] and buffer.cursor == 2


def test_load_hdf5_fills_an_online_buffer_env_axis_and_trajectories(tmp_path: Path) -> None:
    source = TrajectoryDictBufferMultiDim(capacity=6, n_dim=2, end_key="done")
    done = torch.zeros(4, 3, 1, dtype=torch.bool)
    done[1, 0] = True
    source.extend({"observation": torch.arange(24.0).reshape(4, 3, 2), "done": done})
    source.save(tmp_path / "online")
    loaded = TrajectoryDictBufferMultiDim(capacity=6, n_dim=2, end_key="done")
    loaded.load_hdf5(tmp_path / "online" / "buffer.hdf5")
    assert (len(loaded), loaded.size()) == (4, 12)
    table, expected = loaded.trajectories(), source.trajectories()
    assert torch.equal(table.start, expected.start) and torch.equal(table.env, expected.env)


# ---------------------------------------------------------- save(nested_key_separator)
def dict_buffer() -> DictBuffer:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"obs": {"x-y": torch.ones(3, 2)}, "reward": torch.zeros(3, 1)})
    return buffer


def online_buffer() -> DictBuffer:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=4, n_dim=2, end_key="done", output_key_t=["obs"], output_key_tp1=["obs"]
    )
    buffer.extend({"obs": {"x-y": torch.ones(2, 3, 2)}, "done": torch.zeros(2, 3, 1, dtype=bool)})
    return buffer


@pytest.mark.parametrize("make", [dict_buffer, online_buffer])
def test_save_with_another_separator_joins_keys_with_it_and_loads_back(
    tmp_path: Path, make: Any
) -> None:
    with pytest.warns(UserWarning, match="contain the nested key separator '-'"):
        buffer = make()  # its key 'x-y' holds the buffer's own separator
    buffer.save(tmp_path / "ckpt", nested_key_separator="|")
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5") as h5:
        assert "obs|x-y" in h5
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())[
        "nested_key_separator"
    ] == "|"
    loaded = load_buffer(tmp_path / "ckpt")
    assert loaded.nested_key_separator == "|" and buffer.nested_key_separator == "-"
    assert torch.equal(loaded.storage["obs"]["x-y"], buffer.storage["obs"]["x-y"])


def test_save_takes_the_separator_positionally_as_bfm_zero(tmp_path: Path) -> None:
    buffer = DictBuffer(capacity=2)
    buffer.extend(rows(2))
    buffer.save(tmp_path / "ckpt", "::")
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5") as h5:
        assert set(h5) == {"observation::state", "reward"}


def test_an_expert_buffer_saved_with_another_separator_loads_back(tmp_path: Path) -> None:
    episodes = [{"obs": {"s": np.ones((3, 1), np.float32)}, "motion_id": np.full(3, m)}
                for m in range(2)]
    expert = TrajectoryDictBuffer(episodes, output_key_t=["obs"], output_key_tp1=[])
    expert.save(tmp_path / "ckpt", nested_key_separator="+")
    loaded = load_buffer(tmp_path / "ckpt")
    assert loaded.nested_key_separator == "+" and loaded.motion_ids == [0, 1]


@pytest.mark.parametrize(
    ("separator", "error", "match"),
    [
        ("", ValueError, "nested_key_separator: expected a non-empty str"),
        ("a/b", ValueError, "'/' is HDF5's group separator"),
        (3, TypeError, "nested_key_separator: expected a non-empty str"),
        ("y", ValueError, "contains the nested key separator 'y'"),
    ],
)
def test_a_refused_separator_writes_nothing_and_keeps_the_old_checkpoint(
    tmp_path: Path, separator: Any, error: type[Exception], match: str
) -> None:
    buffer = DictBuffer(capacity=2)
    buffer.extend({"ky": torch.ones(1, 1)})
    buffer.save(tmp_path / "ckpt")
    before = (tmp_path / "ckpt" / "manifest.json").read_bytes()
    with pytest.raises(error, match=match):
        buffer.save(tmp_path / "ckpt", nested_key_separator=separator)
    with pytest.raises(error, match=match):
        buffer.save(tmp_path / "new", nested_key_separator=separator)
    assert (tmp_path / "ckpt" / "manifest.json").read_bytes() == before
    assert not (tmp_path / "new").exists()


def test_a_zbuffer_has_no_separator_to_override(tmp_path: Path) -> None:
    zbuffer = ZBuffer(4, 2)
    zbuffer.add(torch.ones(2, 2))
    with pytest.raises(ValueError, match="a ZBuffer has no nested keys to join"):
        zbuffer.save(tmp_path / "z", nested_key_separator="|")
    assert not (tmp_path / "z").exists()


# ------------------------------------------------------------------------ file_names
def motion_episode(length: int, motion: int, done: list[int] | None = None) -> dict[str, Any]:
    episode: dict[str, Any] = {
        "observation": np.zeros((length, 2), np.float32),
        "motion_id": np.full(length, motion),
    }
    if done is not None:
        episode["done"] = np.array(done, bool)[:, None]
    return episode


@pytest.fixture
def motion_list(tmp_path: Path) -> Path:
    """walk.h5 (motions 0, 1) and sub/run.h5 (motion 2), listed in that order."""
    (tmp_path / "sub").mkdir()
    save_episodes(tmp_path / "walk.h5", [motion_episode(3, 0), motion_episode(4, 1)])
    save_episodes(tmp_path / "sub" / "run.h5", [motion_episode(2, 2)])
    (tmp_path / "motions.txt").write_text("walk.h5\nsub/run.h5\n")
    return tmp_path / "motions.txt"


def test_file_names_give_the_file_of_each_trajectory_aligned_with_motion_ids(
    motion_list: Path,
) -> None:
    root = motion_list.parent
    expert = load_expert_trajectories(motion_list, root, seq_length=1, device="cpu")
    assert expert.motion_ids == [0, 1, 2]
    assert expert.file_names == [str(root / "walk.h5")] * 2 + [str(root / "sub" / "run.h5")]


def test_an_episode_split_by_its_end_flags_names_its_file_for_each_part(tmp_path: Path) -> None:
    save_episodes(tmp_path / "a.h5", [motion_episode(4, 0, [0, 1, 0, 1])])
    save_episodes(tmp_path / "b.h5", [motion_episode(2, 1, [0, 1])])
    (tmp_path / "m.txt").write_text("a.h5\nb.h5\n")
    expert = load_expert_trajectories(tmp_path / "m.txt", tmp_path, seq_length=1, device="cpu")
    assert expert.lengths.tolist() == [2, 2, 2]
    assert expert.file_names == [str(tmp_path / "a.h5")] * 2 + [str(tmp_path / "b.h5")]


def test_a_buffer_built_from_episodes_has_no_file_names() -> None:
    expert = TrajectoryDictBuffer([motion_episode(3, 0)])
    assert not hasattr(expert, "file_names")
    with pytest.raises(AttributeError, match="built without file names"):
        _ = expert.file_names


def test_file_names_can_be_assigned_as_bfm_zero_does_and_are_a_copy() -> None:
    expert = TrajectoryDictBuffer([motion_episode(3, 0), motion_episode(2, 1)])
    names = ["walk", "run"]
    expert.file_names = names
    names.append("jump")
    expert.file_names.append("skip")
    assert expert.file_names == ["walk", "run"]


@pytest.mark.parametrize(
    ("names", "error", "match"),
    [
        (["only one"], ValueError, "expected 2 names, one per trajectory, got 1"),
        (["a", 3], TypeError, r"file_names\[1\]: expected a str, got int"),
        ("ab", TypeError, "file_names: expected a list of str, got str"),
        (None, TypeError, "file_names: expected a list of str, got NoneType"),
    ],
)
def test_assigning_bad_file_names_raises_and_keeps_the_old_ones(
    names: Any, error: type[Exception], match: str
) -> None:
    expert = TrajectoryDictBuffer([motion_episode(3, 0), motion_episode(2, 1)])
    expert.file_names = ["walk", "run"]
    with pytest.raises(error, match=match):
        expert.file_names = names
    assert expert.file_names == ["walk", "run"]


def test_file_names_are_saved_and_load_back(motion_list: Path, tmp_path: Path) -> None:
    expert = load_expert_trajectories(motion_list, motion_list.parent, seq_length=1, device="cpu")
    expert.save(tmp_path / "ckpt")
    assert load_buffer(tmp_path / "ckpt").file_names == expert.file_names
    assert load_buffer(tmp_path / "ckpt", leaves=[]).file_names == expert.file_names


def test_a_checkpoint_without_file_names_loads_without_them(tmp_path: Path) -> None:
    assert not hasattr(load_buffer(expert_buffer(tmp_path / "expert")), "file_names")


@pytest.mark.parametrize(
    ("saved", "match"),
    [
        (["a", "b"], r"state\['file_names'\]: expected 3 names"),
        (["a", "b", 7], r"state\['file_names'\]\[2\]: expected a str"),
        ("abc", r"state\['file_names'\]: expected a list of str"),
    ],
)
def test_malformed_saved_file_names_are_a_corrupt_state(
    tmp_path: Path, saved: Any, match: str
) -> None:
    path = expert_buffer(tmp_path / "expert")
    rewrite(path, "state.json", {"file_names": saved})
    with pytest.raises(CorruptCheckpointError, match=r"state\.json: " + match):
        load_buffer(path)

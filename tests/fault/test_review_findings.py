"""Defects a second hostile review found after the first fixes, each pinned where it was found:
draws undone when a sample fails after drawing, clashing key paths in a checkpoint, malformed
generator state and manifests, Python numbers at full precision, unknown device backends, and
episode datasets this host cannot decode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

import bufcore.storage.ring
from bufcore import (
    CorruptCheckpointError,
    CorruptFileError,
    DictBuffer,
    TrajectoryDictBuffer,
    ZBuffer,
    load_buffer,
)
from bufcore.persist.episodes import load_episode_based_h5
from tests.support import reseal, rewrite_file


def filled(capacity: int = 5) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=3)
    buffer.extend({"x": np.arange(capacity, dtype=np.float32)[:, None]})
    return buffer


def out_of_memory(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate")


@pytest.mark.parametrize("capacity", [1, 2, 5])
def test_a_sample_whose_output_cannot_be_allocated_leaves_the_generator_unchanged(
    capacity: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    buffer, twin = filled(capacity), filled(capacity)
    monkeypatch.setattr(bufcore.storage.ring.RingStorage, "gather", out_of_memory)
    with pytest.raises(MemoryError, match="batch_size: the output cannot be allocated"):
        buffer.sample(4)
    monkeypatch.undo()
    assert torch.equal(buffer.sample(4)["x"], twin.sample(4)["x"])


def test_a_z_sample_whose_output_cannot_be_allocated_leaves_the_generator_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buffer, twin = ZBuffer(4, 2, seed=1), ZBuffer(4, 2, seed=1)
    for z in (buffer, twin):
        z.add(np.ones((3, 2), np.float32))
    monkeypatch.setattr(bufcore.storage.ring.RingStorage, "gather", out_of_memory)
    with pytest.raises(MemoryError, match="num: the output cannot be allocated"):
        buffer.sample(2)
    monkeypatch.undo()
    assert torch.equal(buffer._generator.get_state(), twin._generator.get_state())


def test_an_expert_sample_whose_output_cannot_be_allocated_leaves_the_generator_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    episodes = [{"observation": np.zeros((6, 2), np.float32), "motion_id": np.zeros(6, np.int64)}]
    buffer = TrajectoryDictBuffer(episodes, seq_length=2, seed=5)
    before = buffer._generator.get_state().clone()
    monkeypatch.setattr(bufcore.storage.ring.RingStorage, "gather", out_of_memory)
    with pytest.raises(MemoryError, match="batch_size"):
        buffer.sample(4)
    assert torch.equal(buffer._generator.get_state(), before)


@pytest.mark.parametrize("batch_size", [2**62 + 1, 2**63, 2**70])
def test_a_batch_size_no_tensor_can_hold_is_refused_naming_it(batch_size: int) -> None:
    with pytest.raises(ValueError, match=r"batch_size: expected an int in \[1, "):
        filled().sample(batch_size)


# ------------------------------------------------------------------------ checkpoints
def test_a_leaf_whose_key_path_nests_into_another_leaf_is_a_corrupt_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bfm"
    path.mkdir()
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5["a"] = np.zeros((2, 1), np.float32)
        h5["a-b"] = np.zeros((2, 1), np.float32)
    config = {
        "capacity": 2,
        "device": "cpu",
        "nested_key_separator": "-",
        "_idx": 0,
        "_is_full": True,
        "__target__": "humanoidverse.agents.buffers.transition.DictBuffer",
    }
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CorruptCheckpointError, match=r"leaf \['a'\] is also a group holding"):
        load_buffer(path)


def test_an_empty_generator_state_is_a_corrupt_state_json(tmp_path: Path) -> None:
    filled().save(tmp_path / "ckpt")
    state = json.loads((tmp_path / "ckpt" / "state.json").read_text())
    state["generator"]["state"] = ""
    rewrite_file(tmp_path / "ckpt", "state.json", (json.dumps(state) + "\n").encode())
    with pytest.raises(CorruptCheckpointError, match="generator") as caught:
        load_buffer(tmp_path / "ckpt")
    assert caught.value.path.name == "state.json"


def test_a_manifest_without_env_count_is_a_corrupt_manifest(tmp_path: Path) -> None:
    filled().save(tmp_path / "ckpt")
    reseal(tmp_path / "ckpt", lambda manifest: manifest.pop("env_count"))
    with pytest.raises(CorruptCheckpointError, match="'env_count' must be present") as caught:
        load_buffer(tmp_path / "ckpt")
    assert caught.value.path.name == "manifest.json"


# ------------------------------------------------------------------------ numbers
def test_python_floats_reach_float64_storage_unrounded() -> None:
    buffer = DictBuffer(capacity=3)
    buffer.extend({"x": np.array([[0.5]])})
    buffer.extend({"x": [[0.1], [1e300]]})
    assert buffer.get_full_buffer()["x"][1:, 0].tolist() == [0.1, 1e300]


def test_python_ints_beyond_int64_are_a_value_error_naming_the_key() -> None:
    with pytest.raises(ValueError, match=r"data\['x'\]: integers beyond the int64 range"):
        DictBuffer(capacity=2).extend({"x": [[2**70]]})


def test_a_huge_python_int_priority_is_reported_as_beyond_float32() -> None:
    episodes = [{"observation": np.zeros((4, 2), np.float32), "motion_id": np.zeros(4, np.int64)}]
    buffer = TrajectoryDictBuffer(episodes, seq_length=2)
    with pytest.raises(ValueError, match="exceeds float32 max"):
        buffer.update_priorities([2**200], [0])


@pytest.mark.parametrize("device", ["hpu", "privateuseone"])
def test_a_device_backend_torch_lacks_is_a_value_error_naming_device(device: str) -> None:
    with pytest.raises(ValueError, match=rf"device: device '{device}(:0)?' is not usable"):
        DictBuffer(capacity=2, device=device)


# ------------------------------------------------------------------------ episode files
def test_an_episode_dataset_needing_a_filter_this_host_lacks_is_a_corrupt_file(
    tmp_path: Path,
) -> None:
    file = tmp_path / "walk.h5"
    with h5py.File(file, "w") as h5:
        h5.attrs["num_episodes"] = 1
        group = h5.create_group("ep_0")
        group["motion_id"] = np.zeros(4, np.int64)
        plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        plist.set_chunk((4, 2))
        plist.set_filter(32123, h5py.h5z.FLAG_OPTIONAL)
        space = h5py.h5s.create_simple((4, 2))
        dataset = h5py.h5d.create(
            group.id, b"observation", h5py.h5t.NATIVE_FLOAT, space, dcpl=plist
        )
        dataset.write_direct_chunk((0, 0), np.ones((4, 2), np.float32).tobytes(), filter_mask=0)
    with pytest.raises(
        CorruptFileError, match="dataset /ep_0/observation cannot be read"
    ) as caught:
        load_episode_based_h5(file)
    assert caught.value.path == file

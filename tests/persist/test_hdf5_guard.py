"""Damaged HDF5 metadata reads as damage (bufcore.persist.hdf5_guard.damage_reported): every
reader of HDF5 raises a CorruptFileError naming the file, never h5py's raw KeyError,
RuntimeError, ValueError or TypeError."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

import bufcore
from bufcore.errors import CorruptCheckpointError, CorruptFileError
from bufcore.inspect import summarize_checkpoint


def damage_name(file: Path, name: bytes) -> None:
    """Make the stored link name ``name`` invalid UTF-8, as a flipped bit could."""
    data = file.read_bytes()
    assert data.count(name) >= 1
    file.write_bytes(data.replace(name, b"\xff" + name[1:], 1))


def bfm_checkpoint(path: Path) -> Path:
    path.mkdir()
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("observation", data=np.ones((3, 5), np.float32))
    config = {"capacity": 4, "device": "cpu", "__target__":
              "humanoidverse.agents.buffers.transition.DictBuffer"}
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_damaged_metadata_in_a_bfm_zero_checkpoint_is_a_corrupt_checkpoint_on_load(
    tmp_path: Path,
) -> None:
    path = bfm_checkpoint(tmp_path / "bfm")
    damage_name(path / "buffer.hdf5", b"observation")
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: damaged HDF5 metadata"):
        bufcore.load_buffer(path)


def test_damaged_metadata_is_a_corrupt_checkpoint_in_a_summary(tmp_path: Path) -> None:
    buffer = bufcore.DictBuffer(capacity=4)
    buffer.extend({"action": np.zeros((3, 2), np.int64)})
    buffer.save(tmp_path / "ckpt")
    damage_name(tmp_path / "ckpt" / "buffer.hdf5", b"action")
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: damaged HDF5 metadata"):
        summarize_checkpoint(tmp_path / "ckpt")


def test_damaged_metadata_in_an_episode_file_is_a_corrupt_file(tmp_path: Path) -> None:
    file = tmp_path / "episodes.hdf5"
    bufcore.save_episodes(file, [{"observation": np.ones((4, 2), np.float32)}])
    damage_name(file, b"observation")
    with pytest.raises(CorruptFileError, match=r"episodes\.hdf5: damaged HDF5 metadata"):
        bufcore.load_episode_based_h5(file)

"""A damaged checkpoint file raises CorruptCheckpointError naming that file; it never loads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from bufcore import CorruptCheckpointError, DictBuffer, load_buffer

FILES = ["buffer.hdf5", "config.json", "manifest.json", "state.json"]
LOADERS: list[Any] = [
    pytest.param(DictBuffer.load, id="DictBuffer.load"),
    pytest.param(load_buffer, id="load_buffer"),
]
Loader = Callable[[Path], Any]


def save_checkpoint(path: Path) -> Path:
    """A bufcore checkpoint with nested keys, a bool leaf and wrapped-around rows."""
    ids = np.arange(300, dtype=np.int64)
    buffer = DictBuffer(capacity=256, seed=5)
    buffer.extend(
        {
            "observation": {
                "state": np.stack([ids, -ids], 1).astype(np.float32),
                "deep": {"x": ids[:, None].astype(np.int32)},
            },
            "action": np.sin(ids)[:, None].repeat(3, 1),
            "terminated": (ids % 5 == 0)[:, None],
        }
    )
    buffer.save(path)
    return path


def save_bfm_zero_checkpoint(path: Path) -> Path:
    """A checkpoint as BFM-Zero itself writes it: config.json and buffer.hdf5, no manifest."""
    path.mkdir()
    rng = np.random.default_rng(0)
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("observation-state", data=rng.standard_normal((50, 9), np.float32))
        h5.create_dataset("action", data=rng.standard_normal((50, 3), np.float32))
        h5.create_dataset("terminated", data=rng.random((50, 1)) < 0.1)
    config = {
        "capacity": 64,
        "device": "cpu",
        "nested_key_separator": "-",
        "_idx": 50,
        "_is_full": False,
        "__target__": "humanoidverse.agents.buffers.transition.DictBuffer",
    }
    (path / "config.json").write_text(json.dumps(config, indent=4))
    return path


def truncate(file: Path, fraction: float) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: int(len(data) * fraction)])


def flip_bit(file: Path, where: str, bit: int) -> None:
    data = bytearray(file.read_bytes())
    offset = {"start": 0, "middle": len(data) // 2, "end": len(data) - 1}[where]
    data[offset] ^= 1 << bit
    file.write_bytes(bytes(data))


def assert_corrupt(load: Loader, checkpoint: Path, damaged: str) -> None:
    with pytest.raises(CorruptCheckpointError) as caught:
        load(checkpoint)
    assert caught.value.path.name == damaged
    assert damaged in str(caught.value)


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return save_checkpoint(tmp_path / "ckpt")


def test_the_undamaged_checkpoint_loads(checkpoint: Path) -> None:
    assert len(DictBuffer.load(checkpoint)) == 256


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize("fraction", [0.5, 0.0], ids=["to-half", "to-empty"])
@pytest.mark.parametrize("name", FILES)
def test_a_truncated_file_raises_corrupt_checkpoint_error_naming_it(
    checkpoint: Path, name: str, fraction: float, load: Loader
) -> None:
    truncate(checkpoint / name, fraction)
    assert_corrupt(load, checkpoint, name)


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize("bit", [0, 5, 7])
@pytest.mark.parametrize("where", ["start", "middle", "end"])
@pytest.mark.parametrize("name", FILES)
def test_a_flipped_bit_raises_corrupt_checkpoint_error_naming_the_file(
    checkpoint: Path, name: str, where: str, bit: int, load: Loader
) -> None:
    flip_bit(checkpoint / name, where, bit)
    assert_corrupt(load, checkpoint, name)


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize("name", ["buffer.hdf5", "config.json", "state.json"])
def test_a_file_listed_in_the_manifest_that_is_missing_raises_naming_it(
    checkpoint: Path, name: str, load: Loader
) -> None:
    (checkpoint / name).unlink()
    assert_corrupt(load, checkpoint, name)


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize("fraction", [0.5, 0.0], ids=["to-half", "to-empty"])
@pytest.mark.parametrize("name", ["buffer.hdf5", "config.json"])
def test_a_truncated_file_of_a_bfm_zero_checkpoint_raises_naming_it(
    tmp_path: Path, name: str, fraction: float, load: Loader
) -> None:
    checkpoint = save_bfm_zero_checkpoint(tmp_path / "bfm")
    truncate(checkpoint / name, fraction)
    assert_corrupt(load, checkpoint, name)


def test_the_undamaged_bfm_zero_checkpoint_loads(tmp_path: Path) -> None:
    assert len(load_buffer(save_bfm_zero_checkpoint(tmp_path / "bfm"))) == 50


@pytest.mark.parametrize("load", LOADERS)
@pytest.mark.parametrize("bit", [0, 5, 7])
def test_a_bfm_zero_payload_with_a_damaged_signature_raises_naming_it(
    tmp_path: Path, bit: int, load: Loader
) -> None:
    checkpoint = save_bfm_zero_checkpoint(tmp_path / "bfm")
    flip_bit(checkpoint / "buffer.hdf5", "start", bit)
    assert_corrupt(load, checkpoint, "buffer.hdf5")


@pytest.mark.parametrize("load", LOADERS)
def test_a_bufcore_checkpoint_that_lost_its_manifest_raises_naming_it(
    checkpoint: Path, load: Loader
) -> None:
    # Without this, deleting manifest.json turns off every checksum: the directory would pass
    # for a BFM-Zero one although bufcore wrote it (its state.json and __target__ say so).
    (checkpoint / "manifest.json").unlink()
    assert_corrupt(load, checkpoint, "manifest.json")

"""Packed DI-engine buffers on each device: rows, draws and checkpoints stay on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import AdvancedReplayBuffer, NaiveReplayBuffer, load_buffer
from tests.support import DEVICES


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cls", [NaiveReplayBuffer, AdvancedReplayBuffer])
def test_packed_items_live_and_come_back_on_the_device(cls: type[Any], device: str) -> None:
    buffer = cls(replay_buffer_size=5, seed=0, storage="packed", device=device)
    buffer.push([{"obs": torch.full((3,), float(i))} for i in range(7)], 0)
    batch = buffer.sample(4, 0)
    assert batch is not None
    assert all(item["obs"].device.type == device for item in batch)
    assert all(float(item["obs"][0]) in {2.0, 3.0, 4.0, 5.0, 6.0} for item in batch)


@pytest.mark.parametrize("device", DEVICES)
def test_a_packed_checkpoint_loads_onto_the_device_and_samples_the_same(
    tmp_path: Path, device: str
) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=1, storage="packed", device=device)
    buffer.push([{"obs": torch.full((2,), float(i)), "priority": i + 1.0} for i in range(4)], 0)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert loaded.device.type == device
    first, second = loaded.sample(3, 0), buffer.sample(3, 0)
    assert first is not None and second is not None
    assert [item["replay_buffer_idx"] for item in first] == [
        item["replay_buffer_idx"] for item in second]

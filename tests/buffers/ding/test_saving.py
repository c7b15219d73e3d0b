"""Checkpoints of the DI-engine buffers: bufcore's format, never pickle; load_buffer, inspect."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import (
    AdvancedReplayBuffer,
    CorruptCheckpointError,
    EpisodeReplayBuffer,
    NaiveReplayBuffer,
    load_buffer,
)
from bufcore.inspect import inspect_path, render, summarize_checkpoint, to_json
from tests.support import rewrite_file


def rich_item(i: int) -> dict[str, Any]:
    """One of each kind a list-mode item may hold."""
    return {
        "obs": torch.full((2,), float(i)),
        "frame": np.full((2, 2), i, dtype=np.uint8),
        "reward": i * 0.5,
        "steps": i,
        "done": i % 2 == 0,
        "tag": f"run-é-{i}",
        "info": {"nested": torch.tensor(i)},
        "collect_iter": i,
    }


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


CLASSES = [NaiveReplayBuffer, AdvancedReplayBuffer]


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("count", [1, 2, 5])
def test_list_items_of_every_kind_come_back_as_pushed(
    tmp_path: Path, cls: type[Any], count: int
) -> None:
    buffer = cls(replay_buffer_size=3, seed=0)
    buffer.push([rich_item(i) for i in range(count)], 0)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert type(loaded) is cls
    assert all(same(a, b) for a, b in zip(loaded.held_items(), buffer.held_items(), strict=True))
    assert (loaded.count(), loaded.cursor, loaded.is_full, loaded.push_count) == (
        buffer.count(), buffer.cursor, buffer.is_full, buffer.push_count)


@pytest.mark.parametrize("cls", CLASSES)
def test_a_loaded_buffer_samples_as_the_saved_one_would(tmp_path: Path, cls: type[Any]) -> None:
    buffer = cls(replay_buffer_size=5, seed=3)
    buffer.push([{"i": i, "collect_iter": 0} for i in range(7)], 0)
    buffer.sample(2, 1)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert loaded.sample(3, 4) == buffer.sample(3, 4)


@pytest.mark.parametrize("cls", CLASSES)
def test_packed_rows_come_back_as_stored(tmp_path: Path, cls: type[Any]) -> None:
    buffer = cls(replay_buffer_size=4, seed=0, storage="packed")
    buffer.push([{"obs": {"x": torch.full((3,), float(i))}, "r": i} for i in range(6)], 0)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert loaded.storage_mode == "packed"
    assert all(same(a, b) for a, b in zip(loaded.held_items(), buffer.held_items(), strict=True))


def test_priorities_use_counts_and_the_beta_step_survive_a_save(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=0, anneal_step=10)
    buffer.push([{"i": i, "priority": float(i + 1)} for i in range(4)], 0)
    batch = buffer.sample(2, 0)
    assert batch is not None
    buffer.update({"replay_unique_id": [batch[0]["replay_unique_id"]],
                   "replay_buffer_idx": [batch[0]["replay_buffer_idx"]], "priority": [9.0]})
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert torch.equal(loaded.priorities(), buffer.priorities())
    assert (loaded.beta, loaded.max_priority) == (buffer.beta, buffer.max_priority)
    assert np.array_equal(loaded._use, buffer._use)


def test_removed_items_stay_removed_after_a_save(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=3, seed=0, max_use=1)
    buffer.push([{"i": i} for i in range(3)], 0)
    buffer.sample(1, 0)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert loaded.count() == 2
    assert sorted(item["i"] for item in loaded.sample(2, 0)) == sorted(
        item["i"] for item in buffer.held_items())


def test_unique_ids_of_a_loaded_buffer_still_match_for_updates(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0)
    buffer.push([{"i": 0}, {"i": 1}], 0)
    batch = buffer.sample(1, 0)
    assert batch is not None
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    info = {"replay_unique_id": [batch[0]["replay_unique_id"]],
            "replay_buffer_idx": [batch[0]["replay_buffer_idx"]], "priority": [3.0]}
    assert loaded.update(info) == 1


@pytest.mark.parametrize("cls", [*CLASSES, EpisodeReplayBuffer])
def test_an_empty_buffer_saves_and_loads(tmp_path: Path, cls: type[Any]) -> None:
    cls(replay_buffer_size=3).save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert type(loaded) is cls and loaded.count() == 0


@pytest.mark.parametrize("cls", CLASSES)
def test_a_cleared_buffer_saves_and_loads_empty(tmp_path: Path, cls: type[Any]) -> None:
    buffer = cls(replay_buffer_size=3)
    buffer.push([{"i": 1}], 0)
    buffer.clear()
    buffer.save(tmp_path / "ckpt")
    assert load_buffer(tmp_path / "ckpt").count() == 0


@pytest.mark.parametrize("lengths", [[1], [2, 3], [4, 1, 5, 2]])
def test_episodes_come_back_as_pushed(tmp_path: Path, lengths: list[int]) -> None:
    buffer = EpisodeReplayBuffer(replay_buffer_size=3, seed=0)
    episodes = [[rich_item(10 * e + t) for t in range(n)] for e, n in enumerate(lengths)]
    buffer.push(episodes, 0)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert type(loaded) is EpisodeReplayBuffer and loaded.episode_len == buffer.episode_len
    for a, b in zip(loaded.held_items(), buffer.held_items(), strict=True):
        assert len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))


def test_an_item_holding_an_object_cannot_be_saved_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3)
    buffer.push([{"a": 1}, {"a": object()}], 0)
    with pytest.raises(TypeError, match=r"item 1\['a'\]: a object cannot be saved without pickle"):
        buffer.save_data(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt").exists()


def test_items_with_other_keys_cannot_be_saved(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3)
    buffer.push([{"a": 1}, {"b": 1}], 0)
    with pytest.raises(ValueError, match="every item must have the same keys"):
        buffer.save(tmp_path / "ckpt")


def test_items_whose_tensors_differ_in_shape_cannot_be_saved(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3)
    buffer.push([{"a": torch.zeros(2)}, {"a": torch.zeros(3)}], 0)
    with pytest.raises(ValueError, match=r"item 1\['a'\]: expected shape \[2\]"):
        buffer.save(tmp_path / "ckpt")


def test_save_data_writes_a_checkpoint_load_data_pushes_its_items(tmp_path: Path) -> None:
    source = AdvancedReplayBuffer(replay_buffer_size=3, seed=0)
    source.push([{"i": i, "priority": float(i + 1)} for i in range(4)], 0)
    source.save_data(tmp_path / "data")
    target = AdvancedReplayBuffer(replay_buffer_size=5, seed=0)
    target.push({"i": 9}, 0)
    target.load_data(tmp_path / "data")
    assert [item["i"] for item in target.held_items()] == [9, 1, 2, 3]
    assert target.priorities().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_load_data_into_a_naive_buffer_pushes_the_items(tmp_path: Path) -> None:
    source = NaiveReplayBuffer(replay_buffer_size=3)
    source.push([{"i": i} for i in range(2)], 0)
    source.save_data(tmp_path / "data")
    target = NaiveReplayBuffer(replay_buffer_size=3)
    target.load_data(tmp_path / "data")
    assert target.held_items() == [{"i": 0}, {"i": 1}]


def test_a_state_dict_builds_the_same_buffer() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=3, seed=1)
    buffer.push([{"i": i} for i in range(4)], 0)
    twin = AdvancedReplayBuffer.from_state_dict(buffer.state_dict())
    assert twin.sample(2, 0) == buffer.sample(2, 0)


def test_load_state_dict_replaces_the_buffer_in_place() -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3, seed=1)
    buffer.push([{"i": i} for i in range(2)], 0)
    other = NaiveReplayBuffer(replay_buffer_size=3)
    other.load_state_dict(buffer.state_dict())
    assert other.held_items() == buffer.held_items()


def test_a_state_of_another_kind_is_refused_by_load_state_dict() -> None:
    naive = NaiveReplayBuffer(replay_buffer_size=3)
    with pytest.raises(ValueError, match="holds a NaiveReplayBuffer"):
        AdvancedReplayBuffer(replay_buffer_size=3).load_state_dict(naive.state_dict())


def test_a_loaded_partial_list_buffer_has_only_the_loaded_keys(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3)
    buffer.push([{"a": i, "b": float(i)} for i in range(2)], 0)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt", leaves=["a"])
    assert loaded.held_items() == [{"a": 0}, {"a": 1}]


def test_a_config_json_whose_capacity_differs_from_the_cfg_is_corrupt(tmp_path: Path) -> None:
    NaiveReplayBuffer(replay_buffer_size=3).save(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    config["capacity"] = 4
    rewrite_file(tmp_path / "ckpt", "config.json", json.dumps(config).encode())
    with pytest.raises(CorruptCheckpointError, match="replay_buffer_size"):
        load_buffer(tmp_path / "ckpt")


# ------------------------------------------------------------------ inspect
def test_inspect_summarizes_a_di_engine_checkpoint(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=0, storage="packed")
    buffer.push([{"obs": torch.zeros(2)} for _ in range(3)], 0)
    buffer.sample(2, 0)
    buffer.save(tmp_path / "ckpt")
    summary = summarize_checkpoint(tmp_path / "ckpt")
    assert summary.kind == "AdvancedReplayBuffer" and summary.length == 3
    assert summary.ding is not None and summary.ding.storage == "packed"
    assert (summary.ding.count, summary.ding.push_count) == (3, 3)
    assert summary.ding.counters["sampled"] == 2
    assert summary.ding.config["max_use"] == "inf"
    assert summary.sampler is not None and summary.sampler.options["alpha"] == 0.6


def test_inspect_renders_episodes_as_transitions_in_slots(tmp_path: Path) -> None:
    buffer = EpisodeReplayBuffer(replay_buffer_size=4)
    buffer.push([[{"t": t} for t in range(3)], [{"t": 0}]], 0)
    buffer.save(tmp_path / "ckpt")
    text = "\n".join(render(inspect_path(tmp_path / "ckpt")))
    assert "4 transitions of episodes in 4 slots" in text
    assert "2 valid episodes, list storage" in text


def test_inspect_json_of_a_di_engine_checkpoint_is_plain_json(tmp_path: Path) -> None:
    NaiveReplayBuffer(replay_buffer_size=2).save(tmp_path / "ckpt")
    data = to_json(inspect_path(tmp_path / "ckpt"))
    json.dumps(data, allow_nan=False)
    assert data["buffers"][0]["ding"]["unit"] == "item"


def test_load_state_dict_keeps_the_buffers_own_clock() -> None:
    class Clock:
        now = 100.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    source = AdvancedReplayBuffer(replay_buffer_size=4, seed=0)
    source.push([{"i": i} for i in range(4)], 0)
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=0, clock=clock)
    buffer.load_state_dict(source.state_dict())
    pushes = buffer.stats()["push_count"]
    clock.now += 3600.0  # an hour on the buffer's clock: the controller's counts fade away
    assert buffer._thruput.counts.counts()[0] < 1e-3 and buffer.stats()["push_count"] == pushes

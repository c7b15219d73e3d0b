"""NaiveReplayBuffer: DI-engine's FIFO ring with uniform sampling (REFERENCE §11.2)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from bufcore import NaiveReplayBuffer

SIZES = [1, 2, 5]


def items(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"obs": torch.tensor([float(i)]), "i": i} for i in range(start, start + count)]


def filled(size: int, count: int, **options: Any) -> NaiveReplayBuffer:
    buffer = NaiveReplayBuffer(replay_buffer_size=size, seed=0, **options)
    buffer.push(items(count), 0)
    return buffer


@pytest.mark.parametrize("storage", ["list", "packed"])
def test_sampling_zero_items_gives_an_empty_list(storage: str) -> None:
    assert filled(3, 2, storage=storage).sample(0, 0) == []


def test_sampling_zero_items_of_an_empty_buffer_gives_an_empty_list() -> None:
    assert NaiveReplayBuffer(replay_buffer_size=3).sample(0, 0) == []


@pytest.mark.parametrize("storage", ["list", "packed"])
def test_an_empty_buffer_refuses_with_none(storage: str) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3, storage=storage)
    assert buffer.sample(1, 0) is None
    assert "empty" in buffer.stats()["last_refusal"]


@pytest.mark.parametrize("size", SIZES)
def test_fewer_items_than_asked_without_replacement_refuses_with_none(size: int) -> None:
    buffer = filled(size, size)
    assert buffer.sample(size + 1, 0) is None


@pytest.mark.parametrize("size", SIZES)
def test_with_replacement_more_items_than_held_can_be_drawn(size: int) -> None:
    batch = filled(size, size).sample(size + 3, 0, replace=True)
    assert batch is not None and len(batch) == size + 3


@pytest.mark.parametrize("size", SIZES)
def test_without_replacement_every_held_item_comes_once(size: int) -> None:
    batch = filled(size, size).sample(size, 0)
    assert batch is not None
    assert sorted(item["i"] for item in batch) == list(range(size))


@pytest.mark.parametrize("size", SIZES)
def test_pushes_past_the_size_overwrite_the_oldest(size: int) -> None:
    buffer = filled(size, size + 3)
    batch = buffer.sample(size, 0)
    assert batch is not None
    assert sorted(item["i"] for item in batch) == list(range(3, size + 3))
    assert (buffer.count(), buffer.push_count, buffer.cursor) == (size, size + 3, 3 % size)


def test_one_push_longer_than_the_ring_keeps_its_last_items() -> None:
    buffer = filled(3, 7)
    assert sorted(item["i"] for item in buffer.held_items()) == [4, 5, 6]
    assert buffer.cursor == 1


def test_a_single_dict_is_pushed_as_one_item() -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3)
    buffer.push({"i": 1}, 0)
    assert buffer.count() == 1 and buffer.held_items() == [{"i": 1}]


def test_sample_range_selects_physical_slots_not_the_latest_pushed() -> None:
    # Slots after 7 pushes into 5: [5, 6, 2, 3, 4]; the last two slots hold 3 and 4.
    buffer = filled(5, 7)
    batch = buffer.sample(2, 0, sample_range=slice(-2, None))
    assert batch is not None and sorted(item["i"] for item in batch) == [3, 4]


def test_a_sample_range_with_too_few_slots_refuses_without_replacement() -> None:
    assert filled(5, 5).sample(3, 0, sample_range=slice(0, 2)) is None


def test_items_come_back_as_stored_without_sampling_keys() -> None:
    batch = filled(2, 2).sample(2, 0)
    assert batch is not None and all(set(item) == {"obs", "i"} for item in batch)


def test_a_push_leaves_the_callers_dicts_alone() -> None:
    pushed = items(2)
    before = copy.deepcopy(pushed)
    buffer = NaiveReplayBuffer(replay_buffer_size=2)
    buffer.push(pushed, 0)
    buffer.sample(2, 0)
    assert [set(item) for item in pushed] == [set(item) for item in before]


def test_without_deepcopy_the_items_share_the_pushed_values() -> None:
    pushed = items(1)
    buffer = NaiveReplayBuffer(replay_buffer_size=1)
    buffer.push(pushed, 0)
    batch = buffer.sample(1, 0)
    assert batch is not None and batch[0]["obs"] is pushed[0]["obs"]


def test_with_deepcopy_the_items_are_copies_at_push_and_at_sample() -> None:
    pushed = items(1)
    buffer = NaiveReplayBuffer(replay_buffer_size=1, deepcopy=True)
    buffer.push(pushed, 0)
    pushed[0]["obs"] += 10
    first, second = buffer.sample(1, 0), buffer.sample(1, 0)
    assert first is not None and second is not None
    assert first[0]["obs"].item() == 0.0 and first[0]["obs"] is not second[0]["obs"]


def test_packed_items_come_back_as_tensors_of_their_rows() -> None:
    buffer = filled(3, 3, storage="packed")
    batch = buffer.sample(3, 0)
    assert batch is not None
    assert sorted(int(item["i"]) for item in batch) == [0, 1, 2]
    assert all(item["obs"].shape == (1,) and float(item["obs"]) == item["i"] for item in batch)


def test_the_same_seed_draws_the_same_items() -> None:
    first, second = filled(5, 5), filled(5, 5)
    draws = [[item["i"] for item in first.sample(3, 0) or []] for _ in range(4)]
    again = [[item["i"] for item in second.sample(3, 0) or []] for _ in range(4)]
    assert draws == again


def test_clear_empties_the_buffer_and_resets_push_count() -> None:
    buffer = filled(3, 4)
    buffer.clear()
    assert (buffer.count(), buffer.push_count, buffer.cursor) == (0, 0, 0)
    assert buffer.sample(1, 0) is None


def test_a_cleared_buffer_fills_again_from_slot_zero() -> None:
    buffer = filled(3, 4)
    buffer.clear()
    buffer.push(items(1, start=9), 0)
    assert buffer.held_items() == [{"obs": torch.tensor([9.0]), "i": 9}]


def test_update_changes_nothing_and_warns() -> None:
    buffer = filled(2, 2)
    with pytest.warns(UserWarning, match="no priorities"):
        assert buffer.update({"priority": [1.0]}) == 0


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (3, TypeError),
        ([{"i": 1}, 2], TypeError),
        ([{"_ding": 1}], ValueError),
        ([{"i": 1, "collect_iter": 1.5}], TypeError),
        ([{"i": 1, "collect_iter": []}], ValueError),
    ],
)
def test_a_bad_push_raises_and_stores_nothing(data: Any, error: type[Exception]) -> None:
    buffer = filled(3, 1)
    with pytest.raises(error, match="data"):
        buffer.push(data, 0)
    assert (buffer.count(), buffer.push_count, buffer.cursor) == (1, 1, 1)


def test_a_packed_push_with_another_shape_raises_and_stores_nothing() -> None:
    buffer = filled(3, 1, storage="packed")
    with pytest.raises(ValueError, match="obs"):
        buffer.push([{"obs": torch.zeros(2), "i": 1}], 0)
    assert (buffer.count(), buffer.cursor) == (1, 1)


def test_packed_items_with_other_keys_are_refused() -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3, storage="packed")
    with pytest.raises(ValueError, match=r"data\[1\]: keys differ"):
        buffer.push([{"a": 1}, {"b": 2}], 0)


@pytest.mark.parametrize(
    ("size", "iteration", "error"),
    [(-1, 0, ValueError), (1.0, 0, TypeError), (1, "0", TypeError)],
)
def test_bad_sample_arguments_are_refused_naming_them(
    size: Any, iteration: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match=r"size|cur_learner_iter"):
        filled(2, 2).sample(size, iteration)


def test_a_sample_range_that_is_not_a_slice_is_refused() -> None:
    with pytest.raises(TypeError, match="sample_range"):
        filled(2, 2).sample(1, 0, sample_range=[0, 1])  # type: ignore[arg-type]


def test_a_bad_collector_envstep_is_refused() -> None:
    with pytest.raises(TypeError, match="cur_collector_envstep"):
        NaiveReplayBuffer(replay_buffer_size=2).push({"i": 1}, None)  # type: ignore[arg-type]


def test_len_is_the_count() -> None:
    buffer = filled(4, 3)
    assert len(buffer) == buffer.count() == 3

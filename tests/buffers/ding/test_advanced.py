"""AdvancedReplayBuffer: prioritized replay, the data-quality monitor and the throughput
controller, with the numbers of REFERENCE §11.3-11.5."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from bufcore import AdvancedReplayBuffer

P_VALUE = 1e-6
# REFERENCE §11.4: priorities [1, 2, 4, 0.5] at alpha 0.6 weigh these.
PRIORITIES = [1.0, 2.0, 4.0, 0.5]
WEIGHTS = [1.0, 1.5157, 2.2974, 0.6598]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def items(count: int, start: int = 0, **extra: Any) -> list[dict[str, Any]]:
    return [{"i": i, **extra} for i in range(start, start + count)]


def prioritized(**options: Any) -> AdvancedReplayBuffer:
    """Four items pushed with the §11.4 priorities."""
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=0, **options)
    buffer.push([{"i": i, "priority": p} for i, p in enumerate(PRIORITIES)], 0)
    return buffer


# ------------------------------------------------------------------ priorities and IS
def test_pushed_priorities_weigh_as_in_the_reference() -> None:
    buffer = prioritized()
    weights = np.power(buffer.priorities().numpy(), 0.6)
    assert weights == pytest.approx(WEIGHTS, abs=1e-4)
    assert weights.sum() == pytest.approx(5.4729, abs=1e-4)


def test_importance_weights_are_p_over_p_min_to_the_minus_beta() -> None:
    buffer = prioritized(anneal_step=0)
    for _ in range(16):
        batch = buffer.sample(4, 0)
        assert batch is not None
        for item in batch:
            expected = (WEIGHTS[item["i"]] / WEIGHTS[3]) ** -0.4
            assert item["IS"] == pytest.approx(expected, rel=1e-3)


def test_draws_follow_the_priority_distribution() -> None:
    buffer = prioritized(anneal_step=0)
    counts = np.zeros(4)
    for _ in range(5000):
        batch = buffer.sample(4, 0)
        assert batch is not None
        counts += np.bincount([item["i"] for item in batch], minlength=4)
    expected = np.array(WEIGHTS) / sum(WEIGHTS) * counts.sum()
    assert chisquare(counts, expected).pvalue > P_VALUE


def test_an_item_pushed_with_priority_zero_is_never_drawn() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=3, seed=0)
    buffer.push([{"i": 0, "priority": 0.0}, {"i": 1}, {"i": 2}], 0)
    for _ in range(200):
        batch = buffer.sample(3, 0)
        assert batch is not None and all(item["i"] != 0 for item in batch)


def test_a_pushed_priority_is_used_as_given_and_leaves_the_max_priority() -> None:
    buffer = prioritized()
    assert buffer.priorities().tolist() == PRIORITIES
    assert buffer.max_priority == 1.0


def test_an_item_pushed_without_priority_gets_the_max_priority() -> None:
    buffer = prioritized()
    batch = buffer.sample(1, 0)
    assert batch is not None
    buffer.update({"replay_unique_id": [batch[0]["replay_unique_id"]],
                   "replay_buffer_idx": [batch[0]["replay_buffer_idx"]], "priority": [7.0]})
    buffer.push({"i": 9}, 0)
    assert buffer.held_items()[-1]["priority"] == 7.0


def test_beta_anneals_after_each_sample_and_the_batch_uses_the_value_before() -> None:
    buffer = prioritized(anneal_step=3)
    betas, ratios = [], []
    for _ in range(5):
        betas.append(buffer.beta)
        batch = buffer.sample(4, 0)
        assert batch is not None
        ratios += [(item["IS"], (WEIGHTS[item["i"]] / WEIGHTS[3]) ** -betas[-1])
                   for item in batch]
    assert betas == pytest.approx([0.4, 0.6, 0.8, 1.0, 1.0])
    assert all(got == pytest.approx(want, rel=1e-3) for got, want in ratios)


def test_anneal_step_zero_keeps_beta() -> None:
    buffer = prioritized(anneal_step=0)
    for _ in range(3):
        buffer.sample(2, 0)
    assert buffer.beta == 0.4


# ------------------------------------------------------------------ sampled items
def test_sampled_items_carry_the_reference_keys() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=0, instance_name="learner")
    buffer.push(items(3, collect_iter=2), 0)
    batch = buffer.sample(2, 5)
    assert batch is not None
    for item in batch:
        assert set(item) == {"i", "collect_iter", "replay_unique_id", "replay_buffer_idx",
                             "priority", "use", "staleness", "IS"}
        assert item["replay_unique_id"] == f"learner_{item['i']}"
        assert item["replay_buffer_idx"] == item["i"]
        assert item["staleness"] == 3


def test_with_deepcopy_the_items_are_copies_at_push_and_at_sample() -> None:
    pushed = items(1, obs=torch.zeros(1))
    buffer = AdvancedReplayBuffer(replay_buffer_size=1, seed=0, deepcopy=True)
    buffer.push(pushed, 0)
    pushed[0]["obs"] += 10
    first, second = buffer.sample(1, 0), buffer.sample(1, 0)
    assert first is not None and second is not None
    assert float(first[0]["obs"][0]) == 0.0
    assert first[0]["obs"] is not second[0]["obs"]


def test_without_deepcopy_the_items_share_the_pushed_values() -> None:
    pushed = items(1, obs=torch.zeros(1))
    buffer = AdvancedReplayBuffer(replay_buffer_size=1, seed=0)
    buffer.push(pushed, 0)
    batch = buffer.sample(1, 0)
    assert batch is not None and batch[0]["obs"] is pushed[0]["obs"]


def test_an_item_without_collect_iter_has_staleness_minus_one() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0)
    buffer.push(items(2), 0)
    batch = buffer.sample(2, 10)
    assert batch is not None and {item["staleness"] for item in batch} == {-1}


def test_a_list_collect_iter_counts_its_smallest() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=1, seed=0)
    buffer.push({"i": 0, "collect_iter": [4, 2, 3]}, 0)
    batch = buffer.sample(1, 10)
    assert batch is not None and batch[0]["staleness"] == 8


def one_drawable(count: int, **options: Any) -> AdvancedReplayBuffer:
    """``count`` items of which only item 0 can be drawn (the others have priority 0)."""
    buffer = AdvancedReplayBuffer(replay_buffer_size=count, seed=0, **options)
    buffer.push([{"obs": torch.zeros(2), "i": 0}]
                + [{"i": i, "obs": torch.zeros(2), "priority": 0.0} for i in range(1, count)], 0)
    return buffer


def test_use_counts_each_draw_in_order_within_a_batch() -> None:
    batch = one_drawable(3).sample(3, 0)
    assert batch is not None and [item["use"] for item in batch] == [1, 2, 3]


def test_an_item_drawn_twice_in_a_batch_comes_as_separate_copies() -> None:
    batch = one_drawable(2).sample(2, 0)
    assert batch is not None and batch[0] is not batch[1]
    assert batch[0]["obs"] is not batch[1]["obs"]


def test_sampling_adds_no_key_to_the_stored_or_pushed_dicts() -> None:
    pushed = {"i": 0}
    buffer = AdvancedReplayBuffer(replay_buffer_size=1, seed=0)
    buffer.push(pushed, 0)
    buffer.sample(1, 0)
    assert pushed == {"i": 0} and buffer.held_items() == [{"i": 0, "priority": 1.0}]


def test_sampling_keys_of_a_pushed_sampled_item_are_replaced() -> None:
    source = AdvancedReplayBuffer(replay_buffer_size=1, seed=0, instance_name="a")
    source.push({"i": 0}, 0)
    batch = source.sample(1, 0)
    assert batch is not None
    target = AdvancedReplayBuffer(replay_buffer_size=2, seed=0, instance_name="b")
    target.push([{"i": 1}, batch[0]], 0)
    again = target.sample(2, 0)
    assert again is not None
    assert {item["replay_unique_id"] for item in again} <= {"b_0", "b_1"}


@pytest.mark.parametrize("size", [0])
def test_sampling_zero_items_gives_an_empty_list(size: int) -> None:
    assert prioritized().sample(size, 0) == []


def test_an_empty_buffer_refuses_with_none() -> None:
    assert AdvancedReplayBuffer(replay_buffer_size=2).sample(1, 0) is None


def test_every_valid_item_at_priority_zero_refuses_with_none() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0)
    buffer.push([{"i": 0, "priority": 0}, {"i": 1, "priority": 0.0}], 0)
    assert buffer.sample(1, 0) is None
    assert "priority zero" in buffer.stats()["last_refusal"]


def test_sample_range_is_refused() -> None:
    with pytest.raises(ValueError, match="sample_range"):
        prioritized().sample(1, 0, sample_range=slice(0, 2))


# ------------------------------------------------------------------ update
def test_update_stores_priority_plus_eps_and_raises_the_max_without_it() -> None:
    buffer = prioritized()
    batch = buffer.sample(1, 0)
    assert batch is not None
    slot = batch[0]["replay_buffer_idx"]
    applied = buffer.update({"replay_unique_id": [batch[0]["replay_unique_id"]],
                             "replay_buffer_idx": [slot], "priority": [3.0]})
    assert applied == 1
    assert buffer.priorities()[slot].item() == pytest.approx(3.0 + 1e-5)
    assert buffer.max_priority == 3.0


def test_update_of_an_overwritten_item_is_skipped() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0)
    buffer.push(items(2), 0)
    batch = buffer.sample(2, 0)
    assert batch is not None
    buffer.push(items(2, start=2), 0)  # both slots hold new items now
    info = {"replay_unique_id": [item["replay_unique_id"] for item in batch],
            "replay_buffer_idx": [item["replay_buffer_idx"] for item in batch],
            "priority": [5.0, 5.0]}
    assert buffer.update(info) == 0
    assert buffer.priorities().tolist() == [1.0, 1.0]


def test_update_takes_integer_ids_too() -> None:
    buffer = prioritized()
    assert buffer.update({"replay_unique_id": [2], "replay_buffer_idx": [2],
                          "priority": [0.25]}) == 1
    assert buffer.priorities()[2].item() == pytest.approx(0.25001)


def test_update_ignores_ids_of_another_buffer() -> None:
    buffer = prioritized()
    assert buffer.update({"replay_unique_id": ["other_2"], "replay_buffer_idx": [2],
                          "priority": [9.0]}) == 0


def test_update_without_priority_changes_nothing() -> None:
    buffer = prioritized()
    assert buffer.update({"replay_unique_id": [0], "replay_buffer_idx": [0]}) == 0
    assert buffer.priorities().tolist() == PRIORITIES


@pytest.mark.parametrize(
    ("info", "error"),
    [
        ({"replay_unique_id": [0], "replay_buffer_idx": [0], "priority": [-1.0]}, ValueError),
        ({"replay_unique_id": [0], "replay_buffer_idx": [0], "priority": [math.nan]},
         ValueError),
        ({"replay_unique_id": [0, 1], "replay_buffer_idx": [0], "priority": [1.0]}, ValueError),
        ({"replay_unique_id": [0], "replay_buffer_idx": [4], "priority": [1.0]}, IndexError),
        ({"replay_unique_id": [0], "replay_buffer_idx": [0.5], "priority": [1.0]}, TypeError),
        ({"replay_unique_id": [None], "replay_buffer_idx": [0], "priority": [1.0]}, TypeError),
        ({"replay_buffer_idx": [0], "priority": [1.0]}, KeyError),
    ],
)
def test_a_bad_update_raises_naming_the_key_and_changes_nothing(
    info: dict[str, Any], error: type[Exception]
) -> None:
    buffer = prioritized()
    with pytest.raises(error, match="info"):
        buffer.update(info)
    assert buffer.priorities().tolist() == PRIORITIES and buffer.max_priority == 1.0


def test_a_bad_pushed_priority_raises_and_stores_nothing() -> None:
    buffer = prioritized()
    with pytest.raises(ValueError, match=r"data\[1\]\['priority'\]"):
        buffer.push([{"i": 5}, {"i": 6, "priority": -2.0}], 0)
    assert buffer.push_count == 4 and buffer.priorities().tolist() == PRIORITIES


# ------------------------------------------------------------------ data quality
def test_stale_items_are_removed_with_the_greater_or_equal_rule() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=0, max_staleness=3)
    buffer.push([{"i": i, "collect_iter": i} for i in range(4)], 0)
    batch = buffer.sample(1, 5)  # staleness 5, 4, 3, 2: the first three go (3 >= 3)
    assert batch is not None and batch[0]["i"] == 3
    assert buffer.count() == 1


def test_the_staleness_walk_stops_at_the_first_fresh_item() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=3, seed=0, max_staleness=3)
    buffer.push([{"i": 0, "collect_iter": 0}, {"i": 1, "collect_iter": 9},
                 {"i": 2, "collect_iter": 0}], 0)
    buffer.sample(1, 5)
    assert [item["i"] for item in buffer.held_items()] == [1, 2]


def test_items_without_collect_iter_are_never_stale() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0, max_staleness=0)
    buffer.push(items(2), 0)
    assert buffer.sample(2, 100) is not None and buffer.count() == 2


def test_staleness_removal_walks_from_the_oldest_item_after_a_wrap() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=3, seed=0, max_staleness=2)
    buffer.push([{"i": i, "collect_iter": i} for i in range(5)], 0)  # slots: 3, 4, 2
    buffer.sample(1, 5)  # staleness of 2, 3, 4: 3, 2, 1; items 2 and 3 go
    assert [item["i"] for item in buffer.held_items()] == [4]


@pytest.mark.parametrize("max_use", [1, 2, 3])
def test_a_used_up_item_is_never_sampled_again_and_no_longer_counts(max_use: int) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0, max_use=max_use)
    buffer.push(items(2), 0)
    drawn: list[int] = []
    while (batch := buffer.sample(1, 0)) is not None:
        drawn.append(batch[0]["i"])
        assert batch[0]["use"] <= max_use
    assert sorted(drawn) == [0] * max_use + [1] * max_use
    assert buffer.count() == 0


def test_an_item_used_up_within_one_batch_is_still_returned_that_time() -> None:
    buffer = one_drawable(3, max_use=2)
    batch = buffer.sample(3, 0)
    assert batch is not None and [item["use"] for item in batch] == [1, 2, 3]
    assert buffer.count() == 2 and buffer.sample(1, 0) is None


def test_a_push_into_a_used_up_slot_counts_again() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0, max_use=1)
    buffer.push(items(2), 0)
    buffer.sample(2, 0)
    buffer.push(items(1, start=5), 0)
    assert buffer.count() == 1
    batch = buffer.sample(1, 0)
    assert batch is not None and batch[0]["i"] == 5


@pytest.mark.parametrize(("valid", "size", "refused"), [(3, 2, True), (4, 2, False), (1, 1, True)])
def test_sample_min_limit_ratio_refuses_too_few_items(valid: int, size: int, refused: bool) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=5, seed=0,
                                  thruput_controller={"sample_min_limit_ratio": 2})
    buffer.push(items(valid), 0)
    assert (buffer.sample(size, 0) is None) is refused


# ------------------------------------------------------------------ throughput
def test_a_push_above_the_max_ratio_is_refused_and_stores_nothing() -> None:
    buffer = AdvancedReplayBuffer(
        replay_buffer_size=100, seed=0, clock=FakeClock(),
        thruput_controller={"push_sample_rate_limit": {"max": 1.0}},
    )
    buffer.push(items(10), 0)
    buffer.sample(10, 0)
    buffer.push(items(10, start=10), 0)  # (10 + 10) / 10 = 2 > 1
    stats = buffer.stats()
    assert buffer.count() == 10 and stats["refused_pushes"] == 1
    assert "limit max" in stats["last_refusal"]


def test_a_sample_below_the_min_ratio_is_refused() -> None:
    buffer = AdvancedReplayBuffer(
        replay_buffer_size=100, seed=0, clock=FakeClock(),
        thruput_controller={"push_sample_rate_limit": {"min": 1.0}},
    )
    buffer.push(items(10), 0)
    assert buffer.sample(10, 0) is not None  # 10 / (0 + 10) = 1
    assert buffer.sample(1, 0) is None  # 10 / (10 + 1) < 1
    assert buffer.stats()["refused_samples"] == 1


def test_time_fades_the_counts_the_controller_compares() -> None:
    clock = FakeClock()
    buffer = AdvancedReplayBuffer(
        replay_buffer_size=100, seed=0, clock=clock,
        thruput_controller={"push_sample_rate_limit": {"max": 1.0}, "window_seconds": 30},
    )
    buffer.push(items(10), 0)
    buffer.sample(10, 0)
    clock.now = 60.0  # both counts down to 0.01 %: a push of 1 makes push/sample ~ 1001
    buffer.push(items(1), 0)
    assert buffer.stats()["refused_pushes"] == 1


# ------------------------------------------------------------------ clear
def test_clear_resets_the_max_priority_but_not_push_count_or_beta() -> None:
    buffer = prioritized(anneal_step=10)
    buffer.update({"replay_unique_id": [0], "replay_buffer_idx": [0], "priority": [8.0]})
    buffer.sample(1, 0)
    buffer.clear()
    assert (buffer.count(), buffer.max_priority, buffer.push_count) == (0, 1.0, 4)
    assert buffer.beta == pytest.approx(0.46)


def test_unique_ids_go_on_after_a_clear() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0)
    buffer.push(items(2), 0)
    buffer.clear()
    buffer.push(items(1), 0)
    batch = buffer.sample(1, 0)
    assert batch is not None and batch[0]["replay_unique_id"] == "buffer_2"


@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_packed_storage_samples_the_same_way(size: int) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=size, seed=0, storage="packed")
    buffer.push([{"obs": torch.full((2,), float(i)), "priority": float(i + 1)}
                 for i in range(size + 1)], 0)
    batch = buffer.sample(size, 0)
    assert batch is not None
    for item in batch:
        assert float(item["obs"][0]) == item["priority"] - 1
        assert set(item) == {"obs", "replay_unique_id", "replay_buffer_idx", "priority", "use",
                             "staleness", "IS"}

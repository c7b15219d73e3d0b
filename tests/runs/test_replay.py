"""The ``replay`` record of a prioritized online buffer (:mod:`bufcore.runs.replay`)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bufcore import AdvancedReplayBuffer, TrajectoryDictBufferMultiDim
from bufcore.runs.replay import ReplayTally
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.windows import ring_row_positions
from tests.support import DEVICES

SEQ = 3
RECORD_KEYS = {
    "buffer", "count", "capacity", "sample_count", "sample_calls", "beta", "max_priority",
    "priority_min", "priority_q25", "priority_median", "priority_q75", "priority_max",
    "is_weight_min", "is_weight_median", "is_weight_max", "windows_drawn",
    "trajectories_drawn", "top_share", "top_trajectories",
}
# The keys a replay record shares with the DI-engine buffers' stats().
DING_KEYS = {
    "buffer", "count", "capacity", "sample_count", "sample_calls", "beta", "max_priority",
    "priority_min", "priority_q25", "priority_median", "priority_q75", "priority_max",
}


def online(
    steps: int, *, sampler: Any = "prioritized", device: str = "cpu"
) -> TrajectoryDictBufferMultiDim:
    """[12, 2] rows: env 0 ends a trajectory every 5 steps, env 1 every 7."""
    buffer = TrajectoryDictBufferMultiDim(
        capacity=12, n_dim=2, seq_length=SEQ, seed=0, device=device,
        sampler=PrioritizedSampler() if sampler == "prioritized" else sampler,
    )
    for step in range(steps):
        done = torch.tensor([[step % 5 == 4, step % 7 == 6]])
        buffer.extend({"observation": torch.full((1, 2, 1), float(step)), "done": done})
    return buffer


@pytest.mark.parametrize("steps", [9, 12, 20, 31])
def test_rows_are_located_in_the_trajectory_a_window_draw_names(steps: int) -> None:
    buffer = online(steps)
    index = buffer.sample_index(SEQ * 40, generator=torch.Generator().manual_seed(steps))
    first = index.rows[::SEQ]
    located = ring_row_positions(buffer.trajectories(), first, capacity=12, env_count=2)
    assert index.trajectory is not None
    assert torch.equal(located, index.trajectory)


def test_a_record_has_the_documented_keys_and_the_di_engine_names_where_they_overlap() -> None:
    buffer = online(20)
    tally = ReplayTally(buffer)
    tally.add(buffer.sample(SEQ * 4)["_index"])
    record = tally.record()
    assert set(record) == RECORD_KEYS
    ding = AdvancedReplayBuffer(replay_buffer_size=4, seed=0).stats()
    assert set(ding) >= DING_KEYS
    assert (record["buffer"], record["count"], record["capacity"]) == (
        "TrajectoryDictBufferMultiDim", 24, 24)


def test_the_counts_follow_every_sample_added() -> None:
    buffer = online(20)
    tally = ReplayTally(buffer)
    for _ in range(3):
        tally.add(buffer.sample(SEQ * 4)["_index"])
    first = tally.record()
    tally.add(buffer.sample(SEQ * 2)["_index"])
    second = tally.record()
    assert (first["sample_count"], first["sample_calls"], first["windows_drawn"]) == (36, 3, 12)
    assert (second["sample_count"], second["sample_calls"], second["windows_drawn"]) == (42, 4, 2)


def test_the_top_trajectories_are_the_most_drawn_with_their_shares() -> None:
    buffer = online(20)
    tally = ReplayTally(buffer, top=2)
    index = buffer.sample_index(SEQ * 50, generator=torch.Generator().manual_seed(3))
    tally.add(index)
    record = tally.record()
    assert index.trajectory is not None
    table = buffer.trajectories()
    drawn = torch.bincount(index.trajectory, minlength=len(table.start))
    order = sorted(range(len(drawn)), key=lambda t: (-int(drawn[t]), int(table.env[t]),
                                                     int(table.start[t])))
    expected = [
        {"env": int(table.env[t]), "start": int(table.start[t]),
         "length": int(table.lengths[t]), "windows": int(drawn[t]), "share": int(drawn[t]) / 50}
        for t in order[:2]
    ]
    assert record["top_trajectories"] == expected
    assert record["trajectories_drawn"] == int((drawn > 0).sum())
    assert record["top_share"] == pytest.approx(sum(e["share"] for e in expected))


def test_a_record_without_draws_since_the_last_has_no_shares() -> None:
    buffer = online(20)
    tally = ReplayTally(buffer)
    tally.add(buffer.sample(SEQ * 4)["_index"])
    tally.record()
    record = tally.record()
    assert (record["windows_drawn"], record["trajectories_drawn"]) == (0, 0)
    assert (record["top_share"], record["top_trajectories"]) == (None, [])
    assert record["sample_calls"] == 1


def test_the_sampler_figures_are_its_stats() -> None:
    buffer = online(20)
    tally = ReplayTally(buffer)
    batch = buffer.sample(SEQ * 4)
    buffer.update_priority(batch["_index"], torch.arange(SEQ * 4.0))
    tally.add(batch["_index"])
    record = tally.record()
    assert {key: record[key] for key in buffer.sampler.stats()} == buffer.sampler.stats()


def test_a_buffer_without_a_prioritized_sampler_is_refused() -> None:
    with pytest.raises(TypeError, match="PrioritizedSampler"):
        ReplayTally(online(20, sampler=None))


def test_rows_that_are_not_whole_windows_are_refused() -> None:
    buffer = online(20)
    tally = ReplayTally(buffer)
    with pytest.raises(ValueError, match="whole windows of 3 rows"):
        tally.add(buffer.sample(SEQ * 2)["_index"][:5])
    assert tally.record()["sample_calls"] == 0


@pytest.mark.parametrize("device", DEVICES)
def test_a_buffer_on_any_device_gives_the_record_a_cpu_buffer_gives(device: str) -> None:
    here, there = online(31), online(31, device=device)
    batch = there.sample(SEQ * 8, generator=torch.Generator(device).manual_seed(4))
    here.sample(SEQ * 8)  # the same number of draws: the same beta
    tallies = [ReplayTally(here), ReplayTally(there)]
    tallies[0].add(batch["_index"].cpu())
    tallies[1].add(batch["_index"])
    assert tallies[0].record() == tallies[1].record()


def test_a_tally_restored_from_its_state_dict_gives_the_same_next_record() -> None:
    buffer = online(20)
    tally = ReplayTally(buffer)
    for _ in range(3):
        tally.add(buffer.sample(SEQ * 4)["_index"])
    again = ReplayTally(buffer)
    again.load_state_dict(tally.state_dict())
    assert again.record() == tally.record()


def test_a_malformed_tally_state_is_refused_and_changes_nothing() -> None:
    tally = ReplayTally(online(20))
    state = {"sample_count": 4, "sample_calls": 1, "drawn": [[0, 1, 2]]}
    with pytest.raises(ValueError, match=r"drawn'\]\[0\]"):
        tally.load_state_dict(state)
    assert tally.state_dict() == {"sample_count": 0, "sample_calls": 0, "drawn": []}

"""Replay statistics of a checkpoint (bufcore.inspect.replay_items, window_shares): each item's
priority, draw probability, importance weight, use and collect_iter as the buffer holds them,
and how prioritized windows spread over trajectories."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from bufcore import (
    AdvancedReplayBuffer,
    DictBuffer,
    NaiveReplayBuffer,
    PrioritizedSampler,
    TrajectoryDictBufferMultiDim,
    load_buffer,
)
from bufcore.inspect import has_replay_items, replay_items, summarize_checkpoint, window_shares
from tests.replay_support import DOMINANT, write_replay_run


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("replay") / "run"
    write_replay_run(run)
    return run


def buffer_path(run: Path, name: str) -> Path:
    return run / "checkpoint" / "buffers" / name


def test_a_prioritized_dict_buffer_gives_the_priorities_its_sampler_holds(
    replay_run: Path,
) -> None:
    path = buffer_path(replay_run, "rows")
    items = replay_items(path)
    loaded = load_buffer(path)
    assert items.unit == "row" and not items.windowed
    assert items.priority is not None
    assert items.priority.tolist() == loaded.sampler.priorities().tolist()
    assert items.beta == loaded.sampler.beta


def test_row_probabilities_are_the_weights_over_their_sum(replay_run: Path) -> None:
    items = replay_items(buffer_path(replay_run, "rows"))
    assert items.priority is not None and items.probability is not None
    weights = items.priority ** 0.6
    assert items.probability == pytest.approx(weights / weights.sum())


def test_importance_weights_equal_what_a_draw_gives_those_rows(replay_run: Path) -> None:
    path = buffer_path(replay_run, "rows")
    items = replay_items(path)
    index = load_buffer(path).sample_index(300, generator=torch.Generator().manual_seed(3))
    assert items.importance is not None and index.weights is not None
    expected = items.importance[index.rows.numpy()].astype(np.float32)
    assert index.weights.numpy().tolist() == expected.tolist()


def test_an_advanced_buffer_gives_its_valid_items_only(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=8, seed=0, max_use=1)
    buffer.push([{"x": i, "collect_iter": i} for i in range(6)], 0)
    drawn = buffer.sample(3, 10)
    assert drawn is not None
    buffer.save(tmp_path / "a")
    items = replay_items(tmp_path / "a")
    used_up = {item["replay_buffer_idx"] for item in drawn}
    assert items.unit == "item" and len(items) == buffer.count()
    assert set(items.rows.tolist()) == set(range(6)) - used_up
    assert items.priority is not None
    assert items.priority.tolist() == buffer.priorities().tolist()


def test_use_and_collect_iter_are_the_buffers(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=8, seed=0)
    buffer.push([{"x": i, "collect_iter": 10 + i} for i in range(4)], 0)
    drawn = buffer.sample(3, 20)
    assert drawn is not None
    buffer.save(tmp_path / "n")
    items = replay_items(tmp_path / "n")
    # The naive buffer draws without replacement: three items used once, one never.
    assert items.use is not None and sorted(items.use.tolist()) == [0, 1, 1, 1]
    assert items.collect_iter is not None and items.collect_iter.tolist() == [10, 11, 12, 13]
    assert items.priority is None and items.importance is None


def test_staleness_is_measured_at_the_learner_iteration_asked_for(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=4, seed=0)
    buffer.push([{"x": 0, "collect_iter": 3}, {"x": 1, "collect_iter": 5}], 0)
    buffer.save(tmp_path / "n")
    staleness = replay_items(tmp_path / "n").staleness(10)
    assert staleness is not None and staleness.tolist() == [7, 5]


def test_an_item_pushed_without_collect_iter_has_no_staleness(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=4, seed=0)
    buffer.push([{"x": 0}], 0)
    buffer.save(tmp_path / "n")
    staleness = replay_items(tmp_path / "n").staleness(10)
    assert staleness is not None and math.isnan(staleness[0])


def test_the_limits_of_an_advanced_buffer_come_with_its_items(replay_run: Path) -> None:
    items = replay_items(buffer_path(replay_run, "advanced"))
    assert (items.max_use, items.max_staleness) == (6.0, 25.0)


def test_an_empty_prioritized_buffer_has_no_items(tmp_path: Path) -> None:
    DictBuffer(capacity=4, sampler=PrioritizedSampler()).save(tmp_path / "e")
    items = replay_items(tmp_path / "e")
    assert len(items) == 0 and items.priority is not None and len(items.priority) == 0


@pytest.mark.parametrize("name", ["episode"])
def test_a_checkpoint_without_replay_figures_is_refused(replay_run: Path, name: str) -> None:
    path = buffer_path(replay_run, name)
    assert not has_replay_items(summarize_checkpoint(path))
    with pytest.raises(ValueError, match="saved no priorities"):
        replay_items(path)


def test_a_dict_buffer_without_a_prioritized_sampler_is_refused(tmp_path: Path) -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"x": torch.zeros(2, 1)})
    buffer.save(tmp_path / "d")
    with pytest.raises(ValueError, match="without a PrioritizedSampler"):
        replay_items(tmp_path / "d")


def test_windows_give_row_priorities_but_no_row_probabilities(replay_run: Path) -> None:
    items = replay_items(buffer_path(replay_run, "windows"))
    assert items.windowed and items.priority is not None and len(items) == 180
    assert items.probability is None and items.importance is None


def test_the_high_priority_trajectories_dominate_the_window_draws(replay_run: Path) -> None:
    shares = window_shares(load_buffer(buffer_path(replay_run, "windows"), leaves=[]), 4)
    assert shares.share.sum() == pytest.approx(1.0)
    assert set(np.argsort(shares.share)[-2:].tolist()) == set(DOMINANT)


def test_equal_priorities_give_every_valid_window_the_same_chance(tmp_path: Path) -> None:
    done = torch.zeros(20, 1, dtype=torch.bool)
    done[[4, 19], 0] = True
    buffer = TrajectoryDictBufferMultiDim(capacity=20, n_dim=2, seq_length=2,
                                          output_key_t=["obs"], output_key_tp1=[],
                                          sampler=PrioritizedSampler())
    buffer.extend({"obs": torch.zeros(20, 1, 1), "done": done})
    shares = window_shares(buffer, 2)
    # Trajectories of 5 and 15 rows hold 4 and 14 windows of 2.
    assert shares.windows.tolist() == [4, 14]
    assert shares.share == pytest.approx([4 / 18, 14 / 18])
    assert shares.importance == pytest.approx(np.ones(18))


def test_window_shares_give_the_weight_a_drawn_window_carries(replay_run: Path) -> None:
    buffer = load_buffer(buffer_path(replay_run, "windows"), leaves=[])
    shares = window_shares(buffer, 4)
    index = buffer.sample_index(40, 4, generator=torch.Generator().manual_seed(0))
    envs = 3
    lookup = {
        (int(t), int(s)): w
        for t, s, w in zip(shares.trajectory, shares.start, shares.importance, strict=True)
    }
    assert index.trajectory is not None and index.weights is not None
    starts = (index.rows[::4] // envs).tolist()
    expected = [lookup[(int(t), s)] for t, s in zip(index.trajectory, starts, strict=True)]
    assert index.weights[::4].tolist() == np.array(expected, dtype=np.float32).tolist()


def test_window_shares_refuse_a_buffer_without_a_prioritized_sampler() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2)
    with pytest.raises(TypeError, match="PrioritizedSampler"):
        window_shares(buffer, 2)


def test_window_shares_refuse_a_window_longer_than_every_trajectory(replay_run: Path) -> None:
    buffer = load_buffer(buffer_path(replay_run, "windows"), leaves=[])
    with pytest.raises(ValueError, match="no trajectory holds a window"):
        window_shares(buffer, 40)

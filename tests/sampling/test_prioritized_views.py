"""What the prioritized sampler tells about its items without drawing: row weights, the
importance weights a draw would give, and the weight of every valid window."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bufcore import TrajectoryDictBufferMultiDim
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import RingPosition
from bufcore.sampling.windows import TrajectoryTable, table_position


def filled(priorities: list[float], **options: object) -> PrioritizedSampler:
    """A sampler bound to a full ring of ``len(priorities)`` rows holding them."""
    rows = len(priorities)
    sampler = PrioritizedSampler(**options)  # type: ignore[arg-type]
    sampler.bind(rows, 1)
    sampler.written(RingPosition(rows, rows), 0, rows)
    sampler.update(np.arange(rows), priorities)
    return sampler


def test_row_weights_are_the_stored_priorities_to_the_power_alpha() -> None:
    sampler = filled([1.0, 2.0, 4.0, 0.5], alpha=0.6, eps=0.0)
    # REFERENCE §11.4's tree weights.
    assert sampler.row_weights().numpy() == pytest.approx([1.0, 1.5157, 2.2974, 0.6598],
                                                          rel=1e-4)


def test_row_weights_of_given_rows_come_in_their_order() -> None:
    sampler = filled([1.0, 2.0, 4.0, 0.5], alpha=1.0, eps=0.0)
    assert sampler.row_weights(np.array([2, 0, 2])).tolist() == [4.0, 1.0, 4.0]


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0])
def test_importance_weights_equal_what_a_draw_of_those_rows_carries(beta: float) -> None:
    sampler = filled([1.0, 2.0, 4.0, 0.5, 3.0], alpha=0.6, beta=beta, anneal_steps=None)
    index = sampler.draw(RingPosition(5, 5), 500, torch.Generator().manual_seed(0))
    expected = sampler.importance_weights(sampler.row_weights(index.rows.numpy()))
    assert index.weights is not None
    assert index.weights.tolist() == expected.float().tolist()


def test_the_importance_weights_use_the_beta_of_the_next_draw() -> None:
    sampler = filled([1.0, 4.0], alpha=1.0, beta=0.0, anneal_steps=2, eps=0.0)
    sampler.steps = 1  # beta 0.5 now
    assert sampler.importance_weights([4.0]).tolist() == [4.0 ** -0.5]


def test_an_item_of_weight_zero_gets_an_infinite_importance_weight() -> None:
    sampler = filled([1.0, 4.0], alpha=1.0, beta=0.5, eps=0.0)
    assert sampler.importance_weights([0.0, 1.0]).tolist() == [math.inf, 1.0]


def windowed() -> TrajectoryDictBufferMultiDim:
    """An online buffer of 2 envs, trajectories of 5, 7 (env 0) and 12 (env 1) rows, whose
    row priorities are ``1 + time + 10 * env``."""
    done = torch.zeros(12, 2, dtype=torch.bool)
    done[[4, 11], 0] = True
    done[11, 1] = True
    buffer = TrajectoryDictBufferMultiDim(
        capacity=12, n_dim=2, seq_length=3, seed=0, output_key_t=["obs"], output_key_tp1=[],
        sampler=PrioritizedSampler(alpha=0.5, beta=0.5, anneal_steps=None),
    )
    buffer.extend({"obs": torch.zeros(12, 2, 1), "done": done})
    written = int(buffer.sample_index(3, 3, generator=torch.Generator()).writes[0])
    rows = torch.arange(24)
    priority = 1.0 + (rows // 2).double() + 10.0 * (rows % 2).double()
    buffer.update_priority(torch.stack([rows, torch.full_like(rows, written)], 1), priority)
    return buffer


def test_window_weights_list_every_valid_window_with_its_max_priority_weight() -> None:
    buffer = windowed()
    sampler = buffer.sampler
    start, env, weight = sampler.window_weights(buffer.trajectories(), length=3, need=3)
    # Starts 0-2 and 5-9 of env 0, 0-9 of env 1; a window weighs its largest priority ** 0.5.
    assert start.tolist() == [0, 1, 2, 5, 6, 7, 8, 9, *range(10)]
    assert env.tolist() == [0] * 8 + [1] * 10
    eps = sampler.eps
    expected = np.sqrt(1.0 + start + 2 + 10.0 * env + eps)
    assert weight == pytest.approx(expected)


def test_a_drawn_window_carries_the_importance_weight_of_its_window_weight() -> None:
    buffer = windowed()
    sampler = buffer.sampler
    table: TrajectoryTable = buffer.trajectories()
    start, env, weight = sampler.window_weights(table, length=3, need=3)
    index = buffer.sample_index(60, 3, generator=torch.Generator().manual_seed(1))
    drawn_start = index.rows[::3] // 2
    drawn_env = index.rows[::3] % 2
    lookup = {(int(s), int(e)): w for s, e, w in zip(start, env, weight, strict=True)}
    windows = [lookup[(int(s), int(e))] for s, e in zip(drawn_start, drawn_env, strict=True)]
    assert index.weights is not None
    assert index.weights[::3].tolist() == sampler.importance_weights(windows).float().tolist()
    assert table_position(table, drawn_start, drawn_env).tolist() == index.trajectory.tolist()

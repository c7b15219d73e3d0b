"""The two hooks the DI-engine buffers use on PrioritizedSampler: ``assign`` (a priority as
given, 0 to take a row out) and ``priorities(rows)`` (some rows' priorities)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import RingPosition


def held(rows: int) -> tuple[PrioritizedSampler, RingPosition]:
    sampler = PrioritizedSampler(eps=1e-5)
    sampler.bind(rows, 1)
    ring = RingPosition(rows, rows)
    sampler.written(ring, 0, rows)
    return sampler, ring


def test_assign_stores_the_priority_as_given_and_keeps_the_max() -> None:
    sampler, _ = held(3)
    sampler.assign(np.array([1]), 5.0)
    assert sampler.priorities().tolist() == [1.0, 5.0, 1.0] and sampler.max_priority == 1.0


def test_assign_of_zero_to_every_row_leaves_nothing_to_draw() -> None:
    sampler, ring = held(2)
    sampler.assign(np.array([0, 1]), 0.0)
    with pytest.raises(ValueError, match="priority zero"):
        sampler.draw(ring, 1, torch.Generator().manual_seed(0))


def test_a_row_assigned_zero_is_never_drawn() -> None:
    sampler, ring = held(3)
    sampler.assign(np.array([2]), 0.0)
    index = sampler.draw(ring, 500, torch.Generator().manual_seed(0))
    assert 2 not in index.rows.tolist()


@pytest.mark.parametrize(("rows", "priority", "error"), [
    (np.array([3]), 1.0, IndexError), (np.array([0]), -1.0, ValueError),
    (np.array([0]), float("nan"), ValueError),
])
def test_a_bad_assign_raises_and_changes_nothing(
    rows: np.ndarray, priority: float, error: type[Exception]
) -> None:
    sampler, _ = held(3)
    with pytest.raises(error):
        sampler.assign(rows, priority)
    assert sampler.priorities().tolist() == [1.0, 1.0, 1.0]


def test_priorities_of_some_rows_come_in_their_order() -> None:
    sampler, _ = held(4)
    sampler.assign(np.array([0, 1, 2, 3]), np.array([4.0, 3.0, 2.0, 1.0]))
    assert sampler.priorities(np.array([3, 0, 0])).tolist() == [1.0, 4.0, 4.0]

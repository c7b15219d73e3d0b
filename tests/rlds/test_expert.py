"""expert_buffer_from_rlds: one RLDS episode = one trajectory = one motion id, sampled as windows
that stay inside their episode; bad episodes refused before anything is built."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bufcore import Curriculum, TrajectoryDictBuffer, expert_buffer_from_rlds
from tests.rlds.episodes import complete, episode, single, stacked, truncated


def numbered(length: int, start: int) -> dict[str, Any]:
    """An episode whose observation ``[t, t]`` counts from ``start``."""
    steps = stacked([True] + [False] * (length - 1), [False] * (length - 1) + [True],
                    [False] * length)
    value = np.arange(start, start + length, dtype=np.float32)
    steps["observation"] = np.stack([value, value], axis=1)
    steps["action"] = np.zeros((length, 1), np.float32)
    steps["reward"] = np.zeros(length, np.float32)
    steps["discount"] = np.ones(length, np.float32)
    return {"steps": steps}


def test_each_episode_becomes_one_trajectory_with_its_position_as_motion_id() -> None:
    buffer = expert_buffer_from_rlds([complete(), single(), truncated()])
    assert isinstance(buffer, TrajectoryDictBuffer)
    assert buffer.motion_ids == [0, 1, 2]
    assert buffer.lengths.tolist() == [3, 1, 3]


def test_given_motion_ids_label_the_episodes_in_order() -> None:
    buffer = expert_buffer_from_rlds([complete(), truncated()], motion_ids=[40, 7])
    assert buffer.motion_ids == [40, 7]


def test_the_rows_are_the_steps_with_their_motion_id() -> None:
    buffer = expert_buffer_from_rlds([complete(), single()], motion_ids=[5, 6])
    rows = buffer.storage
    assert rows["observation"].tolist() == [[1, 2], [3, 4], [5, 6], [1, 2]]
    assert rows["is_last"].tolist() == [False, False, True, True]
    assert rows["motion_id"].tolist() == [5, 5, 5, 6]
    assert sorted(rows) == [
        "action", "discount", "is_first", "is_last", "is_terminal", "motion_id", "observation",
        "reward",
    ]


@pytest.mark.parametrize("seq_length", [1, 2, 3])
def test_windows_and_their_next_rows_stay_inside_one_episode(seq_length: int) -> None:
    buffer = expert_buffer_from_rlds(
        [numbered(5, 0), numbered(4, 100)], seq_length=seq_length, seed=0
    )
    batch = buffer.sample(seq_length * 64)
    now = batch["observation"][:, 0].reshape(64, seq_length)
    following = batch["next"]["observation"][:, 0].reshape(64, seq_length)
    assert torch.equal(following, now + 1)  # the next row is the next step
    assert bool(((now < 100).all(1) | (now >= 100).all(1)).all())  # one episode per window


def test_a_curriculum_round_prioritises_the_rlds_episodes_by_motion_id() -> None:
    buffer = expert_buffer_from_rlds([numbered(3, 0), numbered(3, 10)], motion_ids=[3, 9], seed=0)
    curriculum = Curriculum(buffer, mode="lin", min_val=0.0)
    curriculum.apply({3: 0.0, 9: 5.0}, step=1)  # motion 3 is tracked perfectly: weight 0
    drawn = buffer.sample(32)["observation"][:, 0]
    assert bool((drawn >= 10).all())


def test_an_episode_holding_two_episodes_is_refused() -> None:
    two = episode([True, False, True], [False, True, True], [False, False, False])
    with pytest.raises(ValueError, match=r"rlds_data\[0\]\['steps'\]\[1\]: a last step before "
                       "the end of its RLDS episode"):
        expert_buffer_from_rlds([two])


def test_an_episode_without_steps_is_refused() -> None:
    with pytest.raises(ValueError, match=r"rlds_data\[1\]\['steps'\]: holds no step"):
        expert_buffer_from_rlds([complete(), {"steps": []}])


def test_no_episode_is_refused() -> None:
    with pytest.raises(ValueError, match="expected at least one episode"):
        expert_buffer_from_rlds([])


def test_a_bad_sequence_is_refused_with_the_conversions_message() -> None:
    with pytest.raises(ValueError, match="Mid step should not be followed by a first step"):
        expert_buffer_from_rlds([episode([True, False], [False, False], [False, False])])


@pytest.mark.parametrize(
    ("motion_ids", "error", "message"),
    [
        ([1], ValueError, r"expected one per episode \(2\), got 1"),
        ([1, 2.5], TypeError, r"motion_ids\[1\]"),
        ("12", TypeError, "expected a list of ints"),
    ],
)
def test_motion_ids_that_are_not_one_int_per_episode_are_refused(
    motion_ids: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        expert_buffer_from_rlds([complete(), single()], motion_ids=motion_ids)

"""RLinf's Trajectory as rows: flattening, the epoch-row trimming rule, checks, and the way back."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bufcore import Trajectory
from bufcore.storage.trajectories import (
    FIELD_NAMES,
    compact,
    from_payload,
    from_rows,
    payload,
    trajectory_rows,
)


def numbered(steps: int, envs: int, *trailing: int) -> torch.Tensor:
    """``[T, B, ...]`` holding ``100 * t + b`` at ``(t, b)`` (repeated over trailing axes)."""
    grid = 100 * torch.arange(steps)[:, None] + torch.arange(envs)[None, :]
    return grid.reshape(steps, envs, *([1] * len(trailing))).expand(steps, envs, *trailing).clone()


def test_rows_are_row_major_over_steps_then_envs() -> None:
    rows = trajectory_rows(Trajectory(rewards=numbered(3, 4), actions=numbered(3, 4, 2)), "t")
    assert rows is not None
    expected = torch.tensor([100 * (i // 4) + i % 4 for i in range(12)])
    assert torch.equal(rows.rows[("rewards",)], expected)
    assert torch.equal(rows.rows[("actions",)][:, 0], expected)
    assert (rows.steps, rows.envs, rows.count, rows.shape) == (3, 4, 12, (3, 4))


def test_t_and_b_come_from_prev_logprobs_before_rewards() -> None:
    rows = trajectory_rows(
        Trajectory(prev_logprobs=numbered(2, 3, 5), actions=numbered(2, 3, 1)), "t"
    )
    assert rows is not None and rows.shape == (2, 3, 5)


def test_a_trajectory_without_rewards_flattens_from_prev_logprobs() -> None:
    rows = trajectory_rows(Trajectory(prev_logprobs=numbered(2, 3), dones=numbered(2, 3)), "t")
    assert rows is not None and list(rows.rows) == [("dones",), ("prev_logprobs",)]


def test_a_trajectory_with_neither_prev_logprobs_nor_rewards_has_no_rows() -> None:
    assert trajectory_rows(Trajectory(actions=numbered(2, 2)), "t") is None


@pytest.mark.parametrize("name", ["dones", "terminations", "truncations"])
def test_epoch_rows_are_dropped_from_the_flags(name: str) -> None:
    # T = 4 in 2 epochs of 2 steps; the flags have 3 rows per epoch, the first one extra.
    flags = torch.tensor([[10], [11], [12], [20], [21], [22]])
    rows = trajectory_rows(Trajectory(rewards=numbered(4, 1), **{name: flags}), "t")
    assert rows is not None
    assert rows.rows[(name,)].tolist() == [11, 12, 21, 22]


def test_epoch_rows_that_do_not_divide_t_are_refused() -> None:
    with pytest.raises(ValueError, match=r"t\.dones: 5 steps for T=3 means 2 epoch rows"):
        trajectory_rows(Trajectory(rewards=numbered(3, 1), dones=torch.zeros(5, 1)), "t")
    with pytest.raises(ValueError, match="T is not a multiple of 3"):
        trajectory_rows(Trajectory(rewards=numbered(4, 1), dones=torch.zeros(7, 1)), "t")


def test_extra_steps_in_another_field_are_refused() -> None:
    with pytest.raises(ValueError, match=r"t\.actions: expected 3 steps"):
        trajectory_rows(Trajectory(rewards=numbered(3, 2), actions=numbered(4, 2)), "t")


def test_another_env_count_is_refused() -> None:
    with pytest.raises(ValueError, match=r"t\.curr_obs\['x'\]: expected 2 envs"):
        trajectory_rows(Trajectory(rewards=numbered(3, 2), curr_obs={"x": numbered(3, 5)}), "t")


@pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
def test_a_trajectory_without_rows_is_refused(shape: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="holds no rows"):
        trajectory_rows(Trajectory(rewards=torch.zeros(shape)), "t")


def test_nested_dicts_become_key_paths_and_small_or_plain_values_are_not_rows() -> None:
    trajectory = Trajectory(
        rewards=numbered(2, 2),
        prev_values=torch.zeros(2),  # one axis: kept in the file, not a row
        curr_obs={
            "cam": {"rgb": numbered(2, 2, 3)}, "note": "x", "task": 4, "scale": torch.ones(2)
        },
        forward_inputs={"tokens": numbered(2, 2, 7)},
    )
    rows = trajectory_rows(trajectory, "t")
    assert rows is not None
    assert list(rows.rows) == [
        ("rewards",), ("curr_obs", "cam", "rgb"), ("forward_inputs", "tokens")
    ]
    assert rows.spec[("curr_obs", "cam", "rgb")].shape == (3,)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"rewards": [[1.0]]}, r"t\.rewards: expected a tensor or None, got list"),
        ({"curr_obs": [1]}, r"t\.curr_obs: expected a dict, got list"),
        ({"curr_obs": {"x": object()}}, r"t\.curr_obs\['x'\]: expected a tensor, a dict"),
        ({"curr_obs": {1: torch.zeros(2, 2)}}, "key 1 is no str"),
        ({"model_weights_id": 3}, r"t\.model_weights_id: expected a str"),
        ({"max_episode_length": 2.5}, r"t\.max_episode_length: expected an int"),
    ],
)
def test_fields_of_the_wrong_kind_are_refused(change: dict[str, Any], match: str) -> None:
    values: dict[str, Any] = {"rewards": torch.zeros(2, 2), **change}
    with pytest.raises(TypeError, match=match):
        trajectory_rows(Trajectory(**values), "t")


def test_something_that_is_no_trajectory_is_refused() -> None:
    with pytest.raises(TypeError, match="expected a Trajectory, got dict"):
        trajectory_rows({"rewards": torch.zeros(2, 2)}, "t")


def test_rows_reshape_back_to_the_trajectory() -> None:
    original = Trajectory(
        max_episode_length=7,
        model_weights_id="w",
        rewards=numbered(3, 2),
        curr_obs={"cam": {"rgb": numbered(3, 2, 4)}},
    )
    rows = trajectory_rows(original, "t")
    assert rows is not None
    back = from_rows(rows.rows, 3, 2, max_episode_length=7, model_weights_id="w")
    assert torch.equal(back.rewards, original.rewards)
    assert torch.equal(back.curr_obs["cam"]["rgb"], original.curr_obs["cam"]["rgb"])
    assert (back.max_episode_length, back.model_weights_id) == (7, "w")
    assert back.rewards.untyped_storage().nbytes() == back.rewards.nbytes  # saves only itself


def test_the_payload_holds_the_fields_that_are_not_none() -> None:
    trajectory = Trajectory(rewards=numbered(2, 2), curr_obs={"x": numbered(2, 2)})
    assert set(payload(trajectory)) == {
        "max_episode_length", "model_weights_id", "rewards", "forward_inputs", "curr_obs",
        "next_obs",
    }
    assert set(payload(trajectory)) <= set(FIELD_NAMES)


def test_a_payload_reads_back_ignoring_unknown_names() -> None:
    data = {"rewards": numbered(2, 2), "curr_obs": {"x": numbered(2, 2)}, "someday": 1}
    trajectory = from_payload(data, max_episode_length=9)
    assert torch.equal(trajectory.rewards, data["rewards"])
    assert trajectory.max_episode_length == 9


@pytest.mark.parametrize(
    "data",
    [[1, 2], {"rewards": [1.0]}, {"curr_obs": 3}, {"model_weights_id": 1},
     {"max_episode_length": True}],
)
def test_a_payload_of_the_wrong_kind_is_refused(data: Any) -> None:
    with pytest.raises(ValueError, match=r"expected a dict|holds a"):
        from_payload(data, max_episode_length=0)


def test_compact_keeps_a_tensor_that_owns_its_whole_storage_without_copying_it() -> None:
    original = Trajectory(rewards=numbered(2, 2).float().requires_grad_())
    kept = compact(original).rewards
    assert kept is not None and original.rewards is not None
    assert kept.data_ptr() == original.rewards.data_ptr()
    assert not kept.requires_grad


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t[:, :, :2],  # not contiguous
        lambda t: t[1:],  # contiguous, at an offset into a larger storage
        lambda t: t[:1],  # contiguous at offset 0, but its storage is larger
    ],
)
def test_compact_copies_a_view_of_a_larger_tensor_into_its_own_storage(view: Any) -> None:
    base = numbered(2, 2, 3)
    original = Trajectory(curr_obs={"x": view(base)})
    copy = compact(original).curr_obs["x"]
    base += 1
    assert torch.equal(copy, view(numbered(2, 2, 3)))
    assert copy.is_contiguous() and copy.untyped_storage().nbytes() == copy.nbytes

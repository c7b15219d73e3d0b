"""push_rlds_to_buffer into a TrajectoryReplayBuffer: one [T, 1] Trajectory per episode with
every transition field, episode ends as dones/terminations/truncations, the spec compared in
the buffer's row key paths first, and nothing written when anything fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import TrajectoryReplayBuffer, convert_rlds_to_trajectories, push_rlds_to_buffer
from bufcore.storage.trajectories import from_payload, trajectory_rows
from bufcore.tree import KeyPath, LeafSpec, flatten
from tests.rlds.episodes import complete, episode, single, truncated

DATA = [complete(), single(), truncated()]
# Transition key -> the Trajectory row key path it is written to (bare observation and action).
PLACES: dict[str, KeyPath] = {
    "step_type": ("forward_inputs", "step_type"),
    "observation": ("curr_obs", "observation"),
    "action": ("actions",),
    "next_step_type": ("forward_inputs", "next_step_type"),
    "reward": ("rewards",),
    "discount": ("forward_inputs", "discount"),
}


def disk_buffer(tmp_path: Path) -> TrajectoryReplayBuffer:
    return TrajectoryReplayBuffer(auto_save=True, auto_save_path=tmp_path / "buffer")


def saved_rows(buffer: TrajectoryReplayBuffer) -> list[dict[KeyPath, torch.Tensor]]:
    """Each trajectory file's rows, in id order, read back as RLinf's loader would."""
    buffer.flush()
    directory = buffer.auto_save_path
    assert directory is not None
    found = []
    for number in range(len(buffer)):
        data = torch.load(directory / f"trajectory_{number}_.pt", weights_only=True)
        rows = trajectory_rows(from_payload(data, 0), "file")
        assert rows is not None
        found.append(rows.rows)
    return found


def snapshot(buffer: TrajectoryReplayBuffer) -> tuple[Any, ...]:
    """Everything a push could change: the counts, the spec and every file's bytes."""
    buffer.flush()
    directory = buffer.auto_save_path
    assert directory is not None
    files = {path.name: path.read_bytes() for path in sorted(directory.iterdir())}
    spec = None if buffer.spec is None else dict(buffer.spec)
    return len(buffer), buffer.total_samples, spec, files


def test_a_push_makes_one_trajectory_per_episode_and_returns_the_transition_count(
    tmp_path: Path,
) -> None:
    buffer = disk_buffer(tmp_path)
    assert push_rlds_to_buffer(DATA, buffer) == 7
    assert len(buffer) == 3 and buffer.total_samples == 7
    assert [len(rows[("rewards",)]) for rows in saved_rows(buffer)] == [3, 1, 3]


def test_each_trajectory_is_t_steps_of_one_env(tmp_path: Path) -> None:
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer([complete()], buffer)
    buffer.flush()
    directory = buffer.auto_save_path
    assert directory is not None
    data = torch.load(directory / "trajectory_0_.pt", weights_only=True)
    assert data["actions"].shape == (3, 1, 1)
    assert data["rewards"].shape == (3, 1)
    assert data["curr_obs"]["observation"].shape == (3, 1, 2)
    assert data["forward_inputs"]["step_type"].shape == (3, 1)


@pytest.mark.parametrize("auto_save", [True, False], ids=["on-disk", "in-memory"])
def test_the_buffers_spec_is_the_transitions_in_row_key_paths_plus_the_ends(
    tmp_path: Path, auto_save: bool
) -> None:
    buffer = TrajectoryReplayBuffer(auto_save=auto_save, auto_save_path=tmp_path / "b")
    push_rlds_to_buffer(DATA, buffer)
    assert buffer.spec is not None
    assert dict(buffer.spec) == {
        ("actions",): LeafSpec((1,), torch.float32),
        ("rewards",): LeafSpec((), torch.float32),
        ("terminations",): LeafSpec((), torch.bool),
        ("truncations",): LeafSpec((), torch.bool),
        ("dones",): LeafSpec((), torch.bool),
        ("curr_obs", "observation"): LeafSpec((2,), torch.float32),
        ("forward_inputs", "step_type"): LeafSpec((), torch.int32),
        ("forward_inputs", "next_step_type"): LeafSpec((), torch.int32),
        ("forward_inputs", "discount"): LeafSpec((), torch.float32),
    }


def test_every_converted_transition_comes_back_from_the_files(tmp_path: Path) -> None:
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer(DATA, buffer)
    rows = [
        {path: column[step] for path, column in trajectory.items()}
        for trajectory in saved_rows(buffer)
        for step in range(len(trajectory[("rewards",)]))
    ]
    transitions = list(convert_rlds_to_trajectories(DATA))
    assert len(rows) == len(transitions)
    for row, transition in zip(rows, transitions, strict=True):
        for key, value in transition.items():
            torch.testing.assert_close(row[PLACES[key]], value)


def test_sampled_rows_are_converted_transitions(tmp_path: Path) -> None:
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer(DATA, buffer)
    batch = buffer.sample(64)
    known = {
        (float(t["action"][0]), int(t["step_type"]), int(t["next_step_type"]), float(t["discount"]))
        for t in convert_rlds_to_trajectories(DATA)
    }
    forward = batch["forward_inputs"]
    for i in range(64):
        drawn = (
            float(batch["actions"][i, 0]),
            int(forward["step_type"][i]),
            int(forward["next_step_type"][i]),
            float(forward["discount"][i]),
        )
        assert drawn in known


@pytest.mark.parametrize(
    ("flags", "dones", "terminations"),
    [
        (([True, False, False], [False, False, True], [False, False, True]), [0, 1, 0], [0, 1, 0]),
        (([True, False, False], [False, False, True], [False, False, False]), [0, 1, 0], [0, 0, 0]),
        (([True, False], [False, True], [False, True]), [1, 0], [1, 0]),
        (([True], [True], [False]), [1], [0]),
        (([True], [True], [True]), [1], [1]),
    ],
    ids=["terminal-3", "truncated-3", "terminal-2", "single", "single-terminal"],
)
def test_an_episode_ends_at_the_transition_into_its_last_step(
    tmp_path: Path, flags: tuple[list[bool], ...], dones: list[int], terminations: list[int]
) -> None:
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer([episode(*flags)], buffer)
    (rows,) = saved_rows(buffer)
    truncations = [d - t for d, t in zip(dones, terminations, strict=True)]
    assert rows[("dones",)].int().tolist() == dones
    assert rows[("terminations",)].int().tolist() == terminations
    assert rows[("truncations",)].int().tolist() == truncations


def test_nested_observations_actions_and_a_policy_info_keep_their_structure(
    tmp_path: Path,
) -> None:
    steps = complete()["steps"]
    steps["observation"] = {"state": steps["observation"], "rgb": np.zeros((3, 2, 2), np.uint8)}
    steps["action"] = {"arm": steps["action"], "grip": np.ones(3, np.float32)}
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer([{"steps": steps}], buffer, lambda step, _: {"v": step["reward"] * 2})
    assert buffer.spec is not None
    assert set(buffer.spec) >= {
        ("curr_obs", "state"),
        ("curr_obs", "rgb"),
        ("forward_inputs", "action", "arm"),
        ("forward_inputs", "action", "grip"),
        ("forward_inputs", "policy_info", "v"),
    }
    assert ("actions",) not in buffer.spec
    (rows,) = saved_rows(buffer)
    assert rows[("forward_inputs", "policy_info", "v")].tolist() == [2, 4, 6]
    assert rows[("curr_obs", "state")].tolist() == [[1, 2], [3, 4], [5, 6]]


def test_a_nested_reward_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    steps = complete()["steps"]
    steps["reward"] = {"task": steps["reward"]}
    buffer = disk_buffer(tmp_path)
    before = snapshot(buffer)
    with pytest.raises(TypeError, match="one reward tensor per step"):
        push_rlds_to_buffer([{"steps": steps}], buffer)
    assert snapshot(buffer) == before


def test_a_second_push_adds_trajectories_after_the_first(tmp_path: Path) -> None:
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer([complete()], buffer)
    assert push_rlds_to_buffer([single(), truncated()], buffer) == 4
    assert len(buffer) == 3
    steps = [rows[("forward_inputs", "step_type")].tolist() for rows in saved_rows(buffer)]
    assert steps == [[0, 1, 2], [2], [0, 1, 2]]


OTHER_OBSERVATION = {**single()["steps"], "observation": np.zeros((1, 3), np.float32)}


@pytest.mark.parametrize(
    ("data", "info", "difference"),
    [
        (
            [single()],
            lambda step, _: step["reward"],
            r"\['forward_inputs'\]\['policy_info'\] not in the buffer",
        ),
        (
            [{"steps": OTHER_OBSERVATION}],
            None,
            r"\['curr_obs'\]\['observation'\]: the buffer holds \[2\] float32, the data \[3\]",
        ),
    ],
    ids=["extra-policy-info", "other-observation-shape"],
)
def test_a_second_push_of_another_spec_writes_nothing(
    tmp_path: Path, data: list[Any], info: Any, difference: str
) -> None:
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer(DATA, buffer)
    before = snapshot(buffer)
    with pytest.raises(ValueError, match="should match RLDS data spec") as caught:
        push_rlds_to_buffer(data, buffer, info)
    assert caught.match(difference)
    assert snapshot(buffer) == before


@pytest.mark.parametrize("filled", [False, True], ids=["empty-buffer", "filled-buffer"])
@pytest.mark.parametrize(
    "bad",
    [
        episode([True, False], [False, False], [False, False]),  # ends without a last step
        episode([False], [True], [False]),  # starts without a first step
        {"random": True},  # no steps
        {"steps": {"observation": np.zeros((1, 2), np.float32)}},  # missing features
    ],
    ids=["unended", "unstarted", "no-steps", "missing-features"],
)
def test_a_bad_episode_anywhere_writes_nothing(
    tmp_path: Path, filled: bool, bad: dict[str, Any]
) -> None:
    buffer = disk_buffer(tmp_path)
    if filled:
        push_rlds_to_buffer([complete(), truncated()], buffer)
    before = snapshot(buffer)
    with pytest.raises(ValueError):
        push_rlds_to_buffer([complete(), single(), bad], buffer)
    assert snapshot(buffer) == before


@pytest.mark.parametrize("data", [[], [{"steps": []}]], ids=["no-episode", "no-step"])
def test_data_without_steps_writes_nothing_and_returns_zero(
    tmp_path: Path, data: list[Any]
) -> None:
    buffer = disk_buffer(tmp_path)
    before = snapshot(buffer)
    assert push_rlds_to_buffer(data, buffer) == 0
    assert snapshot(buffer) == before


def test_empty_episodes_between_others_make_no_trajectory(tmp_path: Path) -> None:
    buffer = disk_buffer(tmp_path)
    assert push_rlds_to_buffer([{"steps": []}, complete(), {"steps": []}, single()], buffer) == 4
    assert [len(rows[("rewards",)]) for rows in saved_rows(buffer)] == [3, 1]


def test_the_files_hold_each_episodes_own_rows_not_views_of_the_dataset(tmp_path: Path) -> None:
    buffer = disk_buffer(tmp_path)
    push_rlds_to_buffer(DATA, buffer)
    buffer.flush()
    directory = buffer.auto_save_path
    assert directory is not None
    data = torch.load(directory / "trajectory_1_.pt", weights_only=True)
    leaves = flatten(data["forward_inputs"])
    assert all(leaf.untyped_storage().nbytes() == leaf.nbytes for leaf in leaves.values())

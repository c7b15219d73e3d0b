"""push_rlds_to_buffer: transitions into a DictBuffer in one extend, the spec compared first,
and nothing pushed when anything fails (DESIGN §2 decision 9); DictBuffer.spec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import (
    DictBuffer,
    TransitionBuffer,
    convert_rlds_to_trajectories,
    create_trajectory_data_spec,
    push_rlds_to_buffer,
)
from bufcore.tree import KeyPath, LeafSpec
from tests.rlds.episodes import complete, episode, single, truncated
from tests.support import DEVICES

DATA = [complete(), single(), truncated()]


def snapshot(buffer: DictBuffer) -> tuple[Any, ...]:
    """Everything a push could change."""
    return (len(buffer), buffer.cursor, buffer.is_full, buffer.spec, buffer.get_full_buffer())


def assert_same(left: Any, right: Any) -> None:
    assert left[:4] == right[:4]
    torch.testing.assert_close(left[4], right[4])


def test_a_push_writes_one_row_per_step_and_returns_the_count() -> None:
    buffer = DictBuffer(capacity=10)
    assert push_rlds_to_buffer(DATA, buffer) == 7
    rows = buffer.get_full_buffer()
    assert rows["step_type"].tolist() == [0, 1, 2, 2, 0, 1, 2]
    assert rows["next_step_type"].tolist() == [1, 2, 0, 2, 1, 2, 0]
    assert rows["discount"].tolist() == [1, 1, 0, 1, 1, 1, 1]
    assert rows["observation"][:3].tolist() == [[1, 2], [3, 4], [5, 6]]


def test_the_rows_pushed_are_the_converted_transitions() -> None:
    buffer = DictBuffer(capacity=10)
    push_rlds_to_buffer(DATA, buffer)
    rows = buffer.get_full_buffer()
    for i, transition in enumerate(convert_rlds_to_trajectories(DATA)):
        for key, value in transition.items():
            torch.testing.assert_close(rows[key][i], value)


def test_a_second_push_appends_after_the_first() -> None:
    buffer = DictBuffer(capacity=10)
    push_rlds_to_buffer([complete()], buffer)
    assert push_rlds_to_buffer([single()], buffer) == 1
    assert buffer.get_full_buffer()["step_type"].tolist() == [0, 1, 2, 2]


@pytest.mark.parametrize("device", DEVICES)
def test_torch_leaves_on_a_device_push_into_a_buffer_there(device: str) -> None:
    data = [complete(torch_leaves=True), single(torch_leaves=True)]
    for item in data:
        item["steps"] = {key: value.to(device) for key, value in item["steps"].items()}
    buffer = DictBuffer(capacity=8, device=device)
    assert push_rlds_to_buffer(data, buffer) == 4
    rows = buffer.get_full_buffer()
    assert rows["observation"].device.type == device
    assert rows["discount"].tolist() == [1, 1, 0, 1]


@pytest.mark.parametrize("capacity", [1, 3, 6])
def test_a_buffer_smaller_than_the_data_keeps_the_last_transitions(capacity: int) -> None:
    buffer = DictBuffer(capacity=capacity)
    assert push_rlds_to_buffer(DATA, buffer) == 7
    expected = [0, 1, 2, 2, 0, 1, 2][-capacity:]
    assert buffer.get_full_buffer()["step_type"].tolist() == expected


def test_data_without_steps_pushes_nothing_and_returns_zero() -> None:
    buffer = DictBuffer(capacity=4)
    assert push_rlds_to_buffer([], buffer) == 0
    assert push_rlds_to_buffer([{"steps": []}], buffer) == 0
    assert buffer.spec is None and len(buffer) == 0


def test_data_without_steps_leaves_a_filled_buffer_as_it_was() -> None:
    buffer = DictBuffer(capacity=4)
    push_rlds_to_buffer([complete()], buffer)
    before = snapshot(buffer)
    assert push_rlds_to_buffer([{"steps": []}], buffer) == 0
    assert_same(snapshot(buffer), before)


def test_an_episode_of_zero_stacked_steps_still_has_its_spec_compared() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"x": np.zeros((1, 2))})
    empty = episode([], [], [])
    with pytest.raises(ValueError, match="should match RLDS data spec"):
        push_rlds_to_buffer([empty], buffer)


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
def test_a_bad_episode_anywhere_pushes_nothing(filled: bool, bad: dict[str, Any]) -> None:
    buffer = DictBuffer(capacity=5)
    if filled:
        push_rlds_to_buffer([complete(), truncated()], buffer)  # wrapped: cursor 1
    before = snapshot(buffer)
    with pytest.raises(ValueError):
        push_rlds_to_buffer([complete(), single(), bad], buffer)
    assert_same(snapshot(buffer), before)


def test_a_buffer_of_another_spec_gets_the_references_message_and_no_rows() -> None:
    buffer = DictBuffer(capacity=8)
    buffer.extend({"observation": np.zeros((2, 3), np.float32), "reward": np.zeros(2)})
    before = snapshot(buffer)
    with pytest.raises(ValueError) as caught:
        push_rlds_to_buffer(DATA, buffer)
    message = str(caught.value)
    assert message.startswith("Replay buffer table signature spec should match RLDS data spec.")
    assert "['observation']: the buffer holds [3] float32, the data [2] float32" in message
    assert "['reward']: the buffer holds [] float64, the data [] float32" in message
    assert "['step_type'] not in the buffer" in message
    assert_same(snapshot(buffer), before)


def test_a_buffer_with_an_extra_key_is_another_spec() -> None:
    buffer = DictBuffer(capacity=8)
    push_rlds_to_buffer([complete()], buffer, lambda s, n: s["reward"])
    with pytest.raises(ValueError, match=r"\['policy_info'\] not in the data"):
        push_rlds_to_buffer([single()], buffer)


def test_a_policy_info_is_pushed_into_a_buffer_whose_spec_has_it() -> None:
    buffer = DictBuffer(capacity=8)
    info = lambda step, following: {"value": step["reward"] * 2}  # noqa: E731
    push_rlds_to_buffer([complete()], buffer, info)
    push_rlds_to_buffer([single()], buffer, info)
    assert buffer.get_full_buffer()["policy_info"]["value"].tolist() == [2, 4, 6, 2]


def test_a_buffer_spec_equal_to_create_trajectory_data_spec_takes_the_push() -> None:
    buffer = DictBuffer(capacity=8)
    push_rlds_to_buffer([single()], buffer)
    assert buffer.spec == create_trajectory_data_spec(DATA)
    assert push_rlds_to_buffer(DATA, buffer) == 7


def test_something_without_spec_and_extend_is_not_a_buffer() -> None:
    with pytest.raises(TypeError, match="expected a buffer with a spec and an extend method"):
        push_rlds_to_buffer(DATA, [])  # type: ignore[arg-type]


class RecordingBuffer:
    """Any buffer with the protocol (a trajectory buffer, say): a spec and an extend."""

    def __init__(self, spec: dict[KeyPath, LeafSpec] | None) -> None:
        self._spec = spec
        self.batches: list[Mapping[str, Any]] = []

    @property
    def spec(self) -> dict[KeyPath, LeafSpec] | None:
        return self._spec

    def extend(self, data: Mapping[str, Any]) -> None:
        self.batches.append(data)


def test_any_buffer_with_a_spec_and_an_extend_takes_one_batch_of_all_rows() -> None:
    buffer = RecordingBuffer(create_trajectory_data_spec(DATA))
    assert isinstance(buffer, TransitionBuffer)
    assert push_rlds_to_buffer(DATA, buffer) == 7
    (batch,) = buffer.batches
    assert batch["step_type"].shape == (7,) and batch["observation"].shape == (7, 2)


def test_a_protocol_buffer_of_another_spec_is_never_extended() -> None:
    spec = create_trajectory_data_spec(DATA)
    spec[("reward",)] = LeafSpec((), torch.float64)
    buffer = RecordingBuffer(spec)
    with pytest.raises(ValueError, match="should match RLDS data spec"):
        push_rlds_to_buffer(DATA, buffer)
    assert buffer.batches == []


# ------------------------------------------------------------------------ DictBuffer.spec
def test_a_dict_buffer_has_no_spec_before_its_first_extend() -> None:
    assert DictBuffer(capacity=2).spec is None


def test_a_dict_buffers_spec_is_each_leafs_row_shape_and_dtype() -> None:
    buffer = DictBuffer(capacity=2)
    done = torch.zeros(3, 1, dtype=torch.bool)
    buffer.extend({"obs": {"state": torch.zeros(3, 4)}, "done": done})
    assert buffer.spec == {
        ("obs", "state"): LeafSpec((4,), torch.float32),
        ("done",): LeafSpec((1,), torch.bool),
    }


def test_changing_the_returned_spec_changes_nothing_in_the_buffer() -> None:
    buffer = DictBuffer(capacity=2)
    buffer.extend({"x": torch.zeros(1, 2)})
    spec = buffer.spec
    assert spec is not None
    spec.clear()
    assert buffer.spec == {("x",): LeafSpec((2,), torch.float32)}

"""Curriculum's ``update_sampling_weight_by_id`` hook: each round reaches the motion sampler,
all or nothing."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bufcore import TrajectoryDictBuffer
from bufcore.curriculum.curriculum import Curriculum


def expert(motion_ids: list[int]) -> TrajectoryDictBuffer:
    episodes = [
        {"observation": np.zeros((3, 1), np.float32), "motion_id": np.full(3, m)}
        for m in motion_ids
    ]
    return TrajectoryDictBuffer(episodes)


class Recorder:
    """A hook that records its keyword arguments and the buffer's priorities when called."""

    def __init__(self, buffer: TrajectoryDictBuffer, *, fail: bool = False) -> None:
        self.buffer = buffer
        self.fail = fail
        self.calls: list[dict[str, Any]] = []
        self.seen: list[torch.Tensor] = []

    def __call__(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)
        self.seen.append(self.buffer.priorities.clone())
        if self.fail:
            raise RuntimeError("the simulator refused the weights")


class MotionLibrary:
    """A motion library with BFM-Zero's method signature, normalising as it does."""

    def __init__(self, count: int) -> None:
        self.sampling_prob = torch.full((count,), 1.0 / count)

    def update_sampling_weight_by_id(
        self, priorities: list[Any], motions_id: list[Any], file_name: Any = None
    ) -> None:
        weights = torch.zeros(len(self.sampling_prob))
        weights[torch.tensor(motions_id)] = torch.tensor(priorities, dtype=torch.float32)
        self.sampling_prob = weights / weights.sum()


def test_the_hook_gets_the_round_priorities_and_motion_ids_by_keyword() -> None:
    buffer = expert([7, 3, 5])
    hook = Recorder(buffer)
    curriculum = Curriculum(buffer, mode="lin", update_sampling_weight_by_id=hook)
    record = curriculum.apply({3: 0.5, 5: 1.0, 7: 2.0}, step=10)
    (call,) = hook.calls
    assert set(call) == {"priorities", "motions_id", "file_name"}
    assert dict(zip(call["motions_id"], call["priorities"], strict=True)) == record.priority
    assert all(isinstance(p, float) for p in call["priorities"])
    assert call["file_name"] is None


def test_the_hook_gets_each_motion_file_name_when_the_buffer_has_them() -> None:
    buffer = expert([7, 3])
    buffer.file_names = ["seven.h5", "three.h5"]
    hook = Recorder(buffer)
    Curriculum(buffer, update_sampling_weight_by_id=hook).apply({3: 1.0, 7: 1.0}, step=0)
    assert hook.calls[0]["file_name"] == {7: "seven.h5", 3: "three.h5"}


def test_the_hook_runs_after_the_buffer_took_the_round() -> None:
    buffer = expert([0, 1])
    hook = Recorder(buffer)
    Curriculum(buffer, mode="lin", update_sampling_weight_by_id=hook).apply(
        {0: 0.5, 1: 1.5}, step=0
    )
    assert hook.seen[0].tolist() == pytest.approx([0.25, 0.75])


def test_a_bfm_zero_motion_library_method_fits_as_it_is() -> None:
    buffer = expert([0, 1, 2])
    library = MotionLibrary(3)
    curriculum = Curriculum(
        buffer, update_sampling_weight_by_id=library.update_sampling_weight_by_id
    )
    for step, emds in enumerate([{0: 0.5, 1: 1.0, 2: 2.0}, {0: 2.0, 1: 0.5, 2: 0.5}]):
        curriculum.apply(emds, step=step)
        assert torch.allclose(library.sampling_prob, buffer.priorities)


@pytest.mark.parametrize("rounds_before", [0, 1, 2])
def test_a_raising_hook_leaves_the_buffer_and_history_as_before(rounds_before: int) -> None:
    buffer = expert([0, 1, 2])
    hook = Recorder(buffer)
    curriculum = Curriculum(buffer, update_sampling_weight_by_id=hook)
    for step in range(rounds_before):
        curriculum.apply({0: 0.5 + step, 1: 1.0, 2: 2.0}, step=step)
    before, state = buffer.priorities.clone(), curriculum.state_dict()
    hook.fail = True
    with pytest.raises(RuntimeError, match="simulator refused"):
        curriculum.apply({0: 2.0, 1: 0.5, 2: 0.5}, step=99)
    assert torch.equal(buffer.priorities, before)
    assert curriculum.state_dict() == state
    assert not hook.seen[-1].equal(before)  # the buffer had taken the round when it raised


def test_the_hook_is_not_called_for_a_refused_round() -> None:
    buffer = expert([0, 1])
    hook = Recorder(buffer)
    curriculum = Curriculum(buffer, update_sampling_weight_by_id=hook)
    with pytest.raises(ValueError, match="not evaluated"):
        curriculum.apply({0: 1.0}, step=0)
    assert hook.calls == []


def test_the_hook_is_not_called_when_the_buffer_refuses_the_update() -> None:
    buffer = expert([0, 1])
    hook = Recorder(buffer)
    curriculum = Curriculum(buffer, update_sampling_weight_by_id=hook)

    def refuse(priorities: torch.Tensor, idxs: torch.Tensor) -> None:
        raise RuntimeError("buffer refused the update")

    buffer.update_priorities = refuse  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="buffer refused"):
        curriculum.apply({0: 1.0, 1: 1.0}, step=0)
    assert (hook.calls, curriculum.history) == ([], [])


@pytest.mark.parametrize("hook", ["motion_lib", 3, object()])
def test_a_hook_that_is_not_callable_is_a_type_error(hook: Any) -> None:
    with pytest.raises(TypeError, match="update_sampling_weight_by_id: expected a callable"):
        Curriculum(expert([0]), update_sampling_weight_by_id=hook)


def test_the_hook_is_not_state_and_from_state_dict_takes_it_again() -> None:
    buffer = expert([0, 1])
    hooked = Curriculum(buffer, update_sampling_weight_by_id=Recorder(buffer))
    plain = Curriculum(buffer)
    for curriculum in (hooked, plain):
        curriculum.apply({0: 1.0, 1: 2.0}, step=5)
    assert hooked.state_dict() == plain.state_dict()
    hook = Recorder(buffer)
    restored = Curriculum.from_state_dict(
        buffer, hooked.state_dict(), update_sampling_weight_by_id=hook
    )
    restored.apply({0: 2.0, 1: 1.0}, step=6)
    assert len(hook.calls) == 1 and len(restored.history) == 2

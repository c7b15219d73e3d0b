"""Curriculum rounds: all or nothing, at each motion's trajectory index."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
import torch

from bufcore.curriculum.curriculum import Curriculum
from bufcore.curriculum.history import Round
from tests.support import FakeExpertBuffer as FakeBuffer


# ---------------------------------------------------------------------- curriculum
def test_apply_updates_each_motion_at_its_trajectory_index() -> None:
    buffer = FakeBuffer([7, 3, 5])
    Curriculum(buffer, mode="lin").apply({3: 0.5, 5: 1.0, 7: 2.0}, step=10)
    ((priorities, idxs),) = buffer.calls
    assert (priorities.dtype, idxs.dtype) == (torch.float32, torch.int64)
    assert dict(zip(idxs.tolist(), priorities.tolist(), strict=True)) == {1: 1.0, 2: 2.0, 0: 4.0}


def test_apply_records_a_round_with_emds_and_unnormalised_priorities() -> None:
    curriculum = Curriculum(FakeBuffer([0, 1]), mode="exp")
    record = curriculum.apply({0: 0.5, 1: 2.0}, step=100)
    assert record == Round(step=100, emd={0: 0.5, 1: 2.0}, priority={0: 2.0, 1: 16.0})
    assert curriculum.history == [record]


def test_rounds_accumulate_in_order() -> None:
    curriculum = Curriculum(FakeBuffer([0, 1]))
    curriculum.apply({0: 0.5, 1: 1.0}, step=1)
    curriculum.apply({0: 2.0, 1: 0.5}, step=2)
    assert [r.step for r in curriculum.history] == [1, 2]


def test_a_round_is_frozen() -> None:
    record = Curriculum(FakeBuffer([0])).apply({0: 1.0}, step=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.step = 5  # type: ignore[misc]


def test_apply_accepts_numpy_and_torch_numbers() -> None:
    curriculum = Curriculum(FakeBuffer([0, 1]), mode="lin")
    emds: dict[Any, Any] = {np.int64(0): np.float32(1.0), 1: torch.tensor(0.5)}
    record = curriculum.apply(emds, step=0)
    assert record.priority == {0: 2.0, 1: 1.0}


BAD_ROUNDS = [
    ({0: 1.0, 1: 1.0}, 0, ValueError, r"emd_by_motion: 1 motion\(s\) .* not evaluated: \[2\]"),
    ({0: 1.0, 1: 1.0, 2: 1.0, 9: 1.0}, 0, ValueError, r"not in the buffer: \[9\]"),
    ({0: 1.0, 1: math.nan, 2: 1.0}, 0, ValueError, r"emd_by_motion\[1\]: expected a finite"),
    ({0: 1.0, 1: 1.0, 2: -2.0}, 0, ValueError, r"emd_by_motion\[2\]: expected a finite"),
    ({0: math.inf, 1: 1.0, 2: 1.0}, 0, ValueError, r"emd_by_motion\[0\]: expected a finite"),
    ({0: 1.0, 1: 1.0, 2: "x"}, 0, TypeError, r"emd_by_motion\[2\]: expected a number"),
    ({0: 1.0, 1: 1.0, "2": 1.0}, 0, TypeError, r"emd_by_motion: motion id"),
    ([1.0, 1.0, 1.0], 0, TypeError, r"emd_by_motion: expected a mapping"),
    ({0: 1.0, 1: 1.0, 2: 1.0}, -1, ValueError, r"step: expected an int >= 0"),
    ({0: 1.0, 1: 1.0, 2: 1.0}, 1.5, TypeError, r"step: expected an int"),
]


@pytest.mark.parametrize(("emds", "step", "error", "match"), BAD_ROUNDS)
def test_an_invalid_round_raises_and_changes_nothing(
    emds: Any, step: Any, error: type[Exception], match: str
) -> None:
    buffer = FakeBuffer([0, 1, 2])
    curriculum = Curriculum(buffer)
    curriculum.apply({0: 1.0, 1: 1.0, 2: 1.0}, step=0)
    before = curriculum.state_dict()
    with pytest.raises(error, match=match):
        curriculum.apply(emds, step=step)
    assert len(buffer.calls) == 1
    assert curriculum.state_dict() == before


def test_a_round_with_every_priority_zero_is_refused() -> None:
    buffer = FakeBuffer([0, 1])
    curriculum = Curriculum(buffer, min_val=0.0, mode="lin")
    with pytest.raises(ValueError, match="every priority is 0"):
        curriculum.apply({0: 0.0, 1: 0.0}, step=0)
    assert (buffer.calls, curriculum.history) == ([], [])


def test_a_refused_buffer_update_leaves_the_history_unchanged() -> None:
    curriculum = Curriculum(FakeBuffer([0, 1], fail=True))
    with pytest.raises(RuntimeError, match="refused"):
        curriculum.apply({0: 1.0, 1: 1.0}, step=0)
    assert curriculum.history == []


def test_apply_refuses_a_buffer_whose_motions_changed() -> None:
    buffer = FakeBuffer([0, 1])
    curriculum = Curriculum(buffer)
    buffer.motion_ids = [1, 0]
    with pytest.raises(ValueError, match=r"buffer\.motion_ids changed"):
        curriculum.apply({0: 1.0, 1: 1.0}, step=0)
    assert (buffer.calls, curriculum.history) == ([], [])


@pytest.mark.parametrize(
    ("motion_ids", "error", "match"),
    [
        ([4, 5, 4], ValueError, r"buffer.motion_ids\[2\]: motion 4 appears twice"),
        ([], ValueError, r"buffer.motion_ids: the buffer holds no motion"),
        ([0, "1"], TypeError, r"buffer.motion_ids\[1\]: expected an int"),
        ([0, True], TypeError, r"buffer.motion_ids\[1\]: expected an int"),
    ],
)
def test_construction_rejects_bad_motion_ids(
    motion_ids: list[Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        Curriculum(FakeBuffer(motion_ids))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"mode": "square"}, "mode"),
        ({"min_val": 3.0}, "min_val"),
        ({"scale": 0}, "scale"),
        ({"max_val": math.nan}, "max_val"),
    ],
)
def test_construction_rejects_invalid_options(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Curriculum(FakeBuffer([0]), **options)


def test_the_curriculum_names_import_from_the_package_as_before() -> None:
    from bufcore.curriculum import Curriculum as Imported
    from bufcore.curriculum import emd, emd_to_priorities

    assert Imported is Curriculum
    assert emd([[0.0]], [[2.0]]) == 2.0
    assert emd_to_priorities([1.0], mode="lin").tolist() == [2.0]


def test_options_whose_priorities_would_overflow_float32_are_refused_at_construction() -> None:
    buffer = FakeBuffer([0, 1])
    with pytest.raises(ValueError, match=r"scale: .*exceeds float32 max"):
        Curriculum(buffer, scale=100.0)
    assert buffer.calls == []


def test_a_finite_emd_beyond_float32_range_gets_the_max_val_priority() -> None:
    buffer = FakeBuffer([0, 1])
    record = Curriculum(buffer).apply({0: 1e300, 1: 0.5}, step=0)
    assert record.priority == {0: 16.0, 1: 2.0}
    assert record.emd == {0: 1e300, 1: 0.5}


def test_numpy_integers_are_accepted_for_step_and_motion_ids() -> None:
    buffer = FakeBuffer([np.int64(4), np.uint8(2)])  # type: ignore[list-item]
    record = Curriculum(buffer).apply({np.int32(4): 1.0, np.uint64(2): 1.0}, step=np.int64(7))
    assert record.step == 7 and type(record.step) is int
    assert list(record.emd) == [4, 2] and all(type(m) is int for m in record.emd)


@pytest.mark.parametrize("step", [True, np.bool_(False)])
def test_a_bool_step_is_refused_and_changes_nothing(step: object) -> None:
    buffer = FakeBuffer([0])
    curriculum = Curriculum(buffer)
    with pytest.raises(TypeError, match="step: expected an int"):
        curriculum.apply({0: 1.0}, step=step)  # type: ignore[arg-type]
    assert buffer.calls == [] and curriculum.history == []


def test_a_bool_motion_id_is_refused() -> None:
    with pytest.raises(TypeError, match=r"emd_by_motion: motion id"):
        Curriculum(FakeBuffer([0, 1])).apply({False: 1.0, 1: 1.0}, step=0)


# ------------------------------------------------------------ across ranks (one process here)
# Real groups of 2 and 3 ranks: tests/distributed/test_process_groups.py.
def test_apply_gathered_in_one_process_is_apply_in_the_buffers_motion_order() -> None:
    gathered = Curriculum(FakeBuffer([7, 3, 5]), mode="bin")
    record = gathered.apply_gathered({5: 1.0, 3: 0.7, 7: 2.0}, step=4)
    expected = Curriculum(FakeBuffer([7, 3, 5]), mode="bin").apply(
        {7: 2.0, 3: 0.7, 5: 1.0}, step=4
    )
    assert record == expected and list(record.emd) == [7, 3, 5]
    assert gathered.history == [record]


def test_apply_gathered_in_one_process_refuses_a_round_missing_a_motion() -> None:
    curriculum = Curriculum(FakeBuffer([0, 1, 2]))
    with pytest.raises(ValueError, match=r"1 motion\(s\) of the buffer were evaluated on no rank"):
        curriculum.apply_gathered({0: 1.0, 1: 1.0}, step=0)
    assert curriculum.history == []


@pytest.mark.parametrize(("emds", "step", "error", "match"), [
    ({0: math.nan}, 0, ValueError, r"^emd_by_motion\[0\]: expected a finite"),
    ({9: 1.0}, 0, ValueError, r"^emd_by_motion: 1 motion\(s\) are not in the buffer"),
    ([(0, 1.0)], 0, TypeError, "^emd_by_motion: expected a mapping"),
    ({0: 1.0, 1: 1.0}, -1, ValueError, "^step"),
])
def test_apply_gathered_in_one_process_raises_the_shares_own_error(
    emds: Any, step: int, error: type[Exception], match: str
) -> None:
    curriculum = Curriculum(FakeBuffer([0, 1]))
    with pytest.raises(error, match=match):
        curriculum.apply_gathered(emds, step=step)
    assert curriculum.history == []

"""EMD curriculum (REFERENCE §7, DESIGN §2 decision 5)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from bufcore.curriculum import Curriculum, Round, emd, emd_to_priorities


class FakeBuffer:
    """An expert buffer that records every priority update."""

    def __init__(self, motion_ids: list[int], *, fail: bool = False) -> None:
        self.motion_ids = list(motion_ids)
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.fail = fail

    def update_priorities(self, priorities: torch.Tensor, idxs: torch.Tensor) -> None:
        if self.fail:
            raise RuntimeError("buffer refused the update")
        self.calls.append((priorities.clone(), idxs.clone()))


EMDS = [0.1, 0.75, 1.2, 1.3, 3.0]
# Clamped to [0.5, 2.0] and scaled by 2: [1.0, 1.5, 2.4, 2.6, 4.0].
EXPECTED = {
    "lin": [1.0, 1.5, 2.4, 2.6, 4.0],
    "exp": [2.0, 2**1.5, 2**2.4, 2**2.6, 16.0],
    # floor -> bins [1, 1, 2, 2, 4]: two members share each of bins 1 and 2, bin 4 is alone.
    "bin": [0.5, 0.5, 0.5, 0.5, 1.0],
}


# ----------------------------------------------------------------------------- emd
@pytest.mark.parametrize("n", [1, 2, 7])
def test_emd_of_a_set_with_itself_is_exactly_zero(n: int) -> None:
    # Far from the origin, so a |x|^2 + |y|^2 - 2xy ground cost would not cancel to 0.
    states = np.random.default_rng(n).normal(1000.0, 100.0, size=(n, 4))
    assert emd(states, states) == 0.0


@pytest.mark.parametrize("n", [1, 2, 7])
def test_emd_of_a_shifted_set_is_the_shift_length(n: int) -> None:
    states = np.random.default_rng(n).normal(size=(n, 2))
    assert emd(states, states + np.array([3.0, 4.0])) == pytest.approx(5.0)


def test_emd_matches_each_point_to_its_nearest_partner_when_that_is_optimal() -> None:
    agent = [[0.0], [10.0]]
    target = [[12.0], [1.0]]
    # 0 -> 1 costs 1 and 10 -> 12 costs 2, each carrying half of the mass.
    assert emd(agent, target) == pytest.approx(1.5)


def test_emd_spreads_one_point_over_a_larger_set() -> None:
    # All mass sits at 0 and goes half to 1 and half to 3.
    assert emd([[0.0, 0.0]], [[1.0, 0.0], [0.0, 3.0]]) == pytest.approx(2.0)


def test_emd_gives_the_same_cost_for_torch_and_numpy_inputs() -> None:
    a = np.random.default_rng(0).normal(size=(5, 3))
    b = np.random.default_rng(1).normal(size=(4, 3))
    assert emd(torch.from_numpy(a).float(), torch.from_numpy(b)) == pytest.approx(
        emd(a.astype(np.float32), b), rel=1e-6
    )


def point_sets(n: int) -> st.SearchStrategy[list[list[float]]]:
    point = st.lists(st.floats(-10, 10), min_size=2, max_size=2)
    return st.lists(point, min_size=n, max_size=n)


@given(st.integers(1, 5).flatmap(lambda n: st.tuples(point_sets(n), point_sets(n))))
def test_emd_of_equal_size_sets_equals_the_best_one_to_one_assignment(
    sets: tuple[list[list[float]], list[list[float]]],
) -> None:
    agent, target = np.asarray(sets[0]), np.asarray(sets[1])
    n = len(agent)
    brute = min(
        sum(float(np.linalg.norm(agent[i] - target[j])) for i, j in enumerate(perm)) / n
        for perm in itertools.permutations(range(n))
    )
    assert emd(agent, target) == pytest.approx(brute, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("agent", "target", "match"),
    [
        (np.zeros(3), np.zeros((3, 2)), r"agent_states: expected a 2-D"),
        (np.zeros((3, 2)), np.zeros((1, 3, 2)), r"target_states: expected a 2-D"),
        (np.zeros((0, 2)), np.zeros((3, 2)), r"agent_states: expected at least one state"),
        (np.zeros((3, 2)), np.zeros((3, 0)), r"target_states: expected at least one state"),
        (np.zeros((3, 2)), np.zeros((3, 3)), r"target_states: expected the feature dimension"),
        (np.array([[0.0, math.nan]]), np.zeros((1, 2)), r"agent_states: expected finite"),
        (np.zeros((1, 2)), np.array([[math.inf, 0.0]]), r"target_states: expected finite"),
    ],
)
def test_emd_rejects_malformed_state_sets_naming_the_argument(
    agent: np.ndarray[Any, Any], target: np.ndarray[Any, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        emd(agent, target)


def test_emd_rejects_non_numeric_states_naming_the_argument() -> None:
    with pytest.raises(TypeError, match="target_states"):
        emd(np.zeros((1, 2)), np.array([["a", "b"]]))


def test_emd_rejects_a_non_positive_iteration_cap() -> None:
    with pytest.raises(ValueError, match="num_itermax"):
        emd(np.zeros((1, 2)), np.zeros((1, 2)), num_itermax=0)


# ---------------------------------------------------------------------- priorities
@pytest.mark.parametrize("mode", ["lin", "exp", "bin"])
def test_priorities_of_the_worked_example_in_each_mode(mode: str) -> None:
    priorities = emd_to_priorities(EMDS, mode=mode)
    assert priorities.dtype == torch.float32
    torch.testing.assert_close(priorities, torch.tensor(EXPECTED[mode]))


def test_default_clamp_and_scale_put_linear_priorities_in_one_to_four() -> None:
    priorities = emd_to_priorities(np.linspace(0.0, 10.0, 101), mode="lin")
    assert (priorities.min().item(), priorities.max().item()) == (1.0, 4.0)


def test_default_exp_priorities_span_two_to_sixteen() -> None:
    priorities = emd_to_priorities([0.0, 0.5, 2.0, 100.0], mode="exp")
    assert priorities.tolist() == [2.0, 2.0, 16.0, 16.0]


@pytest.mark.parametrize(
    ("emds", "expected"),
    [
        # Bins 1, 1, 2, 2, 3, 3, 4, 4: EMD [0.5, 1) -> 1, [1, 1.5) -> 2, [1.5, 2) -> 3, >= 2 -> 4.
        ([0.5, 0.9, 1.0, 1.4, 1.5, 1.9, 2.0, 7.0], [0.5] * 8),
        # 1.0 starts bin 2, so it does not share bin 1.
        ([0.5, 0.9, 1.0], [0.5, 0.5, 1.0]),
        # Just below each edge stays in the lower bin.
        ([0.99, 1.49, 1.99, 2.0], [1.0, 1.0, 1.0, 1.0]),
        # Empty bins (2 and 3) receive nothing.
        ([0.5, 0.6, 0.7, 2.5], [1 / 3, 1 / 3, 1 / 3, 1.0]),
        ([1.2], [1.0]),
    ],
)
def test_bin_mode_gives_every_non_empty_bin_equal_mass(
    emds: list[float], expected: list[float]
) -> None:
    torch.testing.assert_close(emd_to_priorities(emds, mode="bin"), torch.tensor(expected))


@given(st.lists(st.floats(0.0, 5.0), min_size=1, max_size=30))
def test_bin_mode_mass_per_bin_is_one(emds: list[float]) -> None:
    priorities = emd_to_priorities(emds, mode="bin")
    bins = torch.floor(emd_to_priorities(emds, mode="lin")).to(torch.int64)
    for b in torch.unique(bins):
        assert priorities[bins == b].sum().item() == pytest.approx(1.0, rel=1e-5)


def test_custom_clamp_and_scale_apply_before_the_mode() -> None:
    priorities = emd_to_priorities([0.0, 1.0, 9.0], min_val=0.25, max_val=3.0, scale=1.0)
    torch.testing.assert_close(priorities, torch.tensor([2**0.25, 2.0, 8.0]))


@pytest.mark.parametrize(
    "emds", [np.array(EMDS), torch.tensor(EMDS, dtype=torch.float64), tuple(EMDS)]
)
def test_priorities_accept_numpy_torch_and_sequences(emds: Any) -> None:
    torch.testing.assert_close(emd_to_priorities(emds), torch.tensor(EXPECTED["exp"]))


@pytest.mark.parametrize(
    ("value", "text"), [(math.nan, "nan"), (-0.1, "-0.1"), (math.inf, "inf"), (-math.inf, "-inf")]
)
@pytest.mark.parametrize("mode", ["lin", "exp", "bin"])
def test_priorities_reject_an_invalid_emd_naming_its_index(
    value: float, text: str, mode: str
) -> None:
    with pytest.raises(ValueError, match=rf"emd\[2\]: expected a finite EMD >= 0, got {text}"):
        emd_to_priorities([0.5, 1.0, value], mode=mode)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"mode": "log"}, r"mode: unsupported prioritization mode 'log'"),
        ({"min_val": 2.5, "max_val": 2.0}, r"min_val: expected min_val <= max_val"),
        ({"scale": 0.0}, r"scale: expected a number > 0"),
        ({"scale": -1.0}, r"scale: expected a number > 0"),
        ({"max_val": math.inf}, r"max_val: expected a finite number"),
        ({"min_val": math.nan}, r"min_val: expected a finite number"),
    ],
)
def test_priorities_reject_invalid_options_naming_them(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        emd_to_priorities(EMDS, **options)


def test_priorities_check_options_before_the_emd_values() -> None:
    with pytest.raises(ValueError, match="mode"):
        emd_to_priorities([math.nan], mode="log")


@pytest.mark.parametrize(
    ("emds", "match"),
    [(np.zeros((2, 2)), r"emd: expected a 1-D"), ([], r"emd: expected at least one")],
)
def test_priorities_reject_a_malformed_emd_array(emds: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        emd_to_priorities(emds)


def test_priorities_reject_a_bool_option() -> None:
    with pytest.raises(TypeError, match="scale"):
        emd_to_priorities(EMDS, scale=True)


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


# --------------------------------------------------------------------- persistence
def two_rounds(buffer: FakeBuffer, **options: Any) -> Curriculum:
    curriculum = Curriculum(buffer, **options)
    curriculum.apply({0: 0.5, 1: 1.7, 2: 3.0}, step=100)
    curriculum.apply({2: 0.2, 0: 1.1, 1: 0.9}, step=200)
    return curriculum


def test_state_dict_is_plain_json() -> None:
    state = two_rounds(FakeBuffer([0, 1, 2])).state_dict()
    assert json.loads(json.dumps(state)) == state


def test_load_state_dict_restores_the_history_through_json() -> None:
    original = two_rounds(FakeBuffer([0, 1, 2]), mode="bin")
    state = json.loads(json.dumps(original.state_dict()))
    buffer = FakeBuffer([0, 1, 2])
    restored = Curriculum(buffer, mode="bin")
    restored.load_state_dict(state)
    assert restored.history == original.history
    assert buffer.calls == []


def test_from_state_dict_restores_the_saved_options_and_history() -> None:
    original = two_rounds(FakeBuffer([0, 1, 2]), min_val=0.1, max_val=4.0, scale=1.5, mode="lin")
    restored = Curriculum.from_state_dict(FakeBuffer([2, 0, 1]), original.state_dict())
    assert restored.options == original.options
    assert restored.history == original.history


def test_load_state_dict_refuses_other_options_and_keeps_the_history() -> None:
    curriculum = two_rounds(FakeBuffer([0, 1, 2]), mode="exp")
    state = two_rounds(FakeBuffer([0, 1, 2]), mode="bin").state_dict()
    before = curriculum.history
    with pytest.raises(ValueError, match=r"state\['options'\]\['mode'\]"):
        curriculum.load_state_dict(state)
    assert curriculum.history == before


def corrupt(state: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    state = json.loads(json.dumps(state))
    node = state
    for part in path[:-1]:
        node = node[part]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return state


DELETE = object()
BAD_STATES = [
    (("rounds",), DELETE, r"state: missing key 'rounds'"),
    (("format",), "other", r"state\['format'\]: expected 'bufcore.curriculum'"),
    (("format_version",), 99, r"state\['format_version'\]"),
    (("options",), [], r"state\['options'\]: expected a mapping"),
    (("options", "scale"), DELETE, r"state\['options'\]: missing key 'scale'"),
    (("options", "scale"), "2", r"state\['options'\]\['scale'\]: expected a number"),
    (("rounds",), {}, r"state\['rounds'\]: expected a list"),
    (("rounds", 1), 3, r"state\['rounds'\]\[1\]: expected a mapping"),
    (("rounds", 1, "step"), -5, r"state\['rounds'\]\[1\]\['step'\]: expected an int >= 0"),
    (("rounds", 0, "emd"), [1.0], r"state\['rounds'\]\[0\]\['emd'\]: expected 3 values"),
    (("rounds", 0, "priority"), DELETE, r"state\['rounds'\]\[0\]: missing key 'priority'"),
    (("rounds", 1, "priority", 1), -1.0, r"state\['rounds'\]\[1\]\['priority'\]\[1\]"),
    (("rounds", 1, "emd", 2), None, r"state\['rounds'\]\[1\]\['emd'\]\[2\]"),
    (("rounds", 0, "motion_ids", 0), "0", r"state\['rounds'\]\[0\]\['motion_ids'\]\[0\]"),
    (("rounds", 0, "motion_ids"), [0, 1, 7], r"state\['rounds'\]\[0\]\['motion_ids'\]"),
    (("rounds", 0, "motion_ids"), [0, 1, 1], r"state\['rounds'\]\[0\]\['motion_ids'\]"),
]


@pytest.mark.parametrize(("path", "value", "match"), BAD_STATES)
def test_load_state_dict_rejects_a_malformed_state_naming_the_key_path(
    path: tuple[Any, ...], value: Any, match: str
) -> None:
    state = corrupt(two_rounds(FakeBuffer([0, 1, 2])).state_dict(), path, value)
    curriculum = Curriculum(FakeBuffer([0, 1, 2]))
    curriculum.apply({0: 1.0, 1: 1.0, 2: 1.0}, step=7)
    before = curriculum.history
    with pytest.raises(ValueError, match=match):
        curriculum.load_state_dict(state)
    assert curriculum.history == before


def test_from_state_dict_rejects_a_state_that_is_not_a_mapping() -> None:
    with pytest.raises(ValueError, match="state: expected a mapping"):
        Curriculum.from_state_dict(FakeBuffer([0]), [])  # type: ignore[arg-type]

"""EMD between state sets (REFERENCE §7): exact, symmetric in its inputs, argument checks."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from bufcore.curriculum.transport import emd


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



# ---------------------------------------------------- range: costs never overflow
@pytest.mark.parametrize("size", [1e-200, 1e-30, 1e30, 1e160, 1e300])
def test_emd_of_two_points_is_their_distance_at_any_scale(size: float) -> None:
    assert emd(np.array([[0.0]]), np.array([[size]])) == size


@pytest.mark.parametrize("size", [1e160, 1e200])
def test_emd_of_far_apart_sets_is_not_reported_as_zero(size: float) -> None:
    agent = np.array([[0.0], [1.0]])
    target = np.array([[size], [2.0 * size]])
    assert emd(agent, target) == pytest.approx(1.5 * size - 0.5, rel=1e-12)


@pytest.mark.parametrize("exponent", [-900, -40, 0, 40, 900])
def test_emd_scales_exactly_with_a_power_of_two(exponent: int) -> None:
    rng = np.random.default_rng(3)
    agent, target = rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    base = emd(agent, target)
    assert emd(np.ldexp(agent, exponent), np.ldexp(target, exponent)) == math.ldexp(base, exponent)


def test_emd_keeps_python_floats_at_full_precision() -> None:
    assert emd([[1e300, 0.0]], [[0.0, 0.0]]) == 1e300


def test_emd_beyond_float64_max_is_refused_naming_both_arguments() -> None:
    with pytest.raises(ValueError, match=r"agent_states, target_states: the transport cost "
                                         r"exceeds float64 max"):
        emd(np.array([[-1.5e308]]), np.array([[1.5e308]]))


def test_emd_refuses_a_cost_the_solver_cut_off_at_num_itermax() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"num_itermax: the solver stopped after 3 iterations"):
        emd(rng.normal(size=(30, 2)), rng.normal(size=(30, 2)), num_itermax=3)


@pytest.mark.parametrize("order", [">", "<", "="])
def test_emd_reads_numpy_arrays_in_any_byte_order(order: str) -> None:
    agent = np.array([[0.0, 0.0]], dtype=f"{order}f8")
    target = np.array([[3.0, 4.0]], dtype=f"{order}f4")
    assert emd(agent, target) == 5.0


@pytest.mark.parametrize(
    "states", [torch.tensor([[1.0 + 1j]]), np.array([[1.0 + 1j]]), np.array([[True]])],
    ids=["torch-complex", "numpy-complex", "numpy-bool"],
)
def test_emd_refuses_complex_or_bool_states_naming_the_argument(states: Any) -> None:
    with pytest.raises(TypeError, match="agent_states: expected real numbers"):
        emd(states, np.zeros((1, 1)))

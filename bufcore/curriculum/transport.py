"""Earth mover's distance between the states an agent visited and a motion's target states.

BFM-Zero evaluates tracking after each evaluation round: for every expert motion it rolls the
agent out and measures the EMD between the visited and the target states. POT solves the
transport problem; it is imported on the first call, because importing it costs about 1.8 s
and most processes that import bufcore (the CLI, the dashboard) never compute an EMD.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from bufcore.checks import check_int
from bufcore.tree import real_values

# ot.emd2's result codes (ot.lp.emd_wrap): anything but OPTIMAL is refused.
_OPTIMAL = 1
_MAX_ITER_REACHED = 3


def emd(agent_states: Any, target_states: Any, *, num_itermax: int = 100_000) -> float:
    """Optimal-transport (earth mover's) cost between two sets of states.

    Each set is an empirical distribution with uniform weights over its rows, and moving mass
    from one row to another costs their Euclidean distance. The result is the cheapest total
    cost of turning one distribution into the other, solved exactly with POT's network simplex
    (``ot.emd2``), as BFM-Zero's tracking evaluation does. The two sets may have different
    numbers of rows. Distances are computed in float64 from coordinate differences (BFM-Zero
    expands the squared norm in float32), so identical sets cost exactly 0.

    Both sets are first scaled by one power of two so that the largest coordinate is about 1:
    that is exact (only exponents change), and squared distances neither overflow (states
    1e200 apart would cost ``inf``, and POT would then answer 0) nor underflow. The cost is
    scaled back at the end. Any result POT flags (infeasible, unbounded, iteration cap reached)
    is refused, never returned.

    Args:
        agent_states: ``[n, d]`` states the agent visited (numpy array in any byte order, torch
            tensor or list).
        target_states: ``[m, d]`` states of the motion it was asked to track.
        num_itermax: Iteration cap of the simplex solver (BFM-Zero uses POT's default 100000).

    Returns:
        The transport cost, a finite Python float ``>= 0``.

    Raises:
        TypeError: A state set is not numeric (or bool or complex), or ``num_itermax`` is not
            an int.
        ValueError: A state set is not 2-D, is empty, holds NaN or inf, the two sets have
            different feature dimensions, ``num_itermax < 1``, the solver reached
            ``num_itermax`` before the optimum, or the cost exceeds float64 max.
        RuntimeError: POT reports the problem infeasible or unbounded (a bug: the weights are
            uniform and the costs finite).
    """
    num_itermax = check_int(num_itermax, "num_itermax", minimum=1)
    agent = _state_set(agent_states, "agent_states")
    target = _state_set(target_states, "target_states")
    if agent.shape[1] != target.shape[1]:
        raise ValueError(
            f"target_states: expected the feature dimension of agent_states ({agent.shape[1]}), "
            f"got shape {list(target.shape)}"
        )
    import ot  # on first use: see the module docstring

    # 2**exponent > the largest |coordinate|; ldexp by a power of two is exact.
    exponent = int(np.frexp(max(np.abs(agent).max(), np.abs(target).max()))[1])
    agent, target = np.ldexp(agent, -exponent), np.ldexp(target, -exponent)
    # Euclidean ground cost from coordinate differences. ot.dist(metric="euclidean") expands
    # |x|^2 + |y|^2 - 2 x.y, which cancels catastrophically: identical sets would cost ~1e-8
    # times the state norm instead of 0.
    cost = ot.dist(agent, target, metric="minkowski", p=2)
    weights_agent = np.full(agent.shape[0], 1.0 / agent.shape[0])
    weights_target = np.full(target.shape[0], 1.0 / target.shape[0])
    with warnings.catch_warnings():
        # POT warns and still returns a number; the log's result code decides here instead.
        warnings.simplefilter("ignore", UserWarning)
        scaled, log = ot.emd2(
            weights_agent, weights_target, cost, numItermax=num_itermax, log=True
        )
    if log["result_code"] != _OPTIMAL:
        if log["result_code"] == _MAX_ITER_REACHED:
            raise ValueError(
                f"num_itermax: the solver stopped after {num_itermax} iterations, before the "
                "optimum (its cost would only be an upper bound); raise num_itermax"
            )
        raise RuntimeError(f"POT could not solve the transport problem: {log['warning']}")
    try:
        return math.ldexp(float(scaled), exponent)
    except OverflowError:
        raise ValueError(
            "agent_states, target_states: the transport cost exceeds float64 max "
            f"({np.finfo(np.float64).max}); the states are too far apart to measure"
        ) from None


def _state_set(value: Any, argument: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    tensor = real_values(value, argument)
    if tensor.ndim != 2:
        raise ValueError(
            f"{argument}: expected a 2-D [states, features] array, got shape {list(tensor.shape)}"
        )
    if tensor.shape[0] == 0 or tensor.shape[1] == 0:
        raise ValueError(
            f"{argument}: expected at least one state with at least one feature, "
            f"got shape {list(tensor.shape)}"
        )
    array = tensor.detach().cpu().numpy()
    if not np.isfinite(array).all():
        bad = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(
            f"{argument}: expected finite values, got {array[tuple(bad)]} at row {bad[0]}, "
            f"column {bad[1]}"
        )
    return array

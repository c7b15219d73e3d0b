"""Earth mover's distance between the states an agent visited and a motion's target states.

BFM-Zero evaluates tracking after each evaluation round: for every expert motion it rolls the
agent out and measures the EMD between the visited and the target states. POT solves the
transport problem; it is imported on the first call, because importing it costs about 1.8 s
and most processes that import bufcore (the CLI, the dashboard) never compute an EMD.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bufcore.checks import check_int
from bufcore.tree import to_tensor


def emd(agent_states: Any, target_states: Any, *, num_itermax: int = 100_000) -> float:
    """Optimal-transport (earth mover's) cost between two sets of states.

    Each set is an empirical distribution with uniform weights over its rows, and moving mass
    from one row to another costs their Euclidean distance. The result is the cheapest total
    cost of turning one distribution into the other, solved exactly with POT's network simplex
    (``ot.emd2``), as BFM-Zero's tracking evaluation does. The two sets may have different
    numbers of rows. Distances are computed in float64 from coordinate differences (BFM-Zero
    expands the squared norm in float32), so identical sets cost exactly 0.

    Args:
        agent_states: ``[n, d]`` states the agent visited (numpy array, torch tensor or list).
        target_states: ``[m, d]`` states of the motion it was asked to track.
        num_itermax: Iteration cap of the simplex solver (BFM-Zero uses POT's default 100000).
            When it is reached POT warns and the returned cost is an upper bound.

    Returns:
        The transport cost, a Python float ``>= 0``.

    Raises:
        TypeError: A state set is not numeric, or ``num_itermax`` is not an int.
        ValueError: A state set is not 2-D, is empty, holds NaN or inf, the two sets have
            different feature dimensions, or ``num_itermax < 1``.
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
    # Euclidean ground cost from coordinate differences. ot.dist(metric="euclidean") expands
    # |x|^2 + |y|^2 - 2 x.y, which cancels catastrophically: identical sets would cost ~1e-8
    # times the state norm instead of 0.
    cost = ot.dist(agent, target, metric="minkowski", p=2)
    weights_agent = np.full(agent.shape[0], 1.0 / agent.shape[0])
    weights_target = np.full(target.shape[0], 1.0 / target.shape[0])
    return float(ot.emd2(weights_agent, weights_target, cost, numItermax=num_itermax))


def _state_set(value: Any, argument: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    tensor = to_tensor(value, argument)
    if tensor.ndim != 2:
        raise ValueError(
            f"{argument}: expected a 2-D [states, features] array, got shape {list(tensor.shape)}"
        )
    if tensor.shape[0] == 0 or tensor.shape[1] == 0:
        raise ValueError(
            f"{argument}: expected at least one state with at least one feature, "
            f"got shape {list(tensor.shape)}"
        )
    array = tensor.detach().to(device="cpu", dtype=torch.float64).numpy()
    if not np.isfinite(array).all():
        bad = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(
            f"{argument}: expected finite values, got {array[tuple(bad)]} at row {bad[0]}, "
            f"column {bad[1]}"
        )
    return array

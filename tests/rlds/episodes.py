"""RLDS episodes for the tests, built as the reference's tests build them (REFERENCE §10.3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

OBSERVATIONS = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
ACTIONS = [[11.0], [21.0], [31.0]]
REWARDS = [1.0, 2.0, 3.0]


def stacked(
    first: Sequence[bool],
    last: Sequence[bool],
    terminal: Sequence[bool],
    *,
    torch_leaves: bool = False,
) -> dict[str, Any]:
    """The reference's test steps (as many as flags given) as one dict of stacked arrays."""
    n = len(first)
    leaves: dict[str, Any] = {
        "observation": np.array(OBSERVATIONS[:n], dtype=np.float32),
        "action": np.array(ACTIONS[:n], dtype=np.float32),
        "reward": np.array(REWARDS[:n], dtype=np.float32),
        "discount": np.ones(n, dtype=np.float32),
        "is_first": np.array(first, dtype=bool),
        "is_last": np.array(last, dtype=bool),
        "is_terminal": np.array(terminal, dtype=bool),
    }
    if torch_leaves:
        leaves = {key: torch.from_numpy(value) for key, value in leaves.items()}
    return leaves


def stepwise(steps: dict[str, Any]) -> list[dict[str, Any]]:
    """The same steps as a list of step dicts."""
    count = len(steps["is_first"])
    return [{key: value[i] for key, value in steps.items()} for i in range(count)]


def episode(
    first: Sequence[bool],
    last: Sequence[bool],
    terminal: Sequence[bool],
    *,
    form: str = "stacked",
    torch_leaves: bool = False,
) -> dict[str, Any]:
    """An RLDS episode whose steps are stacked or a list of step dicts."""
    steps = stacked(first, last, terminal, torch_leaves=torch_leaves)
    return {"steps": steps if form == "stacked" else stepwise(steps)}


def complete(**options: Any) -> dict[str, Any]:
    return episode([True, False, False], [False, False, True], [False, False, True], **options)


def truncated(**options: Any) -> dict[str, Any]:
    return episode([True, False, False], [False, False, True], [False, False, False], **options)


def single(**options: Any) -> dict[str, Any]:
    return episode([True], [True], [False], **options)

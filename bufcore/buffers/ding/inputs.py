"""What a DI-engine buffer's push reads off each item, checked: its ``collect_iter``, its
``data_id`` (meta-data mode) and its own ``priority`` (the prioritized buffer); and the checks
of the buffers' name options.
"""

from __future__ import annotations

import numbers
import os
from typing import Any

import numpy as np
import torch

from bufcore.checks import check_int, check_real

# collect_iter of an item that gave none (its staleness reads -1, as in DI-engine).
MISSING = int(np.iinfo(np.int64).min)


class ItemMeta:
    """What a push reads off one item besides storing it."""

    __slots__ = ("collect_iter", "data_id", "priority")

    def __init__(self, collect_iter: int, data_id: str | None, priority: float | None) -> None:
        self.collect_iter = collect_iter
        self.data_id = data_id
        self.priority = priority


def check_name(value: Any, argument: str) -> str:
    """Raises:
    TypeError: not a str.
    ValueError: empty.
    """
    if not isinstance(value, str):
        raise TypeError(f"{argument}: expected a str, got {value!r:.80}")
    if not value:
        raise ValueError(f"{argument}: expected a non-empty str")
    return value


def collect_iter(value: Any, where: str) -> int:
    """An item's ``collect_iter`` (an int, or the smallest of a list of them); MISSING for
    None.

    Raises:
        TypeError: not an int nor a list of ints.
        ValueError: an empty list.
    """
    if value is None:
        return MISSING
    if isinstance(value, torch.Tensor | np.ndarray) and value.ndim > 0:
        value = value.tolist()
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError(f"{where}: expected an int or a non-empty list of ints, got []")
        return min(check_int(item, f"{where}[{i}]") for i, item in enumerate(value))
    number = check_int(value, where)
    if number == MISSING:
        raise ValueError(f"{where}: {number} is reserved")
    return number


def data_id_of(value: Any, where: str) -> str:
    """Raises:
    TypeError: not a str or path.
    ValueError: empty.
    """
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected a file path (str), got {value!r:.80}")
    if not value:
        raise ValueError(f"{where}: expected a file path, got ''")
    return value


def check_priority(value: Any, where: str) -> float | None:
    """A pushed item's own priority (None when it gave none).

    Raises:
        TypeError: not a real number.
        ValueError: NaN, infinite or negative.
    """
    if value is None:
        return None
    if isinstance(value, numbers.Real | torch.Tensor | np.ndarray | np.generic):
        return check_real(value, where, minimum=0.0)
    raise TypeError(f"{where}: expected a number, got {value!r:.80}")


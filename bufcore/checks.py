"""Argument validators shared by every constructor and public function.

One validator per kind of argument, so the same mistake gets the same exception and the same
wording everywhere: the message starts with the argument's name (or key path), then says what was
expected and what came (``"capacity: expected an int >= 1, got 0"``).

Conventions:

- A value of the wrong *kind* (a float where an int is needed, a str where a device is) raises
  ``TypeError``; a value of the right kind outside its range raises ``ValueError``.
- Integers: Python ints and every other integral type (numpy integers, 0-d integer tensors) are
  accepted and returned as ``int``; bools are refused (``True`` is not a count).
- Reals: any ``numbers.Real`` (ints, floats, numpy scalars, 0-d arrays and tensors) but not
  bools, returned as ``float``.

These also check values parsed from saved state (JSON gives ints, floats, strs and bools only);
callers there turn the error into a :class:`bufcore.errors.StateError`.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

S = TypeVar("S", bound=str)

# torch.Generator.manual_seed takes any value in [-2**63, 2**64).
_SEED_RANGE = (-(2**63), 2**64 - 1)


# Counts of rows or draws (batch sizes, window lengths) are at most this: beyond it no tensor's
# size can even be computed in int64 bytes.
MAX_COUNT = 2**62

def _describe(value: Any) -> str:
    """``repr`` of a value, cut short: error messages quote what came, never pages of it."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def check_int(
    value: Any, argument: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an ``int`` in ``[minimum, maximum]`` (either bound optional).

    Raises:
        TypeError: not an integral value, or a bool.
        ValueError: outside the bounds.
    """
    if (
        isinstance(value, bool | np.bool_)
        or (isinstance(value, torch.Tensor) and (value.dtype == torch.bool or value.ndim != 0))
        or (isinstance(value, np.ndarray) and value.ndim != 0)
    ):
        raise TypeError(f"{argument}: expected an int, got {_describe(value)}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{argument}: expected an int, got {_describe(value)}") from None
    if minimum is not None and maximum is not None and not minimum <= number <= maximum:
        raise ValueError(f"{argument}: expected an int in [{minimum}, {maximum}], got {number}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{argument}: expected an int >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{argument}: expected an int <= {maximum}, got {number}")
    return number


def check_real(
    value: Any,
    argument: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    positive: bool = False,
    finite: bool = True,
) -> float:
    """``value`` as a ``float``: finite (unless ``finite=False``), at least ``minimum``, at
    most ``maximum`` and (with ``positive``) above 0.

    Raises:
        TypeError: not a real number, or a bool.
        ValueError: NaN or infinite (with ``finite``), below ``minimum``, above ``maximum`` or
            not positive.
    """
    if isinstance(value, torch.Tensor | np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{argument}: expected a number, got {_describe(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"{argument}: expected a finite number, got {_describe(value)}") from None
    if finite and not math.isfinite(number):
        raise ValueError(f"{argument}: expected a finite number, got {number}")
    if minimum is not None and not number >= minimum:
        raise ValueError(f"{argument}: expected a number >= {minimum}, got {number}")
    if maximum is not None and not number <= maximum:
        raise ValueError(f"{argument}: expected a number <= {maximum}, got {number}")
    if positive and not number > 0:
        raise ValueError(f"{argument}: expected a number > 0, got {number}")
    return number


def check_bool(value: Any, argument: str) -> bool:
    """``value`` if it is a ``bool``: a flag given as ``"no"`` or ``None`` is refused rather than
    read by its truthiness.

    Raises:
        TypeError: anything but ``True`` or ``False``.
    """
    if not isinstance(value, bool):
        raise TypeError(f"{argument}: expected a bool, got {_describe(value)}")
    return value


def check_choice(value: Any, argument: str, choices: Sequence[S]) -> S:
    """``value`` if it is one of ``choices`` (strings).

    Raises:
        ValueError: any other value.
    """
    for choice in choices:
        if isinstance(value, str) and value == choice:
            return choice
    raise ValueError(f"{argument}: expected one of {list(choices)}, got {_describe(value)}")


def check_path(value: Any, argument: str = "path") -> Path:
    """``Path(value)`` for a str or ``os.PathLike`` that is not empty.

    ``Path("")`` is ``Path(".")``: an empty string would silently mean the working directory.

    Raises:
        TypeError: not a str or ``os.PathLike`` of str.
        ValueError: the empty string.
    """
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(text, str):
        raise TypeError(
            f"{argument}: expected a path (str or os.PathLike), got {_describe(value)}"
        )
    if not text:
        raise ValueError(
            f"{argument}: expected a path, got an empty one ('') which would mean the working "
            "directory; pass '.' for that"
        )
    return Path(text)


def check_device(value: Any, argument: str = "device") -> torch.device:
    """``torch.device(value)`` with a clear error.

    Raises:
        TypeError: not a str or ``torch.device``.
        ValueError: a string torch does not read as a device.
    """
    if isinstance(value, torch.device):
        return value
    if not isinstance(value, str):
        raise TypeError(
            f"{argument}: expected a torch device such as 'cpu' or 'cuda', got {_describe(value)}"
        )
    try:
        return torch.device(value)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"{argument}: expected a torch device such as 'cpu' or 'cuda', got {value!r}"
        ) from err


def check_usable_device(device: torch.device, argument: str = "device") -> torch.device:
    """``device`` if this process can put tensors on it.

    ``torch.device("cuda:3")`` parses anywhere; only using it shows whether torch was built
    for it and the device exists. Callers check this before they change or draw anything.

    Raises:
        ValueError: the device is not usable here (the message names ``argument``).
    """
    try:
        torch.empty(0, device=device)
    # torch raises any of these, by backend (ImportError: a backend module torch lacks).
    except (RuntimeError, AssertionError, ImportError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(
            f"{argument}: device {str(device)!r} is not usable in this process ({reason})"
        ) from err
    return device


def check_dtype(value: Any, argument: str, allowed: Collection[torch.dtype]) -> torch.dtype:
    """``value`` if it is a ``torch.dtype`` in ``allowed``.

    Raises:
        TypeError: not a ``torch.dtype``.
        ValueError: a dtype outside ``allowed`` (complex, float8, ...).
    """
    if not isinstance(value, torch.dtype):
        raise TypeError(f"{argument}: expected a torch.dtype, got {_describe(value)}")
    if value not in allowed:
        names = sorted(dtype_name(dtype) for dtype in allowed)
        raise ValueError(f"{argument}: expected one of {names}, got {dtype_name(value)}")
    return value


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"`` (how messages and files name a dtype)."""
    return str(dtype).removeprefix("torch.")


def check_seed(value: Any, argument: str = "seed") -> int | None:
    """A generator seed: ``None`` (nondeterministic) or an int ``torch.Generator`` accepts.

    Raises:
        TypeError: not an int or None.
        ValueError: outside ``[-2**63, 2**64)``.
    """
    if value is None:
        return None
    low, high = _SEED_RANGE
    return check_int(value, argument, minimum=low, maximum=high)


def check_separator(value: Any, argument: str = "nested_key_separator") -> str:
    """A nested key separator: a non-empty str without '/', which HDF5 reads as a group path.

    Raises:
        TypeError: not a str.
        ValueError: empty, or containing '/'.
    """
    if not isinstance(value, str):
        raise TypeError(f"{argument}: expected a non-empty str, got {_describe(value)}")
    if not value:
        raise ValueError(f"{argument}: expected a non-empty str, got ''")
    if "/" in value:
        raise ValueError(
            f"{argument}: '/' is HDF5's group separator; choose another, got {value!r}"
        )
    return value


def check_generator(
    value: Any, device: torch.device, argument: str = "generator"
) -> torch.Generator:
    """``value`` if it is a ``torch.Generator`` on ``device`` (the tensors it would draw for).

    Devices are compared as torch uses them: ``"cuda"`` is the current CUDA device.

    Raises:
        TypeError: not a ``torch.Generator``.
        ValueError: a generator on another device.
    """
    if not isinstance(value, torch.Generator):
        raise TypeError(f"{argument}: expected a torch.Generator, got {_describe(value)}")
    got, expected = concrete_device(value.device), concrete_device(device)
    if got != expected:
        raise ValueError(
            f"{argument}: expected a generator on the buffer's device {str(expected)!r}, "
            f"got one on {str(got)!r}"
        )
    return value


def concrete_device(device: torch.device) -> torch.device:
    """``device`` as its tensors report it: ``cuda`` -> ``cuda:0`` when 0 is current, and
    ``cpu:0`` -> ``cpu`` (compare these, not devices as written)."""
    if device.type == "cpu":
        return torch.device("cpu")
    index: int | None = device.index  # torch's stubs say int; it is None for "cuda"
    if index is not None:
        return device
    try:
        return torch.empty(0, device=device).device
    except (RuntimeError, AssertionError, ImportError):
        return device  # not usable here; compared as written

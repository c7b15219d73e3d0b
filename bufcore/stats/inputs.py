"""Checks of the tensors and options the TD statistics take, shared by the stats modules.

They never read a tensor's values on an accelerator: shapes, dtypes and devices are checked
everywhere (they cost nothing), values only where they already sit in host memory (CPU
tensors). On CUDA a value check would need a device-to-host copy, a synchronisation on every
micro-batch; there a mask value other than 0/1 counts as valid wherever it is nonzero
(``mask.bool()``) and externally given statistics are used as they are.
"""

from __future__ import annotations

from typing import Any

import torch

from bufcore.checks import check_real, dtype_name
from bufcore.tree import to_tensor

# Variance floor of the batch statistics: the population std is at least 1e-4 (the shipped
# class's `sqrt(max(var, 1e-8))`), so a constant batch never divides by zero.
VARIANCE_FLOOR = 1e-8


def accumulator_dtype(device: torch.device) -> torch.dtype:
    """The dtype sums and statistics are computed in: float64, so that ``E[x^2] - mean^2``
    does not cancel catastrophically, except on MPS, which has no float64."""
    return torch.float32 if device.type == "mps" else torch.float64


def check_floating(value: Any, argument: str) -> torch.Tensor:
    """``value`` as a dense floating tensor (numpy arrays and lists are converted).

    Raises:
        TypeError: not numeric, not dense, or not a floating dtype.
    """
    tensor = to_tensor(value, argument)
    if not tensor.is_floating_point():
        raise TypeError(
            f"{argument}: expected a floating tensor, got dtype "
            f"{dtype_name(tensor.dtype)}"
        )
    return tensor


def check_like(value: Any, argument: str, like: torch.Tensor, like_name: str) -> torch.Tensor:
    """``value`` as a dense real tensor (bool excluded) of ``like``'s shape and device.

    Raises:
        TypeError: not numeric, bool or complex.
        ValueError: another shape or device than ``like``.
    """
    tensor = to_tensor(value, argument)
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise TypeError(
            f"{argument}: expected a real (integer or floating) tensor, got dtype "
            f"{dtype_name(tensor.dtype)}"
        )
    _check_same_place(tensor, argument, like, like_name)
    return tensor


def check_mask(value: Any, argument: str, like: torch.Tensor, like_name: str) -> torch.Tensor:
    """``value`` as a bool tensor of ``like``'s shape and device.

    A bool mask is taken as it is. A numeric mask must hold only 0 and 1; that is checked on
    CPU tensors (elsewhere it would synchronise, and nonzero counts as valid).

    Raises:
        TypeError: not numeric, or complex.
        ValueError: another shape or device than ``like``; a CPU mask holding a value other
            than 0 or 1.
    """
    tensor = to_tensor(value, argument)
    if tensor.is_complex():
        raise TypeError(
            f"{argument}: expected a bool or 0/1 tensor, got dtype "
            f"{dtype_name(tensor.dtype)}"
        )
    _check_same_place(tensor, argument, like, like_name)
    if tensor.dtype == torch.bool:
        return tensor
    if tensor.device.type == "cpu":
        bad = (tensor != 0) & (tensor != 1)
        if bool(bad.any()):
            first = tensor[bad][0].item()
            raise ValueError(
                f"{argument}: expected a bool or 0/1 mask, got {int(bad.sum())} other value(s), "
                f"such as {first}"
            )
    return tensor != 0


def _check_same_place(
    tensor: torch.Tensor, argument: str, like: torch.Tensor, like_name: str
) -> None:
    if tensor.shape != like.shape:
        raise ValueError(
            f"{argument}: expected the shape of {like_name}, {tuple(like.shape)}, got "
            f"{tuple(tensor.shape)}"
        )
    if tensor.device != like.device:
        raise ValueError(
            f"{argument}: expected a tensor on {like_name}'s device {str(like.device)!r}, "
            f"got one on {str(tensor.device)!r}"
        )


def check_device_of(tensor: torch.Tensor, argument: str, device: torch.device) -> None:
    """Refuse ``tensor`` unless it sits on ``device``.

    Raises:
        ValueError: it sits elsewhere.
    """
    if tensor.device != device:
        raise ValueError(
            f"{argument}: expected a tensor on {str(device)!r} (the statistics' device), got "
            f"one on {str(tensor.device)!r}"
        )


def check_weight_options(beta: Any, min_weight: Any, max_weight: Any) -> tuple[float, float, float]:
    """``(beta, min_weight, max_weight)`` as floats: beta > 0, 0 <= min_weight <= max_weight,
    all finite.

    Raises:
        TypeError: one is not a real number (or is a bool).
        ValueError: one is NaN, infinite or out of its range.
    """
    beta_f = check_real(beta, "beta", positive=True)
    low = check_real(min_weight, "min_weight", minimum=0.0)
    high = check_real(max_weight, "max_weight", minimum=0.0)
    if high < low:
        raise ValueError(f"max_weight: expected a number >= min_weight ({low}), got {high}")
    return beta_f, low, high


def check_statistic(
    value: Any, argument: str, *, device: torch.device, dtype: torch.dtype, nonnegative: bool
) -> torch.Tensor:
    """A normalising statistic (a Python number or a 0-d real tensor) as a 0-d ``dtype``
    tensor on ``device``.

    The value must be finite (and, with ``nonnegative``, >= 0); that is checked for Python
    numbers and CPU tensors, not for tensors on an accelerator (see the module docstring).

    Raises:
        TypeError: not a real number or 0-d real tensor (bools refused).
        ValueError: NaN, infinite or (with ``nonnegative``) negative.
    """
    minimum = 0.0 if nonnegative else None
    if isinstance(value, torch.Tensor):
        if value.ndim != 0 or value.dtype == torch.bool or value.is_complex():
            raise TypeError(
                f"{argument}: expected a number or a 0-d real tensor, got a tensor of shape "
                f"{tuple(value.shape)} and dtype {dtype_name(value.dtype)}"
            )
        if value.device.type == "cpu":
            check_real(value, argument, minimum=minimum)
        return value.detach().to(device=device, dtype=dtype)
    return torch.tensor(check_real(value, argument, minimum=minimum), device=device, dtype=dtype)

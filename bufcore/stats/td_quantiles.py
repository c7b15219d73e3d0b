"""The compact distribution of normalised TD errors: evenly spaced quantiles taken on the device
during training, and the fractions of weights clipped at each bound that they imply.

A token's weight is ``clamp(exp(z / beta), min_weight, max_weight)`` with the normalised TD
error ``z = (td - mean) / (std + 1e-8)`` (:func:`bufcore.build_weights`), so it is clipped at
``min_weight`` exactly when ``z < beta * ln(min_weight)`` and at ``max_weight`` exactly when
``z > beta * ln(max_weight)``: for any beta and bounds the clipped fractions are the empirical
distribution function of ``z`` at two thresholds. :class:`bufcore.TDWeighting` (with
``quantiles=q``) reports, per update, the quantiles of ``z`` at the ``q`` levels
``0, 1/(q-1), ..., 1`` (:func:`normalised_quantiles`), and :func:`clip_fractions` reads the
fractions back from them for any settings.

The quantiles are the inverse of the empirical distribution function (type 1): the quantile
at level ``p > 0`` is the smallest token value with at least a fraction ``p`` of the tokens at
or below it, the one at level 0 the smallest value. Between two adjacent levels ``p_i`` and
``p_(i+1)`` whose quantiles bracket a threshold, the true fraction lies in
``[p_i, p_(i+1))``, so :func:`clip_fractions` is off by less than the level spacing (0.5
percentage points for 201 levels) whatever the shape of the distribution, and exact (0 or 1)
beyond the smallest and largest value.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from bufcore.checks import check_int
from bufcore.stats.inputs import check_weight_options
from bufcore.tree import to_tensor

# Levels as many as a log record can hold in one vector (RunLogger's limit).
MAX_LEVELS = 4096


def check_levels(value: Any, argument: str = "quantiles") -> int:
    """A quantile count: 0 (none), or 2 to :data:`MAX_LEVELS` levels.

    Raises:
        TypeError: not an int.
        ValueError: 1, negative, or above :data:`MAX_LEVELS`.
    """
    count = check_int(value, argument, minimum=0, maximum=MAX_LEVELS)
    if count == 1:
        raise ValueError(f"{argument}: expected 0 (none) or at least 2 levels (0 and 1), got 1")
    return count


def normalised_quantiles(z: torch.Tensor, valid: torch.Tensor, levels: int) -> torch.Tensor:
    """The type-1 quantiles of ``z[valid]`` at ``levels`` evenly spaced levels from 0 to 1.

    Everything stays on ``z``'s device: no value is read on the host (a batch without a valid
    token gives NaN quantiles without a branch).

    Args:
        z: Floating tensor of normalised TD errors, any shape.
        valid: Bool tensor of ``z``'s shape: the tokens that count.
        levels: At least 2.

    Returns:
        A float32 tensor ``[levels]``, non-decreasing; all NaN without a valid token.
    """
    values = z.reshape(-1)
    keep = valid.reshape(-1)
    if values.numel() == 0:
        return torch.full((levels,), math.nan, dtype=torch.float32, device=z.device)
    count = keep.sum()
    ordered = torch.where(keep, values, math.inf).sort().values
    # Level i/(L-1) is the ceil(i * n / (L-1))-th smallest value; integers keep it exact.
    level = torch.arange(levels, device=z.device, dtype=torch.int64)
    rank = (level * count + levels - 2) // (levels - 1) - 1
    rank = torch.minimum(rank.clamp(min=0), (count - 1).clamp(min=0))
    picked = ordered.gather(0, rank)
    return torch.where(count > 0, picked, math.nan).to(torch.float32)


def clip_fractions(
    quantiles: Any, *, beta: float, min_weight: float, max_weight: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fractions of tokens whose weight is clipped at ``min_weight`` and at ``max_weight``,
    read from logged quantiles of the normalised TD errors (see the module docstring).

    The fractions count as :class:`bufcore.TDWeighting` does: weights strictly below
    ``min_weight`` (or above ``max_weight``) before clamping.

    Args:
        quantiles: Real tensor, array or nested list ``[..., levels]`` (``levels >= 2``): each
            row the quantiles at evenly spaced levels from 0 to 1, non-decreasing. A row
            holding a NaN gives NaN fractions.
        beta, min_weight, max_weight: As :func:`bufcore.build_weights`.

    Returns:
        ``(clipped_at_min, clipped_at_max)``: float64 CPU tensors of the rows' shape.

    Raises:
        TypeError: ``quantiles`` is not numeric, or a setting is not a number.
        ValueError: fewer than 2 levels, a row that decreases, or settings out of range.
    """
    beta_f, low, high = check_weight_options(beta, min_weight, max_weight)
    table = to_tensor(quantiles, "quantiles", python_floats=torch.float64)
    if table.dtype == torch.bool or table.is_complex():
        raise TypeError(f"quantiles: expected real numbers, got dtype {table.dtype}")
    if table.ndim == 0 or table.shape[-1] < 2:
        raise ValueError(
            f"quantiles: expected [..., levels] with levels >= 2, got shape {tuple(table.shape)}"
        )
    rows = table.detach().to("cpu", torch.float64).reshape(-1, table.shape[-1])
    missing = rows.isnan().any(dim=1)
    usable = rows[~missing]
    if bool((usable[:, 1:] < usable[:, :-1]).any()):
        raise ValueError("quantiles: expected each row non-decreasing (levels from 0 to 1)")
    lowest = beta_f * math.log(low) if low > 0 else -math.inf
    highest = beta_f * math.log(high)
    below = _fraction_below(rows, lowest, inclusive=False)
    above = 1.0 - _fraction_below(rows, highest, inclusive=True)
    nothing = torch.tensor(math.nan, dtype=torch.float64)
    shape = table.shape[:-1]
    return (
        torch.where(missing, nothing, below).reshape(shape),
        torch.where(missing, nothing, above).reshape(shape),
    )


def _fraction_below(rows: torch.Tensor, threshold: float, *, inclusive: bool) -> torch.Tensor:
    """Per row, the fraction of values below ``threshold`` (at or below with ``inclusive``),
    interpolated between the two levels whose quantiles bracket it."""
    levels = rows.shape[1]
    probability = torch.linspace(0.0, 1.0, levels, dtype=torch.float64)
    point = torch.full((rows.shape[0], 1), threshold, dtype=torch.float64)
    # The first quantile at or above the threshold (strictly above with `inclusive`).
    upper = torch.searchsorted(rows.contiguous(), point, right=inclusive).squeeze(1)
    high = upper.clamp(max=levels - 1)
    low = (upper - 1).clamp(min=0)
    q_low = rows.gather(1, low[:, None]).squeeze(1)
    q_high = rows.gather(1, high[:, None]).squeeze(1)
    span = q_high - q_low
    share = torch.where(span > 0, (threshold - q_low) / span, 0.0).nan_to_num(0.0).clamp(0, 1)
    inside = probability[low] + (probability[high] - probability[low]) * share
    return torch.where(upper == 0, 0.0, torch.where(upper == levels, 1.0, inside))

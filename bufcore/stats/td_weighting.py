"""Token weights from TD errors (REFERENCE §12.2), the TD errors themselves, and the
per-micro-batch order of the seed in one helper (:class:`TDWeighting`).

Precision: statistics and the normalised TD errors are computed in float64 (float32 on MPS);
the weights come back as float32, or float64 for float64 TD errors. Tokens outside the mask
and non-finite TD errors get weight exactly 0, whatever their value. Weights carry no
gradient. Nothing here synchronises with the host unless a CPU input is value-checked (see
:mod:`bufcore.stats.inputs`).
"""

from __future__ import annotations

from typing import Any

import torch

from bufcore.checks import check_bool, check_real
from bufcore.stats.inputs import (
    accumulator_dtype,
    check_device_of,
    check_floating,
    check_like,
    check_mask,
    check_statistic,
    check_weight_options,
)
from bufcore.stats.td_ema import TDStatsEMA
from bufcore.stats.td_quantiles import check_levels, normalised_quantiles

# The reference divides by `std + 1e-8`, so a zero std saturates the weights at the bounds.
_STD_EPS = 1e-8


def build_weights(
    td_errors: torch.Tensor,
    loss_mask: torch.Tensor,
    beta: float = 1.0,
    min_weight: float = 0.1,
    max_weight: float = 5.0,
    external_mean: float | torch.Tensor | None = None,
    external_std: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """``clamp(exp(((td - mean) / (std + 1e-8)) / beta), min_weight, max_weight)`` on valid
    tokens, exactly 0 elsewhere.

    With both ``external_mean`` and ``external_std`` (an EMA's :meth:`TDStatsEMA.get_stats`,
    or Python floats read from a log) those normalise; with neither, the valid tokens'
    mean and unbiased std do, and a batch with at most one valid token weighs each valid
    token 1. Valid tokens: ``loss_mask`` set and the TD error finite; a NaN or infinite TD
    error gets weight 0 (it is excluded, as in :class:`TDStatsEMA`).

    Args:
        td_errors: Floating tensor, any shape (``[batch, seq]``).
        loss_mask: Bool or 0/1 tensor of the same shape and device.
        beta: Temperature, > 0.
        min_weight, max_weight: Clip bounds, 0 <= min_weight <= max_weight.
        external_mean: Finite number or 0-d tensor.
        external_std: Finite number >= 0 or 0-d tensor.

    Returns:
        Weights of ``td_errors``' shape on its device (float32; float64 for float64 input).

    Raises:
        TypeError: a tensor of the wrong kind, or an option that is not a number.
        ValueError: shapes or devices differ, an option is out of range, only one external
            statistic is given, or a CPU input holds a bad value (mask not 0/1, external
            statistic not finite, external std negative).
    """
    td, mask = _checked(td_errors, loss_mask)
    beta_f, low, high = check_weight_options(beta, min_weight, max_weight)
    work = accumulator_dtype(td.device)
    stats = _external(external_mean, external_std, device=td.device, dtype=work)
    values = td.detach().to(work)
    valid = mask & torch.isfinite(values)
    if stats is not None:
        raw = _raw_weights(values, stats, beta_f)
    else:
        count = valid.sum(dtype=work)
        mean = torch.where(valid, values, 0).sum() / count.clamp(min=1)
        deviation = torch.where(valid, values - mean, 0)
        std = ((deviation * deviation).sum() / (count - 1).clamp(min=1)).sqrt()
        # At most one valid token: no spread to normalise by, every valid token weighs 1.
        raw = torch.where(count > 1, _raw_weights(values, (mean, std), beta_f), 1.0)
    weights = torch.where(valid, raw.clamp(min=low, max=high), 0)
    return weights.to(torch.promote_types(td.dtype, torch.float32))


def _raw_weights(
    values: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor], beta: float
) -> torch.Tensor:
    return torch.exp(_normalised(values, stats) / beta)


def _normalised(values: torch.Tensor, stats: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``(td - mean) / (std + 1e-8)``: the TD errors as the weights see them."""
    mean, std = stats
    return (values - mean) / (std + _STD_EPS)


def _checked(td_errors: Any, loss_mask: Any) -> tuple[torch.Tensor, torch.Tensor]:
    td = check_floating(td_errors, "td_errors")
    return td, check_mask(loss_mask, "loss_mask", td, "td_errors")


def _external(
    mean: Any, std: Any, *, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor] | None:
    if mean is None and std is None:
        return None
    if mean is None or std is None:
        given, missing = (
            ("external_std", "external_mean")
            if mean is None
            else (
                "external_mean",
                "external_std",
            )
        )
        raise ValueError(
            f"{missing}: expected it with {given} (external statistics come as a pair; give "
            f"neither to use the batch's own), got None"
        )
    return (
        check_statistic(mean, "external_mean", device=device, dtype=dtype, nonnegative=False),
        check_statistic(std, "external_std", device=device, dtype=dtype, nonnegative=True),
    )


def compute_td_errors(
    values: torch.Tensor, rewards: torch.Tensor, loss_mask: torch.Tensor, gamma: float = 1.0
) -> torch.Tensor:
    """One-step TD errors ``r_t + gamma * V_next - V_t`` along the last axis.

    ``V_next`` is the value at the next *valid* token of the same row (masked tokens in
    between are skipped); the last valid token of a row bootstraps from 0, so a terminal
    reward belongs at that token. Masked positions come out exactly 0, whatever ``values``
    and ``rewards`` hold there. Gradients flow into ``values`` (and ``rewards``).

    Args:
        values: Floating tensor ``[..., seq]`` (squeeze a value head's trailing 1 first).
        rewards: Real tensor of the same shape and device.
        loss_mask: Bool or 0/1 tensor of the same shape and device.
        gamma: Discount per valid step, in [0, 1].

    Returns:
        TD errors of ``values``' shape, in ``values``' and ``rewards``' promoted dtype (at
        least float32).

    Raises:
        TypeError: a tensor of the wrong kind; ``gamma`` not a number.
        ValueError: ``values`` is 0-d, shapes or devices differ, ``gamma`` outside [0, 1], or
            a CPU mask holds values other than 0/1.
    """
    value = check_floating(values, "values")
    if value.ndim == 0:
        raise ValueError("values: expected a tensor [..., seq] with a sequence axis, got 0-d")
    reward = check_like(rewards, "rewards", value, "values")
    mask = check_mask(loss_mask, "loss_mask", value, "values")
    discount = check_real(gamma, "gamma", minimum=0.0)
    if discount > 1.0:
        raise ValueError(f"gamma: expected a number in [0, 1], got {discount}")
    dtype = torch.promote_types(torch.promote_types(value.dtype, reward.dtype), torch.float32)
    value, reward = value.to(dtype), reward.to(dtype)
    length = value.shape[-1]
    position = torch.arange(length, device=value.device).expand(value.shape)
    # Index of the first valid token at or after each position (`length`: none) ...
    upcoming = torch.where(mask, position, length).flip(-1).cummin(-1).values.flip(-1)
    # ... and after it: the next valid token, whose value is bootstrapped from.
    after = torch.full_like(upcoming[..., :1], length)
    following = torch.cat([upcoming[..., 1:], after], dim=-1)
    padded = torch.cat([torch.where(mask, value, 0), torch.zeros_like(value[..., :1])], dim=-1)
    next_value = padded.gather(-1, following)
    return torch.where(mask, reward + discount * next_value - value, 0)


class TDWeighting:
    """The seed's per-micro-batch order around a :class:`TDStatsEMA`.

    For each micro-batch: ``w = tdw.weights(td, mask)`` (weights from the statistics of the
    earlier batches; the first batch uses the prior (0, 1)), then the loss and ``backward``,
    then ``metrics = tdw.update(td, mask)``. The metrics are tensors on the device, 0-d
    but for the optional quantiles (no host sync; the caller decides when to read them):

    - ``td/ema_mean``, ``td/ema_std``: the statistics after this update;
    - ``td/batch_mean``, ``td/batch_std``: this batch's (global when all-reduced; NaN when it
      had no valid token), ``td/batch_tokens``: its valid tokens;
    - ``td/clip_min_fraction``, ``td/clip_max_fraction``: fraction of this process's valid
      tokens whose weight, from the statistics before this update, was clipped at
      ``min_weight`` / ``max_weight`` (NaN without valid tokens);
    - ``td/nonfinite_count``: non-finite tokens excluded so far;
    - with ``quantiles=q``, ``td/norm_quantiles``: a float32 tensor ``[q]``, the quantiles at
      levels ``0, 1/(q-1), ..., 1`` of this process's valid tokens' normalised TD errors
      ``(td - mean) / (std + 1e-8)``, normalised with the statistics before this update (the
      ones the weights used); NaN without valid tokens. From them
      :func:`bufcore.inspect.clip_fractions` gives the fractions any other beta and bounds
      would clip, off by less than ``1/(q-1)`` (see :mod:`bufcore.stats.td_quantiles`).
      Log it as a list (``metrics["td/norm_quantiles"].tolist()``); it costs one sort of the
      batch's TD errors per update.

    Args:
        ema: The statistics to read and update.
        beta, min_weight, max_weight: As :func:`build_weights`.
        distributed: Passed to :meth:`TDStatsEMA.update`.
        quantiles: Levels of ``td/norm_quantiles`` (201: every half percent); 0 (the
            default) reports none, so every metric stays a 0-d tensor.

    Raises:
        TypeError: ``ema`` is not a :class:`TDStatsEMA`; an option of the wrong type.
        ValueError: an option out of range (``quantiles`` 1, negative or above 4096).
    """

    def __init__(
        self,
        ema: TDStatsEMA,
        *,
        beta: float = 1.0,
        min_weight: float = 0.1,
        max_weight: float = 5.0,
        distributed: bool = True,
        quantiles: int = 0,
    ) -> None:
        if not isinstance(ema, TDStatsEMA):
            raise TypeError(f"ema: expected a TDStatsEMA, got {type(ema).__name__}")
        self._beta, self._min_weight, self._max_weight = check_weight_options(
            beta, min_weight, max_weight
        )
        self._ema = ema
        self._distributed = check_bool(distributed, "distributed")
        self._quantiles = check_levels(quantiles)

    @property
    def ema(self) -> TDStatsEMA:
        return self._ema

    @property
    def options(self) -> dict[str, float | bool | int]:
        """``beta``, ``min_weight``, ``max_weight``, ``distributed`` and ``quantiles`` as
        given."""
        return {
            "beta": self._beta,
            "min_weight": self._min_weight,
            "max_weight": self._max_weight,
            "distributed": self._distributed,
            "quantiles": self._quantiles,
        }

    def weights(self, td_errors: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
        """:func:`build_weights` with the EMA's current statistics.

        Raises:
            TypeError, ValueError: As :func:`build_weights`.
        """
        mean, std = self._ema.get_stats()
        return build_weights(
            td_errors,
            loss_mask,
            self._beta,
            self._min_weight,
            self._max_weight,
            external_mean=mean,
            external_std=std,
        )

    def update(self, td_errors: torch.Tensor, loss_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Fold the batch into the EMA (after ``backward``) and return the metrics.

        Raises:
            TypeError, ValueError: As :meth:`TDStatsEMA.update`; the EMA is then unchanged.
        """
        td, mask = _checked(td_errors, loss_mask)
        check_device_of(td, "td_errors", self._ema.device)
        work = accumulator_dtype(td.device)
        values = td.detach().to(work)
        valid = mask & torch.isfinite(values)
        mean, std = self._ema.get_stats()
        normalised = _normalised(values, (mean.to(work), std.to(work)))
        raw = torch.exp(normalised / self._beta)
        distribution = (
            normalised_quantiles(normalised, valid, self._quantiles) if self._quantiles else None
        )
        tokens = valid.sum(dtype=work)
        nothing = torch.full_like(tokens, float("nan"))
        below = (valid & (raw < self._min_weight)).sum(dtype=work) / tokens.clamp(min=1)
        above = (valid & (raw > self._max_weight)).sum(dtype=work) / tokens.clamp(min=1)
        batch = self._ema.update(td, mask, distributed=self._distributed)
        ema_mean, ema_std = self._ema.get_stats()
        metrics = {
            "td/ema_mean": ema_mean,
            "td/ema_std": ema_std,
            "td/batch_mean": batch.mean,
            "td/batch_std": batch.std,
            "td/batch_tokens": batch.tokens,
            "td/clip_min_fraction": torch.where(tokens > 0, below, nothing).to(torch.float32),
            "td/clip_max_fraction": torch.where(tokens > 0, above, nothing).to(torch.float32),
            "td/nonfinite_count": self._ema.nonfinite_count,
        }
        if distribution is not None:
            metrics["td/norm_quantiles"] = distribution
        return metrics

"""Running statistics of TD errors: an exponential moving average of their mean and std.

:class:`TDStatsEMA` follows the shipped ``td_stats_ema.py``, not the seed 004 plan (DESIGN §2
item 7, REFERENCE §12.3):

- batch statistics are over the valid tokens (``loss_mask`` set and the TD error finite); the
  std is the population std floored at 1e-4;
- the first batch with a valid token initialises the statistics fully; batch ``k <= W``
  (``W = warmup_steps``) is blended with weight ``(k - 1) / W`` on the old statistics; after
  the warmup ``ema = (1 - m) * ema + m * batch``; ``W = 0`` is a plain EMA from the prior
  (0, 1) from the first batch on;
- a batch without a valid token changes nothing (its non-finite tokens are still counted);
- across processes, (sum, sum of squares, count, non-finite count) are summed over the ranks
  (:func:`bufcore.distributed.all_reduce_sum`, added in rank order), so every rank holds
  exactly the global statistics, bit for bit the same.

``update`` never synchronises with the host: the statistics stay 0-d tensors on the device
and every decision ("was there a valid token?") is a tensor operation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from bufcore import distributed as _distributed
from bufcore.checks import check_bool, check_device, check_int, check_real, check_usable_device
from bufcore.fields import Field
from bufcore.stats.inputs import (
    VARIANCE_FLOOR,
    accumulator_dtype,
    check_device_of,
    check_floating,
    check_mask,
)

# The statistics are kept in float32, the dtype the seed's `torch.tensor(0.0)` has.
STATS_DTYPE = torch.float32
PRIOR_MEAN, PRIOR_STD = 0.0, 1.0
_MAX_COUNT = 2**63 - 1
_STATE_KEYS = frozenset(
    {"ema_mean", "ema_std", "step_count", "nonfinite_count", "momentum", "warmup_steps"}
)


class TDBatchStats(NamedTuple):
    """What one :meth:`TDStatsEMA.update` saw (global across processes), as 0-d tensors.

    Attributes:
        mean: Mean of the valid tokens, float32 (NaN when there was none).
        std: Their population std floored at 1e-4, float32 (NaN when there was none).
        tokens: How many valid tokens were used (0 when the batch was skipped).
        nonfinite: How many tokens inside ``loss_mask`` were excluded as non-finite.
    """

    mean: torch.Tensor
    std: torch.Tensor
    tokens: torch.Tensor
    nonfinite: torch.Tensor


def check_momentum(value: Any, argument: str = "momentum") -> float:
    """An EMA momentum: a number in (0, 1].

    Raises:
        TypeError: not a real number.
        ValueError: NaN, infinite, or outside (0, 1].
    """
    momentum = check_real(value, argument, positive=True)
    if momentum > 1.0:
        raise ValueError(f"{argument}: expected a number in (0, 1], got {momentum}")
    return momentum


class TDStatsEMA:
    """Exponential moving average of the TD errors' mean and std (REFERENCE §12.1).

    Args:
        device: Where the statistics live; ``update`` takes tensors on this device.
        momentum: Weight of a new batch after the warmup, in (0, 1].
        warmup_steps: Batches blended in with the warmup weight ``(k - 1) / W``; 0: none.

    Attributes (read-only; restore them with :meth:`load_state_dict`):
        ema_mean, ema_std: 0-d float32 tensors on ``device``; the prior is (0, 1).
        step_count: 0-d int64 tensor: batches that had a valid token.
        nonfinite_count: 0-d int64 tensor: tokens inside ``loss_mask`` excluded because they
            (or their batch's statistics) were not finite.

    Raises:
        TypeError: ``device`` is not a str or ``torch.device``; ``momentum`` is not a number;
            ``warmup_steps`` is not an int.
        ValueError: the device is not usable here (or is ``meta``); ``momentum`` outside (0, 1];
            ``warmup_steps`` outside [0, 2**63 - 1].
    """

    def __init__(
        self, device: str | torch.device, momentum: float = 0.1, warmup_steps: int = 10
    ) -> None:
        usable = check_usable_device(check_device(device))
        if usable.type == "meta":
            raise ValueError("device: 'meta' holds no values, so the statistics could not be read")
        self._momentum = check_momentum(momentum)
        # Bounded so that the step counter (int64) can be compared with it.
        self._warmup_steps = check_int(warmup_steps, "warmup_steps", minimum=0, maximum=_MAX_COUNT)
        # The device tensors report ("cuda" -> "cuda:0"), so inputs compare equal to it.
        self._device = torch.empty(0, device=usable).device
        self._accumulate = accumulator_dtype(self._device)
        self._mean = torch.tensor(PRIOR_MEAN, dtype=STATS_DTYPE, device=self._device)
        self._std = torch.tensor(PRIOR_STD, dtype=STATS_DTYPE, device=self._device)
        self._steps = torch.zeros((), dtype=torch.int64, device=self._device)
        self._nonfinite = torch.zeros((), dtype=torch.int64, device=self._device)

    # ------------------------------------------------------------------ read-only state
    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def momentum(self) -> float:
        return self._momentum

    @property
    def warmup_steps(self) -> int:
        return self._warmup_steps

    @property
    def ema_mean(self) -> torch.Tensor:
        return self._mean

    @property
    def ema_std(self) -> torch.Tensor:
        return self._std

    @property
    def step_count(self) -> torch.Tensor:
        return self._steps

    @property
    def nonfinite_count(self) -> torch.Tensor:
        return self._nonfinite

    def get_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ema_mean, ema_std)``: 0-d tensors that later updates do not change in place."""
        return self._mean, self._std

    # ------------------------------------------------------------------------ update
    def update(
        self, td_errors: torch.Tensor, loss_mask: torch.Tensor, distributed: bool = True
    ) -> TDBatchStats:
        """Fold one batch of TD errors into the statistics (call it after ``backward``).

        With ``distributed`` and an initialised default process group, every rank must call
        this (it all-reduces once, also when its own batch has no valid token).

        Args:
            td_errors: Floating tensor on :attr:`device`, any shape (``[batch, seq]``).
            loss_mask: Bool or 0/1 tensor of the same shape and device.
            distributed: All-reduce the batch sums when a process group is initialised.

        Returns:
            The batch's statistics (global when all-reduced).

        Raises:
            TypeError: ``td_errors`` not floating, ``loss_mask`` not numeric, ``distributed``
                not a bool.
            ValueError: shapes or devices differ; a CPU mask holds values other than 0/1.
        """
        td = check_floating(td_errors, "td_errors")
        check_device_of(td, "td_errors", self._device)
        mask = check_mask(loss_mask, "loss_mask", td, "td_errors")
        check_bool(distributed, "distributed")
        td = td.detach()
        finite = torch.isfinite(td)
        valid = mask & finite
        values = torch.where(valid, td, 0).to(self._accumulate)
        totals = torch.stack(
            [
                values.sum(),
                (values * values).sum(),
                valid.sum(dtype=self._accumulate),
                (mask & ~finite).sum(dtype=self._accumulate),
            ]
        )
        if distributed and _distributed.is_initialized():
            totals = _distributed.all_reduce_sum(totals)
        return self._absorb(totals)

    def _absorb(self, totals: torch.Tensor) -> TDBatchStats:
        """Blend the batch given by ``(sum, sum_sq, count, nonfinite)`` into the state."""
        total, total_sq, count, nonfinite = totals.unbind()
        used = count.clamp(min=1)
        mean = total / used
        std = (total_sq / used - mean * mean).clamp(min=VARIANCE_FLOOR).sqrt()
        # A batch whose statistics overflow float32 (or float64) cannot be blended in: it is
        # skipped like an empty one and its tokens count as non-finite.
        usable = (
            (count > 0) & torch.isfinite(mean.to(STATS_DTYPE)) & torch.isfinite(std.to(STATS_DTYPE))
        )
        steps = self._steps + usable.to(torch.int64)
        keep = self._keep_weight(steps)
        new_mean = keep * self._mean.to(mean.dtype) + (1 - keep) * mean
        new_std = keep * self._std.to(std.dtype) + (1 - keep) * std
        overflowed = torch.where(usable, 0, count)
        excluded = (nonfinite + overflowed).to(torch.int64)
        # Nothing above can fail after this point: the state changes all at once.
        self._mean = torch.where(usable, new_mean.to(STATS_DTYPE), self._mean)
        self._std = torch.where(usable, new_std.to(STATS_DTYPE), self._std)
        self._steps = steps
        self._nonfinite = self._nonfinite + excluded
        missing = torch.full_like(mean, float("nan"))
        return TDBatchStats(
            mean=torch.where(count > 0, mean, missing).to(STATS_DTYPE),
            std=torch.where(count > 0, std, missing).to(STATS_DTYPE),
            tokens=torch.where(usable, count, 0).to(torch.int64),
            nonfinite=excluded,
        )

    def _keep_weight(self, steps: torch.Tensor) -> torch.Tensor:
        """Weight of the old statistics for batch number ``steps`` (a tensor, >= 1 when used).

        Warmup (``k <= W``): ``(k - 1) / W``, so batch 1 replaces the prior. After it, or with
        ``W = 0`` (where ``k <= W`` never holds for a used batch): ``1 - momentum``.
        """
        during = (steps - 1).to(self._accumulate) / max(self._warmup_steps, 1)
        return torch.where(steps <= self._warmup_steps, during, 1.0 - self._momentum)

    # ------------------------------------------------------------------- persistence
    def state_dict(self) -> dict[str, Any]:
        """The state as plain JSON-ready numbers (this reads the device: a checkpoint)."""
        mean, std = torch.stack([self._mean, self._std]).tolist()
        steps, nonfinite = torch.stack([self._steps, self._nonfinite]).tolist()
        return {
            "ema_mean": mean,
            "ema_std": std,
            "step_count": steps,
            "nonfinite_count": nonfinite,
            "momentum": self._momentum,
            "warmup_steps": self._warmup_steps,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`, momentum and warmup included.

        A seed or shipped state (without ``nonfinite_count``, or without ``momentum`` and
        ``warmup_steps``) loads too: a missing count is 0, missing options keep this object's.
        Everything is checked before anything changes.

        Raises:
            StateError: (a ``ValueError``) ``state`` is not a mapping, lacks ``ema_mean``,
                ``ema_std`` or ``step_count``, has an unknown key, or a value of the wrong
                type or range (finite mean, finite std > 0, counts and warmup_steps in
                [0, 2**63 - 1], momentum in (0, 1]); the message names the key.
        """
        root = Field(state, "state", part="state")
        unknown = sorted(str(key) for key in root.mapping() if key not in _STATE_KEYS)
        if unknown:
            raise root.error(f"unknown key(s) {unknown}; expected some of {sorted(_STATE_KEYS)}")
        mean = _float32_state(root.key("ema_mean"), positive=False)
        std = _float32_state(root.key("ema_std"), positive=True)
        steps = root.key("step_count").integer(minimum=0, maximum=_MAX_COUNT)
        nonfinite = root.optional("nonfinite_count", 0).integer(minimum=0, maximum=_MAX_COUNT)
        momentum = root.optional("momentum", self._momentum).validate(check_momentum)
        warmup = root.optional("warmup_steps", self._warmup_steps).integer(
            minimum=0, maximum=_MAX_COUNT
        )
        self._mean = torch.tensor(mean, dtype=STATS_DTYPE, device=self._device)
        self._std = torch.tensor(std, dtype=STATS_DTYPE, device=self._device)
        self._steps = torch.tensor(steps, dtype=torch.int64, device=self._device)
        self._nonfinite = torch.tensor(nonfinite, dtype=torch.int64, device=self._device)
        self._momentum, self._warmup_steps = momentum, warmup

    @classmethod
    def from_state_dict(
        cls, state: Mapping[str, Any], *, device: str | torch.device
    ) -> TDStatsEMA:
        """A new statistics object on ``device`` holding ``state`` (its momentum and warmup
        included; a state without them gets the constructor's defaults).

        Raises:
            StateError: as :meth:`load_state_dict`.
            TypeError: ``device`` is not a str or ``torch.device``.
            ValueError: the device is not usable here.
        """
        stats = cls(device)
        stats.load_state_dict(state)
        return stats


def _float32_state(field: Field, *, positive: bool) -> float:
    """A saved statistic: finite (and > 0 with ``positive``) also once stored as float32."""
    number = field.validate(check_real, positive=positive)
    stored = torch.tensor(number, dtype=STATS_DTYPE)
    if not bool(torch.isfinite(stored)):
        raise field.error(f"expected a number within float32's range, got {number}")
    if positive and not bool(stored > 0):
        raise field.error(f"expected a number > 0 that float32 can hold, got {number}")
    return number

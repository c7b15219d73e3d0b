"""The TD-EMA view's data: the logged TD statistics, their smoothing, the warmup, and a preview
of the TD weights other settings would give.

Everything comes from a run's ``train`` records (``td/ema_mean``, ``td/ema_std``,
``td/batch_mean``, ``td/batch_std``, ``td/clip_min_fraction``, ``td/clip_max_fraction``; see
:class:`bufcore.TDWeighting`). The log holds each batch's mean and std only, not its TD
errors, so the weight preview assumes they were Normal(batch mean, batch std) and draws
samples from that; the weights themselves come from :func:`bufcore.build_weights`, normalised
with the EMA as it stood *before* the step's update, as training computes them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bufcore import build_weights

# Keys of a train record, and the option names of the demo's run record / run.json.
STAT_KEYS = {
    "ema_mean": "td/ema_mean",
    "ema_std": "td/ema_std",
    "batch_mean": "td/batch_mean",
    "batch_std": "td/batch_std",
    "clip_min": "td/clip_min_fraction",
    "clip_max": "td/clip_max_fraction",
}
# bufcore's defaults (TDWeighting, TDStatsEMA) when a run does not record its settings.
DEFAULT_BETA, DEFAULT_MIN_WEIGHT, DEFAULT_MAX_WEIGHT = 1.0, 0.1, 5.0
# The EMA's prior: what the first update's weights are normalised with.
PRIOR_MEAN, PRIOR_STD = 0.0, 1.0


@dataclass(frozen=True)
class TDSeries:
    """The TD statistics of every train record that logged them, in step order.

    Attributes:
        steps: Training step of each record (int64).
        ema_mean, ema_std: The EMA after the record's update.
        batch_mean, batch_std: The batch's statistics (NaN when it had no valid token).
        clip_min, clip_max: Logged fractions of the batch's weights clipped at each bound
            (NaN when not logged).
    """

    steps: np.ndarray
    ema_mean: np.ndarray
    ema_std: np.ndarray
    batch_mean: np.ndarray
    batch_std: np.ndarray
    clip_min: np.ndarray
    clip_max: np.ndarray

    def __len__(self) -> int:
        return len(self.steps)

    def stats_before(self) -> tuple[np.ndarray, np.ndarray]:
        """The EMA each record's weights were normalised with: the previous record's EMA,
        the prior (0, 1) for the first record."""
        mean = np.concatenate([[PRIOR_MEAN], self.ema_mean[:-1]])
        std = np.concatenate([[PRIOR_STD], self.ema_std[:-1]])
        return mean, std


@dataclass(frozen=True)
class TDSettings:
    """A run's TD weighting settings (bufcore's defaults where the run does not say).

    Attributes:
        beta: Temperature of the weights.
        min_weight, max_weight: Clip bounds.
        warmup: Warmup updates of the EMA, or None when unknown.
        recorded: Whether beta and the bounds came from the run (not defaults).
    """

    beta: float
    min_weight: float
    max_weight: float
    warmup: int | None
    recorded: bool


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value)


def td_series(records: Sequence[Mapping[str, Any]]) -> TDSeries:
    """The TD statistics of the ``train`` records holding ``td/ema_mean`` (others skipped).

    A value that is missing or not a number reads as NaN.
    """
    rows = [r for r in records if r.get("kind") == "train" and "td/ema_mean" in r]
    columns = {
        name: np.array([_number(r.get(key)) for r in rows], dtype=np.float64)
        for name, key in STAT_KEYS.items()
    }
    steps = np.array([int(r.get("step", 0)) for r in rows], dtype=np.int64)
    return TDSeries(steps=steps, **columns)


def td_settings(
    options: Mapping[str, Any] | None, saved_warmup: int | None = None
) -> TDSettings:
    """The weighting settings in a run's options (the ``run`` record's or run.json's).

    Args:
        options: The run's options (``beta``, ``min_weight``, ``max_weight``, ``td_warmup``),
            or None.
        saved_warmup: run.json's ``td_ema.warmup_steps``, used when the options lack it.
    """
    given = dict(options or {})
    values = [_number(given.get(k)) for k in ("beta", "min_weight", "max_weight")]
    recorded = all(math.isfinite(v) for v in values)
    beta, low, high = values if recorded else (
        DEFAULT_BETA, DEFAULT_MIN_WEIGHT, DEFAULT_MAX_WEIGHT
    )
    warmup = given.get("td_warmup", saved_warmup)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        warmup = saved_warmup
    return TDSettings(beta, low, high, warmup, recorded)


def warmup_end(steps: np.ndarray, warmup: int | None) -> int | None:
    """The step of the last warmup update (the ``warmup``-th record), or None when there is
    no warmup or the log ends before it."""
    if not warmup or len(steps) < warmup:
        return None
    return int(steps[warmup - 1])


def smooth(values: np.ndarray, weight: float) -> np.ndarray:
    """Exponential smoothing for display: ``s_t = weight * s_(t-1) + (1 - weight) * x_t``.

    Non-finite values are skipped (their smoothed value is the previous one, NaN before the
    first finite value); ``weight = 0`` returns the values unchanged.

    Raises:
        ValueError: ``weight`` outside ``[0, 1)``.
    """
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"weight: expected a number in [0, 1), got {weight}")
    data = np.asarray(values, dtype=np.float64)
    out = np.empty_like(data)
    if weight == 0.0:
        out[:] = data
        return out
    level = math.nan
    for i, value in enumerate(data):
        if math.isfinite(value):
            level = value if math.isnan(level) else weight * level + (1.0 - weight) * value
        out[i] = level
    return out


@dataclass(frozen=True)
class WeightPreview:
    """Weights previewed from the logged statistics.

    Attributes:
        steps: The steps previewed.
        clip_min, clip_max: Fraction of each step's samples clipped at each bound.
        weights: The samples' weights of the last previewed step (float64).
        samples: Samples drawn per step.
    """

    steps: np.ndarray
    clip_min: np.ndarray
    clip_max: np.ndarray
    weights: np.ndarray
    samples: int


def preview_weights(
    series: TDSeries,
    rows: Sequence[int] | np.ndarray,
    *,
    beta: float,
    min_weight: float,
    max_weight: float,
    samples: int = 1024,
    seed: int = 0,
) -> WeightPreview:
    """Weights of Normal(batch mean, batch std) samples at the records ``rows``.

    Each record's samples are weighted by :func:`bufcore.build_weights` with the EMA as it
    stood before that record's update (:meth:`TDSeries.stats_before`). A record without a
    finite batch mean and std gets NaN fractions (and no weights).

    Args:
        series: The logged statistics.
        rows: Indices into ``series`` (ascending), at least one.
        beta, min_weight, max_weight: As :func:`bufcore.build_weights`.
        samples: Samples per record, >= 1.
        seed: Seed of the sampling generator (the same seed gives the same preview).

    Raises:
        ValueError: ``rows`` empty or out of range, ``samples < 1``, or settings that
            :func:`bufcore.build_weights` refuses.
        TypeError: settings that are not numbers.
    """
    index = np.asarray(rows, dtype=np.int64)
    if index.ndim != 1 or index.size == 0 or index.min() < 0 or index.max() >= len(series):
        raise ValueError(f"rows: expected indices into {len(series)} records, got {rows!r:.80}")
    if samples < 1:
        raise ValueError(f"samples: expected >= 1, got {samples}")
    generator = torch.Generator().manual_seed(seed)
    before_mean, before_std = series.stats_before()
    mask = torch.ones(samples, dtype=torch.bool)
    low = np.full(index.size, np.nan)
    high = np.full(index.size, np.nan)
    weights = torch.zeros(0, dtype=torch.float64)
    for out, row in enumerate(index):
        noise = torch.randn(samples, generator=generator, dtype=torch.float64)
        mean, std = series.batch_mean[row], series.batch_std[row]
        stats = (before_mean[row], before_std[row])
        if not (math.isfinite(mean) and math.isfinite(std)) or not all(map(math.isfinite, stats)):
            weights = torch.zeros(0, dtype=torch.float64)
            continue
        td = mean + std * noise
        weights = build_weights(
            td, mask, beta, min_weight, max_weight,
            external_mean=float(stats[0]), external_std=max(float(stats[1]), 0.0),
        )
        # Clipped exactly onto a bound (build_weights clamps); as TDWeighting counts them.
        low[out] = float((weights <= min_weight).double().mean())
        high[out] = float((weights >= max_weight).double().mean())
    steps = series.steps[index]
    return WeightPreview(steps, low, high, weights.numpy().astype(np.float64), samples)


def spread_rows(count: int, limit: int) -> np.ndarray:
    """At most ``limit`` record indices spread evenly over ``count``, first and last kept.

    Raises:
        ValueError: ``count < 0`` or ``limit < 2``.
    """
    if count < 0:
        raise ValueError(f"count: expected >= 0, got {count}")
    if limit < 2:
        raise ValueError(f"limit: expected >= 2, got {limit}")
    if count <= limit:
        return np.arange(count, dtype=np.int64)
    return np.unique(np.linspace(0, count - 1, limit).round().astype(np.int64))


def clip_gap(preview: WeightPreview, series: TDSeries, rows: np.ndarray) -> tuple[float, float]:
    """Mean absolute difference between previewed and logged clip fractions (min, max bound)
    over the rows where both are finite; NaN when there are none."""
    index = np.asarray(rows, dtype=np.int64)
    gaps = []
    for previewed, logged in ((preview.clip_min, series.clip_min), (preview.clip_max,
                                                                    series.clip_max)):
        diff = np.abs(previewed - logged[index])
        diff = diff[np.isfinite(diff)]
        gaps.append(float(diff.mean()) if diff.size else math.nan)
    return gaps[0], gaps[1]

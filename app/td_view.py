"""The TD-EMA view's data: the logged TD statistics, their smoothing, the warmup, and a preview
of the TD weights other settings would give.

Everything comes from a run's ``train`` records (``td/ema_mean``, ``td/ema_std``,
``td/batch_mean``, ``td/batch_std``, ``td/clip_min_fraction``, ``td/clip_max_fraction`` and,
where the run logged them, ``td/norm_quantiles``; see :class:`bufcore.TDWeighting`).

The weight preview works on the normalised TD errors ``z = (td - mean) / (std + 1e-8)``, with
the EMA as it stood *before* the step's update (as training normalises). Where a record holds
``td/norm_quantiles`` (the logged distribution of ``z``), the clipped fractions come from it
(:func:`bufcore.inspect.clip_fractions`, off by less than the level spacing: 0.5 points for the
demo's 201 levels). A record without them falls back to assuming the batch's TD errors were
Normal(batch mean, batch std), which skewed TD errors do not follow; the preview says which
basis each step used. The histogram's weights come from :func:`bufcore.build_weights` applied
to the quantile function of ``z`` (logged or Normal) on an even grid of levels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bufcore import build_weights
from bufcore.inspect import clip_fractions

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
# The logged distribution of the normalised TD errors (TDWeighting(quantiles=...)).
QUANTILES_KEY = "td/norm_quantiles"
# build_weights divides by std + 1e-8; the normalisation here does the same.
STD_EPS = 1e-8


@dataclass(frozen=True)
class TDSeries:
    """The TD statistics of every train record that logged them, in step order.

    Attributes:
        steps: Training step of each record (int64).
        ema_mean, ema_std: The EMA after the record's update.
        batch_mean, batch_std: The batch's statistics (NaN when it had no valid token).
        clip_min, clip_max: Logged fractions of the batch's weights clipped at each bound
            (NaN when not logged).
        quantiles: ``[records, levels]``: each record's logged quantiles of its normalised TD
            errors (a NaN row where a record has none that can be used), or None when no
            record has them.
    """

    steps: np.ndarray
    ema_mean: np.ndarray
    ema_std: np.ndarray
    batch_mean: np.ndarray
    batch_std: np.ndarray
    clip_min: np.ndarray
    clip_max: np.ndarray
    quantiles: np.ndarray | None = None

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

    A value that is missing or not a number reads as NaN. Quantiles are kept where a record
    holds a list of finite, non-decreasing numbers as long as the first such list (at least
    2); any other record gets a NaN row.
    """
    rows = [r for r in records if r.get("kind") == "train" and "td/ema_mean" in r]
    columns = {
        name: np.array([_number(r.get(key)) for r in rows], dtype=np.float64)
        for name, key in STAT_KEYS.items()
    }
    steps = np.array([int(r.get("step", 0)) for r in rows], dtype=np.int64)
    return TDSeries(steps=steps, **columns, quantiles=_quantile_table(rows))


def _quantile_table(rows: Sequence[Mapping[str, Any]]) -> np.ndarray | None:
    lists = [_quantile_row(r.get(QUANTILES_KEY)) for r in rows]
    levels = next((len(q) for q in lists if q is not None), None)
    if levels is None:
        return None
    table = np.full((len(rows), levels), np.nan)
    for i, row in enumerate(lists):
        if row is not None and len(row) == levels:
            table[i] = row
    return table


def _quantile_row(value: Any) -> np.ndarray | None:
    if not isinstance(value, list) or len(value) < 2:
        return None
    row = np.array([_number(v) for v in value], dtype=np.float64)
    if not np.isfinite(row).all() or np.any(np.diff(row) < 0):
        return None
    return row


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
        clip_min, clip_max: Fraction of each step's TD errors clipped at each bound.
        weights: The weights of the last previewed step at ``samples`` evenly spaced levels
            of its TD errors' distribution (float64; empty when it could not be previewed).
        samples: Levels the histogram's weights are taken at.
        empirical: Per step, whether it was previewed from the logged distribution (True) or
            from the Normal assumption (False).
    """

    steps: np.ndarray
    clip_min: np.ndarray
    clip_max: np.ndarray
    weights: np.ndarray
    samples: int
    empirical: np.ndarray


def preview_weights(
    series: TDSeries,
    rows: Sequence[int] | np.ndarray,
    *,
    beta: float,
    min_weight: float,
    max_weight: float,
    samples: int = 1024,
) -> WeightPreview:
    """The fractions of TD weights ``beta``, ``min_weight`` and ``max_weight`` would clip at
    the records ``rows``, and the weights of the last of them (see the module docstring).

    A record with logged quantiles is previewed from them; one without, from
    Normal(batch mean, batch std), normalised with the EMA before that record's update
    (:meth:`TDSeries.stats_before`). A record with neither (no finite batch mean and std)
    gets NaN fractions (and no weights).

    Args:
        series: The logged statistics.
        rows: Indices into ``series`` (ascending), at least one.
        beta, min_weight, max_weight: As :func:`bufcore.build_weights`.
        samples: Levels of the distribution the histogram's weights are taken at, >= 1.

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
    table = (
        series.quantiles[index] if series.quantiles is not None
        else np.full((index.size, 2), np.nan)
    )
    low, high = (f.numpy() for f in clip_fractions(
        table, beta=beta, min_weight=min_weight, max_weight=max_weight
    ))
    empirical = np.isfinite(low)
    centre, spread = _normal_z(series)
    lowest = beta * math.log(min_weight) if min_weight > 0 else -math.inf
    highest = beta * math.log(max_weight)
    for out, row in enumerate(index):
        if not empirical[out] and math.isfinite(centre[row]) and spread[row] > 0:
            low[out] = _normal_cdf((lowest - centre[row]) / spread[row])
            high[out] = 1.0 - _normal_cdf((highest - centre[row]) / spread[row])
    levels = (np.arange(samples) + 0.5) / samples
    last = int(index[-1])
    if empirical[-1]:
        quantiles = np.asarray(table[-1], dtype=np.float64)
        z = np.interp(levels, np.linspace(0.0, 1.0, len(quantiles)), quantiles)
    elif math.isfinite(low[-1]) and math.isfinite(spread[last]):
        normal = torch.special.ndtri(torch.from_numpy(levels)).numpy()
        z = centre[last] + spread[last] * normal
    else:
        z = np.zeros(0)
    weights = build_weights(
        torch.from_numpy(z), torch.ones(len(z), dtype=torch.bool), beta, min_weight,
        max_weight, external_mean=0.0, external_std=1.0,
    )
    return WeightPreview(series.steps[index], low, high, weights.numpy().astype(np.float64),
                         samples, empirical)


def _normal_z(series: TDSeries) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of each record's normalised TD errors under the Normal assumption
    (NaN where the batch or the EMA before it has no finite statistics)."""
    # z = (td - m) / (s + 1e-8) of td ~ Normal(batch mean, batch std).
    before_mean, before_std = series.stats_before()
    scale = np.maximum(before_std, 0.0) + STD_EPS
    with np.errstate(invalid="ignore", divide="ignore"):
        return (series.batch_mean - before_mean) / scale, series.batch_std / scale


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


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

"""The TD-EMA view's data functions (no Streamlit): series, settings, warmup, smoothing, and the
weight preview against what training logged."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from app.run_data import read_log
from app.td_view import (
    DEFAULT_BETA,
    DEFAULT_MAX_WEIGHT,
    DEFAULT_MIN_WEIGHT,
    TDSeries,
    clip_gap,
    preview_weights,
    smooth,
    spread_rows,
    td_series,
    td_settings,
    warmup_end,
)
from bufcore import RunLogger, TDStatsEMA, TDWeighting
from tests.support import TINY_DEMO


def train_record(step: int, **stats: float) -> dict[str, Any]:
    values = {"ema_mean": 0.0, "ema_std": 1.0, "batch_mean": 0.0, "batch_std": 1.0,
              "clip_min_fraction": 0.0, "clip_max_fraction": 0.0, **stats}
    return {"step": step, "kind": "train", **{f"td/{k}": v for k, v in values.items()}}


def normal_log(
    count: int, *, tokens: int = 1024, warmup: int = 3, seed: int = 0, **weighting: float
) -> list[dict[str, Any]]:
    """Train records of TDWeighting fed batches that really are Normal (drifting mean/std)."""
    generator = torch.Generator().manual_seed(seed)
    tdw = TDWeighting(TDStatsEMA("cpu", momentum=0.1, warmup_steps=warmup), **weighting)
    records = []
    for k in range(count):
        mean, std = -3.0 + 0.05 * k, 1.5 + 0.5 * math.sin(k / 5)
        td = mean + std * torch.randn(tokens, generator=generator, dtype=torch.float64)
        mask = torch.ones(tokens, dtype=torch.bool)
        tdw.weights(td, mask)
        metrics = tdw.update(td, mask)
        records.append({"step": 4 * (k + 1), "kind": "train",
                        **{name: float(v) for name, v in metrics.items()}})
    return records


def test_td_series_keeps_train_records_with_td_statistics_in_order() -> None:
    records = [{"step": 0, "kind": "run"}, train_record(4, batch_mean=2.0),
               {"step": 5, "kind": "buffer"}, {"step": 8, "kind": "train", "loss": 1.0},
               train_record(12, batch_mean=3.0)]
    series = td_series(records)
    assert series.steps.tolist() == [4, 12]
    assert series.batch_mean.tolist() == [2.0, 3.0]


def test_a_missing_or_non_numeric_statistic_reads_as_nan() -> None:
    record = train_record(4)
    del record["td/clip_max_fraction"]
    record["td/batch_std"] = "oops"
    series = td_series([record])
    assert math.isnan(series.clip_max[0]) and math.isnan(series.batch_std[0])


def test_an_empty_log_gives_an_empty_series() -> None:
    assert len(td_series([])) == 0


def test_the_first_record_is_weighted_with_the_prior_and_later_ones_with_the_previous_ema() -> None:
    series = td_series([train_record(4, ema_mean=-2.0, ema_std=3.0),
                        train_record(8, ema_mean=-1.0, ema_std=2.0)])
    mean, std = series.stats_before()
    assert mean.tolist() == [0.0, -2.0] and std.tolist() == [1.0, 3.0]


def test_settings_come_from_the_run_options() -> None:
    settings = td_settings({"beta": 2.0, "min_weight": 0.2, "max_weight": 4.0, "td_warmup": 7})
    assert (settings.beta, settings.min_weight, settings.max_weight) == (2.0, 0.2, 4.0)
    assert settings.warmup == 7 and settings.recorded


def test_settings_fall_back_to_bufcore_defaults_and_the_saved_warmup() -> None:
    settings = td_settings(None, saved_warmup=5)
    assert (settings.beta, settings.min_weight, settings.max_weight) == (
        DEFAULT_BETA, DEFAULT_MIN_WEIGHT, DEFAULT_MAX_WEIGHT)
    assert settings.warmup == 5 and not settings.recorded


@pytest.mark.parametrize(("count", "warmup", "expected"),
                         [(1, 1, 4), (2, 1, 4), (7, 3, 12), (7, 7, 28), (2, 3, None),
                          (5, 0, None), (5, None, None)])
def test_warmup_ends_at_the_step_of_the_last_warmup_update(
    count: int, warmup: int | None, expected: int | None
) -> None:
    steps = np.arange(1, count + 1) * 4
    assert warmup_end(steps, warmup) == expected


@pytest.mark.parametrize("size", [1, 2, 7])
def test_no_smoothing_returns_the_values_unchanged(size: int) -> None:
    values = np.arange(size, dtype=np.float64)
    assert smooth(values, 0.0).tolist() == values.tolist()


def test_smoothing_skips_nan_and_carries_the_previous_level() -> None:
    out = smooth(np.array([np.nan, 1.0, np.nan, 3.0]), 0.5)
    assert math.isnan(out[0])
    assert out[1:].tolist() == [1.0, 1.0, 2.0]


@pytest.mark.parametrize("weight", [-0.1, 1.0])
def test_a_smoothing_weight_outside_zero_to_one_is_refused_naming_weight(weight: float) -> None:
    with pytest.raises(ValueError, match="weight"):
        smooth(np.zeros(3), weight)


@pytest.mark.parametrize(("count", "limit"), [(0, 2), (1, 2), (2, 2), (7, 3), (1000, 400)])
def test_spread_rows_keeps_the_first_and_last_and_at_most_the_limit(count: int,
                                                                   limit: int) -> None:
    rows = spread_rows(count, limit)
    assert len(rows) <= limit
    if count:
        assert rows[0] == 0 and rows[-1] == count - 1
    assert np.all(np.diff(rows) > 0)


def test_the_preview_is_the_same_every_time() -> None:
    series = td_series(normal_log(5))
    first = preview_weights(series, [0, 4], beta=1.0, min_weight=0.1, max_weight=5.0)
    again = preview_weights(series, [0, 4], beta=1.0, min_weight=0.1, max_weight=5.0)
    assert first.clip_min.tolist() == again.clip_min.tolist()
    assert first.weights.tolist() == again.weights.tolist()


def test_weights_stay_within_the_bounds() -> None:
    series = td_series(normal_log(4))
    preview = preview_weights(series, [3], beta=0.5, min_weight=0.3, max_weight=2.0)
    assert preview.weights.min() >= 0.3 and preview.weights.max() <= 2.0


def test_a_larger_beta_clips_fewer_weights() -> None:
    series = td_series(normal_log(8))
    rows = np.arange(8)
    sharp = preview_weights(series, rows, beta=0.5, min_weight=0.1, max_weight=5.0)
    flat = preview_weights(series, rows, beta=4.0, min_weight=0.1, max_weight=5.0)
    assert np.nansum(flat.clip_min + flat.clip_max) < np.nansum(sharp.clip_min + sharp.clip_max)


def test_a_step_without_batch_statistics_previews_as_nan() -> None:
    series = td_series([train_record(4, batch_mean=math.nan, batch_std=math.nan)])
    preview = preview_weights(series, [0], beta=1.0, min_weight=0.1, max_weight=5.0)
    assert math.isnan(preview.clip_min[0]) and preview.weights.size == 0


@pytest.mark.parametrize("rows", [[], [5], [-1]])
def test_rows_outside_the_series_are_refused_naming_rows(rows: list[int]) -> None:
    series = td_series([train_record(4)])
    with pytest.raises(ValueError, match="rows"):
        preview_weights(series, np.array(rows, dtype=np.int64), beta=1.0, min_weight=0.1,
                        max_weight=5.0)


def test_settings_build_weights_refuses_are_refused() -> None:
    series = td_series([train_record(4)])
    with pytest.raises(ValueError, match=r"max_weight|min_weight"):
        preview_weights(series, [0], beta=1.0, min_weight=3.0, max_weight=2.0)


@pytest.mark.parametrize("settings", [(1.0, 0.1, 5.0), (0.5, 0.3, 2.0), (2.0, 0.05, 1.5)])
def test_on_normal_td_errors_the_preview_matches_the_logged_clip_fractions(
    settings: tuple[float, float, float],
) -> None:
    beta, low, high = settings
    records = normal_log(60, beta=beta, min_weight=low, max_weight=high)
    series = td_series(records)
    rows = np.arange(len(series))
    preview = preview_weights(series, rows, beta=beta, min_weight=low, max_weight=high,
                              samples=4096)
    # Per step the logged fraction (1024 tokens) and the preview (4096 samples) each carry
    # binomial noise: std <= sqrt(0.25 / 1024) + sqrt(0.25 / 4096) ~ 0.023 at worst, so the
    # mean absolute gap over 60 steps stays well under 0.03 when the alignment (EMA before
    # the update, prior for the first step) is right; a misalignment by one step adds the
    # drift between steps and fails.
    gaps = clip_gap(preview, series, rows)
    assert max(gaps) < 0.03
    assert np.nanmax(np.abs(preview.clip_min - series.clip_min)) < 0.1


def test_clip_gap_is_nan_when_nothing_was_logged() -> None:
    series = td_series([train_record(4, clip_min_fraction=math.nan, clip_max_fraction=math.nan)])
    preview = preview_weights(series, [0], beta=1.0, min_weight=0.1, max_weight=5.0)
    assert all(math.isnan(g) for g in clip_gap(preview, series, np.array([0])))


def test_series_length_is_its_record_count() -> None:
    series = TDSeries(*(np.zeros(3) for _ in range(7)))
    assert len(series) == 3


def skewed_log(
    run: Path, count: int, *, beta: float, min_weight: float, max_weight: float
) -> list[dict[str, Any]]:
    """Train records that TDWeighting(quantiles=201) wrote through a RunLogger on skewed,
    heavy-tailed TD errors (a shifted lognormal, drifting), read back from the file."""
    generator = torch.Generator().manual_seed(7)
    tdw = TDWeighting(TDStatsEMA("cpu", momentum=0.1, warmup_steps=3), beta=beta,
                      min_weight=min_weight, max_weight=max_weight, quantiles=201)
    mask = torch.ones(8, 128, dtype=torch.bool)
    with RunLogger(run) as logger:
        for k in range(count):
            noise = torch.randn(8, 128, generator=generator, dtype=torch.float64)
            td = (0.9 * noise).exp() * (1.0 + 0.02 * k) - 1.5
            tdw.weights(td, mask)
            metrics = tdw.update(td, mask)
            quantiles = metrics.pop("td/norm_quantiles")
            logger.log("train", 4 * (k + 1), {**{n: float(v) for n, v in metrics.items()},
                                              "td/norm_quantiles": quantiles.tolist()})
    return list(read_log(run / "metrics.jsonl").records)


@pytest.mark.parametrize("settings", [(1.0, 0.1, 5.0), (0.5, 0.3, 2.0), (2.0, 0.05, 1.5)])
def test_from_logged_quantiles_the_preview_matches_each_logged_clip_fraction_within_half_a_point(
    tmp_path: Path, settings: tuple[float, float, float]
) -> None:
    beta, low, high = settings
    series = td_series(skewed_log(tmp_path, 60, beta=beta, min_weight=low, max_weight=high))
    rows = np.arange(len(series))
    preview = preview_weights(series, rows, beta=beta, min_weight=low, max_weight=high)
    assert preview.empirical.all()
    assert np.abs(preview.clip_min - series.clip_min).max() < 0.005
    assert np.abs(preview.clip_max - series.clip_max).max() < 0.005


def test_a_log_without_quantiles_is_previewed_under_the_normal_assumption() -> None:
    series = td_series(normal_log(3))
    assert series.quantiles is None
    preview = preview_weights(series, [0, 2], beta=1.0, min_weight=0.1, max_weight=5.0)
    assert not preview.empirical.any() and np.isfinite(preview.clip_min).all()


@pytest.mark.parametrize("bad", [[0.0, 2.0, 1.0], [0.0, 1.0], ["a", "b", "c"],
                                 [0.0, None, 1.0], "0 1 2", [True, False, True]])
def test_a_record_whose_quantiles_cannot_be_used_falls_back_to_the_normal_assumption(
    bad: Any,
) -> None:
    good = train_record(4, norm_quantiles=[-1.0, 0.0, 1.0])
    series = td_series([good, train_record(8, norm_quantiles=bad)])
    preview = preview_weights(series, [0, 1], beta=1.0, min_weight=0.1, max_weight=5.0)
    assert preview.empirical.tolist() == [True, False]


def test_the_histogram_weights_follow_the_logged_distribution() -> None:
    # z spread evenly over [-3, 3]: exp(z) < 0.1 for z < -2.30 (11.6%), > 5 for z > 1.61 (23.2%).
    series = td_series([train_record(4, norm_quantiles=np.linspace(-3, 3, 201).tolist())])
    preview = preview_weights(series, [0], beta=1.0, min_weight=0.1, max_weight=5.0,
                              samples=10_000)
    assert (preview.weights == 0.1).mean() == pytest.approx(0.116, abs=0.002)
    assert (preview.weights == 5.0).mean() == pytest.approx(0.232, abs=0.002)
    assert preview.clip_min[0] == pytest.approx(0.116, abs=0.002)


def test_on_the_demo_run_the_preview_matches_every_logged_clip_fraction_within_half_a_point(
    demo_run: Path,
) -> None:
    series = td_series(read_log(demo_run / "metrics.jsonl").records)
    settings = td_settings(TINY_DEMO.to_json())
    rows = np.arange(len(series))
    preview = preview_weights(series, rows, beta=settings.beta, min_weight=settings.min_weight,
                              max_weight=settings.max_weight)
    assert preview.empirical.all()
    assert np.abs(preview.clip_min - series.clip_min).max() < 0.005
    assert np.abs(preview.clip_max - series.clip_max).max() < 0.005

"""The normalised TD errors' quantiles (computed on the device) and the clipped fractions read
back from them, against counting every token."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import TDStatsEMA, TDWeighting
from bufcore.inspect import clip_fractions
from bufcore.stats.td_quantiles import normalised_quantiles
from tests.stats.helpers import host_reads_forbidden
from tests.support import DEVICES

SETTINGS = [(1.0, 0.1, 5.0), (0.5, 0.3, 2.0), (2.0, 0.05, 1.5), (1.0, 0.9, 1.1), (3.0, 0.0, 8.0)]


def skewed(size: int, seed: int) -> torch.Tensor:
    """Right-skewed, heavy-tailed values (a shifted lognormal), float64."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(size, generator=generator, dtype=torch.float64).mul(0.9).exp() - 1.5


def counted(z: torch.Tensor, beta: float, low: float, high: float) -> tuple[float, float]:
    """The fractions clipped at each bound, counted token by token as TDWeighting counts."""
    raw = torch.exp(z / beta)
    return float((raw < low).double().mean()), float((raw > high).double().mean())


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1000])
@pytest.mark.parametrize("levels", [2, 5, 201])
def test_quantiles_are_the_inverse_empirical_distribution_function(size: int, levels: int) -> None:
    z = skewed(size, seed=size)
    got = normalised_quantiles(z, torch.ones(size, dtype=torch.bool), levels)
    ordered = sorted(z.tolist())
    # Level p: the smallest value with at least a fraction p of the values at or below it
    # (exact fractions: numpy's float `n * p` rounds some levels to the next value).
    expected = [
        next(v for k, v in enumerate(ordered) if Fraction(k + 1, size) >= Fraction(i, levels - 1))
        for i in range(levels)
    ]
    np.testing.assert_array_equal(got.numpy(), np.array(expected, dtype=np.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_tokens_outside_the_valid_mask_do_not_count(device: str) -> None:
    z = torch.tensor([[5.0, -1.0, 100.0], [0.0, 1.0, -50.0]], device=device)
    valid = torch.tensor([[True, True, False], [True, True, False]], device=device)
    got = normalised_quantiles(z, valid, 5).cpu()
    assert got.tolist() == [-1.0, -1.0, 0.0, 1.0, 5.0]


@pytest.mark.parametrize("shape", [(0,), (2, 3)])
def test_without_a_valid_token_every_quantile_is_nan(shape: tuple[int, ...]) -> None:
    z = torch.zeros(shape)
    got = normalised_quantiles(z, torch.zeros(shape, dtype=torch.bool), 4)
    assert got.shape == (4,) and bool(got.isnan().all())


def test_quantiles_read_no_tensor_value_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    z = skewed(50, seed=1)
    valid = z > -1.0
    with host_reads_forbidden(monkeypatch):
        got = normalised_quantiles(z, valid, 11)
    assert got[0].item() == pytest.approx(float(z[valid].min()))


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("size", [1, 3, 64, 1024, 5000])
@pytest.mark.parametrize("levels", [11, 201])
def test_clip_fractions_are_off_by_less_than_the_level_spacing(
    settings: tuple[float, float, float], size: int, levels: int
) -> None:
    beta, low, high = settings
    z = skewed(size, seed=size + levels)
    table = normalised_quantiles(z, torch.ones(size, dtype=torch.bool), levels)
    below, above = clip_fractions(table, beta=beta, min_weight=low, max_weight=high)
    true_below, true_above = counted(z.float().double(), beta, low, high)
    assert abs(float(below) - true_below) < 1 / (levels - 1)
    assert abs(float(above) - true_above) < 1 / (levels - 1)


def test_thresholds_beyond_the_extremes_give_exactly_none_or_all() -> None:
    table = torch.linspace(-1.0, 1.0, 11)
    # ln(0.1) = -2.3 and ln(5) = 1.6 lie outside [-1, 1]: nothing is clipped.
    assert [float(f) for f in clip_fractions(table, beta=1.0, min_weight=0.1,
                                             max_weight=5.0)] == [0.0, 0.0]
    # Bounds inside (exp(-1), exp(1)) around every value: all clipped at min... or max.
    low, high = clip_fractions(table, beta=1.0, min_weight=3.0, max_weight=3.0)
    assert (float(low), float(high)) == (1.0, 0.0)


def test_a_zero_min_weight_clips_nothing_at_min() -> None:
    below, _ = clip_fractions([-1e6, 0.0, 1.0], beta=1.0, min_weight=0.0, max_weight=5.0)
    assert float(below) == 0.0


def test_rows_are_read_independently_and_a_row_with_nan_gives_nan() -> None:
    table = [[-3.0, 0.0, 3.0], [math.nan, 0.0, 1.0], [-9.0, -8.0, -7.0]]
    below, above = clip_fractions(table, beta=1.0, min_weight=0.1, max_weight=5.0)
    assert below.shape == (3,) and math.isnan(below[1]) and math.isnan(above[1])
    assert float(below[2]) == 1.0 and float(above[2]) == 0.0


@pytest.mark.parametrize(
    ("quantiles", "kwargs", "error", "match"),
    [
        ([1.0], {}, ValueError, "quantiles: expected .* levels >= 2"),
        (3.0, {}, ValueError, "quantiles: expected"),
        ([0.0, 2.0, 1.0], {}, ValueError, "quantiles: expected each row non-decreasing"),
        (["a", "b"], {}, TypeError, "quantiles"),
        ([True, False], {}, TypeError, "quantiles"),
        ([0.0, 1.0], {"beta": 0.0}, ValueError, "beta"),
        ([0.0, 1.0], {"min_weight": 2.0, "max_weight": 1.0}, ValueError, "max_weight"),
    ],
)
def test_bad_quantiles_or_settings_are_refused_naming_them(
    quantiles: Any, kwargs: dict[str, float], error: type[Exception], match: str
) -> None:
    options = {"beta": 1.0, "min_weight": 0.1, "max_weight": 5.0, **kwargs}
    with pytest.raises(error, match=match):
        clip_fractions(quantiles, **options)


# ------------------------------------------------------------------ TDWeighting(quantiles=)
def test_the_helper_reports_quantiles_normalised_with_the_statistics_before_the_update() -> None:
    ema = TDStatsEMA("cpu", warmup_steps=1)
    helper = TDWeighting(ema, quantiles=5)
    first = torch.tensor([[0.0, 2.0, 4.0]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    # The prior (0, 1) normalised the first batch.
    assert helper.update(first, mask)["td/norm_quantiles"].tolist() == pytest.approx(
        [0.0, 0.0, 2.0, 4.0, 4.0])
    mean, std = (float(s) for s in ema.get_stats())
    second = torch.tensor([[1.0, 5.0, 3.0]])
    got = helper.update(second, mask)["td/norm_quantiles"]
    expected = (torch.tensor([1.0, 1.0, 3.0, 5.0, 5.0]) - mean) / (std + 1e-8)
    torch.testing.assert_close(got, expected)


def test_without_quantiles_the_helper_reports_none() -> None:
    metrics = TDWeighting(TDStatsEMA("cpu")).update(torch.zeros(1, 3), torch.ones(1, 3))
    assert "td/norm_quantiles" not in metrics


@pytest.mark.parametrize(("value", "error"), [(1, ValueError), (-1, ValueError),
                                              (4097, ValueError), (2.0, TypeError)])
def test_the_helper_refuses_a_bad_quantile_count_naming_it(
    value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match="quantiles"):
        TDWeighting(TDStatsEMA("cpu"), quantiles=value)


def test_the_helper_with_quantiles_reads_no_tensor_value_on_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    helper = TDWeighting(TDStatsEMA("cpu", warmup_steps=2), quantiles=201)
    td = skewed(64, seed=3).reshape(8, 8)
    mask = torch.ones(8, 8, dtype=torch.bool)
    with host_reads_forbidden(monkeypatch):
        for _ in range(3):
            metrics = helper.update(td, mask)
    assert metrics["td/norm_quantiles"].shape == (201,)


@pytest.mark.parametrize("settings", SETTINGS)
def test_quantiles_logged_in_training_give_back_the_logged_clip_fractions(
    settings: tuple[float, float, float],
) -> None:
    beta, low, high = settings
    helper = TDWeighting(TDStatsEMA("cpu", warmup_steps=3), beta=beta, min_weight=low,
                         max_weight=high, quantiles=201)
    mask = torch.ones(16, 64, dtype=torch.bool)
    for k in range(20):
        td = skewed(1024, seed=k).reshape(16, 64) * (1 + 0.1 * k)
        metrics = helper.update(td, mask)
        below, above = clip_fractions(metrics["td/norm_quantiles"], beta=beta, min_weight=low,
                                      max_weight=high)
        assert abs(float(below) - float(metrics["td/clip_min_fraction"])) < 0.005
        assert abs(float(above) - float(metrics["td/clip_max_fraction"])) < 0.005

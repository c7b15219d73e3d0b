"""Min/max reduction keeps every extreme; histograms count server-side."""

from __future__ import annotations

import numpy as np
import pytest

from app.downsample import histogram, min_max


@pytest.mark.parametrize("total", [1, 2, 7, 100])
def test_short_series_are_kept_whole(total: int) -> None:
    x = np.arange(total, dtype=float)
    reduced = min_max(x, x * 2, max_points=100)
    assert np.array_equal(reduced.x, x) and not reduced.reduced
    assert reduced.caption() == f"{total:,} points"


@pytest.mark.parametrize(("total", "max_points"), [(101, 100), (1000, 2), (100_003, 1000)])
def test_reduction_keeps_the_global_extremes_and_the_point_budget(
    total: int, max_points: int
) -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=total)
    y[total // 3] = 50.0
    y[total // 2] = -50.0
    reduced = min_max(np.arange(total), y, max_points=max_points)
    assert len(reduced.x) <= max_points
    assert reduced.y.max() == 50.0 and reduced.y.min() == -50.0
    assert np.all(np.diff(reduced.x) > 0)
    assert reduced.caption() == f"{total:,} -> {len(reduced.x):,} points (min/max per bucket)"


def test_every_bucket_keeps_its_own_minimum_and_maximum() -> None:
    y = np.tile([0.0, 5.0, -5.0, 1.0], 50)  # 50 buckets of 4 when reduced to 100 points
    reduced = min_max(np.arange(200), y, max_points=100)
    assert np.count_nonzero(reduced.y == 5.0) == 50
    assert np.count_nonzero(reduced.y == -5.0) == 50


def test_non_finite_values_are_not_taken_for_extremes() -> None:
    y = np.zeros(1000)
    y[10] = np.inf
    y[20] = np.nan
    y[30] = 3.0
    reduced = min_max(np.arange(1000), y, max_points=10)
    assert np.isfinite(reduced.y).all() and reduced.y.max() == 3.0


def test_a_bucket_of_only_nan_keeps_one_point_so_the_gap_shows() -> None:
    y = np.zeros(1000)
    y[:500] = np.nan
    reduced = min_max(np.arange(1000), y, max_points=10)
    assert np.isnan(reduced.y).sum() >= 1


@pytest.mark.parametrize(
    ("x", "y", "points"), [([1, 2], [1], 10), ([[1]], [[1]], 10), ([1], [1], 1)]
)
def test_bad_input_is_refused(x: list[float], y: list[float], points: int) -> None:
    with pytest.raises(ValueError):
        min_max(np.array(x), np.array(y), max_points=points)


def test_histogram_counts_finite_values_in_equal_bins() -> None:
    counts, edges = histogram(np.array([0.0, 1.0, 1.0, np.nan, 2.0]), bins=2)
    assert counts.tolist() == [1, 3] and edges.tolist() == [0.0, 1.0, 2.0]


def test_histogram_of_a_constant_is_one_bar() -> None:
    counts, edges = histogram(np.full(5, 3.0), bins=10)
    assert counts.tolist() == [5] and len(edges) == 2


def test_histogram_of_nothing_is_empty() -> None:
    counts, edges = histogram(np.array([np.nan]), bins=10)
    assert counts.size == 0 and edges.size == 0

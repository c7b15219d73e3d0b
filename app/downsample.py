"""Reducing long series for charts while keeping their extremes.

A chart of 1,000,000 steps cannot show every point, and random sampling drops exactly the
spikes a researcher looks for. :func:`min_max` cuts the series into equal buckets of
consecutive points and keeps, per bucket, the points holding the minimum and the maximum (in
their original order), so every spike and dip survives and the curve's envelope is exact. The
result says how many points went in and came out; charts print it as ``"n -> m points"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

# Charts plot at most about this many points (DESIGN §4).
MAX_POINTS = 50_000


@dataclass(frozen=True)
class Reduced:
    """A series after :func:`min_max`.

    Attributes:
        x: Kept x values (float64), increasing when the input's were.
        y: Kept y values (float64).
        total: Points before the reduction.
    """

    x: np.ndarray
    y: np.ndarray
    total: int

    @property
    def reduced(self) -> bool:
        """Whether points were dropped."""
        return len(self.x) < self.total

    def caption(self) -> str:
        """``"1,000,000 -> 4,000 points (min/max per bucket)"``, or ``"120 points"``."""
        if not self.reduced:
            return f"{self.total:,} points"
        return f"{self.total:,} -> {len(self.x):,} points (min/max per bucket)"


def min_max(x: np.ndarray, y: np.ndarray, *, max_points: int = MAX_POINTS) -> Reduced:
    """At most ``max_points`` points of ``(x, y)``: each bucket's minimum and maximum of ``y``.

    Non-finite values are kept out of the extremes, but a bucket made only of them keeps one
    (so a run that went NaN still shows a gap where it did).

    Raises:
        ValueError: ``x`` and ``y`` differ in length, are not 1-D, or ``max_points < 2``.
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.ndim != 1 or ys.shape != xs.shape:
        raise ValueError(f"x, y: expected two 1-D arrays of one length, got {xs.shape}, {ys.shape}")
    if max_points < 2:
        raise ValueError(f"max_points: expected >= 2, got {max_points}")
    total = len(xs)
    if total <= max_points:
        return Reduced(xs, ys, total)
    buckets = max_points // 2
    values = torch.from_numpy(ys)
    finite = torch.isfinite(values)
    edges = torch.linspace(0, total, buckets + 1, dtype=torch.float64).long()
    owner = torch.bucketize(torch.arange(total), edges[1:], right=True)
    low = torch.where(finite, values, torch.inf)
    high = torch.where(finite, values, -torch.inf)
    index = torch.arange(total, dtype=torch.float64)
    keep = torch.zeros(total, dtype=torch.bool)
    for masked, pick in ((low, torch.amin), (high, torch.amax)):
        extreme = torch.full((buckets,), torch.nan, dtype=torch.float64)
        extreme = extreme.scatter_reduce(0, owner, masked, reduce=_name(pick), include_self=False)
        hit = masked == extreme[owner]
        # The first point per bucket that holds the extreme.
        first = torch.full((buckets,), float(total), dtype=torch.float64)
        first = first.scatter_reduce(0, owner, torch.where(hit, index, total), reduce="amin")
        chosen = first[first < total].long()
        keep[chosen] = True
    # Buckets holding only non-finite values keep their first point.
    has_finite = torch.zeros(buckets, dtype=torch.bool).scatter_reduce(
        0, owner, finite, reduce="amax"
    )
    starts = edges[:-1]
    keep[starts[~has_finite]] = True
    kept = keep.nonzero().squeeze(1).numpy()
    return Reduced(xs[kept], ys[kept], total)


def _name(pick: object) -> str:
    return "amin" if pick is torch.amin else "amax"


def histogram(values: np.ndarray, *, bins: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Counts and bin edges of the finite ``values`` (``bins`` equal bins; one bin if constant).

    The counting happens server-side, so a chart gets ``bins`` bars whatever the data's size.

    Raises:
        ValueError: ``bins < 1``.
    """
    if bins < 1:
        raise ValueError(f"bins: expected >= 1, got {bins}")
    data = np.asarray(values, dtype=np.float64).ravel()
    data = data[np.isfinite(data)]
    if data.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    low, high = float(data.min()), float(data.max())
    if low == high:
        return np.array([data.size]), np.array([low - 0.5, high + 0.5])
    counts, edges = np.histogram(data, bins=bins, range=(low, high))
    return counts, edges

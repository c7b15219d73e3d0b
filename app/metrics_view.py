"""The Metrics view's data: every scalar a run logged, as curves over steps or wall time,
smoothed and reduced for drawing, and the CSV of exactly what is drawn.

A *scalar* is a number (not a bool) at any depth of a record's mappings, named by the record's
kind and its key path: ``train/policy_loss``, ``eval/mean_emd``, ``buffer/train/len``. Lists
(per-motion EMDs, quantiles) and strings are not scalars. Records come from
:func:`bufcore.read_metrics` (through :func:`app.run_data.read_log`), so a non-finite value
is NaN here and draws as a gap.

What a chart draws is a list of :class:`Trace`: per run, the raw curve and (with smoothing)
the smoothed one, each reduced with :func:`app.downsample.min_max`. The figure and the CSV
download are both made from that list, so the CSV holds exactly the points on screen.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np

from app.downsample import MAX_POINTS, Reduced, min_max
from app.td_view import smooth

# Distinct scalar names kept per log: a log with a new key in every record stays bounded.
MAX_SERIES = 1000
# How the x axis can be read, and the CSV column each gives.
STEP, RELATIVE, WALL = "step", "relative", "wall"
X_AXES = {STEP: "training step", RELATIVE: "time since the run's first record (s)",
          WALL: "wall clock (UTC)"}
X_COLUMNS = {STEP: "step", RELATIVE: "seconds_since_start", WALL: "wall_clock_utc"}
# The curves an RL user looks at first, shown by default where the log has them.
PREFERRED = ("train/policy_loss", "train/value_loss", "train/reward_mean", "eval/mean_emd")
RAW, SMOOTHED = "raw", "smoothed"
_RESERVED = ("step", "time", "kind")


@dataclass(frozen=True)
class Curve:
    """One scalar over a run: the records that held it, in file order (float64 arrays)."""

    steps: np.ndarray
    times: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class RunScalars:
    """Every scalar of one run's log.

    Attributes:
        curves: Scalar name -> its curve, names in order of first appearance.
        start: The first record's time (seconds since the epoch), or None without records.
        dropped: Names left out beyond :data:`MAX_SERIES`.
    """

    curves: dict[str, Curve]
    start: float | None
    dropped: int


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float's range (valid JSON)
        return None


def _scalars(prefix: str, mapping: Mapping[str, Any]) -> Iterable[tuple[str, float]]:
    for key, value in mapping.items():
        name = f"{prefix}/{key}"
        if isinstance(value, Mapping):
            yield from _scalars(name, value)
        elif (number := _number(value)) is not None:
            yield name, number


def run_scalars(records: Sequence[Mapping[str, Any]]) -> RunScalars:
    """The scalars of ``records`` (see the module docstring), each over its records."""
    points: dict[str, tuple[list[float], list[float], list[float]]] = {}
    dropped: set[str] = set()
    for record in records:
        fields = {k: v for k, v in record.items() if k not in _RESERVED}
        step, when = float(record["step"]), float(record["time"])
        for name, value in _scalars(str(record["kind"]), fields):
            held = points.get(name)
            if held is None:
                if len(points) >= MAX_SERIES:
                    dropped.add(name)
                    continue
                held = points[name] = ([], [], [])
            held[0].append(step)
            held[1].append(when)
            held[2].append(value)
    curves = {
        name: Curve(np.array(s, dtype=np.float64), np.array(t, dtype=np.float64),
                    np.array(v, dtype=np.float64))
        for name, (s, t, v) in points.items()
    }
    start = float(records[0]["time"]) if records else None
    return RunScalars(curves, start, len(dropped))


def default_metrics(names: Sequence[str], *, limit: int = 3) -> list[str]:
    """What to show before the user picks: the usual RL curves the log has (in
    :data:`PREFERRED` order), else its first ``limit`` scalars."""
    preferred = [name for name in PREFERRED if name in names]
    return preferred[:limit] if preferred else list(names[:limit])


@dataclass(frozen=True)
class Trace:
    """One drawn curve.

    Attributes:
        run: The run's label.
        metric: The scalar's name.
        curve: :data:`RAW` or :data:`SMOOTHED`.
        x: Drawn x values (steps, seconds since the run's start, or seconds since the epoch).
        y: Drawn y values.
        total: Points before the min/max reduction.
    """

    run: str
    metric: str
    curve: str
    x: np.ndarray
    y: np.ndarray
    total: int

    @property
    def reduced(self) -> bool:
        """Whether the min/max reduction dropped points."""
        return len(self.x) < self.total

    def caption(self) -> str:
        """As :meth:`app.downsample.Reduced.caption`."""
        return Reduced(self.x, self.y, self.total).caption()


def metric_traces(
    curve: Curve,
    *,
    run: str,
    metric: str,
    axis: str,
    start: float,
    smoothing: float,
    log_y: bool,
    max_points: int = MAX_POINTS,
) -> tuple[list[Trace], int]:
    """The traces one run's curve draws as: raw, and smoothed when ``smoothing > 0``.

    Smoothing (:func:`app.td_view.smooth`, as on the TD-EMA page) runs over every logged
    point; each curve is then reduced to at most ``max_points``. On a log axis (``log_y``)
    points at or below 0 cannot be drawn, so they are left out of the traces (and counted).

    Args:
        curve: The scalar's curve.
        run, metric: Labels the traces carry.
        axis: :data:`STEP`, :data:`RELATIVE` (seconds since ``start``) or :data:`WALL`.
        start: The run's first record time.
        smoothing: Weight in [0, 1); 0 draws the raw curve alone.
        log_y: Whether the y axis is logarithmic.
        max_points: Points each trace keeps at most.

    Returns:
        The traces (raw first) and how many raw points were left out for the log axis.

    Raises:
        ValueError: an unknown ``axis``, ``smoothing`` outside [0, 1), or ``max_points < 2``.
    """
    if axis not in X_AXES:
        raise ValueError(f"axis: expected one of {sorted(X_AXES)}, got {axis!r:.40}")
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing: expected a number in [0, 1), got {smoothing}")
    x = {STEP: curve.steps, RELATIVE: curve.times - start, WALL: curve.times}[axis]
    shapes = [(RAW, curve.values)]
    if smoothing > 0:
        shapes.append((SMOOTHED, smooth(curve.values, smoothing)))
    traces, hidden = [], 0
    for name, y in shapes:
        keep = ~(y <= 0) if log_y else np.ones(len(y), dtype=bool)
        if name == RAW:
            hidden = int((~keep).sum())
        shown = min_max(x[keep], y[keep], max_points=max_points)
        traces.append(Trace(run, metric, name, shown.x, shown.y, shown.total))
    return traces, hidden


def wall_clock(seconds: np.ndarray) -> np.ndarray:
    """Seconds since the epoch as milliseconds since the epoch (float64), the values a
    Vega-Lite time axis reads."""
    return np.asarray(seconds, dtype=np.float64) * 1000.0


def traces_csv(traces: Sequence[Trace], *, axis: str) -> str:
    """The drawn points of ``traces`` as CSV: ``run, metric, curve, <x>, value`` per point,
    in drawing order; the x column is named by :data:`X_COLUMNS` (wall clock as ISO 8601 UTC)
    and numbers keep full precision (NaN as ``nan``).

    Raises:
        ValueError: an unknown ``axis``.
    """
    if axis not in X_COLUMNS:
        raise ValueError(f"axis: expected one of {sorted(X_COLUMNS)}, got {axis!r:.40}")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["run", "metric", "curve", X_COLUMNS[axis], "value"])
    for trace in traces:
        for x, y in zip(trace.x.tolist(), trace.y.tolist(), strict=True):
            writer.writerow([trace.run, trace.metric, trace.curve, _x_text(x, axis), repr(y)])
    return out.getvalue()


def _x_text(x: float, axis: str) -> str:
    if axis == STEP:
        return str(int(x)) if math.isfinite(x) and x == int(x) else repr(x)
    if axis == WALL:
        return datetime.fromtimestamp(x, tz=timezone.utc).isoformat()
    return repr(x)

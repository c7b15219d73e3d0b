"""What a DI-engine buffer reports about itself: counts, rates, refusals and the quality of the
items it hands out, as one flat dict a run's metrics log takes.

DI-engine prints these through a logger thread and TensorBoard (``PeriodicThruputMonitor``,
``SampledDataAttrMonitor``); here :class:`ReplayMonitor` only counts, and the buffer's
``stats()`` returns them (plus what only the buffer knows: its count, priorities, beta), so a
training loop logs them where it logs everything else (``buffer.log_stats(run_logger, step)``
with a :class:`bufcore.RunLogger`, or any object with its ``log(kind, step, metrics)``).

The use and staleness figures follow DI-engine's sampled-data monitor: each successful sample
call records the mean and max ``use`` and ``staleness`` of the items it returned, and the
figures are the mean of those means and the max of those maxima over the last
``average_range`` calls. Rates are :class:`~bufcore.buffers.ding.throughput.DecayedCounts`'
over about the last ``periodic_thruput`` seconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from bufcore.buffers.ding.throughput import Clock, DecayedCounts
from bufcore.checks import check_int
from bufcore.fields import Field

# Counters a save keeps (the rest is recomputed or starts afresh).
COUNTERS = ("pushed", "sampled", "sample_calls", "refused_pushes", "refused_samples", "removed")


class MetricsSink(Protocol):
    """Where :meth:`log_stats` writes: :class:`bufcore.RunLogger` is one."""

    def log(self, kind: str, step: int, metrics: Mapping[str, Any]) -> Any: ...


class ReplayMonitor:
    """Counters of one buffer (see the module docstring).

    Args:
        window_seconds: Seconds over which rates are taken (a count keeps 1 % of its weight
            after them).
        average_range: Sample calls whose use and staleness figures are combined.
        clock: The time in seconds (``time.monotonic`` by default).
    """

    def __init__(
        self, *, window_seconds: float, average_range: int = 5, clock: Clock | None = None
    ) -> None:
        self.rates = DecayedCounts(window_seconds, clock=clock)
        self.pushed = 0
        self.sampled = 0
        self.sample_calls = 0
        self.refused_pushes = 0
        self.refused_samples = 0
        self.removed = 0
        self.last_refusal: str | None = None
        self._recent: deque[tuple[float, float, float, float]] = deque(
            maxlen=check_int(average_range, "average_range", minimum=1)
        )

    def on_push(self, count: int) -> None:
        """``count`` items were stored."""
        self.pushed += count
        self.rates.add(pushed=count)

    def on_refused_push(self, reason: str) -> None:
        """A push was refused, for ``reason``."""
        self.refused_pushes += 1
        self.last_refusal = f"push: {reason}"

    def on_sample(self, use: np.ndarray, staleness: np.ndarray) -> None:
        """A sample returned items with these ``use`` counts and ``staleness`` values."""
        self.sampled += len(use)
        self.sample_calls += 1
        self.rates.add(sampled=len(use))
        self._recent.append(
            (float(use.mean()), float(use.max()), float(staleness.mean()), float(staleness.max()))
        )

    def on_refused_sample(self, reason: str) -> None:
        """A sample was refused (returned None), for ``reason``."""
        self.refused_samples += 1
        self.last_refusal = f"sample: {reason}"

    def on_removed(self, count: int) -> None:
        """``count`` items left the buffer (overwritten, stale, used up or cleared)."""
        self.removed += count

    def stats(self) -> dict[str, Any]:
        """The counters, rates and recent sampled-item figures (None before any sample)."""
        push_rate, sample_rate = self.rates.rates()
        recent = np.array(self._recent) if self._recent else None
        return {
            "push_count": self.pushed,
            "sample_count": self.sampled,
            "sample_calls": self.sample_calls,
            "push_rate": push_rate,
            "sample_rate": sample_rate,
            "refused_pushes": self.refused_pushes,
            "refused_samples": self.refused_samples,
            "removed": self.removed,
            "use_mean": None if recent is None else float(recent[:, 0].mean()),
            "use_max": None if recent is None else float(recent[:, 1].max()),
            "staleness_mean": None if recent is None else float(recent[:, 2].mean()),
            "staleness_max": None if recent is None else float(recent[:, 3].max()),
            "last_refusal": self.last_refusal,
        }

    def state_dict(self) -> dict[str, Any]:
        """The counters and rates as plain data."""
        return {
            **{name: getattr(self, name) for name in COUNTERS},
            "rates": self.rates.state_dict(),
        }

    def load_state_dict(self, state: Field) -> None:
        """Take back what :meth:`state_dict` gave.

        Raises:
            StateError: a field is missing or malformed.
        """
        counters = {name: state.key(name).integer(minimum=0) for name in COUNTERS}
        self.rates.load_state_dict(state.key("rates"))
        for name, value in counters.items():
            setattr(self, name, value)


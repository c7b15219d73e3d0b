"""Push and sample counts that fade with time, and DI-engine's throughput controller on them
(REFERENCE §11.5, DESIGN §2 decision 10).

DI-engine keeps two counts and a daemon thread multiplies both by ``0.01 ** (1 / window)`` once
a second, so a count keeps 1 % of its weight after ``window`` seconds. :class:`DecayedCounts`
applies the same decay exactly for the time that passed whenever it is read or added to, from
an injectable clock: no thread, and a test moves time by hand. At whole seconds the two agree
(``window_seconds=30``: x0.8577 after one second, x0.01 after thirty).

:class:`ThruputController` has the code's semantics, not its config comment's (which inverts
them): the ratio is push / sample; a push of ``n`` is refused when
``(push + n) / sample > max`` (never while ``sample < 1e-5``), a sample of ``n`` when
``push / (sample + n) < min``. It is enabled only when ``max`` is finite or ``min`` positive,
as in DI-engine. Counts grow only by what was actually pushed or sampled.

The same counts give rates (:meth:`DecayedCounts.rates`): with decay rate
``lam = ln(100) / window``, a steady rate ``r`` makes a count ``r / lam`` in the long run, so
``count * lam`` estimates it, divided by ``1 - exp(-lam * age)`` so that it is exact for a
steady rate from the start.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from bufcore.checks import check_real
from bufcore.fields import Field

Clock = Callable[[], float]
# DI-engine's "no sample yet" threshold of can_push.
_NO_SAMPLES = 1e-5


def check_clock(clock: Any) -> Clock:
    """``clock`` (a callable returning seconds), or ``time.monotonic`` for None.

    Raises:
        TypeError: not callable.
    """
    if clock is None:
        return time.monotonic
    if not callable(clock):
        raise TypeError(f"clock: expected a callable returning seconds, got {clock!r:.80}")
    clock_fn: Clock = clock
    return clock_fn


class DecayedCounts:
    """Push and sample counts losing 99 % of their weight every ``window_seconds``.

    Args:
        window_seconds: Seconds after which a count keeps 1 % of its weight.
        clock: Returns the time in seconds (``time.monotonic`` by default); must not go
            backwards by much: a step back is read as no time passing.

    Raises:
        TypeError: ``clock`` is not callable, ``window_seconds`` not a number.
        ValueError: ``window_seconds`` not positive and finite.
    """

    def __init__(self, window_seconds: float, *, clock: Clock | None = None) -> None:
        self.window_seconds = check_real(window_seconds, "window_seconds", positive=True)
        self._lambda = math.log(100.0) / self.window_seconds
        self._clock = check_clock(clock)
        self._time = self._now()
        self._start = self._time
        self._push = 0.0
        self._sample = 0.0

    def _now(self) -> float:
        """Raises:
        ValueError: the clock gave a non-finite time.
        """
        now = check_real(self._clock(), "clock()")
        return now

    def _advance(self) -> None:
        now = self._now()
        elapsed = now - self._time
        if elapsed > 0:
            factor = math.exp(-self._lambda * elapsed)
            self._push *= factor
            self._sample *= factor
            self._time = now

    def counts(self) -> tuple[float, float]:
        """The decayed push and sample counts now."""
        self._advance()
        return self._push, self._sample

    def add(self, *, pushed: int = 0, sampled: int = 0) -> None:
        """Count ``pushed`` items pushed and ``sampled`` items sampled now."""
        self._advance()
        self._push += pushed
        self._sample += sampled

    def rates(self) -> tuple[float, float]:
        """Push and sample rates in items per second over about the last window (see the
        module docstring); 0 before any time has passed."""
        push, sample = self.counts()
        age = self._time - self._start
        if age <= 0:
            return 0.0, 0.0
        scale = self._lambda / -math.expm1(-self._lambda * age)
        return push * scale, sample * scale

    def reset(self) -> None:
        """Counts back to 0, and the rates' age with them."""
        self._time = self._start = self._now()
        self._push = self._sample = 0.0

    def use_clock(self, clock: Clock) -> None:
        """Count on ``clock`` from now on, keeping the counts and their age."""
        push, sample = self.counts()
        age = self._time - self._start
        self._clock = check_clock(clock)
        self._time = self._now()
        self._start = self._time - age
        self._push, self._sample = push, sample

    def state_dict(self) -> dict[str, float]:
        """The counts now and the seconds they have been counted (plain data)."""
        push, sample = self.counts()
        return {"push": push, "sample": sample, "age": self._time - self._start}

    def load_state_dict(self, state: Field) -> None:
        """Take back what :meth:`state_dict` gave, counting from now.

        Raises:
            StateError: a field is missing or malformed.
        """
        push = state.key("push").real(minimum=0.0)
        sample = state.key("sample").real(minimum=0.0)
        age = state.key("age").real(minimum=0.0)
        self._time = self._now()
        self._start = self._time - age
        self._push, self._sample = push, sample


class ThruputController:
    """DI-engine's push/sample rate limiter (see the module docstring).

    Args:
        max_rate: Largest push / sample ratio a push may reach (``inf``: no limit).
        min_rate: Smallest push / sample ratio a sample may leave (0: no limit).
        window_seconds: Seconds after which a count keeps 1 % of its weight.
        clock: The time in seconds (``time.monotonic`` by default).

    Raises:
        TypeError: an option of the wrong type.
        ValueError: ``min_rate`` negative or infinite, ``max_rate`` below it, or
            ``window_seconds`` not positive.
    """

    def __init__(
        self,
        *,
        max_rate: float = math.inf,
        min_rate: float = 0.0,
        window_seconds: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        self.min_rate = check_real(min_rate, "min_rate", minimum=0.0)
        self.max_rate = check_real(max_rate, "max_rate", minimum=self.min_rate, finite=False)
        self.counts = DecayedCounts(window_seconds, clock=clock)

    @property
    def enabled(self) -> bool:
        """Whether it can refuse anything (``max`` finite or ``min`` positive)."""
        return self.max_rate != math.inf or self.min_rate != 0

    def can_push(self, count: int) -> str | None:
        """Why a push of ``count`` items is refused, or None when it may go ahead."""
        if not self.enabled:
            return None
        push, sample = self.counts.counts()
        if abs(sample) < _NO_SAMPLES:
            return None
        if (push + count) / sample > self.max_rate:
            return (
                f"push({push:.4g}+{count}) / sample({sample:.4g}) > "
                f"push_sample_rate_limit max({self.max_rate})"
            )
        return None

    def can_sample(self, count: int) -> str | None:
        """Why a sample of ``count`` items is refused, or None when it may go ahead."""
        if not self.enabled:
            return None
        push, sample = self.counts.counts()
        if push / (sample + count) < self.min_rate:
            return (
                f"push({push:.4g}) / sample({sample:.4g}+{count}) < "
                f"push_sample_rate_limit min({self.min_rate})"
            )
        return None

    def ratio(self) -> float | None:
        """The push / sample ratio of the decayed counts, or None before any sample."""
        push, sample = self.counts.counts()
        return None if sample < _NO_SAMPLES else push / sample

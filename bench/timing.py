"""Timed blocks, repeat statistics and torch's intra-op thread count.

A *repeat* is one timed block of several calls; its rate is work done over wall time. Results
are summarised by the median with the minimum, maximum and quartiles beside it, because on a
shared 2-core machine single repeats swing widely (DESIGN §6).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

T = TypeVar("T")


@dataclass
class Series:
    """Rates measured over repeats (higher is better), in ``unit``.

    Each value carries the tag of the round it was measured in; values of two series with the
    same tag were measured back to back, which is what paired ratios compare.
    """

    unit: str
    values: list[float] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    faults: list[float] = field(default_factory=list)

    def add(self, value: float, tag: str, faults: float | None = None) -> None:
        """Record one repeat (``faults``: minor page faults per call, when counted)."""
        self.values.append(value)
        self.tags.append(tag)
        if faults is not None:
            self.faults.append(faults)

    @property
    def median_faults(self) -> float | None:
        """Median minor page faults per call, or None when they were not counted."""
        return statistics.median(self.faults) if self.faults else None

    def by_tag(self) -> dict[str, float]:
        """The first value measured in each round."""
        out: dict[str, float] = {}
        for tag, value in zip(self.tags, self.values, strict=True):
            out.setdefault(tag, value)
        return out

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def quartiles(self) -> tuple[float, float]:
        """First and third quartiles (the extremes when there are fewer than 4 repeats)."""
        if len(self.values) < 4:
            return self.low, self.high
        q1, _, q3 = statistics.quantiles(self.values, n=4, method="inclusive")
        return q1, q3

    def to_json(self) -> dict[str, Any]:
        q1, q3 = self.quartiles()
        return {
            "unit": self.unit,
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "q1": q1,
            "q3": q3,
            "repeats": len(self.values),
            "values": self.values,
            "rounds": self.tags,
            "faults_per_call": self.faults,
        }


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Wall-clock seconds of one ``fn()`` call and its result, with the cyclic GC paused.

    The result is handed back rather than dropped inside the timed region, so freeing a large
    result is never timed.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, result
    finally:
        if enabled:
            gc.enable()


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with ``count`` torch intra-op threads, then restore the previous count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def paired_ratio(numerator: Series, denominator: Series) -> float | None:
    """Median over shared rounds of ``numerator / denominator``; None when no round is shared."""
    mine = numerator.by_tag()
    ratios = [mine[tag] / value for tag, value in denominator.by_tag().items() if tag in mine]
    return statistics.median(ratios) if ratios else None

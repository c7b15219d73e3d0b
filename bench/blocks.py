"""Timed blocks inside one headline child process, and the record each op keeps of them.

A child (:mod:`bench.isolated`) times every op in several blocks of ``calls`` calls, with the
cyclic GC paused (:func:`bench.timing.timed`), and counts this process's minor page faults
around each block. An op's rate in that process is the median of its blocks; the blocks are
kept in the JSON beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bench.memory import minor_faults
from bench.timing import timed

ROWS_PER_S = "rows/s"
SAMPLES_PER_S = "samples/s"
STEPS_PER_S = "steps/s"

T = TypeVar("T")


@dataclass
class OpRecord:
    """The timed blocks of one op in one process.

    Attributes:
        unit: Unit of the rates (rows, samples or steps per second).
        rows_per_call: Units of work one call does (rows written or sampled, or 1 for steps).
        calls: Calls per timed block.
        rates: One rate per block.
        faults: Minor page faults per call, one value per block.
    """

    unit: str
    rows_per_call: int
    calls: int
    rates: list[float] = field(default_factory=list)
    faults: list[float] = field(default_factory=list)

    def add(self, seconds: float, work: float, faults: int) -> None:
        """Record a block that did ``work`` units in ``seconds`` and took ``faults`` faults."""
        self.rates.append(work / seconds)
        self.faults.append(faults / self.calls)

    def measure(self, step: Callable[[], object]) -> None:
        """Time one block of ``calls`` calls of ``step`` and record it."""
        calls = self.calls

        def block() -> None:
            for _ in range(calls):
                step()

        before = minor_faults()
        seconds, _ = timed(block)
        self.add(seconds, calls * self.rows_per_call, minor_faults() - before)

    def to_json(self) -> dict[str, Any]:
        """The op's rate and faults in this process (medians of its blocks) and the blocks."""
        return {
            "unit": self.unit,
            "rows_per_call": self.rows_per_call,
            "calls": self.calls,
            "rate": statistics.median(self.rates),
            "faults_per_call": statistics.median(self.faults),
            "blocks": [
                {"rate": rate, "faults_per_call": faults}
                for rate, faults in zip(self.rates, self.faults, strict=True)
            ],
        }


def measure_rounds(
    steps: dict[str, Callable[[], object]], records: dict[str, OpRecord], blocks: int
) -> None:
    """``blocks`` rounds, each timing one block of every op in ``steps`` (in dict order).

    Interleaving the ops round by round lets slow drift of the machine hit all of them alike.
    """
    for _ in range(blocks):
        for op, step in steps.items():
            records[op].measure(step)


def time_once(build: Callable[[], T], record: OpRecord, work: float) -> T:
    """Time one call of ``build`` as a single block of ``record`` and return its result.

    ``record.calls`` is the number of library calls ``build`` makes, so faults stay per call.
    """
    before = minor_faults()
    seconds, result = timed(build)
    record.add(seconds, work, minor_faults() - before)
    return result

"""The ratios bufcore is held to, and the ones reported for information.

A :class:`Ratio` compares a bufcore measurement with another measurement of the same run and
thread count, as rates (higher is better for bufcore). Its value is *paired*: the median, over
the rounds in which both were measured back to back, of bufcore's rate over the other's. This
keeps the slow drift of a shared machine (rates here wander by 30% over a minute) out of the
ratio; the plain ratio of the two medians is kept in the JSON beside it. Ratios with a
``minimum`` are targets: PASS when the ratio reaches it. Targets apply to the headline thread
count (1); the same ratio at 2 threads is reported beside it for information.

The trajectory table (:mod:`bench.trajectory`) adds :data:`TRAJECTORY_RATIOS` and, for the two
limits the issue states in absolute terms (index building per batch, windows per second),
:class:`Bound` targets on the median of bufcore's own measurement. Those move with the machine,
so they are reported beside the ratios rather than instead of them.

The headline (:mod:`bench.headline`, fresh processes) has its own targets:
:data:`HEADLINE_RATIOS` (bufcore's median over processes / the peer's median over processes,
never paired: no two processes run at once) and :data:`HEADLINE_LIMITS` (bufcore's stability,
slowest process over its median, and page faults per call in the steady state).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.headline import HeadlineResults
from bench.runner import Results
from bench.timing import paired_ratio
from bench.trajectory import OP_INDEX, OP_INDEX_US, OP_WINDOWS
from bench.trajpeers import BUFCORE, CACHED_TABLE, PER_LEAF, RESCAN, TORCHRL, TORCHRL_CACHED


@dataclass(frozen=True)
class Ratio:
    """bufcore's ``(op, subject)`` median over ``against``'s median.

    Attributes:
        op: The bufcore measurement's op.
        subject: The bufcore measurement's implementation label.
        against: The (op, implementation) it is divided by; the table shows the ratio there.
        minimum: The target, or None for a ratio reported for information.
    """

    op: str
    subject: str
    against: tuple[str, str]
    minimum: float | None = None

    def value(self, results: Results, threads: int) -> float | None:
        """The paired ratio at ``threads``.

        Falls back to the ratio of medians when no round is shared; None when either side was
        not measured.
        """
        mine = results.get(self.op, self.subject, threads)
        other = results.get(*self.against, threads)
        if mine is None or other is None:
            return None
        paired = paired_ratio(mine, other)
        return paired if paired is not None else mine.median / other.median

    def of_medians(self, results: Results, threads: int) -> float | None:
        """Plain ratio of the two medians at ``threads``."""
        mine = results.get(self.op, self.subject, threads)
        other = results.get(*self.against, threads)
        if mine is None or other is None:
            return None
        return mine.median / other.median

    def verdict(self, results: Results, threads: int) -> str:
        """``PASS``/``MISS`` for a target, ``""`` for information, ``n/a`` when unmeasured."""
        if self.minimum is None:
            return ""
        value = self.value(results, threads)
        if value is None:
            return "n/a"
        return "PASS" if value >= self.minimum else "MISS"


RATIOS: tuple[Ratio, ...] = (
    Ratio("sample", "bufcore", ("sample", "torchrl"), 4.0),
    Ratio("sample", "bufcore", ("sample", "cpprb"), 3.0),
    Ratio("sample", "bufcore", ("sample", "per-leaf")),
    Ratio("sample", "bufcore", ("sample", "1 array"), 0.5),
    Ratio("extend", "bufcore", ("extend", "torchrl"), 2.0),
    Ratio("extend", "bufcore", ("extend", "cpprb"), 1.35),
    Ratio("extend", "bufcore", ("extend", "per-leaf"), 1.0),
    Ratio("extend", "bufcore", ("extend", "1 array")),
    Ratio("first fill", "bufcore", ("first fill", "torchrl")),
    Ratio("first fill", "bufcore", ("first fill", "cpprb"), 0.9),
    Ratio("first fill", "bufcore", ("first fill", "per-leaf")),
    Ratio("first fill", "bufcore", ("first fill", "1 array")),
    Ratio("save", "bufcore", ("save", "raw write+fsync"), 0.65),
    Ratio("load (cold)", "bufcore", ("load (cold)", "raw read"), 0.65),
)


# Trajectory sampling. Index: the issue's >= 10x torchrl without cached values (measured here
# before: torchrl ~43 k samples/s, a full rescan ~114 k). Windows with next: >= 300 k samples/s,
# which was 2.8x torchrl with cached values (107 k) and 4.4x without (68 k) on this machine.
TRAJECTORY_RATIOS: tuple[Ratio, ...] = (
    Ratio(OP_INDEX, BUFCORE, (OP_INDEX, TORCHRL), 10.0),
    Ratio(OP_INDEX, BUFCORE, (OP_INDEX, RESCAN)),
    Ratio(OP_INDEX, BUFCORE, (OP_INDEX, CACHED_TABLE)),
    Ratio(OP_WINDOWS, BUFCORE, (OP_WINDOWS, TORCHRL_CACHED), 2.8),
    Ratio(OP_WINDOWS, BUFCORE, (OP_WINDOWS, TORCHRL), 4.4),
    Ratio(OP_WINDOWS, BUFCORE, (OP_WINDOWS, PER_LEAF)),
)


def ratio_for(op: str, subject: str, ratios: tuple[Ratio, ...] = RATIOS) -> Ratio | None:
    """The ratio shown on the row of ``(op, subject)``, if any."""
    for ratio in ratios:
        if ratio.against == (op, subject):
            return ratio
    return None


@dataclass(frozen=True)
class Bound:
    """An absolute target on the median of one measurement at a thread count.

    Attributes:
        op: The measurement's op.
        subject: The measurement's implementation label.
        minimum: Lowest passing median (for rates), or None.
        maximum: Highest passing median (for times), or None.
    """

    op: str
    subject: str
    minimum: float | None = None
    maximum: float | None = None

    def value(self, results: Results, threads: int) -> float | None:
        """The median at ``threads``; None when not measured."""
        series = results.get(self.op, self.subject, threads)
        return None if series is None else series.median

    def margin(self, value: float) -> float:
        """How far ``value`` is inside the bound (negative: outside), relative to the bound."""
        if self.minimum is not None:
            return value / self.minimum - 1
        assert self.maximum is not None
        return 1 - value / self.maximum

    def verdict(self, results: Results, threads: int) -> str:
        """``PASS``/``MISS``, or ``n/a`` when unmeasured."""
        value = self.value(results, threads)
        if value is None:
            return "n/a"
        return "PASS" if self.margin(value) >= 0 else "MISS"


TRAJECTORY_BOUNDS: tuple[Bound, ...] = (
    Bound(OP_INDEX_US, BUFCORE, maximum=100.0),
    Bound(OP_WINDOWS, BUFCORE, minimum=300_000.0),
)


def bound_for(op: str, subject: str) -> Bound | None:
    """The absolute target shown on the row of ``(op, subject)``, if any."""
    for bound in TRAJECTORY_BOUNDS:
        if (bound.op, bound.subject) == (op, subject):
            return bound
    return None


# ----------------------------------------------------------------------- headline (fresh processes)
# The headline table (bench.headline) runs each implementation in fresh processes; its targets
# compare medians over those processes, not paired rounds (two processes never run at once).
@dataclass(frozen=True)
class ProcessRatio:
    """bufcore's median over processes divided by ``against``'s, for one op of one table.

    Attributes:
        table: ``transition`` or ``online``.
        op: The op (same for both sides).
        against: The implementation bufcore is divided by; the table shows the ratio there.
        minimum: The target, or None for a ratio reported for information.
    """

    table: str
    op: str
    against: str
    minimum: float | None = None

    def value(self, results: HeadlineResults) -> float | None:
        """Median of bufcore's per-process rates / median of ``against``'s; None if unmeasured."""
        mine = results.get(self.table, self.op, BUFCORE)
        other = results.get(self.table, self.op, self.against)
        if mine is None or other is None:
            return None
        return mine.median / other.median

    def verdict(self, results: HeadlineResults) -> str:
        """``PASS``/``MISS`` for a target, ``""`` for information, ``n/a`` when unmeasured."""
        minimum = self.minimum
        if minimum is None:
            return ""
        return _verdict(self.value(results), lambda value: value >= minimum)


@dataclass(frozen=True)
class Stability:
    """bufcore's slowest process against its own median: ``min / median >= minimum``."""

    table: str
    op: str
    minimum: float

    def value(self, results: HeadlineResults) -> float | None:
        stats = results.get(self.table, self.op, BUFCORE)
        return None if stats is None else stats.low / stats.median

    def verdict(self, results: HeadlineResults) -> str:
        return _verdict(self.value(results), lambda value: value >= self.minimum)


@dataclass(frozen=True)
class FaultLimit:
    """bufcore's median minor page faults per call must stay below ``maximum``."""

    table: str
    op: str
    maximum: float

    def value(self, results: HeadlineResults) -> float | None:
        stats = results.get(self.table, self.op, BUFCORE)
        return None if stats is None else stats.median_faults

    def verdict(self, results: HeadlineResults) -> str:
        return _verdict(self.value(results), lambda value: value < self.maximum)


def _verdict(value: float | None, met: Callable[[float], bool]) -> str:
    """``n/a`` when unmeasured, else ``PASS`` or ``MISS``."""
    if value is None:
        return "n/a"
    return "PASS" if met(value) else "MISS"


HEADLINE_RATIOS: tuple[ProcessRatio, ...] = (
    ProcessRatio("transition", "sample", "per-leaf", 3.0),
    ProcessRatio("transition", "sample", "cpprb", 3.5),
    ProcessRatio("transition", "sample", "torchrl"),
    ProcessRatio("transition", "extend", "per-leaf", 1.0),
    ProcessRatio("transition", "extend", "cpprb", 1.2),
    ProcessRatio("transition", "extend", "torchrl"),
    ProcessRatio("transition", "mix", "per-leaf", 3.0),
    ProcessRatio("transition", "mix", "cpprb"),
    ProcessRatio("transition", "mix", "torchrl"),
    ProcessRatio("transition", "first fill (untouched)", "per-leaf"),
    ProcessRatio("transition", "first fill (untouched)", "cpprb"),
    ProcessRatio("transition", "first fill (untouched)", "torchrl"),
    ProcessRatio("transition", "first fill (pre-touched)", "per-leaf"),
    ProcessRatio("transition", "first fill (pre-touched)", "cpprb", 0.8),
    ProcessRatio("transition", "first fill (pre-touched)", "torchrl"),
    ProcessRatio("transition", "sample (settled)", "per-leaf"),
    ProcessRatio("transition", "sample (settled)", "cpprb"),
    ProcessRatio("transition", "sample (settled)", "torchrl"),
    ProcessRatio("transition", "extend (settled)", "per-leaf"),
    ProcessRatio("transition", "extend (settled)", "cpprb"),
    ProcessRatio("transition", "extend (settled)", "torchrl"),
    *(
        ProcessRatio("online", op, peer)
        for op in ("step", "extend", "sample")
        for peer in ("per-leaf", "torchrl")
    ),
)
HEADLINE_LIMITS: tuple[Stability | FaultLimit, ...] = (
    Stability("transition", "sample", 0.8),
    FaultLimit("transition", "sample", 10.0),
    FaultLimit("transition", "extend", 10.0),
)


def headline_ratio_for(table: str, op: str, against: str) -> ProcessRatio | None:
    """The ratio shown on the headline row of ``(table, op, against)``, if any."""
    for ratio in HEADLINE_RATIOS:
        if (ratio.table, ratio.op, ratio.against) == (table, op, against):
            return ratio
    return None

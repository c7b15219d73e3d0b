"""The ratios bufcore is held to, and the ones reported for information.

A :class:`Ratio` compares a bufcore measurement with another measurement of the same run and
thread count, as rates (higher is better for bufcore). Its value is *paired*: the median, over
the rounds in which both were measured back to back, of bufcore's rate over the other's. This
keeps the slow drift of a shared machine (rates here wander by 30% over a minute) out of the
ratio; the plain ratio of the two medians is kept in the JSON beside it. Ratios with a
``minimum`` are targets: PASS when the ratio reaches it. Targets apply to the headline thread
count (1); the same ratio at 2 threads is reported beside it for information.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.runner import Results
from bench.timing import paired_ratio


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


def ratio_for(op: str, subject: str) -> Ratio | None:
    """The ratio shown on the row of ``(op, subject)``, if any."""
    for ratio in RATIOS:
        if ratio.against == (op, subject):
            return ratio
    return None

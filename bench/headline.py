"""The headline benchmark: every implementation in its own fresh Python process.

For each round, and each scenario of :mod:`bench.isolated` (``steady``, ``prefill``, then
``online``), every implementation runs in a child process of its own, one child at a time, in an
order that rotates by one place per round (:func:`rotation`): with at least as many rounds as
implementations, each implementation takes each position. A child's rate for an op is the median
of its timed blocks; the table then shows, per op and implementation, the median, minimum and
maximum of those per-process rates and the median page faults per call. Ratios (see
:mod:`bench.targets`) divide medians over processes.

An implementation whose packages are not installed is listed as missing and skipped; a child
that fails stops the run with :class:`ChildFailed`, which names it and carries its stderr.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.child_spec import ONLINE_IMPLEMENTATIONS, TRANSITION_IMPLEMENTATIONS, ChildSpec

ROOT = Path(__file__).resolve().parent.parent
TRANSITION, ONLINE = "transition", "online"
REQUIRES: dict[str, tuple[str, ...]] = {
    "bufcore": (),
    "per-leaf": (),
    "cpprb": ("cpprb",),
    "torchrl": ("torchrl", "tensordict"),
}
"""Importable modules each implementation needs (peers come from the optional bench extra)."""
CHILD_TIMEOUT_S = 1800

Runner = Callable[[ChildSpec], dict[str, Any]]
Log = Callable[[str], None]


class ChildFailed(RuntimeError):
    """A child process exited with an error (or printed no JSON)."""


@dataclass(frozen=True)
class HeadlineConfig:
    """What the headline measures.

    Attributes:
        capacity: Rows of the transition buffers.
        batch: Rows per extend and per sample.
        rounds: Child processes per implementation and scenario.
        calls: Calls per timed block (sample, extend; online step, sample, extend).
        blocks: Timed blocks per op in each child.
        mix_steps: Mix steps per timed block.
        mix_samples: Samples per mix step (after its one extend; BFM-Zero's 16).
        online_capacity: Time rows of the online buffers.
        online_envs: Envs of the online buffers (one extend writes ``[1, online_envs]``).
        seq_length: Rows per online window.
        threads: torch intra-op threads in every child.
        scenarios: Which of ``steady``, ``prefill``, ``online`` to run.
    """

    capacity: int = 1_000_000
    batch: int = 1024
    rounds: int = 5
    calls: int = 32
    blocks: int = 5
    mix_steps: int = 4
    mix_samples: int = 16
    online_capacity: int = 500
    online_envs: int = 1024
    seq_length: int = 8
    threads: int = 1
    scenarios: tuple[str, ...] = ("steady", "prefill", "online")

    def __post_init__(self) -> None:
        """Check every field before any child runs.

        Raises:
            ValueError: ``rounds`` < 1, or a field a child would refuse (see ChildSpec).
            TypeError: A field a child would refuse for its type.
        """
        if self.rounds < 1:
            raise ValueError(f"rounds: expected >= 1, got {self.rounds}")
        # Check every child's fields now, not after the first children have run.
        for scenario in self.scenarios:
            self.spec("bufcore", scenario)

    def spec(self, implementation: str, scenario: str) -> ChildSpec:
        """The child spec of ``implementation`` in ``scenario``."""
        online = scenario == "online"
        return ChildSpec(
            implementation=implementation,
            scenario=scenario,
            capacity=self.online_capacity if online else self.capacity,
            batch=self.batch,
            calls=self.calls,
            blocks=self.blocks,
            mix_steps=self.mix_steps,
            mix_samples=self.mix_samples,
            envs=self.online_envs,
            seq_length=self.seq_length,
            threads=self.threads,
        )


@dataclass
class Stats:
    """One op of one implementation over its processes (one value per process).

    Attributes:
        unit: Unit of the rates.
        rates: The op's rate in each process (median of that process's blocks).
        faults: Minor page faults per call in each process (median of its blocks).
        positions: Each process's place in its round's order (0 = first).
    """

    unit: str
    rates: list[float] = field(default_factory=list)
    faults: list[float] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    @property
    def low(self) -> float:
        return min(self.rates)

    @property
    def high(self) -> float:
        return max(self.rates)

    @property
    def median_faults(self) -> float:
        return statistics.median(self.faults)

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "processes": len(self.rates),
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "faults_per_call_median": self.median_faults,
            "rates": self.rates,
            "faults_per_call": self.faults,
            "positions": self.positions,
        }


@dataclass
class HeadlineResults:
    """Everything the headline measured.

    Attributes:
        config: The run's configuration.
        stats: ``(table, op, implementation)`` -> :class:`Stats` (table: transition/online).
        missing: Implementation -> the modules it lacks (not run).
        versions: Implementation -> package versions ("" for code in bench/).
        children: Every child's JSON, with its round and position added.
        seconds: Wall time of the whole headline.
    """

    config: HeadlineConfig
    stats: dict[tuple[str, str, str], Stats] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def get(self, table: str, op: str, implementation: str) -> Stats | None:
        return self.stats.get((table, op, implementation))

    def add_child(self, child: dict[str, Any], round_: int, position: int) -> None:
        """Fold one child's JSON into :attr:`stats` (and keep it in :attr:`children`)."""
        table = ONLINE if child["scenario"] == "online" else TRANSITION
        name = child["implementation"]
        self.versions.setdefault(name, child.get("version", ""))
        for op, record in child["ops"].items():
            stats = self.stats.setdefault((table, op, name), Stats(record["unit"]))
            stats.rates.append(float(record["rate"]))
            stats.faults.append(float(record["faults_per_call"]))
            stats.positions.append(position)
        self.children.append({**child, "round": round_, "position": position})


def rotation(names: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of each round: ``names`` shifted left by one place per round."""
    count = len(names)
    if count == 0:
        return [[] for _ in range(rounds)]
    return [[*names[r % count :], *names[: r % count]] for r in range(rounds)]


def missing_modules(
    implementation: str, requires: dict[str, tuple[str, ...]] = REQUIRES
) -> list[str]:
    """The modules ``implementation`` needs that cannot be found (found without importing)."""
    return [m for m in requires.get(implementation, ()) if importlib.util.find_spec(m) is None]


def run_child(spec: ChildSpec) -> dict[str, Any]:
    """Run ``spec`` in a fresh interpreter (``python -m bench.isolated``); its JSON object.

    Raises:
        ChildFailed: The child exited non-zero, timed out, or printed no JSON object.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    # Thread pools sized like torch's, so no library starts with more threads than the others.
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(spec.threads)
    what = f"{spec.implementation} ({spec.scenario})"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench.isolated", spec.to_json()],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as error:
        tail = (error.stderr or "").strip()[-4000:]
        raise ChildFailed(f"{what}: child exited with {error.returncode}:\n{tail}") from error
    except subprocess.TimeoutExpired as error:
        raise ChildFailed(f"{what}: child ran over {CHILD_TIMEOUT_S} s") from error
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    try:
        result = json_object(lines[-1]) if lines else None
    except ValueError as error:
        raise ChildFailed(f"{what}: last stdout line is not JSON: {lines[-1]!r}") from error
    if result is None:
        raise ChildFailed(f"{what}: child printed nothing on stdout; stderr:\n{done.stderr}")
    return result


def json_object(line: str) -> dict[str, Any]:
    """``line`` parsed as a JSON object.

    Raises:
        ValueError: ``line`` is not JSON, or not an object.
    """
    value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(
    cfg: HeadlineConfig,
    *,
    runner: Runner = run_child,
    log: Log = _log,
    requires: dict[str, tuple[str, ...]] = REQUIRES,
) -> HeadlineResults:
    """Every round x scenario x implementation (rotated), one child each; the results."""
    started = time.perf_counter()
    results = HeadlineResults(cfg)
    present: dict[str, list[str]] = {}
    for scenario in cfg.scenarios:
        names = ONLINE_IMPLEMENTATIONS if scenario == "online" else TRANSITION_IMPLEMENTATIONS
        present[scenario] = []
        for name in names:
            lacking = missing_modules(name, requires)
            if lacking:
                results.missing[name] = lacking
            else:
                present[scenario].append(name)
    for name, lacking in results.missing.items():
        log(f"headline: {name} is not installed (missing {', '.join(lacking)}); skipped")
    orders = {s: rotation(present[s], cfg.rounds) for s in cfg.scenarios}
    for round_ in range(cfg.rounds):
        for scenario in cfg.scenarios:
            for position, name in enumerate(orders[scenario][round_]):
                log(f"headline round {round_ + 1}/{cfg.rounds}: {scenario}, {name}")
                child = runner(cfg.spec(name, scenario))
                results.add_child(child, round_, position)
    results.seconds = time.perf_counter() - started
    return results

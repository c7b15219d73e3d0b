"""``python -m bench.prioritized``: prioritized replay, sample + update steps per second.

One step is what a PER training loop does per batch: draw ``batch`` rows by priority (with
their importance weights) and give those rows new priorities. Three contenders, measured back
to back in each round of one process, at each capacity (full) and batch:

- ``buffer``: ``DictBuffer(sampler=PrioritizedSampler())``: ``sample_index`` +
  ``update_priority`` (write counts checked, as a user's loop runs it; no rows gathered);
- ``sampler``: the sampler alone, ``draw`` + ``update``;
- ``plain``: a plain per-level numpy descent over two binary heaps, every level walked per item
  and duplicates resolved with ``np.unique`` (the baseline the issue measured at
  ~1,700-1,800 steps/s at 1M, batch 1024).

Peers (torchrl's C++ trees, cpprb, ``torch.multinomial``) are measured in fresh processes by
``python -m bench --only prioritized`` (:mod:`bench.prioritized_headline`), not here. Rates are
the median over rounds with min and max (a shared machine swings; DESIGN §6). Prints one JSON
object.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from bench.timing import Series, paired_ratio, timed, torch_threads
from bufcore import DictBuffer, PrioritizedSampler, RingPosition


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.prioritized", description=__doc__)
    parser.add_argument("--capacities", type=int, nargs="+", default=[1_000_000, 131_072])
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeats", type=int, default=7, help="timed rounds (median)")
    parser.add_argument("--steps", type=int, default=200, help="steps per round")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    return parser.parse_args(argv)


class PlainTrees:
    """The baseline: sum and min heaps, each level walked per item (no shortcuts)."""

    def __init__(self, capacity: int) -> None:
        self.depth = (capacity - 1).bit_length()
        self.size = 1 << self.depth
        self.sums = np.zeros(2 * self.size)
        self.minima = np.full(2 * self.size, np.inf)

    def set(self, leaves: np.ndarray, values: np.ndarray) -> None:
        leaves, first = np.unique(leaves[::-1], return_index=True)  # last write wins
        values = values[::-1][first]
        node = leaves + self.size
        self.sums[node] = values
        self.minima[node] = np.where(values > 0, values, np.inf)
        for _ in range(self.depth):
            node = node // 2
            self.sums[node] = self.sums[2 * node] + self.sums[2 * node + 1]
            self.minima[node] = np.minimum(self.minima[2 * node], self.minima[2 * node + 1])

    def find(self, targets: np.ndarray) -> np.ndarray:
        node = np.ones(len(targets), dtype=np.int64)
        for _ in range(self.depth):
            left = self.sums[2 * node]
            right = targets >= left
            targets = np.where(right, targets - left, targets)
            node = 2 * node + right
        leaves: np.ndarray = node - self.size
        return leaves


def contenders(capacity: int, batch: int) -> dict[str, Callable[[], None]]:
    """One step of each contender, on trees filled with random priorities."""
    rng = np.random.default_rng(0)
    generator = torch.Generator().manual_seed(0)
    initial = rng.random(capacity) + 0.01

    buffer = DictBuffer(capacity=capacity, seed=0, sampler=PrioritizedSampler())
    buffer.extend({"obs": torch.zeros(capacity, 1)})
    buffer.sampler.update(np.arange(capacity), initial)

    def buffer_step() -> None:
        index = buffer.sample_index(batch)
        buffer.update_priority(index, torch.rand(batch, dtype=torch.float64))

    sampler = PrioritizedSampler()
    ring = RingPosition(capacity, capacity)
    sampler.bind(capacity, 1)
    sampler.written(ring, 0, capacity)
    sampler.update(np.arange(capacity), initial)

    def sampler_step() -> None:
        index = sampler.draw(ring, batch, generator)
        sampler.update(index.rows.numpy(), rng.random(batch))

    plain = PlainTrees(capacity)
    plain.set(np.arange(capacity), initial**0.6)

    def plain_step() -> None:
        leaves = plain.find(rng.random(batch) * plain.sums[1])
        weights = plain.sums[leaves + plain.size]
        (weights / plain.minima[1]) ** -0.4  # the importance weights every contender computes
        plain.set(leaves, (rng.random(batch) + 1e-5) ** 0.6)

    return {"buffer": buffer_step, "sampler": sampler_step, "plain": plain_step}


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (capacity, batch) case: steps per second of each contender over the rounds."""
    results = []
    for capacity in args.capacities:
        for batch in args.batches:
            steps = contenders(capacity, batch)
            series = {name: Series("steps/s") for name in steps}
            for step in steps.values():
                step()  # warm-up
            for round_number in range(args.repeats):
                for name, step in steps.items():

                    def run(step: Callable[[], None] = step) -> None:
                        for _ in range(args.steps):
                            step()

                    seconds, _ = timed(run)
                    series[name].add(args.steps / seconds, f"round {round_number}")
            results.append(
                {
                    "capacity": capacity,
                    "batch": batch,
                    **{name: s.to_json() for name, s in series.items()},
                    "buffer_over_plain": paired_ratio(series["buffer"], series["plain"]),
                    "sampler_over_plain": paired_ratio(series["sampler"], series["plain"]),
                }
            )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the JSON summary; exit status 0."""
    args = parse_args(argv)
    with torch_threads(args.threads):
        print(json.dumps(measure(args), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

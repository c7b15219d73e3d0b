"""bufcore's steady-state ``sample``/``extend`` in a fresh process (a diagnostic).

The main run settles glibc's malloc thresholds first (:mod:`bench.memory`), as a long-running
training process has them. A fresh process that imports only torch and bufcore has not: there,
the thresholds are still at their defaults and per-call allocations can be handed back to the
kernel and faulted in again on every call. Whether that happens depends on the heap's layout:
in 3 of 5 fresh processes measured here, bufcore's ``sample`` re-faulted its whole 4.5 MB output
on every call (1,146 faults per call, 0.27-0.37 M rows/s instead of 1.5-1.9 M). This module
measures bufcore in that state, in a child process (``python -m bench.fresh``), and reports
rates and page faults per call as JSON on stdout; one child per run, so the row can come out
either way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench.memory import minor_faults
from bench.timing import timed, torch_threads
from bench.workload import make_pool, slice_batch


def _measure(capacity: int, batch: int, calls: int, rounds: int, threads: list[int]) -> Any:
    from bufcore import DictBuffer

    pool = make_pool(16, batch)
    buffer = DictBuffer(capacity=capacity, device="cpu", seed=0)
    for i in range(capacity // batch):
        buffer.extend(pool[i % len(pool)])
    if capacity % batch:
        buffer.extend(slice_batch(pool[0], capacity % batch))
    out: dict[str, dict[str, list[list[float]]]] = {"sample": {}, "extend": {}}

    def sample() -> None:
        for _ in range(calls):
            buffer.sample(batch)

    def extend() -> None:
        for i in range(calls):
            buffer.extend(pool[i % len(pool)])

    for _ in range(rounds):
        for count in threads:
            with torch_threads(count):
                for op, step in (("sample", sample), ("extend", extend)):
                    before = minor_faults()
                    seconds, _ = timed(step)
                    faults = (minor_faults() - before) / calls
                    out[op].setdefault(str(count), []).append([calls * batch / seconds, faults])
    return out


def run_child(
    capacity: int, batch: int, calls: int, rounds: int, threads: tuple[int, ...]
) -> dict[str, dict[str, list[list[float]]]]:
    """Run :func:`_measure` in a fresh interpreter; ``{op: {threads: [[rate, faults], ...]}}``."""
    args = json.dumps([capacity, batch, calls, rounds, list(threads)])
    done = subprocess.run(
        [sys.executable, "-m", "bench.fresh", args],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, dict[str, list[list[float]]]] = json.loads(done.stdout)
    return result


if __name__ == "__main__":
    print(json.dumps(_measure(*json.loads(sys.argv[1]))))

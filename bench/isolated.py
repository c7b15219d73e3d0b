"""The child of the headline benchmark: one implementation, one scenario, one fresh process.

``python -m bench.isolated '<json spec>'`` (a :class:`ChildSpec`) builds one implementation,
runs one scenario and prints one JSON object on stdout: for every op, its rate in this process
(the median of its timed blocks), minor page faults per call, and the blocks themselves. The
parent (:mod:`bench.headline`) starts one such process per implementation and round, so every
measurement starts where a user's training process starts: nothing pre-touched, glibc's malloc
thresholds at their defaults (DESIGN §6, "Measure what a user gets").

Scenarios:

- ``steady``: create the buffer and extend it until it holds ``capacity`` rows, timed
  (``first fill (untouched)``); warm every op once; then ``blocks`` rounds of one block each of
  ``sample``, ``extend`` (into the full buffer, wrapping) and ``mix`` (BFM-Zero's update: one
  extend then ``mix_samples`` samples; its rate counts every row moved). After those, a
  diagnostic: :func:`bench.memory.settle_allocator`, then ``sample (settled)`` and
  ``extend (settled)`` again.
- ``prefill``: :func:`bench.memory.prefault` the bytes the fill will allocate (the same amount
  for every implementation), then the timed create-and-fill (``first fill (pre-touched)``).
- ``online``: the ``[time, env]`` buffer (:mod:`bench.online_child`).

Inputs are torch tensors, as rollouts produce them, converted untimed to each library's natural
input (:mod:`bench.peers`).
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from bench.blocks import ROWS_PER_S, OpRecord, measure_rounds, time_once
from bench.child_spec import (
    ChildSpec,
)
from bench.memory import prefault, settle_allocator
from bench.online_child import online
from bench.peers import (
    Implementation,
    Subject,
    bufcore_impl,
    cpprb_impl,
    perleaf_impl,
    torchrl_impl,
)
from bench.runner import fill
from bench.workload import ROW_BYTES, make_pool, slice_batch

SAMPLE, EXTEND, MIX = "sample", "extend", "mix"
FILL_UNTOUCHED = "first fill (untouched)"
FILL_PRETOUCHED = "first fill (pre-touched)"
SAMPLE_SETTLED, EXTEND_SETTLED = "sample (settled)", "extend (settled)"


def transition_impl(name: str, batch: int) -> Implementation:
    """The adapter (:mod:`bench.peers`) of one transition implementation."""
    factories: dict[str, Callable[[], Implementation]] = {
        "bufcore": bufcore_impl,
        "per-leaf": perleaf_impl,
        "cpprb": cpprb_impl,
        "torchrl": lambda: torchrl_impl(batch),
    }
    return factories[name]()


def fill_bytes(rows: int) -> int:
    """Bytes a first fill of ``rows`` rows may allocate (row padding, per-leaf slack)."""
    return int(rows * ROW_BYTES * 1.05) + (64 << 20)


def _inputs(impl: Implementation, spec: ChildSpec) -> tuple[list[Any], Any | None]:
    """The pool in ``impl``'s input form, and the partial tail batch of the fill (untimed)."""
    pool = make_pool(spec.pool_batches, spec.batch)
    inputs = [impl.prepare(batch) for batch in pool]
    remainder = spec.capacity % spec.batch
    tail = impl.prepare(slice_batch(pool[0], remainder)) if remainder else None
    return inputs, tail


def _first_fill(
    impl: Implementation, spec: ChildSpec, inputs: list[Any], tail: Any | None
) -> tuple[Subject, OpRecord]:
    """Create an empty buffer and extend it to ``capacity`` rows, timed (faults per extend)."""
    record = OpRecord(ROWS_PER_S, spec.batch, -(-spec.capacity // spec.batch))

    def build() -> Subject:
        subject = impl.create(spec.capacity)
        fill(subject, inputs, tail, spec.capacity, spec.batch)
        return subject

    subject = time_once(build, record, spec.capacity)
    return subject, record


def steady(spec: ChildSpec) -> tuple[str, dict[str, OpRecord]]:
    """The ``steady`` scenario (see the module docstring); the version and the op records."""
    impl = transition_impl(spec.implementation, spec.batch)
    inputs, tail = _inputs(impl, spec)
    subject, first = _first_fill(impl, spec, inputs, tail)
    batch = spec.batch
    source = itertools.cycle(inputs).__next__

    def sample() -> None:
        subject.sample(batch)

    def extend() -> None:
        subject.extend(source())

    def mix() -> None:
        subject.extend(source())
        for _ in range(spec.mix_samples):
            subject.sample(batch)

    for warm in (sample, extend, mix):
        warm()
    records = {
        FILL_UNTOUCHED: first,
        SAMPLE: OpRecord(ROWS_PER_S, batch, spec.calls),
        EXTEND: OpRecord(ROWS_PER_S, batch, spec.calls),
        MIX: OpRecord(ROWS_PER_S, (1 + spec.mix_samples) * batch, spec.mix_steps),
        SAMPLE_SETTLED: OpRecord(ROWS_PER_S, batch, spec.calls),
        EXTEND_SETTLED: OpRecord(ROWS_PER_S, batch, spec.calls),
    }
    measure_rounds({SAMPLE: sample, EXTEND: extend, MIX: mix}, records, spec.blocks)
    # Diagnostic only, after every headline block: the allocator of a long-running process.
    settle_allocator()
    measure_rounds({SAMPLE_SETTLED: sample, EXTEND_SETTLED: extend}, records, spec.blocks)
    return impl.version, records


def prefill(spec: ChildSpec) -> tuple[str, dict[str, OpRecord]]:
    """The ``prefill`` scenario: prefault, then the timed create-and-fill."""
    impl = transition_impl(spec.implementation, spec.batch)
    inputs, tail = _inputs(impl, spec)
    gc.collect()
    prefault(fill_bytes(spec.capacity))
    _, record = _first_fill(impl, spec, inputs, tail)
    return impl.version, {FILL_PRETOUCHED: record}


def measure(spec: ChildSpec) -> dict[str, Any]:
    """Run ``spec`` in this process and return the child's JSON object."""
    torch.set_num_threads(spec.threads)
    if spec.scenario == "online":
        version, records = online(spec)
    else:
        version, records = (steady if spec.scenario == "steady" else prefill)(spec)
    return {
        "implementation": spec.implementation,
        "scenario": spec.scenario,
        "version": version,
        "pid": os.getpid(),
        "threads": torch.get_num_threads(),
        "ops": {op: record.to_json() for op, record in records.items()},
    }


def main(argv: list[str]) -> int:
    """Entry point: one JSON spec argument in, one JSON line out."""
    if len(argv) != 1:
        print("usage: python -m bench.isolated '<json spec>'", file=sys.stderr)
        return 2
    print(json.dumps(measure(ChildSpec.from_json(argv[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

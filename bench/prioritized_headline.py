"""The ``prioritized`` row: prioritized replay's sample + update, each implementation in a fresh
process (DESIGN §6).

``python -m bench --only prioritized`` measures what a PER training loop does per batch: draw
``batch`` rows by priority, with their importance weights, and give those rows new priorities.
Every measurement runs in a child process of its own (``python -m bench.prioritized_headline
'<json spec>'``), one at a time, the order rotated every round, with one torch thread. A child
builds its buffer untimed, warms the op, then times ``blocks`` blocks of ``calls`` calls; its
rate is the median of its blocks, with the minor page faults per call. The table gives, per
implementation, the median over processes, the slowest process and the median faults per call;
ratios divide medians over processes of the same run.

**Rows** (capacity 1,000,000 and 131,072, batch 256 and 1024), ``steps/s`` of one
``sample + update``; every buffer holds one float per row (the step reads no rows) and starts
from the same random priorities; the new priorities are float32 tensors, as a loss gives them:

- ``bufcore``: ``DictBuffer(sampler=PrioritizedSampler())``: ``sample_index(batch)`` (rows,
  importance weights, write counts) + ``update_priority(index, priority)`` (rows overwritten
  since skipped): the user's path, without gathering rows.
- ``torchrl``: ``PrioritizedReplayBuffer`` over ``LazyTensorStorage`` on torchrl's C++ trees
  (:mod:`bench.torchrl_ext`): ``rb.sampler.sample(rb.storage, batch)`` (indices and
  ``priority_weight``) + ``rb.update_priority(index, priority)``, its index path.
- ``cpprb``: ``PrioritizedReplayBuffer``: ``sample(batch, beta)`` (it always gathers; one float
  per row here) + ``update_priorities(indexes, priority)``.
- ``multinomial``: a float64 weight vector, ``torch.multinomial(w, batch, replacement=True)``,
  ``(w[i] / w.min()) ** -beta`` and ``w[i] = (p + eps) ** alpha``: the simplest correct code.

**Windows** on the online ``[500, 1024]`` buffer (end flags from :mod:`bench.rollout`: episodes
of 50-500 steps, the ring wrapped; a float and the flag per row), ``batch`` 1024 rows = 128
windows of 8: ``step`` = ``extend`` of one ``[1, 1024]`` time row + the draw + the update (an
online loop), ``mix`` = one ``extend`` + 16 draws each with its update (BFM-Zero's updates per
env step; rate in mix steps/s), ``sample + update`` without any extend.

- ``bufcore``: ``TrajectoryDictBufferMultiDim(n_dim=2, sampler=PrioritizedSampler())``: a
  window is drawn by its rows' max priority, exactly.
- ``torchrl``: ``PrioritizedSliceSampler(cache_values=True, truncated_key=None,
  strict_length=True)`` on a ``[500, 1024]`` ``LazyTensorStorage`` (time first, extended along
  time): a window is drawn by its start row's priority; its cached trajectories hold until the
  next write, its best case; ``truncated_key=None`` skips reading the rows.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.blocks import STEPS_PER_S, OpRecord, measure_rounds
from bench.children import run_json_child
from bench.headline import Stats, missing_modules, rotation

ROWS, WINDOWS = "rows", "windows"
ROW_IMPLEMENTATIONS = ("bufcore", "torchrl", "cpprb", "multinomial")
WINDOW_IMPLEMENTATIONS = ("bufcore", "torchrl")
REQUIRES: dict[str, tuple[str, ...]] = {"torchrl": ("torchrl", "tensordict"), "cpprb": ("cpprb",)}
SAMPLE_UPDATE, STEP, MIX = "sample + update", "step", "mix"
MIX_SAMPLES = 16
"""Draws (each with its update) per extend in the ``mix`` op (BFM-Zero's 16)."""
ALPHA, BETA, EPS = 0.6, 0.4, 1e-5
PRIORITY_POOL = 32
"""Distinct new-priority batches the timed loops cycle through."""
END_KEY = "truncated"
FILL_STEPS = 125
CHILD_TIMEOUT_S = 900
# Ratios bufcore / peer to reach (the targets): torchrl by batch, cpprb at any batch.
TORCHRL_TARGETS = {1024: 1.5, 256: 1.0}
CPPRB_TARGET = 3.0
WINDOW_TARGET = 3.0


def row_target(peer: str, batch: int) -> float | None:
    """The ratio bufcore / ``peer`` the rows table asks for at ``batch`` (None: no target)."""
    if peer == "cpprb":
        return CPPRB_TARGET
    return TORCHRL_TARGETS.get(batch) if peer == "torchrl" else None


@dataclass(frozen=True)
class PerSpec:
    """What one child measures.

    Attributes:
        table: :data:`ROWS` or :data:`WINDOWS`.
        implementation: One of :data:`ROW_IMPLEMENTATIONS` or :data:`WINDOW_IMPLEMENTATIONS`.
        capacity: Rows (rows table) or time rows (windows table).
        batch: Rows per draw (windows: ``batch // seq_length`` windows).
        envs: Envs of the online buffer (windows table).
        seq_length: Rows per window.
        calls: Calls per timed block.
        blocks: Timed blocks per op.
        threads: torch intra-op threads.
    """

    table: str
    implementation: str
    capacity: int
    batch: int
    envs: int = 1024
    seq_length: int = 8
    calls: int = 64
    blocks: int = 5
    threads: int = 1

    def __post_init__(self) -> None:
        known = {ROWS: ROW_IMPLEMENTATIONS, WINDOWS: WINDOW_IMPLEMENTATIONS}
        if self.table not in known:
            raise ValueError(f"table: expected {ROWS!r} or {WINDOWS!r}, got {self.table!r}")
        if self.implementation not in known[self.table]:
            raise ValueError(
                f"implementation: expected one of {known[self.table]}, got {self.implementation!r}"
            )
        for name in ("capacity", "batch", "envs", "seq_length", "calls", "blocks", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {value!r}")
        if self.table == WINDOWS and self.batch % self.seq_length:
            raise ValueError(
                f"batch: expected a multiple of seq_length {self.seq_length}, got {self.batch}"
            )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> PerSpec:
        return cls(**json.loads(text))


# ------------------------------------------------------------------------------- the rows
def _priorities(count: int, batch: int) -> tuple[Any, list[Any]]:
    """The initial priorities (float64 numpy ``[count]``) and the new-priority batches
    (float32 tensors ``[batch]``), the same for every implementation."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    initial = rng.random(count) + 0.01
    pool = [torch.from_numpy(rng.random(batch, dtype=np.float32) * 2) for _ in range(PRIORITY_POOL)]
    return initial, pool


def _version(*names: str) -> str:
    return ", ".join(f"{name} {importlib.metadata.version(name)}" for name in names)


def rows_step(spec: PerSpec) -> tuple[str, Callable[[], None]]:
    """Build ``spec.implementation``'s full buffer (untimed); its version and one step."""
    import numpy as np
    import torch

    capacity, batch = spec.capacity, spec.batch
    initial, pool = _priorities(capacity, batch)
    new = itertools.cycle(pool).__next__
    name = spec.implementation
    if name == "bufcore":
        from bufcore import DictBuffer, PrioritizedSampler

        buffer = DictBuffer(
            capacity=capacity, seed=0, sampler=PrioritizedSampler(alpha=ALPHA, beta=BETA, eps=EPS)
        )
        buffer.extend({"obs": torch.zeros(capacity, 1)})
        buffer.sampler.update(np.arange(capacity), initial)

        def bufcore_step() -> None:
            buffer.update_priority(buffer.sample_index(batch), new())

        return _version("bufcore"), bufcore_step
    if name == "torchrl":
        from bench.torchrl_ext import activate

        built = activate()
        from tensordict import TensorDict  # type: ignore[import-untyped]
        from torchrl.data import (  # type: ignore[import-untyped]
            LazyTensorStorage,
            PrioritizedReplayBuffer,
        )

        rb = PrioritizedReplayBuffer(
            alpha=ALPHA, beta=BETA, eps=EPS, storage=LazyTensorStorage(capacity), batch_size=batch
        )
        rb.extend(TensorDict({"obs": torch.zeros(capacity, 1)}, batch_size=[capacity]))
        # float32: the dtype of torchrl's default trees (its C++ update takes no other).
        rb.update_priority(torch.arange(capacity), torch.from_numpy(initial).float())

        def torchrl_step() -> None:
            index, _ = rb.sampler.sample(rb.storage, batch)
            rb.update_priority(index, new())

        return f"{_version('torchrl', 'tensordict')}; C++ trees {built}", torchrl_step
    if name == "cpprb":
        import cpprb  # type: ignore[import-untyped]

        cb = cpprb.PrioritizedReplayBuffer(capacity, {"obs": {"shape": 1}}, alpha=ALPHA, eps=EPS)
        cb.add(obs=np.zeros((capacity, 1), dtype=np.float32), priorities=initial)
        arrays = itertools.cycle([p.numpy() for p in pool]).__next__

        def cpprb_step() -> None:
            got = cb.sample(batch, beta=BETA)
            cb.update_priorities(got["indexes"], arrays())

        return _version("cpprb"), cpprb_step
    weights = torch.from_numpy(initial) ** ALPHA
    generator = torch.Generator().manual_seed(0)

    def multinomial_step() -> None:
        index = torch.multinomial(weights, batch, replacement=True, generator=generator)
        (weights[index] / weights.min()) ** -BETA  # the importance weights
        weights[index] = (new().to(torch.float64) + EPS) ** ALPHA

    return f"torch {torch.__version__}", multinomial_step


# ---------------------------------------------------------------------------- the windows
def windows_ops(spec: PerSpec) -> tuple[str, dict[str, Callable[[], object]]]:
    """Build ``spec.implementation``'s full online buffer (untimed); its version and ops."""
    import numpy as np
    import torch

    from bench.rollout import flag_stream

    capacity, envs, batch = spec.capacity, spec.envs, spec.batch
    stream = flag_stream(capacity, envs, steady=256)
    initial, pool = _priorities(capacity * envs, batch)
    new = itertools.cycle(pool).__next__

    def rows(times: slice) -> dict[str, torch.Tensor]:
        flags = stream.truncated[times]
        return {END_KEY: flags.unsqueeze(-1), "obs": torch.zeros(*flags.shape, 1)}

    steps = itertools.cycle(range(stream.steady))
    if spec.implementation == "bufcore":
        from bufcore import PrioritizedSampler, TrajectoryDictBufferMultiDim

        buffer = TrajectoryDictBufferMultiDim(
            capacity=capacity,
            n_dim=2,
            seq_length=spec.seq_length,
            output_key_t=["obs", END_KEY],
            output_key_tp1=["obs"],
            end_key=END_KEY,
            seed=0,
            sampler=PrioritizedSampler(alpha=ALPHA, beta=BETA, eps=EPS),
        )
        for times in stream.fill_chunks(FILL_STEPS):
            buffer.extend(rows(times))
        buffer.sampler.update(np.arange(capacity * envs), initial)
        writes = [rows(stream.step(i)) for i in range(stream.steady)]

        def bufcore_draw() -> None:
            buffer.update_priority(buffer.sample_index(batch), new())

        def bufcore_step() -> None:
            buffer.extend(writes[next(steps)])
            bufcore_draw()

        def bufcore_mix() -> None:
            bufcore_step()
            for _ in range(MIX_SAMPLES - 1):
                bufcore_draw()

        ops = {STEP: bufcore_step, MIX: bufcore_mix, SAMPLE_UPDATE: bufcore_draw}
        return _version("bufcore"), ops
    from bench.torchrl_ext import activate

    built = activate()
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers.samplers import (  # type: ignore[import-untyped]
        PrioritizedSliceSampler,
    )

    def tensordict(times: slice) -> Any:
        data = rows(times)
        return TensorDict(data, batch_size=list(data[END_KEY].shape[:2]))

    sampler = PrioritizedSliceSampler(
        max_capacity=capacity * envs,
        alpha=ALPHA,
        beta=BETA,
        eps=EPS,
        num_slices=batch // spec.seq_length,
        end_key=END_KEY,
        traj_key=None,
        cache_values=True,
        truncated_key=None,
        strict_length=True,
    )
    # ndim=2 counts capacity in elements; dim_extend=0 extends along time ([n, E] batches).
    rb = ReplayBuffer(
        storage=LazyTensorStorage(capacity * envs, ndim=2),
        sampler=sampler,
        batch_size=batch,
        dim_extend=0,
    )
    for times in stream.fill_chunks(FILL_STEPS):
        rb.extend(tensordict(times))
    rb.update_priority(torch.arange(capacity * envs), torch.from_numpy(initial).float())
    tensordicts = [tensordict(stream.step(i)) for i in range(stream.steady)]

    def torchrl_draw() -> None:
        index, _ = rb.sampler.sample(rb.storage, batch)
        rb.update_priority(index, new())

    def torchrl_step() -> None:
        rb.extend(tensordicts[next(steps)])
        torchrl_draw()

    def torchrl_mix() -> None:
        torchrl_step()
        for _ in range(MIX_SAMPLES - 1):
            torchrl_draw()

    version = f"{_version('torchrl', 'tensordict')}; C++ trees {built}"
    return version, {STEP: torchrl_step, MIX: torchrl_mix, SAMPLE_UPDATE: torchrl_draw}


def measure(spec: PerSpec) -> dict[str, Any]:
    """Run ``spec`` in this process; the child's JSON object."""
    import logging
    import warnings

    import torch

    torch.set_num_threads(spec.threads)
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore")  # torchrl's deprecation notes would swamp stderr
    if spec.table == ROWS:
        version, step = rows_step(spec)
        ops: dict[str, Callable[[], object]] = {SAMPLE_UPDATE: step}
    else:
        version, ops = windows_ops(spec)
    # A mix does 16 draws: a quarter of the calls keeps its blocks about as long as the others'.
    records = {
        op: OpRecord(STEPS_PER_S, 1, max(1, spec.calls // 4) if op == MIX else spec.calls)
        for op in ops
    }
    for op in ops.values():
        for _ in range(2 if spec.table == WINDOWS else 8):
            op()  # warm-up
    measure_rounds(ops, records, spec.blocks)
    return {
        "table": spec.table,
        "implementation": spec.implementation,
        "capacity": spec.capacity,
        "batch": spec.batch,
        "version": version,
        "pid": os.getpid(),
        "ops": {op: record.to_json() for op, record in records.items()},
    }


def run_child(spec: PerSpec) -> dict[str, Any]:
    """:func:`measure` in a fresh ``python -m bench.prioritized_headline`` process.

    Raises:
        RuntimeError: the child failed (its stderr's tail is in the message).
    """
    return run_json_child("bench.prioritized_headline", spec.to_json(), threads=spec.threads,
                          what=f"{spec.implementation} ({spec.table})",
                          timeout_s=CHILD_TIMEOUT_S)


# ------------------------------------------------------------------------------ the parent
@dataclass(frozen=True)
class PerConfig:
    """What the row measures (see the module docstring)."""

    capacities: tuple[int, ...] = (1_000_000, 131_072)
    batches: tuple[int, ...] = (256, 1024)
    rounds: int = 5
    calls: int = 64
    blocks: int = 5
    window_capacity: int = 500
    window_envs: int = 1024
    window_batch: int = 1024
    seq_length: int = 8
    window_calls: int = 16
    threads: int = 1

    def specs(self, implementation: str, table: str) -> list[PerSpec]:
        """Every spec ``implementation`` runs in ``table``, one per case."""
        if table == WINDOWS:
            return [
                PerSpec(
                    WINDOWS, implementation, self.window_capacity, self.window_batch,
                    envs=self.window_envs, seq_length=self.seq_length,
                    calls=self.window_calls, blocks=self.blocks, threads=self.threads,
                )
            ]
        return [
            PerSpec(ROWS, implementation, capacity, batch, calls=self.calls, blocks=self.blocks,
                    threads=self.threads)
            for capacity in self.capacities
            for batch in self.batches
        ]


Key = tuple[str, int, int, str, str]
"""``(table, capacity, batch, op, implementation)``."""


@dataclass
class PerResults:
    """Rates per key over processes, versions, missing peers and the machine's load."""

    config: PerConfig
    stats: dict[Key, Stats] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, child: dict[str, Any], position: int) -> None:
        name = child["implementation"]
        self.versions.setdefault(f"{child['table']}/{name}", child["version"])
        for op, record in child["ops"].items():
            key = (child["table"], child["capacity"], child["batch"], op, name)
            stats = self.stats.setdefault(key, Stats(record["unit"]))
            stats.rates.append(float(record["rate"]))
            stats.faults.append(float(record["faults_per_call"]))
            stats.positions.append(position)

    def to_json(self) -> dict[str, Any]:
        return {
            "config": dataclasses.asdict(self.config),
            "versions": self.versions,
            "missing": self.missing,
            "load_average_1min": self.loads,
            "seconds": round(self.seconds, 1),
            "stats": [
                {"table": t, "capacity": c, "batch": b, "op": op, "implementation": impl,
                 **stats.to_json()}
                for (t, c, b, op, impl), stats in self.stats.items()
            ],
        }


def unavailable(implementation: str) -> str | None:
    """Why ``implementation`` cannot run here, or None."""
    lacking = missing_modules(implementation, REQUIRES)
    if lacking:
        return f"not installed (missing {', '.join(lacking)}; pip install -e '.[bench]')"
    if implementation == "torchrl":
        from bench.torchrl_ext import unavailable as torchrl_unavailable

        return torchrl_unavailable()
    return None


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(
    cfg: PerConfig,
    *,
    runner: Callable[[PerSpec], dict[str, Any]] = run_child,
    log: Callable[[str], None] = _log,
) -> PerResults:
    """Every round: each case's implementations in rotated order, one fresh child each."""
    started = time.perf_counter()
    results = PerResults(cfg)
    present: dict[str, list[str]] = {}
    for table, names in ((ROWS, ROW_IMPLEMENTATIONS), (WINDOWS, WINDOW_IMPLEMENTATIONS)):
        present[table] = []
        for name in names:
            reason = results.missing.get(name) or unavailable(name)
            if reason:
                results.missing[name] = reason
                log(f"prioritized: {name} skipped: {reason}")
            else:
                present[table].append(name)
    for round_ in range(cfg.rounds):
        for table in (ROWS, WINDOWS):
            order = rotation(present[table], cfg.rounds)[round_]
            cases = len(cfg.specs(order[0], table)) if order else 0
            for case in range(cases):
                for position, name in enumerate(order):
                    spec = cfg.specs(name, table)[case]
                    results.loads.append(os.getloadavg()[0])
                    log(
                        f"prioritized round {round_ + 1}/{cfg.rounds}: {table} "
                        f"{spec.capacity:,}x{spec.batch} {name} (load {results.loads[-1]:.2f})"
                    )
                    results.add(runner(spec), position)
    results.seconds = time.perf_counter() - started
    return results


# ------------------------------------------------------------------------------- the report
def _cell(stats: Stats | None) -> str:
    if stats is None:
        return "-"
    return f"{stats.median:,.0f} [{stats.low:,.0f}] {stats.median_faults:.1f}f"


def _ratio(base: Stats | None, peer: Stats | None, target: float | None) -> str:
    if base is None or peer is None:
        return "-"
    ratio = base.median / peer.median
    if target is None:
        return f"{ratio:.2f}x"
    return f"{ratio:.2f}x ({'met' if ratio >= target else 'missed'} >= {target:g}x)"


def render(results: PerResults) -> str:
    """The two tables (markdown): steps/s median [slowest process] and faults per call."""
    cfg = results.config
    loads = results.loads or [0.0]
    lines = [
        "prioritized replay (fresh process per measurement; steps/s median [slowest] Nf = "
        f"faults per call; {cfg.rounds} rounds; 1-min load average {min(loads):.1f}-"
        f"{max(loads):.1f}, median {statistics.median(loads):.1f})",
        "| capacity | batch | bufcore | torchrl | cpprb | multinomial | vs torchrl | vs cpprb "
        "| vs multinomial |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for capacity in cfg.capacities:
        for batch in cfg.batches:
            row = {
                name: results.stats.get((ROWS, capacity, batch, SAMPLE_UPDATE, name))
                for name in ROW_IMPLEMENTATIONS
            }
            base = row["bufcore"]
            ratios = [
                _ratio(base, row[name], row_target(name, batch))
                for name in ("torchrl", "cpprb", "multinomial")
            ]
            cells = [_cell(row[name]) for name in ROW_IMPLEMENTATIONS]
            lines.append(f"| {capacity:,} | {batch} | {' | '.join(cells)} | {' | '.join(ratios)} |")
    lines += [
        "",
        f"prioritized windows, online [{cfg.window_capacity}, {cfg.window_envs}] buffer, "
        f"{cfg.window_batch // cfg.seq_length} windows of {cfg.seq_length} (steps/s)",
        "| op | bufcore | torchrl PrioritizedSliceSampler | vs torchrl |",
        "|---|---|---|---|",
    ]
    for op in (STEP, MIX, SAMPLE_UPDATE):
        key = (WINDOWS, cfg.window_capacity, cfg.window_batch, op)
        base, peer = results.stats.get((*key, "bufcore")), results.stats.get((*key, "torchrl"))
        lines.append(
            f"| {op} | {_cell(base)} | {_cell(peer)} | {_ratio(base, peer, WINDOW_TARGET)} |"
        )
    for name, reason in results.missing.items():
        lines.append(f"{name}: {reason}")
    for name, version in sorted(results.versions.items()):
        lines.append(f"{name}: {version}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Child entry point: one JSON spec in, one JSON line out."""
    if len(argv) != 1:
        print("usage: python -m bench.prioritized_headline '<json spec>'", file=sys.stderr)
        return 2
    print(json.dumps(measure(PerSpec.from_json(argv[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

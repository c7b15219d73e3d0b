"""The demo run data-parallel over N CPU processes (``bufcore demo --nproc N``).

:func:`run_demo_ranks` spawns N ``python -m bufcore.runs.demo.ranks`` processes itself (no
``torchrun`` needed: the command stays one command, works offline, and each process can be
killed and reaped by the launcher). They join one gloo group through a FileStore in a
private temporary directory (gloo bound to the loopback interface) and each runs the demo
loop as one rank (:mod:`bufcore.runs.demo.spawned`; :class:`RankPlan` says what differs):

- envs split over ranks (:func:`bufcore.distributed.shard_bounds` of ``options.envs``), each
  rank stepping its envs from its own stream of the envs seed; each rank's buffers draw their
  own sample streams (``rank=`` is the group's rank);
- the agent's gradients are summed over the ranks and divided by N in the backward pass (a
  hook on each weight), so every rank keeps the same policy and value function;
- TD-EMA statistics are all-reduced (``TDStatsEMA`` does it whenever a group is up);
- each rank measures the EMD of its share of the motions and the curriculum round is
  gathered (:meth:`bufcore.Curriculum.apply_gathered`), identical on every rank;
- rank 0 writes ``metrics.jsonl``; ``train`` and ``buffer`` records carry each rank's
  figures under ``"ranks"``; the run checkpoint holds every rank's buffers
  (``checkpoint/buffers/<name>/rank_<r>/``, the expert buffer recorded as replicated).

With one rank (no group) the plan changes nothing: the run is today's demo, bit for bit.
``bufcore demo --resume`` of a run saved by N ranks spawns N ranks the same way
(:func:`spawn_ranks`, job ``resume``: :func:`bufcore.runs.demo.resume.resume_rank`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import torch

from bufcore import distributed
from bufcore.checks import check_int
from bufcore.curriculum.curriculum import Curriculum
from bufcore.curriculum.history import Round
from bufcore.persist.run_checkpoint import METRICS_FILE
from bufcore.rng import stream_seed
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.runlog import read_metrics

T = TypeVar("T")
# How long a rank waits in one collective before giving up (a dead peer).
COLLECTIVE_TIMEOUT_S = 300
# A spawned rank's job when it continues a run from its checkpoint (else the job is options).
RESUME_JOB = "resume"


@dataclass(frozen=True)
class RankPlan:
    """This process's place in a data-parallel demo run (rank 0 of 1 without a group).

    Attributes:
        rank: This process's rank.
        world: How many ranks run.
    """

    rank: int
    world: int

    @classmethod
    def current(cls) -> RankPlan:
        """The plan of this process, from the default process group (if any)."""
        return cls(distributed.rank(), distributed.world_size())

    def envs(self, total: int) -> int:
        """How many of ``total`` envs this rank steps.

        Raises:
            ValueError: fewer envs than ranks.
        """
        if total < self.world:
            raise ValueError(f"envs: {total} envs cannot give each of {self.world} ranks one")
        start, end = distributed.shard_bounds(total, rank=self.rank, world_size=self.world)
        return end - start

    def seed(self, seed: int) -> int:
        """This rank's seed derived from ``seed`` (``seed`` itself on rank 0)."""
        return stream_seed(seed, self.rank)

    def first(self, make: Callable[[], T]) -> T:
        """``make()`` run on rank 0 only, its JSON result handed to every rank (one process:
        ``make()`` itself)."""
        if self.world == 1:
            return make()
        gathered = distributed.all_gather_checked(lambda: make() if self.rank == 0 else None)
        return cast(T, gathered[0])

    def average_gradients(self, *weights: torch.Tensor) -> None:
        """Make each weight's gradient the mean over the ranks (a backward hook)."""
        if self.world == 1:
            return
        for weight in weights:
            # torch's stubs leave register_hook untyped.
            weight.register_hook(  # type: ignore[no-untyped-call]
                lambda grad: distributed.all_reduce_sum(grad) / self.world
            )

    def motions(self, count: int) -> range:
        """The motions (by position) whose EMD this rank measures."""
        return range(*distributed.shard_bounds(count, rank=self.rank, world_size=self.world))

    def apply(self, curriculum: Curriculum, emds: dict[int, float], step: int) -> Round:
        """One curriculum round of this rank's EMDs (gathered over the ranks)."""
        if self.world == 1:
            return curriculum.apply(emds, step=step)
        return curriculum.apply_gathered(emds, step=step)

    def per_rank(self, figures: dict[str, Any]) -> dict[str, Any]:
        """``per_rank=`` for a log call: the figures when several ranks run, else nothing
        (one process logs what it always logged)."""
        return {"per_rank": figures} if self.world > 1 else {}

    def run_fields(self) -> dict[str, Any]:
        """What the ``run`` record adds with several ranks."""
        return {"world_size": self.world} if self.world > 1 else {}


def run_demo_ranks(
    run_dir: str | os.PathLike[str], options: DemoOptions, *, nproc: int
) -> list[float]:
    """Run the demo on ``nproc`` spawned CPU processes (gloo) into ``run_dir``.

    Returns:
        The mean EMD of each evaluation round (rank 0's, the same on every rank).

    Raises:
        ValueError: ``nproc < 2`` (one process is :func:`bufcore.runs.demo.run_demo`), more
            ranks than envs, or the buffers would not fit in memory.
        FileExistsError: ``run_dir`` holds anything but a previous demo run.
        RuntimeError: a rank failed (the message holds its output's end).
    """
    from bufcore.runs.demo.rundir import check_memory, check_run_dir

    world = check_int(nproc, "nproc", minimum=2)
    RankPlan(0, world).envs(options.envs)
    run = Path(run_dir)
    check_memory(options)
    check_run_dir(run)
    spawn_ranks(run, world, json.dumps(options.to_json()))
    curve: list[float] = []
    offset = 0
    while True:  # read_metrics reads a bounded amount per call
        records, after = read_metrics(run / METRICS_FILE, offset)
        if after == offset:
            return curve
        curve += [float(r["mean_emd"]) for r in records if r["kind"] == "eval"]
        offset = after


def spawn_ranks(run: Path, world: int, job: str) -> None:
    """Spawn ``world`` ranks of the demo on ``run`` and wait for all of them.

    Args:
        run: The run directory (checked by the caller).
        world: How many ranks.
        job: What each rank does (:mod:`bufcore.runs.demo.spawned`): a new run's options as
            JSON, or :data:`RESUME_JOB`.

    Raises:
        RuntimeError: a rank failed (the others are killed; the message names the rank,
            whose traceback is in this process's output).
    """
    # The ranks meet through a file in a private directory (removed afterwards); their output
    # goes where this process's goes, so a failing rank's traceback is seen.
    with tempfile.TemporaryDirectory(prefix="bufcore-ranks-") as scratch:
        store = Path(scratch) / "store"
        env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
        processes: list[subprocess.Popen[bytes]] = []
        killed: set[int] = set()
        try:
            for rank in range(world):
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "bufcore.runs.demo.spawned", str(run), str(rank),
                     str(world), str(store), job], env=env,
                ))
            while any(p.poll() is None for p in processes):
                if any(p.poll() not in (None, 0) for p in processes):
                    break  # one failed: the others would wait for it until the timeout
                time.sleep(0.1)
        finally:
            for rank, process in enumerate(processes):
                if process.poll() is None:
                    process.kill()
                    killed.add(rank)
                process.wait()
    # The rank that failed, not one killed here because it did.
    failed = sorted([(r in killed, r, p.returncode) for r, p in enumerate(processes)
                     if p.returncode != 0])
    if failed:
        raise RuntimeError(f"demo rank {failed[0][1]} of {world} failed (exit "
                           f"{failed[0][2]}); its output is above")

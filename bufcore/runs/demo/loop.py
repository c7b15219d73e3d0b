"""The demo training run: a small curriculum-learning loop in the shape of BFM-Zero's.

One run, built only from bufcore:

1. Expert data: synthetic motions (:mod:`~bufcore.runs.demo.motions`) written as episode files
   with a motion list, read back with :func:`bufcore.load_expert_trajectories`.
2. Online data: parallel tracking envs (:mod:`~bufcore.runs.demo.env`) write one
   ``[1, envs]`` row per step into a :class:`~bufcore.TrajectoryDictBufferMultiDim`
   (``n_dim=2``, ``end_key="truncated"``, BFM-Zero's row layout). Each episode tracks a motion
   drawn by the motion bank's sampling weights, which the curriculum keeps equal to the expert
   buffer's priorities through its ``update_sampling_weight_by_id`` hook.
3. Every ``update_every`` steps: the policy takes a step on expert windows (``z`` from the fixed
   backward map), their ``z`` and as many random ones go into the :class:`~bufcore.ZBuffer`
   (which slot holds which kind is kept beside it, :mod:`~bufcore.runs.demo.zsource`),
   and the value function takes a TD step on online windows, weighted by TD-EMA.
4. Every ``eval_every`` steps: each motion is tracked from its first frame, its EMD to the
   expert frames is measured, and the :class:`~bufcore.Curriculum` re-prioritises the expert
   buffer.
5. The run checkpoint is published right after the first agent update (within seconds of the
   start, so a dashboard has every buffer to show early), every ``checkpoint_every`` rounds
   and at the end. Before each save the previous checkpoint is kept under
   ``checkpoints/step-<step>/`` (hard links, no copy), so earlier moments stay comparable.

With ``prioritized`` (``--prioritized``), the online buffer's windows are drawn by a
:class:`~bufcore.PrioritizedSampler`: after each TD step the rows of the windows just drawn get
the magnitude of their TD errors as priorities (``|td| + eps``, through the buffer's
``update_priority`` with the batch's ``"_index"``, so a row overwritten since is skipped), the
importance weights (``"_weight"``) multiply the TD-EMA weights in the value loss, and a
``replay`` record (:mod:`bufcore.runs.replay`) follows each ``buffer`` record.

Everything is logged to ``metrics.jsonl`` (kinds ``run``, with the plan ``total_steps``,
``train``, ``buffer``, ``eval``, ``checkpoint``, ``replay`` with ``prioritized``, and ``end``
once the last step is done; README "Run logs"). Given the same options the run is the same,
record for record, except the ``time`` field; without ``prioritized`` it is the run earlier
versions wrote (``tests/runs/test_demo_prioritized.py`` pins it).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.buffers.motions import load_expert_trajectories
from bufcore.buffers.online import TrajectoryDictBufferMultiDim
from bufcore.buffers.zbuffer import ZBuffer
from bufcore.curriculum.curriculum import Curriculum
from bufcore.curriculum.history import Round
from bufcore.curriculum.transport import emd
from bufcore.persist.run_checkpoint import (
    CHECKPOINT_DIR,
    HISTORY_DIR,
    keep_run_checkpoint,
    kept_name,
)
from bufcore.runs.demo.agent import BackwardMap, TrackingPolicy, ValueFunction
from bufcore.runs.demo.env import MotionBank, TrackingEnvs, track_all
from bufcore.runs.demo.motions import Motion, make_motions
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.demo.progress import Progress
from bufcore.runs.demo.ranks import RankPlan
from bufcore.runs.demo.rundir import (
    MOTIONS_DIR,
    WRITER,
    check_memory,
    check_run_dir,
    clear_history,
    write_motions,
)
from bufcore.runs.demo.state import loop_state
from bufcore.runs.demo.zsource import EXPERT, RANDOM, ZSources
from bufcore.runs.ranks import save_run_buffers
from bufcore.runs.replay import REPLAY_KIND, ReplayTally
from bufcore.runs.runlog import RunLogger
from bufcore.sampling.prioritized import PrioritizedSampler, Reduction
from bufcore.stats.td_ema import TDStatsEMA
from bufcore.stats.td_weighting import TDWeighting

# Env steps between buffer-statistics records.
BUFFER_EVERY = 25
# Quantile levels of the normalised TD errors logged per update (every half percent): the
# dashboard's weight preview reads the clipped fractions from them to within 0.5 points.
TD_QUANTILES = 201
# Decimals the logged quantiles keep (they are normalised, so this is 1e-4 of a std).
QUANTILE_DECIMALS = 4
_SEEDS = ("motions", "backward", "policy", "envs", "buffers", "z")
# The run's own generators (the buffers keep theirs), each seeded from its _SEEDS entry.
GENERATORS = ("motions", "backward", "policy", "envs")
# The prioritized sampler of --prioritized: Schaul et al.'s proportional variant's alpha and
# initial beta, DI-engine's eps, and a window weighing as its heaviest row.
PER_ALPHA = 0.6
PER_BETA = 0.4
PER_EPS = 1e-5
PER_REDUCTION: Reduction = "max"


@dataclass(frozen=True)
class DemoResult:
    """What a finished run reports.

    Attributes:
        run_dir: The run directory.
        mean_emd: Mean EMD over motions, one per evaluation round.
        last_emd: Motion id -> EMD of the last round.
        last_priority: Motion id -> the expert buffer's sampling probability at the end.
        options: The run's options.
    """

    run_dir: Path
    mean_emd: list[float]
    last_emd: dict[int, float]
    last_priority: dict[int, float]
    options: DemoOptions | None = None


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run on one torch thread, then restore the count: a reduction split over threads rounds
    differently, so records would depend on the machine's cores; the demo's small tensors are
    also faster on one thread (no handoffs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _seeds(seed: int) -> dict[str, int]:
    master = torch.Generator().manual_seed(seed)
    values = torch.randint(0, 2**62, (len(_SEEDS),), generator=master).tolist()
    return dict(zip(_SEEDS, values, strict=True))


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def run_demo(
    run_dir: str | os.PathLike[str],
    options: DemoOptions,
    *,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> DemoResult:
    """Run the demo into ``run_dir`` (created; a previous demo run there is replaced).

    Args:
        run_dir: Where ``metrics.jsonl``, ``motions/`` and ``checkpoint/`` go.
        options: The run's options.
        progress: Shows progress; none by default.
        clock: Wall-clock time for the log's ``time`` field (and ``--live`` pacing).
        sleep: How ``--live`` waits.

    Raises:
        FileExistsError: ``run_dir`` holds anything but a previous demo run's ``metrics.jsonl``,
            ``motions/`` and ``checkpoint/`` (see :func:`check_run_dir`); nothing is written
            then.
        NotADirectoryError: ``run_dir`` is a file.
        ValueError: the buffers would not fit in this machine's memory (nothing is written).
    """
    run = Path(run_dir)
    check_memory(options)
    check_run_dir(run)
    with _one_thread():
        return _run(run, options, progress, clock, sleep)


def _run(
    run: Path,
    options: DemoOptions,
    progress: Progress | None,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> DemoResult:
    """The run itself, once its directory and options passed (see :func:`run_demo`); as one
    rank of a process group, this rank's share of it (:mod:`bufcore.runs.demo.ranks`)."""
    plan = RankPlan.current()
    if plan.rank == 0:
        clear_history(run)
    loop = build_loop(run, options)
    loop.envs.reset(torch.ones(plan.envs(options.envs), dtype=torch.bool), loop.zbuffer)
    started = clock()
    with RunLogger(run, clock=clock) as logger:
        logger.log("run", 0, {**_run_record(options, loop.motions, loop.online),
                              **plan.run_fields()})
        drive(loop, 1, logger, progress, started=started, clock=clock, sleep=sleep)
    if progress is not None:
        progress.close()
    return loop.result()


@dataclass(frozen=True)
class Buffers:
    """The run's three buffers, when they come from a checkpoint (a resumed run)."""

    expert: TrajectoryDictBuffer
    online: TrajectoryDictBufferMultiDim
    zbuffer: ZBuffer


def build_loop(run: Path, options: DemoOptions, buffers: Buffers | None = None) -> _Loop:
    """Every part of the run as its first step finds it, the envs not yet reset; with
    ``buffers`` (a resumed run), those instead of new ones, and no file written. As one rank
    of a process group, this rank's share (:class:`RankPlan`)."""
    plan = RankPlan.current()
    seeds = _seeds(options.seed)
    generators = {name: _generator(seeds[name]) for name in GENERATORS}
    generators["envs"] = _generator(plan.seed(seeds["envs"]))  # each rank's envs differ
    motions = make_motions(
        options.motions,
        dim=options.dim,
        min_length=options.min_length,
        max_length=options.max_length,
        generator=generators["motions"],
    )
    if buffers is None:
        motion_list = Path(plan.first(lambda: str(write_motions(run / MOTIONS_DIR, motions))))
        expert = load_expert_trajectories(
            motion_list, run / MOTIONS_DIR, options.seq_length, "cpu", seed=seeds["buffers"]
        )
        online = TrajectoryDictBufferMultiDim(
            capacity=options.capacity,
            n_dim=2,
            seq_length=options.seq_length,
            end_key="truncated",
            output_key_t=["observation", "action", "z", "reward"],
            output_key_tp1=["observation", "terminated"],
            seed=seeds["buffers"] + 1,
            sampler=_sampler(options) if options.prioritized else None,
        )
        buffers = Buffers(expert, online, ZBuffer(options.z_capacity, options.z_dim,
                                                  seed=seeds["z"]))
    bank = MotionBank(motions, options.seq_length)
    curriculum = Curriculum(
        buffers.expert,
        min_val=options.min_val,
        max_val=options.max_val,
        scale=options.scale,
        mode=options.mode,
        update_sampling_weight_by_id=bank.update_sampling_weight_by_id,
    )
    encoder = BackwardMap(
        options.dim, options.seq_length, options.z_dim, generators["backward"]
    )
    policy = TrackingPolicy(
        options.dim, options.z_dim, lr=0.006, state_noise=0.15, generator=generators["policy"]
    )
    value = ValueFunction(options.dim, options.z_dim, lr=0.01)
    plan.average_gradients(policy.weight, value.weight)
    weighting = TDWeighting(
        TDStatsEMA("cpu", momentum=options.td_momentum, warmup_steps=options.td_warmup),
        beta=options.beta,
        min_weight=options.min_weight,
        max_weight=options.max_weight,
        quantiles=TD_QUANTILES,
    )
    own_envs = plan.envs(options.envs)
    envs = TrackingEnvs(
        bank,
        own_envs,
        encoder,
        mix=options.mix,
        action_noise=0.06,
        dynamics_noise=0.03,
        generator=generators["envs"],
    )
    return _Loop(run, options, motions, buffers, curriculum, encoder, policy, value, weighting,
                 bank, envs, generators, plan)


def drive(
    loop: _Loop,
    first: int,
    logger: RunLogger,
    progress: Progress | None,
    *,
    started: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> None:
    """Steps ``first`` to the last, then the ``end`` record; ``--live`` paces step ``s`` to
    end ``live_seconds * s / steps`` after ``started``."""
    options = loop.options
    for step in range(first, options.steps + 1):
        loop.env_step(step, logger)
        if progress is not None:
            progress.update(step, loop.status())
        if options.live_seconds:
            ahead = started + options.live_seconds * step / options.steps - clock()
            if ahead > 0:
                sleep(ahead)
    logger.log("end", options.steps, {"status": "finished"})


def run_rank(run: Path, options: DemoOptions) -> list[float]:
    """Run this process's rank of a data-parallel demo (the group is up, and the launcher
    checked ``run``: :func:`bufcore.runs.demo.ranks.run_demo_ranks`); the mean EMD per round."""
    with _one_thread():
        return _run(run, options, None, time.time, time.sleep).mean_emd


def updates(options: DemoOptions) -> int:
    """Agent updates the run makes: every ``update_every`` steps once a window fits."""
    return options.steps // options.update_every - options.seq_length // options.update_every


def _sampler(options: DemoOptions) -> PrioritizedSampler:
    """The online buffer's sampler with ``prioritized``: beta reaches 1 at the last update."""
    return PrioritizedSampler(
        alpha=PER_ALPHA, beta=PER_BETA, anneal_steps=max(1, updates(options)), eps=PER_EPS,
        reduction=PER_REDUCTION,
    )


def _run_record(
    options: DemoOptions, motions: list[Motion], online: TrajectoryDictBufferMultiDim
) -> dict[str, Any]:
    record = {
        "writer": WRITER,
        "total_steps": options.steps,
        "options": options.to_json(),
        "motions": {
            "motion_ids": [m.motion_id for m in motions],
            "length": [int(m.frames.shape[0]) for m in motions],
            "difficulty": [round(m.difficulty, 6) for m in motions],
        },
    }
    if isinstance(online.sampler, PrioritizedSampler):
        record["replay_sampler"] = online.sampler.config()
    return record


def reprioritize(
    online: TrajectoryDictBufferMultiDim, index: torch.Tensor, td: torch.Tensor
) -> int:
    """Give the rows a batch drew (its ``"_index"``) the magnitudes of their TD errors ``td``
    (``[windows, seq]``, slice-major as the rows) as priorities; the sampler stores
    ``|td| + eps``, skips rows overwritten since the draw, and a row drawn twice keeps its
    last value. Returns how many rows were updated."""
    return online.update_priority(index, td.abs().reshape(-1))


def _mean_emd(round_: Round) -> float:
    return sum(round_.emd.values()) / len(round_.emd)


def demo_result(run: Path, options: DemoOptions, curriculum: Curriculum) -> DemoResult:
    """What a run reports from its curriculum (its rounds, and its expert buffer's
    priorities), once its last step is done."""
    last = curriculum.history[-1]
    expert = curriculum.buffer
    return DemoResult(
        run_dir=run,
        mean_emd=[_mean_emd(r) for r in curriculum.history],
        last_emd=dict(last.emd),
        last_priority=dict(zip(expert.motion_ids, expert.priorities.tolist(), strict=True)),
        options=options,
    )


class _Loop:
    """The state of one run and its per-step work (split out of :func:`run_demo` to read)."""

    def __init__(
        self,
        run: Path,
        options: DemoOptions,
        motions: list[Motion],
        buffers: Buffers,
        curriculum: Curriculum,
        encoder: BackwardMap,
        policy: TrackingPolicy,
        value: ValueFunction,
        weighting: TDWeighting,
        bank: MotionBank,
        envs: TrackingEnvs,
        generators: dict[str, torch.Generator],
        plan: RankPlan,
    ) -> None:
        self.run, self.options, self.motions, self.plan = run, options, motions, plan
        self.expert, self.online, self.zbuffer = buffers.expert, buffers.online, buffers.zbuffer
        self.curriculum, self.encoder = curriculum, encoder
        self.policy, self.value, self.weighting = policy, value, weighting
        self.bank, self.envs, self.generators = bank, envs, generators
        self.generator = generators["policy"]
        self.episodes = 0
        self.z_sources = ZSources(self.zbuffer.capacity)
        self.tally = ReplayTally(self.online) if options.prioritized else None
        # The step of the checkpoint now at checkpoint/ (None before the first).
        self.saved_step: int | None = None

    def result(self) -> DemoResult:
        """What the run reports once its last step is done."""
        return demo_result(self.run, self.options, self.curriculum)

    def mean_emd(self) -> list[float]:
        """Mean EMD over motions, one per curriculum round so far."""
        return [_mean_emd(r) for r in self.curriculum.history]

    def status(self) -> str:
        """The progress bar's text: rounds so far and the last mean EMD."""
        curve = self.mean_emd()
        last = f"mean EMD {curve[-1]:.3f}" if curve else "no eval yet"
        return f"round {len(curve)}, {last}"

    def env_step(self, step: int, logger: RunLogger) -> None:
        """Step every env, then update, log, evaluate and checkpoint when they are due."""
        options = self.options
        rows = self.envs.step(self.policy, self.zbuffer)
        self.online.extend(rows.data)
        self.episodes += rows.episodes_done
        updated = step % options.update_every == 0 and step > options.seq_length
        if updated:
            logger.log("train", step, {**self.update(), "reward_mean": rows.reward_mean},
                       **self.plan.per_rank({"reward_mean": rows.reward_mean}))
        if step % BUFFER_EVERY == 0 or step == options.steps:
            logger.log("buffer", step, self.buffer_record(step),
                       **self.plan.per_rank({"transitions": self.online.size(),
                                             "episodes_finished": self.episodes}))
            if self.tally is not None:
                logger.log(REPLAY_KIND, step, self.tally.record())
        due = updated and self.saved_step is None  # the first update: checkpoint early
        if step % options.eval_every == 0 or step == options.steps:
            logger.log("eval", step, self.evaluate(step))
            rounds = len(self.curriculum.history)
            due = due or rounds % options.checkpoint_every == 0 or step == options.steps
        if due:
            logger.log("checkpoint", step, self.checkpoint(step))

    def update(self) -> dict[str, Any]:
        """One policy step on expert windows, z into the z buffer, one weighted TD step."""
        options = self.options
        seq, windows = options.seq_length, options.batch_size // options.seq_length
        expert = self.expert.sample(options.batch_size)
        state = expert["observation"]["state"].view(windows, seq, -1)[:, 0]
        future = expert["next"]["observation"]["state"].view(windows, seq, -1)
        z = self.encoder(future)
        policy_loss = self.policy.train_step(z, state, future[:, 0])
        scale = z.norm(dim=1).mean() / math.sqrt(options.z_dim)
        random_z = torch.randn(z.shape, generator=self.generator) * scale
        codes = torch.tensor([EXPERT, RANDOM]).repeat_interleave(len(z))
        self.z_sources.record(self.zbuffer.cursor, codes)
        self.zbuffer.add(torch.cat([z, random_z]))

        batch = self.online.sample(options.batch_size)
        now, after = batch["observation"], batch["next"]["observation"]
        values = self.value(now["state"], now["target"], batch["z"]).view(windows, seq)
        with torch.no_grad():
            following = self.value(after["state"], after["target"], batch["z"]).view(windows, seq)
            alive = (~batch["next"]["terminated"]).view(windows, seq)
            target = batch["reward"].view(windows, seq) + options.gamma * following * alive
        td = target - values
        mask = torch.ones(windows, seq, dtype=torch.bool)
        weights = self.weighting.weights(td.detach(), mask)
        if self.tally is not None:
            weights = weights * batch["_weight"].view(windows, seq)
        value_loss = (weights * td.pow(2)).sum() / mask.sum()
        self.value.step(value_loss)
        metrics = self.weighting.update(td.detach(), mask)
        if self.tally is not None:
            reprioritize(self.online, batch["_index"], td.detach())
            self.tally.add(batch["_index"])
        quantiles = metrics.pop("td/norm_quantiles")
        return {
            "policy_loss": policy_loss,
            "value_loss": float(value_loss.detach()),
            **{name: float(v) for name, v in metrics.items()},
            "td/norm_quantiles": [round(q, QUANTILE_DECIMALS) for q in quantiles.tolist()],
        }

    def buffer_record(self, step: int) -> dict[str, Any]:
        """Occupancy of the online and z buffers, and the online trajectories' lengths."""
        online, options = self.online, self.options
        lengths = online.trajectories().lengths
        need = options.seq_length + 1  # a window and the row after it
        return {
            "train": {
                "len": len(online),
                "capacity": online.capacity,
                "cursor": online.cursor,
                "full": online.is_full,
                "wraps": step // online.capacity,
                "transitions": online.size(),
                "trajectories": int(lengths.numel()),
                "mean_length": float(lengths.double().mean()),
                "samplable_trajectories": int((lengths >= need).sum()),
                "episodes_finished": self.episodes,
            },
            "z": {
                "len": len(self.zbuffer),
                "capacity": self.zbuffer.capacity,
                "full": self.zbuffer.is_full,
            },
        }

    def evaluate(self, step: int) -> dict[str, Any]:
        """Track every motion, apply the EMDs as a curriculum round; the ``eval`` record."""
        paths = track_all(self.bank, self.encoder, self.policy)
        frames = self.bank.frames
        emds = {
            m: emd(paths[m].double(), frames[m, : int(self.bank.lengths[m])].double())
            for m in self.plan.motions(len(paths))
        }
        round_ = self.plan.apply(self.curriculum, emds, step)
        probability = self.expert.priorities.double()
        entropy = float(-(probability * probability.clamp(min=1e-30).log()).sum())
        mean = _mean_emd(round_)
        ids = self.expert.motion_ids
        return {
            "round": len(self.curriculum.history),
            "motion_ids": ids,
            "emd": [round_.emd[m] for m in ids],
            "priority": [round_.priority[m] for m in ids],
            "probability": probability.tolist(),
            "mean_emd": mean,
            "entropy": entropy,
            "effective_motions": float(1.0 / probability.pow(2).sum()),
        }

    def checkpoint(self, step: int) -> dict[str, Any]:
        """Keep the previous run checkpoint, publish this one; the ``checkpoint`` record."""
        path = self.run / CHECKPOINT_DIR
        if self.saved_step is not None and self.plan.rank == 0:
            # Before the save, whose first collective the other ranks wait in meanwhile.
            keep_run_checkpoint(path, self.run / HISTORY_DIR / kept_name(self.saved_step))
        ema = self.weighting.ema
        save_run_buffers(
            path,
            {"train": self.online, "expert": self.expert, "z": self.zbuffer},
            replicated=["expert"],
            state={
                "writer": WRITER,
                "step": step,
                "round": len(self.curriculum.history),
                "seed": self.options.seed,
                "options": self.options.to_json(),
                "curriculum": self.curriculum.state_dict(),
                "td_ema": ema.state_dict(),
                "z_source": self.z_sources.state(len(self.zbuffer)),
                "agent": {
                    "backward_map": self.encoder.matrix.tolist(),
                    "policy": self.policy.state_dict(),
                    "value": self.value.state_dict(),
                },
            },
            loop=loop_state(self),  # what resuming needs beyond run.json (runs/demo/state.py)
        )
        self.saved_step = step
        return self.checkpoint_record()

    def checkpoint_record(self) -> dict[str, Any]:
        """The ``checkpoint`` record of the checkpoint just published."""
        return {"round": len(self.curriculum.history), "path": CHECKPOINT_DIR,
                "buffers": ["train", "expert", "z"]}

"""A run directory for the Replay statistics page, written by real bufcore buffers: the
metrics.jsonl an ``AdvancedReplayBuffer`` logs through ``RunLogger`` over a short loop, and
checkpoints of every kind the page reads."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from bufcore import (
    AdvancedReplayBuffer,
    DictBuffer,
    EpisodeReplayBuffer,
    NaiveReplayBuffer,
    PrioritizedSampler,
    RunLogger,
    TrajectoryDictBufferMultiDim,
)

# Buffer name -> kind, as the run's checkpoint/buffers/ holds them.
REPLAY_BUFFERS = {
    "rows": "DictBuffer",
    "windows": "TrajectoryDictBufferMultiDim",
    "advanced": "AdvancedReplayBuffer",
    "naive": "NaiveReplayBuffer",
    "episode": "EpisodeReplayBuffer",
}
# Steps of the logging loop (one replay record each).
LOOP_STEPS = 40
# The advanced buffer's throughput band (push/sample ratio).
THRUPUT_MIN, THRUPUT_MAX = 0.5, 3.0
# Items pushed and sampled per step, by 5-step phase (others: 8 and 8): pushing too fast, then
# sampling too fast, so the controller refuses a few pushes, then a few samples.
PHASES = {2: (40, 4), 5: (1, 24)}
# The online buffer's trajectories whose rows get high priorities (positions in trajectories()).
DOMINANT = (1, 4)


def write_replay_run(run: Path) -> None:
    """Write the run (``run/metrics.jsonl`` and ``run/checkpoint/buffers/<name>`` for each of
    :data:`REPLAY_BUFFERS`); deterministic apart from the log's wall times."""
    buffers = run / "checkpoint" / "buffers"
    buffers.mkdir(parents=True)
    _advanced_loop(run).save(buffers / "advanced")
    prioritized_rows().save(buffers / "rows")
    prioritized_windows().save(buffers / "windows")
    _naive().save(buffers / "naive")
    episode = EpisodeReplayBuffer(replay_buffer_size=4, seed=0)
    episode.push([[{"t": t} for t in range(n)] for n in (3, 6)], 0)
    episode.save(buffers / "episode")


def _advanced_loop(run: Path) -> AdvancedReplayBuffer:
    """A loop that pushes too fast, then samples too fast (:data:`PHASES`), updates
    priorities by lognormal "TD errors" and logs ``stats()`` at every step; the buffer after
    it."""
    # The log's times end about now, so the checkpoint (written after) follows its run.
    now = [time.time() - LOOP_STEPS]
    generator = torch.Generator().manual_seed(0)
    buffer = AdvancedReplayBuffer(
        replay_buffer_size=96, seed=0, storage="packed", clock=lambda: now[0],
        max_use=6, max_staleness=25,
        thruput_controller={"push_sample_rate_limit": {"max": THRUPUT_MAX, "min": THRUPUT_MIN},
                            "window_seconds": 30.0, "sample_min_limit_ratio": 1.0},
        monitor={"periodic_thruput": {"seconds": 30.0}},
    )
    with RunLogger(run, clock=lambda: now[0]) as log:
        for step in range(LOOP_STEPS):
            now[0] += 1.0
            pushes, samples = PHASES.get(step // 5, (8, 8))
            obs = torch.randn(pushes, 3, generator=generator)
            buffer.push([{"obs": row, "collect_iter": step} for row in obs], step)
            batch = buffer.sample(samples, step)
            if batch:
                td = torch.randn(len(batch), generator=generator).mul(1.5).exp()
                buffer.update({
                    "replay_unique_id": [item["replay_unique_id"] for item in batch],
                    "replay_buffer_idx": [item["replay_buffer_idx"] for item in batch],
                    "priority": td.tolist(),
                })
            buffer.log_stats(log, step)
    return buffer


def prioritized_rows() -> DictBuffer:
    """A DictBuffer with a PrioritizedSampler whose priorities span a few decades."""
    generator = torch.Generator().manual_seed(1)
    buffer = DictBuffer(capacity=256, seed=0,
                        sampler=PrioritizedSampler(alpha=0.6, beta=0.4, anneal_steps=1000))
    buffer.extend({"obs": torch.randn(200, 3, generator=generator)})
    for _ in range(6):
        index = buffer.sample_index(64, generator=generator)
        buffer.update_priority(index, torch.randn(64, generator=generator).mul(2.0).exp())
    return buffer


def prioritized_windows() -> TrajectoryDictBufferMultiDim:
    """An online buffer (3 envs) with prioritized windows: the rows of the trajectories in
    :data:`DOMINANT` get priority 50, every other row 0.5."""
    generator = torch.Generator().manual_seed(2)
    rows, envs = 60, 3
    done = torch.zeros(rows, envs, dtype=torch.bool)
    for env, ends in enumerate(((9, 29, 44, 59), (14, 39, 59), (7, 19, 33, 49, 59))):
        done[list(ends), env] = True
    buffer = TrajectoryDictBufferMultiDim(
        capacity=64, n_dim=2, seq_length=4, seed=0, output_key_t=["observation"],
        output_key_tp1=["observation"], sampler=PrioritizedSampler(alpha=0.7, beta=0.5),
    )
    buffer.extend({"observation": torch.randn(rows, envs, 2, generator=generator),
                   "done": done})
    table = buffer.trajectories()
    priority = torch.full((rows, envs), 0.5, dtype=torch.float64)
    for position in DOMINANT:
        env, start, stop = (int(table.env[position]), int(table.start[position]),
                            int(table.stop[position]))
        priority[start : stop + 1, env] = 50.0
    # Every row at once, as a batch's _index: one extend wrote them all, so they share the
    # write count any drawn row carries.
    written = int(buffer.sample_index(4, 4, generator=generator).writes[0])
    flat = torch.arange(rows * envs)
    buffer.update_priority(torch.stack([flat, torch.full_like(flat, written)], 1),
                           priority.reshape(-1))
    return buffer


def _naive() -> NaiveReplayBuffer:
    """A naive buffer whose items were sampled a few times (use counts, collect_iter)."""
    buffer = NaiveReplayBuffer(replay_buffer_size=32, seed=0)
    for step in range(6):
        buffer.push([{"obs": torch.zeros(2), "collect_iter": step} for _ in range(6)], step)
        buffer.sample(8, step)
    return buffer

"""A process for the disk buffer's crash test: forks children that add trajectories until killed.

Run as a script, it imports bufcore once and serves commands from stdin, one per line, answering
each with one line:

- ``add PATH``: fork a child that opens the buffer directory ``PATH`` with ``auto_save`` (loading
  it first when it holds one) and adds :func:`generation` ``k``, ``k + 1``, ... forever, where
  ``k`` follows the largest generation its index names. Answers the child's pid.
- ``reap PID``: wait for that child to end. Answers its wait status.

Forking from a process that already imported torch keeps each start at milliseconds.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import torch

from bufcore import Trajectory, TrajectoryReplayBuffer


def generation(k: int) -> Trajectory:
    """Trajectory ``k``: ``max_episode_length`` is ``k`` and every value of it equals ``k``;
    its length varies with ``k`` so that kills land in writes of different lengths."""
    steps, envs = 1 + k % 7, 2
    value = torch.full((steps, envs), float(k))
    return Trajectory(
        max_episode_length=k,
        model_weights_id=f"g{k % 3}",
        rewards=value,
        actions=value[..., None].repeat(1, 1, 2),
        curr_obs={"state": value[..., None].repeat(1, 1, 2048)},
    )


def _add_forever(path: Path) -> None:
    buffer = TrajectoryReplayBuffer(
        auto_save=True, auto_save_path=str(path), cache_size=2, sample_window_size=4
    )
    k = 0
    if (path / "trajectory_index.json").exists():
        buffer.load_checkpoint(path)
        entries = json.loads((path / "trajectory_index.json").read_text())["trajectory_index"]
        k = 1 + max((entry["max_episode_length"] for entry in entries.values()), default=-1)
    while True:
        buffer.add_trajectories([generation(k)])
        k += 1


def main() -> None:
    for line in sys.stdin:
        command, argument = line.split()
        if command == "add":
            pid = os.fork()
            if pid == 0:
                try:
                    _add_forever(Path(argument))
                except BaseException:
                    traceback.print_exc()
                    sys.stderr.flush()
                    os._exit(1)
                os._exit(0)
            answer = pid
        elif command == "reap":
            _, answer = os.waitpid(int(argument), 0)
        else:
            raise ValueError(f"unknown command {line!r}")
        print(answer, flush=True)


if __name__ == "__main__":
    main()

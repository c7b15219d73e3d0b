"""Trajectories for the disk buffer's tests: every value says which trajectory and row it is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from bufcore import Trajectory


def trajectory(number: int, steps: int = 3, envs: int = 2, *, weights: str = "w") -> Trajectory:
    """A trajectory whose row ``i`` (step ``i // B``, env ``i % B``) holds ``1000 * number + i``
    in ``rewards``, ``actions[..., 0]`` and ``curr_obs['state'][..., 0]``; ``dones`` carries
    one epoch row (dropped from the rows)."""
    values = (1000 * number + torch.arange(steps * envs)).reshape(steps, envs).double()
    return Trajectory(
        max_episode_length=steps,
        model_weights_id=weights,
        actions=values[..., None].repeat(1, 1, 2).float(),
        rewards=values.float(),
        dones=torch.cat([torch.ones(1, envs, dtype=torch.bool), values.long() % 2 == 1]),
        prev_logprobs=-values.float(),
        curr_obs={"state": values[..., None].repeat(1, 1, 3).float()},
        next_obs={"state": (values + 0.5)[..., None].repeat(1, 1, 3).float()},
    )


def sampled_ids(batch: dict[str, Any]) -> list[int]:
    """Which trajectory each sampled row came from."""
    return [int(v) // 1000 for v in batch["rewards"].tolist()]


def assert_consistent(batch: dict[str, Any]) -> None:
    """Every leaf of each sampled row comes from the same trajectory row."""
    rewards = batch["rewards"]
    assert torch.equal(batch["actions"][:, 0], rewards)
    assert torch.equal(batch["prev_logprobs"], -rewards)
    assert torch.equal(batch["curr_obs"]["state"][:, 2], rewards)
    assert torch.equal(batch["next_obs"]["state"][:, 0], rewards + 0.5)
    assert torch.equal(batch["dones"], rewards.long() % 2 == 1)


def write_rlinf_directory(
    path: Path, trajectories: list[Trajectory], *, with_files: list[int] | None = None
) -> None:
    """A directory laid out exactly as RLinf's buffer writes it: ``torch.save`` of the dict of
    non-None fields (CPU clones), ``metadata.json`` and ``trajectory_index.json`` as its
    ``json.dump`` writes them; ``with_files``: the ids whose files exist (all by default)."""
    path.mkdir(parents=True)
    index: dict[str, Any] = {}
    total = 0
    for number, item in enumerate(trajectories):
        fields = {
            name: value for name, value in vars(item).items() if value is not None
        }
        if with_files is None or number in with_files:
            torch.save(fields, path / f"trajectory_{number}_{item.model_weights_id}.pt")
        shape = item.prev_logprobs.shape if item.prev_logprobs is not None else item.rewards.shape
        index[str(number)] = {
            "num_samples": shape[0] * shape[1], "trajectory_id": number,
            "max_episode_length": item.max_episode_length, "shape": list(shape),
            "model_weights_id": item.model_weights_id,
        }
        total += shape[0] * shape[1]
    with (path / "metadata.json").open("w") as stream:
        json.dump({"trajectory_format": "pt", "size": len(trajectories), "total_samples": total,
                   "trajectory_counter": len(trajectories), "seed": 1234}, stream)
    with (path / "trajectory_index.json").open("w") as stream:
        json.dump({"trajectory_index": index,
                   "trajectory_id_list": list(range(len(trajectories)))}, stream)

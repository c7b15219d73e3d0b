"""Parallel tracking environments: each env follows one expert motion with the demo's policy.

State dynamics are an integrator with a little noise, ``s' = s + action + noise``; the reward is
minus the distance to the motion's next frame. An env starts each episode on a motion drawn by
the motion bank's sampling weights, at a random frame of its first half, and runs to the
motion's last frame. The curriculum sets those weights after each round through the bank's
``update_sampling_weight_by_id``, as BFM-Zero's sets its simulator's motion library. Rows come
out in BFM-Zero's online layout: row ``t`` holds the observation, the action taken there and its
reward, with the ``truncated`` flag of the previous step, so an episode's last row is its final
observation (flagged, action and reward 0) and the next row is the reset.

With probability ``mix`` an episode explores instead of tracking: it holds one ``z`` drawn from
the z buffer for the whole episode (BFM-Zero's mixed rollouts) rather than encoding the motion's
upcoming frames at every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from bufcore.buffers.zbuffer import ZBuffer
from bufcore.errors import StateError
from bufcore.runs.demo.agent import BackwardMap, TrackingPolicy
from bufcore.runs.demo.motions import Motion

# What TrackingEnvs.state_dict saves: every env's episode as it stands.
_EPISODE = ("motion", "frame", "state", "explore", "held_z", "truncated")


class MotionBank:
    """All motions padded into one ``[M, max_len + horizon, dim]`` tensor (last frame repeated),
    and the weights episodes draw them by (the simulator's motion library in BFM-Zero).

    Args:
        motions: The motions, ``motions[i].motion_id == i``.
        horizon: Frames a ``z`` looks ahead.

    Attributes:
        sampling_prob: ``[M]`` float32 probability of each motion starting an episode,
            uniform until :meth:`update_sampling_weight_by_id`.
    """

    def __init__(self, motions: Sequence[Motion], horizon: int) -> None:
        self.lengths = torch.tensor([m.frames.shape[0] for m in motions])
        longest = int(self.lengths.max())
        dim = motions[0].frames.shape[1]
        self.frames = torch.empty(len(motions), longest + horizon + 1, dim)
        for i, motion in enumerate(motions):
            length = motion.frames.shape[0]
            self.frames[i, :length] = motion.frames
            self.frames[i, length:] = motion.frames[-1]
        self.horizon = horizon
        self.sampling_prob = torch.full((len(motions),), 1.0 / len(motions))

    def update_sampling_weight_by_id(
        self,
        priorities: Sequence[float],
        motions_id: Sequence[int],
        file_name: Mapping[int, str] | None = None,
    ) -> None:
        """Replace :attr:`sampling_prob` (the curriculum's hook; BFM-Zero's signature).

        The listed motions get their priorities normalised to sum 1, the others 0, as in
        BFM-Zero. ``file_name`` is accepted and not checked: the demo's motions are not named.

        Raises:
            ValueError: lengths differ, a motion id is out of range, or the priorities are
                negative, not finite or all zero.
        """
        weights = torch.tensor(list(priorities), dtype=torch.float64)
        ids = torch.tensor(list(motions_id), dtype=torch.int64)
        if weights.shape != ids.shape:
            raise ValueError(
                f"priorities: expected one per motion id, got {len(weights)} for {len(ids)}"
            )
        count = len(self.sampling_prob)
        if bool(((ids < 0) | (ids >= count)).any()):
            raise ValueError(f"motions_id: expected ids in [0, {count}), got {ids.tolist()}")
        if not bool(torch.isfinite(weights).all()) or bool((weights < 0).any()):
            raise ValueError(f"priorities: expected finite values >= 0, got {weights.tolist()}")
        full = torch.zeros(count, dtype=torch.float64)
        full[ids] = weights
        total = float(full.sum())
        if total <= 0:
            raise ValueError("priorities: every motion would have probability 0")
        # Normalised in float64 then stored as float32, as the expert buffer stores its own.
        self.sampling_prob = (full / total).to(torch.float32)

    def windows(self, motion: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
        """``[n, horizon, dim]``: frames ``frame + 1 .. frame + horizon`` of each motion."""
        ahead = frame[:, None] + torch.arange(1, self.horizon + 1)
        return self.frames[motion[:, None], ahead]


@dataclass
class StepRows:
    """One env step as online-buffer leaves, each ``[1, E, ...]``."""

    data: dict[str, object]
    episodes_done: int
    reward_mean: float


class TrackingEnvs:
    """``envs`` environments stepping together.

    Args:
        bank: The motions.
        envs: Number of environments.
        encoder: The backward map that turns upcoming frames into ``z``.
        mix: Probability that an episode explores with a ``z`` from the z buffer.
        action_noise: Exploration noise added to the policy's action.
        dynamics_noise: Noise of the integrator.
        generator: Every random choice.
    """

    def __init__(
        self,
        bank: MotionBank,
        envs: int,
        encoder: BackwardMap,
        *,
        mix: float,
        action_noise: float,
        dynamics_noise: float,
        generator: torch.Generator,
    ) -> None:
        self.bank = bank
        self.envs = envs
        self.encoder = encoder
        self.mix = mix
        self.action_noise = action_noise
        self.dynamics_noise = dynamics_noise
        self._generator = generator
        dim = bank.frames.shape[2]
        self.motion = torch.zeros(envs, dtype=torch.int64)
        self.frame = torch.zeros(envs, dtype=torch.int64)
        self.state = torch.zeros(envs, dim)
        self.explore = torch.zeros(envs, dtype=torch.bool)
        self.held_z = torch.zeros(envs, encoder.matrix.shape[1])
        self.truncated = torch.zeros(envs, dtype=torch.bool)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Each env's episode as it stands (motion, frame, state, exploring, held ``z``, last
        ``truncated``); the generator is the caller's to save."""
        return {name: getattr(self, name).clone() for name in _EPISODE}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Continue the episodes of a :meth:`state_dict`; nothing changes unless all fits.

        Raises:
            StateError: a part is missing, or of another shape or dtype than these envs'.
        """
        for name in _EPISODE:
            saved, now = state.get(name), getattr(self, name)
            if not isinstance(saved, torch.Tensor) or saved.shape != now.shape or (
                saved.dtype != now.dtype
            ):
                raise StateError("state", f"envs[{name!r}]: expected a {now.dtype} tensor of "
                                          f"shape {tuple(now.shape)}, got {saved!r:.80}")
        for name in _EPISODE:
            setattr(self, name, state[name].clone())

    def reset(self, which: torch.Tensor, zbuffer: ZBuffer) -> None:
        """Start new episodes in the envs ``which`` (a bool mask), on motions drawn by the
        bank's ``sampling_prob``."""
        count = int(which.sum())
        if count == 0:
            return
        motion = torch.multinomial(
            self.bank.sampling_prob, count, replacement=True, generator=self._generator
        )
        half = (self.bank.lengths[motion] // 2).clamp(min=1)
        frame = (torch.rand(count, generator=self._generator) * half).long()
        explore = torch.rand(count, generator=self._generator) < self.mix
        self.motion[which] = motion
        self.frame[which] = frame
        self.state[which] = self.bank.frames[motion, frame]
        if not zbuffer.empty():
            self.explore[which] = explore
            self.held_z[which] = zbuffer.sample(count)
        else:
            self.explore[which] = False

    def step(self, policy: TrackingPolicy, zbuffer: ZBuffer) -> StepRows:
        """Act in every env and return the row this step writes to the online buffer."""
        final = self.frame + 1 >= self.bank.lengths[self.motion]
        tracking_z = self.encoder(self.bank.windows(self.motion, self.frame))
        z = torch.where(self.explore[:, None], self.held_z, tracking_z)
        target = self.bank.frames[self.motion, self.frame]
        action = policy.act(z, self.state)
        action += self.action_noise * torch.randn(action.shape, generator=self._generator)
        action[final] = 0.0
        following = self.state + action
        following += self.dynamics_noise * torch.randn(following.shape, generator=self._generator)
        next_target = self.bank.frames[self.motion, self.frame + 1]
        reward = -(following - next_target).norm(dim=1)
        reward[final] = 0.0
        rows = {
            "observation": {"state": self.state[None].clone(), "target": target[None]},
            "action": action[None],
            "z": z[None],
            "reward": reward[None, :, None],
            "terminated": torch.zeros(1, self.envs, 1, dtype=torch.bool),
            "truncated": final[None, :, None].clone(),
            "motion_id": self.motion[None].clone(),
        }
        live = ~final
        reward_mean = float(reward[live].mean()) if bool(live.any()) else 0.0
        self.state = torch.where(final[:, None], self.state, following)
        self.frame = torch.where(final, self.frame, self.frame + 1)
        self.reset(final, zbuffer)
        return StepRows(rows, int(final.sum()), reward_mean)


@torch.no_grad()
def track_all(
    bank: MotionBank, encoder: BackwardMap, policy: TrackingPolicy
) -> list[torch.Tensor]:
    """Track every motion from its first frame without noise; ``[L_m, dim]`` states each."""
    count, longest = bank.frames.shape[0], int(bank.lengths.max())
    motion = torch.arange(count)
    state = bank.frames[:, 0].clone()
    states = [state]
    for t in range(longest - 1):
        frame = torch.full((count,), t)
        state = state + policy.act(encoder(bank.windows(motion, frame)), state)
        states.append(state)
    path = torch.stack(states, dim=1)
    return [path[m, : int(bank.lengths[m])] for m in range(count)]

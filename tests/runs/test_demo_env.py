"""The demo's tracking envs and agent: BFM-Zero's row layout, curriculum-drawn motions, learning."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import ZBuffer, load_buffer
from bufcore.runs.demo import run_demo
from bufcore.runs.demo.agent import BackwardMap, TrackingPolicy
from bufcore.runs.demo.env import MotionBank, TrackingEnvs
from bufcore.runs.demo.motions import make_motions
from tests.support import TINY_DEMO


def setup(envs: int = 6) -> tuple[MotionBank, TrackingEnvs, TrackingPolicy, ZBuffer]:
    generator = torch.Generator().manual_seed(0)
    motions = make_motions(3, dim=2, min_length=12, max_length=12, generator=generator)
    bank = MotionBank(motions, horizon=4)
    encoder = BackwardMap(2, 4, 3, generator)
    policy = TrackingPolicy(2, 3, lr=0.01, state_noise=0.1, generator=generator)
    with torch.no_grad():
        policy.weight.fill_(0.1)  # some nonzero action
    env = TrackingEnvs(
        bank, envs, encoder, mix=0.0, action_noise=0.0, dynamics_noise=0.0, generator=generator
    )
    return bank, env, policy, ZBuffer(8, 3)


def test_an_episode_ends_on_a_flagged_final_row_with_no_action_or_reward() -> None:
    _, env, policy, zbuffer = setup()
    env.reset(torch.ones(6, dtype=torch.bool), zbuffer)
    rows = [env.step(policy, zbuffer).data for _ in range(12)]
    truncated = torch.stack([r["truncated"][0, :, 0] for r in rows])  # type: ignore[index]
    action = torch.stack([r["action"][0] for r in rows])  # type: ignore[index]
    reward = torch.stack([r["reward"][0, :, 0] for r in rows])  # type: ignore[index]
    assert truncated.any()
    assert bool((action[truncated] == 0).all()) and bool((reward[truncated] == 0).all())
    assert bool((action[~truncated] != 0).any(dim=-1).all())


def test_the_row_after_a_final_row_is_a_reset_to_an_expert_frame() -> None:
    _, env, policy, zbuffer = setup()
    env.reset(torch.ones(6, dtype=torch.bool), zbuffer)
    previous = env.step(policy, zbuffer).data
    for _ in range(20):
        rows = env.step(policy, zbuffer).data
        ended = previous["truncated"][0, :, 0]  # type: ignore[index]
        state = rows["observation"]["state"][0]  # type: ignore[index]
        target = rows["observation"]["target"][0]  # type: ignore[index]
        assert torch.equal(state[ended], target[ended])  # a reset starts on the motion
        previous = rows


def test_motions_are_drawn_by_priority_and_a_zero_priority_motion_never_runs() -> None:
    bank, env, policy, zbuffer = setup(envs=64)
    bank.update_sampling_weight_by_id(priorities=[0.0, 1.0, 3.0], motions_id=[0, 1, 2])
    env.reset(torch.ones(64, dtype=torch.bool), zbuffer)
    seen = [env.motion.clone()]
    for _ in range(40):
        env.step(policy, zbuffer)
        seen.append(env.motion.clone())
    counts = torch.bincount(torch.cat(seen), minlength=3)
    assert counts[0] == 0 and counts[2] > counts[1]


def test_policy_steps_on_the_same_windows_lower_the_tracking_error() -> None:
    generator = torch.Generator().manual_seed(1)
    policy = TrackingPolicy(2, 3, lr=0.05, state_noise=0.0, generator=generator)
    z, state = torch.randn(64, 3, generator=generator), torch.randn(64, 2, generator=generator)
    target = state + z[:, :2] * 0.5
    first = policy.train_step(z, state, target)
    for _ in range(200):
        last = policy.train_step(z, state, target)
    assert last < 0.1 * first


def test_the_bank_replaces_its_weights_by_the_normalised_priorities() -> None:
    bank, *_ = setup()
    assert bank.sampling_prob.tolist() == pytest.approx([1 / 3] * 3)
    bank.update_sampling_weight_by_id(priorities=[1.0, 3.0], motions_id=[2, 0], file_name=None)
    assert bank.sampling_prob.tolist() == pytest.approx([0.75, 0.0, 0.25])
    assert bank.sampling_prob.dtype == torch.float32


@pytest.mark.parametrize(
    ("priorities", "motions_id", "match"),
    [
        ([1.0], [0, 1], "expected one per motion id"),
        ([1.0, 1.0], [0, 3], r"motions_id: expected ids in \[0, 3\)"),
        ([1.0, -1.0], [0, 1], "expected finite values >= 0"),
        ([1.0, math.nan], [0, 1], "expected finite values >= 0"),
        ([0.0, 0.0], [0, 1], "every motion would have probability 0"),
    ],
)
def test_bad_weights_are_refused_and_leave_the_bank_as_it_was(
    priorities: list[float], motions_id: list[int], match: str
) -> None:
    bank, *_ = setup()
    before = bank.sampling_prob.clone()
    with pytest.raises(ValueError, match=match):
        bank.update_sampling_weight_by_id(priorities, motions_id)
    assert torch.equal(bank.sampling_prob, before)


def test_the_demo_curriculum_reaches_the_bank_through_its_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[torch.Tensor] = []
    original = MotionBank.update_sampling_weight_by_id

    def recording(bank: MotionBank, **kwargs: Any) -> None:
        original(bank, **kwargs)
        received.append(bank.sampling_prob.clone())

    monkeypatch.setattr(MotionBank, "update_sampling_weight_by_id", recording)
    run_demo(tmp_path / "run", TINY_DEMO)
    expert = load_buffer(tmp_path / "run" / "checkpoint" / "buffers" / "expert")
    assert len(received) == TINY_DEMO.steps // TINY_DEMO.eval_every
    by_motion = torch.zeros(len(expert.motion_ids))
    by_motion[torch.tensor(expert.motion_ids)] = expert.priorities
    assert torch.equal(received[-1], by_motion)

"""``bufcore.resume``: each piece a loop needs comes back as saved, and what cannot be resumed
is refused with a typed error saying why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import bufcore
from bufcore import (
    Curriculum,
    DictBuffer,
    MissingStateError,
    NewerFormatError,
    NoCheckpointError,
    NotARunError,
    ResumeError,
    TDStatsEMA,
    TrajectoryDictBuffer,
)
from bufcore.errors import CorruptCheckpointError
from bufcore.persist.run_checkpoint import save_run_checkpoint
from bufcore.runs.demo.agent import BackwardMap, TrackingPolicy, ValueFunction
from bufcore.runs.demo.env import MotionBank, TrackingEnvs
from bufcore.runs.demo.motions import make_motions
from bufcore.runs.demo.zsource import ZSources
from bufcore.runs.runlog import RunLogger


def _expert() -> TrajectoryDictBuffer:
    episodes = [{"observation": torch.arange(20, dtype=torch.float32).reshape(10, 2) + m,
                 "motion_id": torch.full((10,), m)} for m in (0, 1)]
    return TrajectoryDictBuffer(episodes, seq_length=3, seed=5)


class Saved:
    """A small run saved with every piece, and the live objects as they were at the save."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self.transitions = DictBuffer(capacity=16, seed=3)
        self.transitions.extend({"obs": torch.randn(20, 2, generator=torch.Generator()
                                                    .manual_seed(1))})
        self.transitions.sample(4)  # the stream has moved on from its seed
        self.expert = _expert()
        self.curriculum = Curriculum(self.expert, mode="lin")
        self.curriculum.apply({0: 1.5, 1: 0.7}, step=10)
        self.ema = TDStatsEMA("cpu", warmup_steps=2)
        self.ema.update(torch.randn(4, 3, generator=torch.Generator().manual_seed(2)),
                        torch.ones(4, 3, dtype=torch.bool))
        self.generator = torch.Generator().manual_seed(9)
        torch.rand(3, generator=self.generator)
        self.extra = {"counts": torch.arange(5, dtype=torch.int64), "flags": torch.tensor(
            [True, False]), "nested": [{"lr": 0.25, "name": "adam"}, None], "episodes": 7}
        save_run_checkpoint(
            run / "checkpoint",
            buffers={"train": self.transitions.save, "expert": self.expert.save},
            state={"step": 10, "options": {"lr": 0.1}, "curriculum": self.curriculum.state_dict(),
                   "td_ema": self.ema.state_dict()},
            loop={0: {"generators": bufcore.generators_state({"noise": self.generator}),
                      **self.extra}},
        )


@pytest.fixture
def saved(tmp_path: Path) -> Saved:
    return Saved(tmp_path / "run")


def test_the_step_and_options_come_back(saved: Saved) -> None:
    resumed = bufcore.resume(saved.run)
    assert (resumed.step, resumed.options, resumed.rank) == (10, {"lr": 0.1}, 0)


def test_a_buffer_comes_back_with_its_rows_and_continues_its_sample_stream(saved: Saved) -> None:
    resumed = bufcore.resume(saved.run)
    buffer = resumed.buffers["train"]
    assert torch.equal(buffer.sample(5)["obs"], saved.transitions.sample(5)["obs"])


def test_the_curriculum_comes_back_with_its_rounds_and_the_expert_priorities(
    saved: Saved,
) -> None:
    resumed = bufcore.resume(saved.run)
    assert resumed.curriculum is not None
    assert resumed.curriculum.history == saved.curriculum.history
    assert torch.equal(resumed.buffers["expert"].priorities, saved.expert.priorities)


def test_the_td_ema_comes_back_and_continues_exactly(saved: Saved) -> None:
    resumed = bufcore.resume(saved.run)
    assert resumed.td_ema is not None
    batch = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    mask = torch.ones(3, 4, dtype=torch.bool)
    resumed.td_ema.update(batch, mask)
    saved.ema.update(batch, mask)
    assert resumed.td_ema.state_dict() == saved.ema.state_dict()


def test_a_generator_comes_back_at_its_saved_state(saved: Saved) -> None:
    resumed = bufcore.resume(saved.run)
    assert torch.equal(torch.rand(4, generator=resumed.generators["noise"]),
                       torch.rand(4, generator=saved.generator))


def test_the_rest_of_the_loop_state_comes_back_tensor_for_tensor(saved: Saved) -> None:
    loop = bufcore.resume(saved.run).loop
    assert torch.equal(loop["counts"], saved.extra["counts"])
    assert loop["counts"].dtype == torch.int64 and loop["flags"].dtype == torch.bool
    assert torch.equal(loop["flags"], saved.extra["flags"])
    assert loop["nested"] == saved.extra["nested"] and loop["episodes"] == 7


def test_a_run_without_a_curriculum_or_td_ema_resumes_without_them(tmp_path: Path) -> None:
    save_run_checkpoint(tmp_path / "checkpoint", buffers={}, state={"step": 0}, loop={0: {}})
    resumed = bufcore.resume(tmp_path)
    assert (resumed.curriculum, resumed.td_ema, resumed.buffers) == (None, None, {})


# ------------------------------------------------------------------ demo pieces
def _envs(generator: torch.Generator) -> tuple[TrackingEnvs, TrackingPolicy, bufcore.ZBuffer]:
    motions = make_motions(3, dim=2, min_length=10, max_length=12,
                           generator=torch.Generator().manual_seed(0))
    bank = MotionBank(motions, 3)
    encoder = BackwardMap(2, 3, 4, torch.Generator().manual_seed(1))
    policy = TrackingPolicy(2, 4, lr=0.01, state_noise=0.1, generator=generator)
    envs = TrackingEnvs(bank, 5, encoder, mix=0.5, action_noise=0.1, dynamics_noise=0.1,
                        generator=generator)
    zbuffer = bufcore.ZBuffer(8, 4, seed=0)
    zbuffer.add(torch.randn(8, 4, generator=torch.Generator().manual_seed(2)))
    envs.reset(torch.ones(5, dtype=torch.bool), zbuffer)
    return envs, policy, zbuffer


def test_demo_envs_continue_their_episodes_from_their_state() -> None:
    first, policy, zbuffer = _envs(torch.Generator().manual_seed(3))
    for _ in range(4):
        first.step(policy, zbuffer)
    second, _, _ = _envs(torch.Generator().manual_seed(3))
    second.load_state_dict(first.state_dict())
    second._generator.set_state(first._generator.get_state())
    assert str(first.step(policy, zbuffer).data) == str(second.step(policy, zbuffer).data)


def test_demo_envs_refuse_a_state_of_other_envs_and_keep_theirs() -> None:
    envs, _, _ = _envs(torch.Generator().manual_seed(3))
    state = envs.state_dict()
    state["frame"] = state["frame"][:2]
    before = envs.state_dict()
    with pytest.raises(bufcore.StateError, match="frame"):
        envs.load_state_dict(state)
    assert all(torch.equal(before[k], v) for k, v in envs.state_dict().items())


@pytest.mark.parametrize("learner", ["policy", "value"])
def test_a_demo_learner_continues_its_adam_steps_from_its_train_state(learner: str) -> None:
    def make() -> Any:
        if learner == "policy":
            return TrackingPolicy(2, 3, lr=0.05, state_noise=0.0,
                                  generator=torch.Generator().manual_seed(0))
        return ValueFunction(2, 3, lr=0.05)

    def step(model: Any, k: int) -> float:
        data = torch.Generator().manual_seed(k)
        z, state, target = (torch.randn(6, n, generator=data) for n in (3, 2, 2))
        if learner == "policy":
            return float(model.train_step(z, state, target))
        loss = (model(state, target, z) - 1.0).pow(2).mean()
        model.step(loss)
        return float(loss.detach())

    first = make()
    for k in range(3):
        step(first, k)
    second = make()
    second.load_train_state_dict(first.train_state_dict())
    assert [step(second, k) for k in (7, 8)] == [step(first, k) for k in (7, 8)]
    assert torch.equal(first.weight, second.weight)


def test_z_sources_come_back_from_their_saved_slots() -> None:
    sources = ZSources(6)
    sources.record(0, torch.tensor([0, 1, 1, 0]))
    again = ZSources(6)
    again.load_state(sources.state(4))
    assert again.state(4) == sources.state(4)
    with pytest.raises(ValueError, match="never written"):
        again.state(5)


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("make", ["missing", "file", "empty"])
def test_a_path_that_is_not_a_run_is_refused_as_not_a_run(tmp_path: Path, make: str) -> None:
    path = tmp_path / "x"
    if make == "file":
        path.write_text("")
    elif make == "empty":
        path.mkdir()
    with pytest.raises(NotARunError, match="not a run"):
        bufcore.resume(path)


def test_a_run_without_a_checkpoint_yet_is_refused_as_such(tmp_path: Path) -> None:
    with RunLogger(tmp_path) as log:
        log.log("run", 0, {})
    with pytest.raises(NoCheckpointError, match="no run checkpoint yet"):
        bufcore.resume(tmp_path)


def test_a_run_checkpoint_of_a_newer_format_is_refused_as_newer(saved: Saved) -> None:
    path = saved.run / "checkpoint" / "run.json"
    state = json.loads(path.read_text())
    path.write_text(json.dumps({**state, "version": 2}))
    with pytest.raises(NewerFormatError, match="upgrade bufcore"):
        bufcore.resume(saved.run)


def test_a_loop_state_of_a_newer_format_is_refused_as_newer(saved: Saved) -> None:
    import h5py

    with h5py.File(saved.run / "checkpoint" / "loop" / "rank_0.hdf5", "r+") as file:
        file.attrs["version"] = 2
    with pytest.raises(NewerFormatError, match="version 2"):
        bufcore.resume(saved.run)


def test_a_damaged_loop_state_is_refused_as_corrupt(saved: Saved) -> None:
    import h5py

    with h5py.File(saved.run / "checkpoint" / "loop" / "rank_0.hdf5", "r+") as file:
        file["0"][0] = 99
    with pytest.raises(CorruptCheckpointError, match="sha256"):
        bufcore.resume(saved.run)


def test_a_checkpoint_without_loop_state_is_refused_naming_it(tmp_path: Path) -> None:
    save_run_checkpoint(tmp_path / "checkpoint", buffers={}, state={"step": 3})
    with pytest.raises(MissingStateError, match=r"loop/rank_0\.hdf5.*start a new run"):
        bufcore.resume(tmp_path)


def test_another_ranks_part_missing_from_the_checkpoint_is_refused_naming_it(
    saved: Saved,
) -> None:
    with pytest.raises(MissingStateError) as caught:
        bufcore.resume(saved.run, rank=1)
    assert caught.value.missing == ["loop/rank_1.hdf5"]


def test_a_checkpoint_without_its_step_is_refused_naming_it(tmp_path: Path) -> None:
    save_run_checkpoint(tmp_path / "checkpoint", buffers={}, state={}, loop={0: {}})
    with pytest.raises(MissingStateError, match=r"run.json\['step'\]"):
        bufcore.resume(tmp_path)


def test_every_refusal_is_a_resume_error() -> None:
    for kind in (NotARunError, NoCheckpointError, NewerFormatError, MissingStateError):
        assert issubclass(kind, ResumeError)


def test_a_checkpoint_replaced_while_it_is_read_is_refused(
    saved: Saved, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bufcore.runs import resume as resume_module

    real = resume_module._read

    def racing(*args: Any) -> Any:
        read = real(*args)
        save_run_checkpoint(saved.run / "checkpoint", buffers={}, state={"step": 11},
                            loop={0: {}})  # the run saved again meanwhile
        return read

    monkeypatch.setattr(resume_module, "_read", racing)
    with pytest.raises(CorruptCheckpointError, match="replaced while it was read"):
        bufcore.resume(saved.run)

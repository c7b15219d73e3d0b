"""``sample(..., generator=)`` and ``sample_index``: a caller's generator draws instead of the
buffer's own (which stays put), and ``sample`` reads exactly the rows ``sample_index`` names,
for every buffer that samples."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

import bufcore
from bufcore.sampling import samplers
from bufcore.storage.ring import RingStorage

SEED = 3


@dataclass
class Case:
    """A filled buffer of one kind, its sample arguments and its physical rows as a model."""

    buffer: Any
    args: tuple[Any, ...]
    # Flat physical rows ``[capacity * env_count, ...]`` of the leaf compared ("obs" or z).
    physical: torch.Tensor
    windowed: bool
    next_rows: bool


def ring_model(capacity: int, writes: int, envs: int) -> torch.Tensor:
    """Flat physical rows after ``writes`` time rows, row ``t`` holding ``t * envs + env``."""
    model = torch.full((capacity, envs), -1.0)
    for t in range(writes):
        model[t % capacity] = t * envs + torch.arange(envs, dtype=torch.float32)
    return model.reshape(-1, 1)


def dict_case(capacity: int, weighting: str) -> Case:
    buffer = bufcore.DictBuffer(capacity=capacity, seed=SEED)
    writes = capacity + 3  # wraps around
    for t in range(writes):
        buffer.extend({"obs": torch.tensor([[float(t)]])})
    return Case(buffer, (5,), ring_model(capacity, writes, 1), False, False)


def z_case(capacity: int, weighting: str) -> Case:
    buffer = bufcore.ZBuffer(capacity, 1, seed=SEED)
    writes = capacity + 3
    buffer.add(torch.arange(writes, dtype=torch.float32)[:, None])
    return Case(buffer, (5,), ring_model(capacity, writes, 1), False, False)


def online_case(capacity: int, weighting: str, envs: int | None) -> Case:
    offset = capacity > 1  # one row cannot hold a window and the row after it
    buffer = bufcore.TrajectoryDictBufferMultiDim(
        capacity=capacity,
        n_dim=1 if envs is None else 2,
        output_key_t=["obs"],
        output_key_tp1=["obs"] if offset else [],
        weighting=weighting,
        seed=SEED,
    )
    width = envs or 1
    writes = 2 * capacity + 2  # wraps around; the newest rows hold a trajectory of 2 or more
    for t in range(writes):
        obs = t * width + torch.arange(width, dtype=torch.float32)
        done = torch.tensor([t % 4 == 3] * width)
        if envs is None:
            buffer.extend({"obs": obs[:, None], "done": done})
        else:
            buffer.extend({"obs": obs[None, :, None], "done": done[None, :]})
    return Case(buffer, (2, 1), ring_model(capacity, writes, width), True, offset)


def expert_case(capacity: int, weighting: str) -> Case:
    lengths = {1: [1], 2: [2], 7: [3, 1, 3]}[capacity]
    offset = capacity > 1
    episodes = []
    first = 0
    for motion, length in enumerate(lengths):
        rows = torch.arange(first, first + length, dtype=torch.float32)[:, None]
        episodes.append({"obs": rows, "motion_id": np.full(length, 10 + motion)})
        first += length
    buffer = bufcore.TrajectoryDictBuffer(
        episodes,
        output_key_t=["obs", "motion_id"],
        output_key_tp1=["obs"] if offset else [],
        weighting=weighting,
        seed=SEED,
    )
    if len(lengths) > 1:
        buffer.update_priorities([0.1, 0.0, 0.9], [0, 1, 2])  # non-uniform, one never drawn
    args = (4, 2) if capacity == 7 else (2, 1)
    return Case(buffer, args, torch.arange(capacity, dtype=torch.float32)[:, None], True, offset)


KINDS: dict[str, Callable[[int, str], Case]] = {
    "dict": dict_case,
    "z": z_case,
    "online-time": lambda c, w: online_case(c, w, None),
    "online-time-env": lambda c, w: online_case(c, w, 3),
    "expert": expert_case,
}
WINDOWED = ("online-time", "online-time-env", "expert")
CASES = [
    pytest.param(kind, capacity, weighting, id=f"{kind}-{capacity}-{weighting}")
    for kind in KINDS
    for capacity in (1, 2, 7)
    for weighting in (("trajectory", "window") if kind in WINDOWED else ("trajectory",))
]


def leaf(sample: Any) -> torch.Tensor:
    """The compared leaf of a sample (``obs`` of a dict, the z tensor itself)."""
    return sample if isinstance(sample, torch.Tensor) else sample["obs"]


def generator_in(state: torch.Tensor) -> torch.Generator:
    generator = torch.Generator()
    generator.set_state(state)
    return generator


@pytest.mark.parametrize(("kind", "capacity", "weighting"), CASES)
def test_sample_with_a_generator_reads_the_storage_at_sample_index_rows(
    kind: str, capacity: int, weighting: str
) -> None:
    case = KINDS[kind](capacity, weighting)
    state = torch.Generator().manual_seed(99).get_state()
    sample = case.buffer.sample(*case.args, generator=generator_in(state))
    index = case.buffer.sample_index(*case.args, generator=generator_in(state))
    torch.testing.assert_close(leaf(sample), case.physical[index.rows])
    if case.next_rows:
        envs = 3 if kind == "online-time-env" else 1
        following = (index.rows + envs) % len(case.physical)
        torch.testing.assert_close(sample["next"]["obs"], case.physical[following])


@pytest.mark.parametrize(("kind", "capacity", "weighting"), CASES)
def test_sample_index_advances_the_buffers_own_stream_exactly_like_sample(
    kind: str, capacity: int, weighting: str
) -> None:
    indexed, sampled = KINDS[kind](capacity, weighting), KINDS[kind](capacity, weighting)
    indexed.buffer.sample_index(*indexed.args)
    sampled.buffer.sample(*sampled.args)
    torch.testing.assert_close(
        leaf(indexed.buffer.sample(*indexed.args)), leaf(sampled.buffer.sample(*sampled.args))
    )


@pytest.mark.parametrize(("kind", "capacity", "weighting"), CASES)
@pytest.mark.parametrize("method", ["sample", "sample_index"])
def test_a_given_generator_leaves_the_buffers_own_generator_where_it_was(
    kind: str, capacity: int, weighting: str, method: str
) -> None:
    case = KINDS[kind](capacity, weighting)
    before = case.buffer._generator.get_state()
    getattr(case.buffer, method)(*case.args, generator=torch.Generator().manual_seed(1))
    assert torch.equal(case.buffer._generator.get_state(), before)


@pytest.mark.parametrize(("kind", "capacity", "weighting"), CASES)
def test_a_generator_seeded_like_the_buffer_draws_what_the_buffers_own_draws(
    kind: str, capacity: int, weighting: str
) -> None:
    given, own = KINDS[kind](capacity, weighting), KINDS[kind](capacity, weighting)
    drawn = given.buffer.sample(*given.args, generator=torch.Generator().manual_seed(SEED))
    torch.testing.assert_close(leaf(drawn), leaf(own.buffer.sample(*own.args)))


@pytest.mark.parametrize(("kind", "capacity", "weighting"), CASES)
def test_the_index_rows_are_time_times_env_count_plus_env(
    kind: str, capacity: int, weighting: str
) -> None:
    case = KINDS[kind](capacity, weighting)
    index = case.buffer.sample_index(*case.args)
    envs = 3 if kind == "online-time-env" else 1
    assert torch.equal(index.rows, index.time * envs + index.env)
    assert bool(((index.env >= 0) & (index.env < envs)).all())
    assert bool(((index.time >= 0) & (index.time < capacity)).all())
    assert (index.trajectory is not None) == case.windowed


@pytest.mark.parametrize(
    ("kind", "capacity", "weighting"), [c for c in CASES if c.values[0] in WINDOWED]
)
def test_each_window_lies_in_the_trajectory_its_index_names(
    kind: str, capacity: int, weighting: str
) -> None:
    case = KINDS[kind](capacity, weighting)
    batch, seq = case.args
    index = case.buffer.sample_index(batch, seq)
    assert index.trajectory is not None and len(index.trajectory) == batch // seq
    table = case.buffer.trajectories()
    for window, position in enumerate(index.trajectory.tolist()):
        lo, hi = int(table.start[position]), int(table.stop[position])
        times = {t % case.buffer.capacity for t in range(lo, hi + 1)}
        rows = slice(window * seq, (window + 1) * seq)
        assert set(index.time[rows].tolist()) <= times
        assert set(index.env[rows].tolist()) == {int(table.env[position])}


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_the_expert_trajectory_index_gives_the_motion_id_of_the_window(weighting: str) -> None:
    case = expert_case(7, weighting)
    state = torch.Generator().manual_seed(5).get_state()
    sample = case.buffer.sample(40, 2, generator=generator_in(state))
    index = case.buffer.sample_index(40, 2, generator=generator_in(state))
    assert index.trajectory is not None
    motions = torch.tensor(case.buffer.motion_ids)[index.trajectory]
    assert torch.equal(sample["motion_id"].reshape(-1, 2)[:, 0], motions)
    assert 1 not in index.trajectory.tolist()  # priority zero: never drawn


# ------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("method", ["sample", "sample_index"])
@pytest.mark.parametrize("bad", [0, np.random.default_rng(0), "cpu"])
def test_a_generator_that_is_not_a_torch_generator_is_a_type_error_naming_it(
    kind: str, method: str, bad: object
) -> None:
    case = KINDS[kind](2, "trajectory")
    before = case.buffer._generator.get_state()
    with pytest.raises(TypeError, match=r"^generator: expected a torch\.Generator, got"):
        getattr(case.buffer, method)(*case.args, generator=bad)
    assert torch.equal(case.buffer._generator.get_state(), before)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("method", ["sample", "sample_index"])
def test_a_failed_gather_sets_the_given_generator_back(
    kind: str, method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = KINDS[kind](7, "trajectory")
    generator = torch.Generator().manual_seed(8)
    before, own = generator.get_state(), case.buffer._generator.get_state()

    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise torch.OutOfMemoryError("no memory left")

    # sample fails in its gather, sample_index in its last step after the draw.
    target = (RingStorage, "gather") if method == "sample" else (samplers, "SampleIndex")
    monkeypatch.setattr(*target, out_of_memory)
    with pytest.raises(MemoryError, match="no memory left"):
        getattr(case.buffer, method)(*case.args, generator=generator)
    assert torch.equal(generator.get_state(), before)
    assert torch.equal(case.buffer._generator.get_state(), own)


@pytest.mark.parametrize("method", ["sample", "sample_index"])
def test_no_long_enough_trajectory_sets_the_given_generator_back(method: str) -> None:
    buffer = bufcore.TrajectoryDictBufferMultiDim(capacity=7, seq_length=1, seed=SEED)
    # Rejection rounds draw before they find that no trajectory holds 4 rows.
    buffer.extend({"observation": torch.zeros(6, 1), "done": torch.tensor([0, 1] * 3)})
    generator = torch.Generator().manual_seed(8)
    before = generator.get_state()
    with pytest.raises(ValueError, match="No trajectories with length >= 4"):
        getattr(buffer, method)(3, 3, generator=generator)
    assert torch.equal(generator.get_state(), before)


def test_a_generator_on_another_device_is_a_value_error_naming_it() -> None:
    from bufcore.checks import check_generator

    with pytest.raises(ValueError, match=r"^generator: expected a generator on the buffer's "
                                         r"device 'cuda.*', got one on 'cpu'"):
        check_generator(torch.Generator(), torch.device("cuda"))


def test_a_cpu_generator_fits_a_buffer_on_cpu_written_with_an_index() -> None:
    buffer = bufcore.DictBuffer(capacity=5, seed=0, device="cpu:0")
    buffer.extend({"x": torch.arange(5.0)})
    assert buffer.sample(3, generator=torch.Generator())["x"].shape == (3,)


def test_zbuffer_sample_index_puts_the_index_on_the_requested_device() -> None:
    case = z_case(7, "trajectory")
    index = case.buffer.sample_index(4, "cpu")
    assert {t.device for t in (index.rows, index.time, index.env)} == {torch.device("cpu")}


def test_sample_index_returns_the_sample_index_bufcore_exports() -> None:
    case = dict_case(2, "trajectory")
    assert "SampleIndex" in bufcore.__all__
    assert isinstance(case.buffer.sample_index(3), bufcore.SampleIndex)

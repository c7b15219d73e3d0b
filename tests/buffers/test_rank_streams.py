"""Per-rank sample streams: every buffer draws the stream of ``(seed, rank)``; rank 0's is the
seed's own (a single process draws and saves what it did before ranks existed); a checkpoint
records any other rank, and a load continues the stream for that rank and branches it for any other.

The ``rank=None`` default inside a real process group is pinned by
tests/distributed/test_process_groups.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import (
    DictBuffer,
    NaiveReplayBuffer,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    ZBuffer,
    load_buffer,
)
from bufcore.buffers.base import Buffer
from bufcore.rng import stream_seed


def transitions(seed: int | None, rank: int | None) -> DictBuffer:
    buffer = DictBuffer(capacity=100, seed=seed, rank=rank)
    buffer.extend({"obs": torch.arange(100.0)[:, None]})
    return buffer


def online(seed: int | None, rank: int | None) -> TrajectoryDictBufferMultiDim:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=64, output_key_tp1=[], weighting="window", seed=seed, rank=rank
    )
    buffer.extend({"observation": torch.arange(64.0)[:, None], "done": torch.zeros(64, 1) > 0})
    return buffer


def expert(seed: int | None, rank: int | None) -> TrajectoryDictBuffer:
    episodes = [
        {"observation": torch.arange(50.0)[:, None] + 100 * i, "motion_id": torch.full((50,), i)}
        for i in range(3)
    ]
    return TrajectoryDictBuffer(episodes, output_key_tp1=[], seed=seed, rank=rank)


def zvectors(seed: int | None, rank: int | None) -> ZBuffer:
    buffer = ZBuffer(100, 2, seed=seed, rank=rank)
    buffer.add(torch.arange(200.0).reshape(100, 2))
    return buffer


def naive(seed: int | None, rank: int | None) -> NaiveReplayBuffer:
    buffer = NaiveReplayBuffer(replay_buffer_size=100, seed=seed, rank=rank, storage="packed")
    buffer.push([{"obs": torch.tensor([float(i)])} for i in range(100)], 0)
    return buffer


BUILDERS: dict[str, Callable[[int | None, int | None], Buffer]] = {
    "dict": transitions, "online": online, "expert": expert, "z": zvectors, "naive": naive,
}


def draw(buffer: Any) -> list[Any]:
    """The next draw: row indices, or the sampled items' values (DI-engine buffers)."""
    if isinstance(buffer, NaiveReplayBuffer):
        return [float(item["obs"]) for item in buffer.sample(16, 0, replace=True)]
    rows = buffer.sample_index(16).rows
    return rows.tolist()  # type: ignore[no-any-return]


def test_rank_zero_keeps_the_seed_itself_and_other_ranks_get_their_own_seeds() -> None:
    seeds = [stream_seed(7, rank) for rank in range(4)]
    assert seeds[0] == 7 and len(set(seeds)) == 4
    assert [stream_seed(7, rank) for rank in range(4)] == seeds  # deterministic
    assert stream_seed(None, 3) is None


def test_a_single_process_draws_the_stream_it_drew_before_ranks_existed() -> None:
    # Pinned from bufcore before ranks: DictBuffer(capacity=100, seed=7) over 100 rows.
    buffer = DictBuffer(capacity=100, seed=7)
    buffer.extend({"obs": torch.arange(100.0)[:, None]})
    assert buffer.rank == 0
    assert buffer.sample_index(8).rows.tolist() == [15, 92, 21, 86, 83, 47, 87, 79]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_rank_zero_is_the_default_without_a_process_group(kind: str) -> None:
    build = BUILDERS[kind]
    assert build(3, None).rank == 0
    assert draw(build(3, None)) == draw(build(3, 0))


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_ranks_sharing_a_seed_draw_different_batches(kind: str) -> None:
    build = BUILDERS[kind]
    streams = [draw(build(3, rank)) for rank in range(3)]
    assert len({tuple(s) for s in streams}) == 3
    assert draw(build(3, 2)) == streams[2]  # each rank's stream is reproducible


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_a_state_dict_records_the_rank_and_that_rank_continues_the_stream(kind: str) -> None:
    buffer = BUILDERS[kind](3, 2)
    state = buffer.state_dict()
    assert (state["state"]["seed"], state["state"]["rank"]) == (3, 2)
    twin = type(buffer).from_state_dict(state, rank=2)
    assert twin.rank == 2
    assert draw(twin) == draw(buffer)


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_another_rank_loading_a_state_draws_a_branch_of_its_own(kind: str) -> None:
    buffer = BUILDERS[kind](3, 0)
    state = buffer.state_dict()
    loads = {rank: type(buffer).from_state_dict(state, rank=rank) for rank in range(3)}
    assert loads[1].rank == 1
    draws = {rank: draw(loaded) for rank, loaded in loads.items()}
    assert draws[0] == draw(buffer)  # the saving rank continues
    assert len({tuple(d) for d in draws.values()}) == 3
    assert draw(type(buffer).from_state_dict(state, rank=1)) == draws[1]  # deterministic


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_rank_zero_saves_what_a_single_process_saved_before_ranks_existed(kind: str) -> None:
    assert "rank" not in BUILDERS[kind](3, 0).state_dict()["state"]


def test_a_checkpoint_records_the_rank_and_loads_with_its_stream(tmp_path: Path) -> None:
    buffer = transitions(5, 1)
    buffer.save(tmp_path / "b")
    loaded = load_buffer(tmp_path / "b", rank=1)
    assert loaded.rank == 1
    assert draw(loaded) == draw(buffer)
    assert draw(load_buffer(tmp_path / "b", rank=0)) != draw(load_buffer(tmp_path / "b", rank=1))


def test_a_state_without_a_rank_is_rank_zeros_stream() -> None:
    buffer = transitions(5, 0)
    state = buffer.state_dict()
    assert draw(DictBuffer.from_state_dict(state, rank=0)) == draw(buffer)
    assert draw(DictBuffer.from_state_dict(state, rank=1)) != draw(buffer)


def test_a_state_without_a_generator_starts_the_seed_and_rank_stream() -> None:
    state = transitions(5, 0).state_dict()
    del state["state"]["generator"]
    assert draw(DictBuffer.from_state_dict(state, rank=2)) == draw(transitions(5, 2))


def test_load_state_dict_keeps_the_buffers_own_rank() -> None:
    target = transitions(9, 2)
    target.load_state_dict(transitions(5, 0).state_dict())
    assert target.rank == 2 and target.seed == 5


@pytest.mark.parametrize(
    ("rank", "error"), [(-1, ValueError), ("1", TypeError), (True, TypeError), (1.0, TypeError)]
)
def test_a_malformed_rank_is_refused_naming_it(rank: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="rank"):
        DictBuffer(capacity=2, seed=0, rank=rank)
    with pytest.raises(error, match="rank"):
        DictBuffer.from_state_dict(transitions(0, 0).state_dict(), rank=rank)


def test_a_saved_rank_that_is_malformed_is_a_state_error() -> None:
    state = transitions(5, 0).state_dict()
    state["state"]["rank"] = -3
    with pytest.raises(ValueError, match=r"state\['rank'\]"):
        DictBuffer.from_state_dict(state)

"""Run checkpoints across ranks, in one process: the layout, loading a rank's buffers back,
refusing another world size, and resharding (rows dealt, trajectories whole, streams per rank).

A checkpoint of N ranks is written here by ``save_checkpoint_for_ranks`` (what a group's
collective save writes, without a group); tests/distributed/test_rank_checkpoints.py saves
one with real gloo ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import (
    DictBuffer,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    WorldSizeError,
    ZBuffer,
    load_run_buffers,
    reshard_run_checkpoint,
    save_run_buffers,
)
from bufcore.errors import CorruptCheckpointError
from bufcore.persist.run_checkpoint import (
    replaceable_run_checkpoint,
    run_layout,
    save_checkpoint_for_ranks,
)
from bufcore.rng import make_generator

SEED = 3
CAPACITY = 12
TIME_ROWS = 5


def transitions(rank: int) -> DictBuffer:
    """Rank ``rank``'s transition buffer: ``4 + 3 * rank`` rows valued ``100 * rank + i``."""
    buffer = DictBuffer(capacity=CAPACITY, seed=SEED, rank=rank)
    buffer.extend({"x": (100.0 * rank + torch.arange(4.0 + 3 * rank))[:, None]})
    return buffer


def online(rank: int) -> TrajectoryDictBufferMultiDim:
    """Rank ``rank``'s online buffer: ``2 + rank`` env columns, :data:`TIME_ROWS` steps,
    each env ending an episode at step 2; rows encode (rank, env, time)."""
    buffer = TrajectoryDictBufferMultiDim(capacity=8, n_dim=2, seq_length=2, end_key="truncated",
                                          seed=SEED, rank=rank)
    envs = 2 + rank
    for t in range(TIME_ROWS):
        code = 1000.0 * rank + 10 * torch.arange(float(envs)) + t
        buffer.extend({"observation": code[None, :, None],
                       "truncated": torch.full((1, envs, 1), t == 2)})
    return buffer


def expert() -> TrajectoryDictBuffer:
    episodes = [{"observation": torch.arange(6.0)[:, None] + 10 * m,
                 "motion_id": torch.full((6,), m)} for m in range(3)]
    return TrajectoryDictBuffer(episodes, output_key_tp1=[], seed=SEED)


def save_ranks(path: Path, world: int, **buffers: Any) -> None:
    """A run checkpoint of ``world`` ranks of the buffers made by ``buffers[name](rank)``."""
    save_checkpoint_for_ranks(
        path, buffers={n: [make(r).save for r in range(world)] for n, make in buffers.items()},
        state={"step": 7}, replicated=["expert"] if "expert" in buffers else (),
    )


def values(buffer: DictBuffer) -> list[float]:
    return buffer.get_full_buffer()["x"][:, 0].tolist()


def columns(buffer: TrajectoryDictBufferMultiDim) -> list[float]:
    """The code of each env column's first row (``1000 * rank + 10 * env``)."""
    storage = buffer.storage
    assert storage is not None
    return storage["observation"][0, :, 0].tolist()


# ------------------------------------------------------------------------------ layout
def test_one_process_saves_the_one_rank_layout_without_a_world_size(tmp_path: Path) -> None:
    save_run_buffers(tmp_path / "ckpt", {"train": transitions(0)}, state={"step": 1})
    assert (tmp_path / "ckpt" / "buffers" / "train" / "config.json").is_file()
    state = json.loads((tmp_path / "ckpt" / "run.json").read_text())
    assert "world_size" not in state and "replicated" not in state
    assert run_layout(tmp_path / "ckpt").world_size == 1


def test_n_ranks_each_get_a_rank_directory_and_run_json_records_them(tmp_path: Path) -> None:
    save_ranks(tmp_path / "ckpt", 2, train=transitions, expert=lambda r: expert())
    for name in ("train", "expert"):
        found = sorted(p.name for p in (tmp_path / "ckpt" / "buffers" / name).iterdir())
        assert found == ["rank_0", "rank_1"]
    state = json.loads((tmp_path / "ckpt" / "run.json").read_text())
    assert (state["world_size"], state["replicated"], state["step"]) == (2, ["expert"], 7)


def test_an_n_rank_checkpoint_may_be_saved_over(tmp_path: Path) -> None:
    save_ranks(tmp_path / "ckpt", 2, train=transitions)
    assert replaceable_run_checkpoint(tmp_path / "ckpt")
    save_ranks(tmp_path / "ckpt", 3, train=transitions)
    assert run_layout(tmp_path / "ckpt").world_size == 3


def test_a_rank_directory_missing_is_reported_as_corrupt(tmp_path: Path) -> None:
    save_ranks(tmp_path / "ckpt", 2, train=transitions)
    for entry in (tmp_path / "ckpt" / "buffers" / "train" / "rank_1").iterdir():
        entry.unlink()
    (tmp_path / "ckpt" / "buffers" / "train" / "rank_1").rmdir()
    with pytest.raises(CorruptCheckpointError, match=r"rank_0 \.\.\. rank_1"):
        run_layout(tmp_path / "ckpt")


@pytest.mark.parametrize("state", [{"world_size": 2}, {"replicated": []}, {"format": "x"}])
def test_fields_the_save_writes_are_refused_in_the_state(tmp_path: Path, state: dict) -> None:
    with pytest.raises(ValueError, match="written by the save itself"):
        save_run_buffers(tmp_path / "ckpt", {"train": transitions(0)}, state=state)
    assert not (tmp_path / "ckpt").exists()


# ------------------------------------------------------------------------------ loading
@pytest.mark.parametrize("rank", [0, 1])
def test_each_rank_loads_its_own_buffers_continuing_its_stream(tmp_path: Path, rank: int) -> None:
    save_ranks(tmp_path / "ckpt", 2, train=transitions)
    loaded = load_run_buffers(tmp_path / "ckpt", rank=rank, world_size=2)["train"]
    assert values(loaded) == values(transitions(rank))
    assert torch.equal(loaded.sample_index(16).rows, transitions(rank).sample_index(16).rows)


@pytest.mark.parametrize(("saved", "loading"), [(2, 3), (2, 1), (1, 2)])
def test_another_world_size_is_refused_naming_both_and_the_reshard_call(
    tmp_path: Path, saved: int, loading: int
) -> None:
    save_ranks(tmp_path / "ckpt", saved, train=transitions)
    with pytest.raises(WorldSizeError) as caught:
        load_run_buffers(tmp_path / "ckpt", rank=0, world_size=loading)
    assert (caught.value.saved, caught.value.world_size) == (saved, loading)
    message = str(caught.value)
    assert f"saved by {saved} rank" in message and f"loaded by {loading}" in message
    assert "bufcore.reshard_run_checkpoint(" in message
    assert f"world_size={loading})" in message


# ---------------------------------------------------------------------------- resharding
@pytest.mark.parametrize(("saved", "world"), [(2, 3), (2, 1), (3, 2), (1, 3), (2, 2)])
def test_resharding_deals_the_rows_in_rank_order_contiguously(
    tmp_path: Path, saved: int, world: int
) -> None:
    save_ranks(tmp_path / "old", saved, train=transitions)
    reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=world)
    before = [v for r in range(saved) for v in values(transitions(r))]
    after = [load_run_buffers(tmp_path / "new", rank=r, world_size=world)["train"]
             for r in range(world)]
    assert [v for b in after for v in values(b)] == before
    sizes = [len(b) for b in after]
    assert max(sizes) - min(sizes) <= 1


def test_resharded_ranks_draw_the_fresh_streams_of_seed_and_new_rank(tmp_path: Path) -> None:
    save_ranks(tmp_path / "old", 2, train=transitions)
    reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=3)
    for rank in range(3):
        buffer = load_run_buffers(tmp_path / "new", rank=rank, world_size=3)["train"]
        expected = make_generator(torch.device("cpu"), SEED, rank=rank)
        index = torch.randint(0, len(buffer), (16,), generator=expected)
        assert buffer.rank == rank
        assert torch.equal(buffer.sample_index(16).rows, index)


def test_resharding_keeps_a_full_rings_rows_oldest_first(tmp_path: Path) -> None:
    def wrapped(rank: int) -> DictBuffer:
        buffer = DictBuffer(capacity=4, seed=SEED, rank=rank)
        buffer.extend({"x": (100.0 * rank + torch.arange(6.0))[:, None]})  # wraps: 2..5
        return buffer

    save_ranks(tmp_path / "old", 2, train=wrapped)
    reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=2)
    new = [load_run_buffers(tmp_path / "new", rank=r, world_size=2)["train"] for r in range(2)]
    assert [values(b) for b in new] == [[2.0, 3.0, 4.0, 5.0], [102.0, 103.0, 104.0, 105.0]]
    assert [(b.cursor, b.is_full) for b in new] == [(0, True), (0, True)]


def test_a_share_beyond_the_capacity_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    save_ranks(tmp_path / "old", 3, train=transitions)  # 4 + 7 + 10 rows, capacity 12
    with pytest.raises(ValueError, match=r"rank 0 of 1 would get 21 rows.*at least 2 ranks"):
        reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=1)
    assert not (tmp_path / "new").exists()


def test_env_columns_are_dealt_whole_so_no_trajectory_is_cut(tmp_path: Path) -> None:
    save_ranks(tmp_path / "old", 2, train=online)  # 2 + 3 env columns
    reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=3)
    new = [load_run_buffers(tmp_path / "new", rank=r, world_size=3)["train"] for r in range(3)]
    assert [columns(b) for b in new] == [[0.0, 10.0], [1000.0, 1010.0], [1020.0]]
    before = sorted(t for r in range(2) for t in _trajectories(online(r)))
    assert sorted(t for b in new for t in _trajectories(b)) == before


def _trajectories(buffer: TrajectoryDictBufferMultiDim) -> list[tuple[float, int]]:
    """(code of the first row, length) of every trajectory: the same across a reshard."""
    table, storage = buffer.trajectories(), buffer.storage
    assert storage is not None
    return [(float(storage["observation"][s, e, 0]), int(n))
            for e, s, n in zip(table.env.tolist(), table.start.tolist(),
                               table.lengths.tolist(), strict=True)]


def test_fewer_env_columns_than_ranks_are_refused(tmp_path: Path) -> None:
    save_ranks(tmp_path / "old", 1, train=online)  # 2 env columns
    with pytest.raises(ValueError, match="2 env columns in all cannot give each of 3 ranks"):
        reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=3)


def test_a_replicated_buffer_is_copied_to_every_new_rank(tmp_path: Path) -> None:
    save_ranks(tmp_path / "old", 2, train=transitions, expert=lambda r: expert())
    reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=3)
    copies = [load_run_buffers(tmp_path / "new", rank=r, world_size=3)["expert"]
              for r in range(3)]
    assert [c.motion_ids for c in copies] == [[0, 1, 2]] * 3
    draws = [c.sample_index(32).rows.tolist() for c in copies]
    assert draws[0] != draws[2] and draws[1] != draws[2]
    assert json.loads((tmp_path / "new" / "run.json").read_text())["replicated"] == ["expert"]


def test_an_expert_buffer_not_marked_replicated_is_refused(tmp_path: Path) -> None:
    save_ranks(tmp_path / "old", 1, expert=lambda r: expert())  # one rank records none
    with pytest.raises(TypeError, match=r"replicated=\['expert'\]"):
        reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=2)
    reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=2,
                           replicated=["expert"])
    assert run_layout(tmp_path / "new").replicated == ("expert",)


def test_resharding_keeps_the_run_state_and_z_buffers(tmp_path: Path) -> None:
    def zs(rank: int) -> ZBuffer:
        buffer = ZBuffer(8, 2, seed=SEED, rank=rank)
        buffer.add(torch.full((3, 2), float(rank)))
        return buffer

    save_ranks(tmp_path / "old", 2, z=zs)
    reshard_run_checkpoint(tmp_path / "old", tmp_path / "new", world_size=1)
    state = json.loads((tmp_path / "new" / "run.json").read_text())
    assert state["step"] == 7 and "world_size" not in state
    z = load_run_buffers(tmp_path / "new", rank=0, world_size=1)["z"]
    assert len(z) == 6

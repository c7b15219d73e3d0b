"""The one state idiom: state_dict / from_state_dict / load_state_dict on every buffer, and
clear() on the ring buffers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import (
    DictBuffer,
    LeafNotLoadedError,
    StateError,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    ZBuffer,
    load_buffer,
)
from bufcore.buffers.base import Buffer


def transitions(capacity: int) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=1)
    buffer.extend({"obs": torch.arange(5.0)[:, None], "nest": {"a": torch.arange(5)}})
    return buffer


def online(capacity: int) -> TrajectoryDictBufferMultiDim:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=capacity, n_dim=2, output_key_tp1=[], weighting="window", seed=2
    )
    for t in range(5):
        buffer.extend({"observation": torch.full((1, 2, 1), float(t)),
                       "done": torch.tensor([[t % 2 == 1, False]])})
    return buffer


def expert(capacity: int) -> TrajectoryDictBuffer:
    lengths = [capacity, 3]
    episodes = [
        {"observation": torch.arange(n, dtype=torch.float32)[:, None] + 10 * i,
         "motion_id": torch.full((n,), 4 + i)}
        for i, n in enumerate(lengths)
    ]
    buffer = TrajectoryDictBuffer(episodes, output_key_tp1=[], seed=3)
    buffer.update_priorities(torch.tensor([1.0, 3.0]), torch.tensor([0, 1]))
    return buffer


def zvectors(capacity: int) -> ZBuffer:
    buffer = ZBuffer(capacity, 3, seed=4)
    buffer.add(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)))
    return buffer


BUILDERS: dict[str, Callable[[int], Buffer]] = {
    "dict": transitions, "online": online, "expert": expert, "z": zvectors,
}


def draw(buffer: Buffer) -> torch.Tensor:
    return buffer.sample_index(2).rows  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("capacity", [1, 2, 7])
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_from_state_dict_rebuilds_a_buffer_that_draws_the_same_stream(
    kind: str, capacity: int
) -> None:
    buffer = BUILDERS[kind](capacity)
    twin = type(buffer).from_state_dict(buffer.state_dict())
    assert type(twin) is type(buffer)
    assert (len(twin), twin.cursor, twin.is_full) == (len(buffer), buffer.cursor, buffer.is_full)
    assert torch.equal(draw(twin), draw(buffer))


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_a_state_dict_holds_plain_config_and_state_and_the_filled_rows(kind: str) -> None:
    buffer = BUILDERS[kind](7)
    state = buffer.state_dict()
    assert state["target"] == f"bufcore.{type(buffer).__name__}"
    assert state["config"]["_idx"] == buffer.cursor
    assert state["state"]["seed"] == buffer.seed
    assert all(len(rows) == len(buffer) for rows in state["rows"].values())


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_a_state_dict_saved_and_loaded_equals_the_buffer_state_dict(
    kind: str, tmp_path: Path
) -> None:
    buffer = BUILDERS[kind](7)
    buffer.save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt").state_dict()
    state = buffer.state_dict()
    assert (loaded["config"], loaded["state"]) == (state["config"], state["state"])
    assert all(torch.equal(loaded["rows"][p], rows) for p, rows in state["rows"].items())


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_load_state_dict_makes_a_buffer_the_one_the_state_describes(kind: str) -> None:
    source = BUILDERS[kind](7)
    target = BUILDERS[kind](2)
    target.load_state_dict(source.state_dict())
    assert len(target) == len(source)
    assert torch.equal(draw(target), draw(source))


def test_load_state_dict_of_another_kind_is_refused_and_changes_nothing() -> None:
    target = transitions(3)
    before = target.state_dict()
    with pytest.raises(ValueError, match="holds a ZBuffer"):
        target.load_state_dict(zvectors(3).state_dict())
    after = target.state_dict()
    assert after["config"] == before["config"]
    assert torch.equal(after["rows"][("obs",)], before["rows"][("obs",)])


def test_a_malformed_state_dict_is_a_state_error_naming_the_field() -> None:
    state = transitions(3).state_dict()
    state["config"]["capacity"] = "three"
    with pytest.raises(StateError, match=r"config\['capacity'\]"):
        DictBuffer.from_state_dict(state)


def test_a_state_dict_without_rows_is_a_state_error() -> None:
    state = transitions(3).state_dict()
    del state["rows"]
    with pytest.raises(StateError, match="rows"):
        DictBuffer.from_state_dict(state)


def test_from_state_dict_with_leaves_copies_only_those_rows() -> None:
    full = transitions(7)
    buffer = DictBuffer.from_state_dict(full.state_dict(), leaves=["obs"])
    assert torch.equal(buffer.sample_index(3).rows, full.sample_index(3).rows)
    with pytest.raises(LeafNotLoadedError, match=r"\['nest'\]\['a'\] was not loaded"):
        buffer.get_full_buffer()


def test_a_state_dict_shares_memory_with_the_rows_as_torch_state_dicts_do() -> None:
    buffer = transitions(7)
    rows = buffer.state_dict()["rows"][("obs",)]
    storage = buffer.storage
    assert storage is not None
    assert rows.data_ptr() == storage["obs"].data_ptr()


ONE_ROW: dict[str, Callable[[Any], None]] = {
    "dict": lambda b: b.extend({"obs": torch.ones(1, 1), "nest": {"a": torch.ones(1).long()}}),
    "online": lambda b: b.extend(
        {"observation": torch.ones(1, 2, 1), "done": torch.tensor([[True, True]])}
    ),
    "z": lambda b: b.add(torch.ones(1, 3)),
}


@pytest.mark.parametrize("capacity", [1, 2, 7])
@pytest.mark.parametrize("kind", list(ONE_ROW))
def test_clear_empties_the_ring_and_the_next_write_starts_at_row_zero(
    kind: str, capacity: int
) -> None:
    buffer: Any = BUILDERS[kind](capacity)
    buffer.clear()
    assert (len(buffer), buffer.cursor, buffer.is_full, buffer.empty()) == (0, 0, False, True)
    with pytest.raises(ValueError, match="empty"):
        draw(buffer)
    ONE_ROW[kind](buffer)
    assert (len(buffer), buffer.cursor) == (1, 1 % capacity)
    assert bool((buffer.sample_index(2).time == 0).all())  # the one time row held


def test_clear_forgets_the_online_trajectories() -> None:
    buffer = online(7)
    buffer.clear()
    assert len(buffer.trajectories().start) == 0
    buffer.extend({"observation": torch.zeros(1, 2, 1), "done": torch.tensor([[True, True]])})
    assert buffer.trajectories().start.tolist() == [0, 0]


def test_clear_keeps_the_spec_so_a_batch_of_other_keys_is_refused() -> None:
    buffer = transitions(3)
    buffer.clear()
    with pytest.raises(ValueError, match="keys"):
        buffer.extend({"other": torch.zeros(2, 1)})
    assert len(buffer) == 0


def test_the_expert_buffer_has_no_clear_since_it_is_read_only() -> None:
    assert not hasattr(expert(2), "clear")


@pytest.mark.parametrize("n_dim", [1, 2])
def test_an_online_buffer_never_written_saves_and_loads_back_empty(
    n_dim: int, tmp_path: Path
) -> None:
    TrajectoryDictBufferMultiDim(capacity=4, n_dim=n_dim, seed=0).save(tmp_path / "empty")
    loaded = load_buffer(tmp_path / "empty")
    assert (type(loaded), len(loaded), loaded.n_dim) == (TrajectoryDictBufferMultiDim, 0, n_dim)
    loaded.extend({"observation": torch.zeros(1, *(3,) * (n_dim - 1), 2),
                   "done": torch.ones(1, *(3,) * (n_dim - 1), dtype=torch.bool)})
    assert len(loaded) == 1

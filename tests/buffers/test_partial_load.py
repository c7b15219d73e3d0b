"""Loads of some leaves (``load_buffer(path, leaves=...)``): sampling indices, ring position and
trajectories as a full load has them, only the chosen leaves (and those sampling needs) given
memory, and every read or write of another leaf refused with LeafNotLoadedError, changing
nothing."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import bufcore
from bufcore import LeafNotLoadedError
from bufcore.errors import KeyPathError
from bufcore.storage.memory import packed_row_bytes
from bufcore.tree import LeafSpec

CAPACITIES = [1, 2, 7]


def dict_buffer(capacity: int, full: bool) -> bufcore.DictBuffer:
    buffer = bufcore.DictBuffer(capacity=capacity, seed=1)
    for t in range(capacity + 2 if full else max(1, capacity - 1)):
        buffer.extend(
            {"obs": {"state": torch.full((1, 3), float(t))}, "action": torch.tensor([[t, -t]])}
        )
    return buffer


def z_buffer(capacity: int, full: bool) -> bufcore.ZBuffer:
    buffer = bufcore.ZBuffer(capacity, 4, seed=1)
    buffer.add(torch.randn(capacity + 2 if full else max(1, capacity - 1), 4))
    return buffer


def online_buffer(n_dim: int) -> Callable[[int, bool], bufcore.TrajectoryDictBufferMultiDim]:
    def build(capacity: int, full: bool) -> bufcore.TrajectoryDictBufferMultiDim:
        buffer = bufcore.TrajectoryDictBufferMultiDim(
            capacity=capacity, n_dim=n_dim, output_key_t=["obs"], output_key_tp1=[], seed=1
        )
        generator = torch.Generator().manual_seed(0)
        lead = (1, 3) if n_dim == 2 else (1,)
        for _ in range(capacity + 3 if full else max(1, capacity - 1)):
            buffer.extend(
                {
                    "obs": torch.randn(*lead, 2, generator=generator),
                    "act": torch.randn(*lead, 5, generator=generator),
                    "done": torch.rand(*lead, 1, generator=generator) < 0.3,
                }
            )
        return buffer

    return build


def expert_buffer(capacity: int, full: bool) -> bufcore.TrajectoryDictBuffer:
    # Always full; ``full`` picks one episode or several that fill ``capacity`` rows.
    lengths = [capacity] if not full or capacity == 1 else [1, capacity - 1]
    episodes = [
        {
            "observation": np.full((n, 2), i, np.float32),
            "motion_id": np.full(n, 10 + i),
            "extra": np.zeros((n, 3), np.float32),
        }
        for i, n in enumerate(lengths)
    ]
    return bufcore.TrajectoryDictBuffer(episodes, output_key_tp1=[], seed=1)


KINDS = {
    "dict": dict_buffer,
    "z": z_buffer,
    "online-1": online_buffer(1),
    "online-2": online_buffer(2),
    "expert": expert_buffer,
}


def index_args(buffer: Any) -> tuple[int, ...]:
    return (4,) if isinstance(buffer, bufcore.DictBuffer | bufcore.ZBuffer) else (2, 1)


def saved(tmp_path: Path, kind: str, capacity: int, full: bool) -> Path:
    KINDS[kind](capacity, full).save(tmp_path / "ckpt")
    return tmp_path / "ckpt"


@pytest.mark.parametrize("full", [True, False], ids=["full", "not-full"])
@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_index_only_load_draws_the_same_sample_index_for_the_same_seed(
    tmp_path: Path, kind: str, capacity: int, full: bool
) -> None:
    path = saved(tmp_path, kind, capacity, full)
    whole, partial = bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=[])
    args = index_args(whole)
    drawn = [
        buffer.sample_index(*args, generator=torch.Generator().manual_seed(5))
        for buffer in (whole, partial)
    ]
    assert torch.equal(drawn[0].rows, drawn[1].rows)
    assert drawn[0].trajectory is None or torch.equal(drawn[0].trajectory, drawn[1].trajectory)


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_index_only_load_continues_the_saved_generator_stream(
    tmp_path: Path, kind: str, capacity: int
) -> None:
    path = saved(tmp_path, kind, capacity, True)
    whole, partial = bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=[])
    args = index_args(whole)
    assert torch.equal(whole.sample_index(*args).rows, partial.sample_index(*args).rows)


@pytest.mark.parametrize("full", [True, False], ids=["full", "not-full"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_index_only_load_has_the_ring_position_and_repr_of_a_full_load(
    tmp_path: Path, kind: str, full: bool
) -> None:
    path = saved(tmp_path, kind, 7, full)
    whole, partial = bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=[])
    assert (len(partial), partial.cursor, partial.is_full) == (
        len(whole), whole.cursor, whole.is_full
    )
    assert repr(partial) == repr(whole)


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("kind", ["online-1", "online-2", "expert"])
def test_an_index_only_load_lists_the_trajectories_of_a_full_load(
    tmp_path: Path, kind: str, capacity: int
) -> None:
    path = saved(tmp_path, kind, capacity, True)
    whole, partial = bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=[])
    for field in ("env", "start", "stop"):
        assert torch.equal(getattr(whole.trajectories(), field),
                           getattr(partial.trajectories(), field))


def test_an_index_only_expert_load_has_the_priorities_and_motion_ids_and_updates_them_alike(
    tmp_path: Path,
) -> None:
    path = saved(tmp_path, "expert", 7, True)
    whole, partial = bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=[])
    assert partial.motion_ids == whole.motion_ids == [10, 11]
    for buffer in (whole, partial):
        buffer.update_priorities([3.0], [1])
    assert torch.equal(partial.priorities, whole.priorities)
    draws = [
        b.sample_index(2, 1, generator=torch.Generator().manual_seed(2)) for b in (whole, partial)
    ]
    assert torch.equal(draws[0].rows, draws[1].rows)


@pytest.mark.parametrize("kind", ["online-1", "online-2", "expert"])
def test_a_with_weighting_view_of_an_index_only_load_draws_as_the_full_loads_view(
    tmp_path: Path, kind: str
) -> None:
    path = saved(tmp_path, kind, 7, True)
    views = [
        buffer.with_weighting("window")
        for buffer in (bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=[]))
    ]
    assert views[1].weighting == "window"
    draws = [v.sample_index(2, 1, generator=torch.Generator().manual_seed(4)) for v in views]
    assert torch.equal(draws[0].rows, draws[1].rows)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_deep_copy_of_an_index_only_load_draws_as_the_load_does(
    tmp_path: Path, kind: str
) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, kind, 7, True), leaves=[])
    twin = copy.deepcopy(partial)
    args = index_args(partial)
    assert torch.equal(twin.sample_index(*args).rows, partial.sample_index(*args).rows)


# ------------------------------------------------------------------------------ memory
@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("kind", ["dict", "z"])
def test_an_index_only_load_of_a_dict_or_z_buffer_allocates_no_rows(
    tmp_path: Path, kind: str, capacity: int
) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, kind, capacity, True), leaves=[])
    assert partial._storage.nbytes == 0


@pytest.mark.parametrize("capacity", CAPACITIES)
@pytest.mark.parametrize("n_dim", [1, 2])
def test_an_index_only_online_load_allocates_only_the_end_flags(
    tmp_path: Path, n_dim: int, capacity: int
) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, f"online-{n_dim}", capacity, True), leaves=[])
    storage = partial._storage
    envs = 3 if n_dim == 2 else 1
    end_row = packed_row_bytes({("done",): LeafSpec((1,), torch.bool)})
    assert storage.nbytes == capacity * envs * end_row
    assert storage.absent == {("obs",), ("act",)}


def test_a_nested_key_loads_every_leaf_under_it(tmp_path: Path) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, "dict", 7, True), leaves=["obs"])
    assert partial._storage.absent == {("action",)}


# ------------------------------------------------------------------------------ sampling
def test_a_trajectory_sample_works_when_every_leaf_it_gathers_was_loaded(tmp_path: Path) -> None:
    path = saved(tmp_path, "online-2", 7, True)
    whole, partial = bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=["obs"])
    samples = [
        b.sample(2, 1, generator=torch.Generator().manual_seed(3)) for b in (whole, partial)
    ]
    assert torch.equal(samples[0]["obs"], samples[1]["obs"])


def test_a_dict_buffer_sample_works_when_every_leaf_was_named(tmp_path: Path) -> None:
    path = saved(tmp_path, "dict", 7, True)
    whole, named = bufcore.load_buffer(path), bufcore.load_buffer(path, leaves=["obs", "action"])
    samples = [b.sample(4, generator=torch.Generator().manual_seed(3)) for b in (whole, named)]
    assert torch.equal(samples[0]["action"], samples[1]["action"])
    assert torch.equal(samples[0]["obs"]["state"], samples[1]["obs"]["state"])


# ----------------------------------------------------------------------------- refusals
def state_of(buffer: Any) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was."""
    storage = buffer._storage
    loaded = {p: v.clone() for p, v in storage._views.items()}
    return len(buffer), buffer.cursor, buffer.is_full, buffer._generator.get_state(), loaded


def assert_same_state(before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
    assert before[:3] == after[:3]
    assert torch.equal(before[3], after[3])
    assert before[4].keys() == after[4].keys()
    assert all(torch.equal(before[4][p], after[4][p]) for p in before[4])


DICT_REFUSALS: dict[str, Callable[[Any, Path], Any]] = {
    "sample": lambda b, p: b.sample(3),
    "sample-out": lambda b, p: b.sample(
        1,
        out={"obs": {"state": torch.zeros(1, 3)}, "action": torch.zeros(1, 2, dtype=torch.int64)},
    ),
    "extend": lambda b, p: b.extend(
        {"obs": {"state": torch.ones(1, 3)}, "action": torch.ones(1, 2, dtype=torch.int64)}
    ),
    "save": lambda b, p: b.save(p / "copy"),
    "storage": lambda b, p: b.storage,
    "get_full_buffer": lambda b, p: b.get_full_buffer(),
}


@pytest.mark.parametrize("operation", list(DICT_REFUSALS))
def test_a_dict_buffer_refuses_to_touch_a_leaf_it_did_not_load_and_changes_nothing(
    tmp_path: Path, operation: str
) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, "dict", 7, True), leaves=["action"])
    before = state_of(partial)
    message = r"leaf \['obs'\]\['state'\] was not loaded"
    with pytest.raises(LeafNotLoadedError, match=message) as caught:
        DICT_REFUSALS[operation](partial, tmp_path)
    assert caught.value.key_path == ("obs", "state")
    assert "leaves=" in str(caught.value)
    assert_same_state(before, state_of(partial))
    assert not (tmp_path / "copy").exists()


TRAJECTORY_REFUSALS: dict[str, Callable[[Any, Path], Any]] = {
    "sample": lambda b, p: b.sample(2, 1),
    "save": lambda b, p: b.save(p / "copy"),
    "storage": lambda b, p: b.storage,
}


@pytest.mark.parametrize("operation", list(TRAJECTORY_REFUSALS))
@pytest.mark.parametrize("kind", ["online-2", "expert"])
def test_a_trajectory_buffer_refuses_to_touch_a_leaf_it_did_not_load_and_changes_nothing(
    tmp_path: Path, kind: str, operation: str
) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, kind, 7, True), leaves=[])
    before = state_of(partial)
    with pytest.raises(LeafNotLoadedError, match="was not loaded"):
        TRAJECTORY_REFUSALS[operation](partial, tmp_path)
    assert_same_state(before, state_of(partial))
    assert not (tmp_path / "copy").exists()


def test_an_online_buffer_refuses_to_extend_after_an_index_only_load_and_changes_nothing(
    tmp_path: Path,
) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, "online-1", 7, True), leaves=[])
    before = state_of(partial)
    table = partial.trajectories()
    batch = {"obs": torch.ones(1, 2), "act": torch.ones(1, 5), "done": torch.ones(1, 1).bool()}
    with pytest.raises(LeafNotLoadedError, match=r"writing rows: leaf \['obs'\]"):
        partial.extend(batch)
    assert_same_state(before, state_of(partial))
    assert torch.equal(partial.trajectories().stop, table.stop)


def test_a_z_buffer_refuses_to_sample_its_vectors_after_an_index_only_load(
    tmp_path: Path,
) -> None:
    partial = bufcore.load_buffer(saved(tmp_path, "z", 7, True), leaves=[])
    before = state_of(partial)
    with pytest.raises(LeafNotLoadedError, match=r"leaf \['z'\] was not loaded"):
        partial.sample(2)
    assert_same_state(before, state_of(partial))


# ------------------------------------------------------------------------------- arguments
def test_an_unknown_leaf_is_a_key_path_error_listing_the_stored_leaves_before_allocating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = saved(tmp_path, "dict", 7, True)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("rows were allocated")

    monkeypatch.setattr(bufcore.storage.ring, "pack_leaves", refuse)
    with pytest.raises(KeyPathError) as caught:
        bufcore.load_buffer(path, leaves=["obs", ("obs", "velocity")])
    assert str(caught.value) == (
        "leaves: key ['obs']['velocity'] matches no stored leaf; stored: ['obs']['state'], "
        "['action']"
    )


@pytest.mark.parametrize("leaves", ["obs", 3, [3], [("obs", 1)]])
def test_leaves_that_are_not_a_list_of_keys_are_a_type_error_naming_leaves(
    tmp_path: Path, leaves: Any
) -> None:
    path = saved(tmp_path, "dict", 7, True)
    with pytest.raises(TypeError, match="leaves"):
        bufcore.load_buffer(path, leaves=leaves)


def test_a_class_load_takes_leaves_too(tmp_path: Path) -> None:
    partial = bufcore.DictBuffer.load(saved(tmp_path, "dict", 7, True), leaves=[])
    assert partial._storage.absent == {("obs", "state"), ("action",)}


def test_loading_every_leaf_by_name_gives_a_buffer_that_saves(tmp_path: Path) -> None:
    path = saved(tmp_path, "dict", 7, True)
    named = bufcore.load_buffer(path, leaves=["obs", "action"])
    named.save(tmp_path / "again")
    again = bufcore.load_buffer(tmp_path / "again").get_full_buffer()
    assert torch.equal(again["action"], bufcore.load_buffer(path).get_full_buffer()["action"])


def test_leaf_not_loaded_error_is_public() -> None:
    assert "LeafNotLoadedError" in bufcore.__all__
    assert issubclass(bufcore.LeafNotLoadedError, ValueError)

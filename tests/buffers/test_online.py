"""TrajectoryDictBufferMultiDim: the online buffer sampled as windows (REFERENCE §4)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

from bufcore.buffers.base import load_buffer
from bufcore.buffers.online import TrajectoryDictBufferMultiDim
from bufcore.sampling.boundaries import OnlineBoundaries

DRAWS = 40_000


def within(observed: int, probability: float, draws: int) -> bool:
    mean = draws * probability
    sigma = (draws * probability * (1 - probability)) ** 0.5
    return abs(observed - mean) <= 5 * sigma + 1e-9


# ------------------------------------------------------------------------ online helpers
def step(t: int, env_count: int, ends: set[int], key: str = "truncated") -> dict[str, Any]:
    """One time step ``[1, E, ...]``: observation encodes (time, env)."""
    envs = np.arange(env_count)
    return {
        "observation": {
            "state": np.stack([np.full(env_count, t), envs], 1)[None].astype(np.float32)
        },
        key: np.array([[[e in ends] for e in range(env_count)]]),
    }


def pairs(batch: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    """(time, env, next time, next env) of every sampled row."""
    now = batch["observation"]["state"].long().tolist()
    after = batch["next"]["observation"]["state"].long().tolist()
    return [(a[0], a[1], b[0], b[1]) for a, b in zip(now, after, strict=True)]


def reference_example(**options: Any) -> TrajectoryDictBufferMultiDim:
    """REFERENCE §4.2: cap 6, E 2, 8 steps, env 0 truncated at t2, env 1 at t4."""
    buffer = TrajectoryDictBufferMultiDim(
        capacity=6, n_dim=2, end_key="truncated", seed=0, **options
    )
    for t in range(8):
        ends = {0} if t == 2 else {1} if t == 4 else set()
        buffer.extend(step(t, 2, ends))
    return buffer


# ------------------------------------------------------------------- online: behaviour
def test_the_reference_full_buffer_example_samples_exactly_its_valid_pairs() -> None:
    buffer = reference_example(seq_length=1)
    seen = {p[:3] for p in pairs(buffer.sample(2000))}
    env0 = {(t, 0, t + 1) for t in range(3, 7)}
    env1 = {(2, 1, 3), (3, 1, 4), (5, 1, 6), (6, 1, 7)}
    assert seen == env0 | env1


def test_bfm_zero_layout_samples_into_the_final_observation_but_never_past_it() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=10, n_dim=2, end_key="truncated", seed=0)
    for t in range(6):
        buffer.extend(step(t, 1, {0} if t == 3 else set()))
    seen = {(a, c) for a, _, c, _ in pairs(buffer.sample(500))}
    assert (2, 3) in seen
    assert (3, 4) not in seen
    assert seen == {(0, 1), (1, 2), (2, 3), (4, 5)}


def test_next_rows_come_from_the_same_env() -> None:
    buffer = reference_example(seq_length=2)
    for t, env, t_next, env_next in pairs(buffer.sample(200)):
        assert (t_next, env_next) == (t + 1, env)


def test_a_single_env_keeps_batch_first_outputs() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=5, n_dim=2, end_key="truncated", seed=0)
    for t in range(3):
        buffer.extend(step(t, 1, set()))
    batch = buffer.sample(4, seq_length=2)
    assert batch["observation"]["state"].shape == (4, 2)
    assert batch["next"]["observation"]["state"].shape == (4, 2)


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_time_rows_without_env_axis_sample_windows_inside_trajectories(capacity: int) -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=capacity, n_dim=1, output_key_tp1=[], seed=0)
    for t in range(capacity + 2):
        buffer.extend({"observation": np.array([[float(t)]]), "done": np.array([t % 3 == 2])})
    rows = buffer.sample(8)["observation"][:, 0].tolist()
    newest = capacity + 1
    assert all(newest - capacity < r <= newest for r in rows)
    assert buffer.size() == capacity


def test_size_counts_time_rows_times_envs() -> None:
    buffer = reference_example()
    assert (len(buffer), buffer.size()) == (6, 12)


def test_sampling_an_empty_buffer_raises() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=4)
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(1)


def test_a_batch_without_the_end_key_is_refused_and_changes_nothing() -> None:
    buffer = reference_example()
    before = (buffer.cursor, buffer.trajectories().stop.tolist())
    bad = step(8, 2, set())
    del bad["truncated"]
    bad["done"] = np.zeros((1, 2, 1), dtype=bool)
    with pytest.raises(ValueError):
        buffer.extend(bad)
    assert (buffer.cursor, buffer.trajectories().stop.tolist()) == before


def test_a_first_batch_without_the_end_key_is_refused() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2)
    with pytest.raises(ValueError, match=r"end_key \['done'\] is missing"):
        buffer.extend({"observation": np.zeros((1, 2, 3))})
    assert buffer.storage is None


def test_no_trajectory_long_enough_names_the_need() -> None:
    buffer = reference_example()
    with pytest.raises(ValueError, match=r"length >= 7 to sample 1 slices.*lengths 1\.\.5"):
        buffer.sample(6, seq_length=6)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"n_dim": 3}, ValueError),
        ({"weighting": "rows"}, ValueError),
        ({"seq_length": 0}, ValueError),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        TrajectoryDictBufferMultiDim(capacity=4, **options)


@pytest.mark.parametrize("option", ["output_key_t", "output_key_tp1"])
def test_a_first_batch_without_an_output_key_is_refused_and_changes_nothing(option: str) -> None:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=6, n_dim=2, end_key="truncated", **{option: ["action"]}
    )
    with pytest.raises(KeyError, match=option):
        buffer.extend(step(0, 2, set()))
    assert buffer.empty()
    assert buffer.storage is None


# ----------------------------------------------------------------- online: persistence
def test_config_json_carries_the_subclass_fields(tmp_path: Path) -> None:
    buffer = reference_example(seq_length=2)
    buffer.save(tmp_path / "online")
    config = json.loads((tmp_path / "online" / "config.json").read_text())
    assert config["__target__"] == "bufcore.TrajectoryDictBufferMultiDim"
    assert {k: config[k] for k in ("n_dim", "seq_length", "end_key", "_idx", "_is_full")} == {
        "n_dim": 2,
        "seq_length": 2,
        "end_key": "truncated",
        "_idx": 2,
        "_is_full": True,
    }
    assert config["output_key_t"] == config["output_key_tp1"] == ["observation"]


def test_a_reloaded_online_buffer_has_the_same_trajectories_and_sample_stream(
    tmp_path: Path,
) -> None:
    buffer = reference_example(seq_length=2, weighting="window")
    buffer.save(tmp_path / "online")
    loaded = load_buffer(tmp_path / "online")
    assert isinstance(loaded, TrajectoryDictBufferMultiDim)
    assert loaded.weighting == "window"
    for a, b in zip(
        (loaded.trajectories().start, loaded.trajectories().stop),
        (buffer.trajectories().start, buffer.trajectories().stop),
        strict=True,
    ):
        assert (a % 6).tolist() == (b % 6).tolist()
    assert pairs(loaded.sample(8)) == pairs(buffer.sample(8))


def bfm_zero_checkpoint(path: Path) -> None:
    """A checkpoint as BFM-Zero writes it: config.json + buffer.hdf5, no manifest."""
    path.mkdir()
    rows, env_count = 4, 3
    config = {
        "capacity": 4,
        "device": "cpu",
        "nested_key_separator": "-",
        "n_dim": 2,
        "seq_length": 2,
        "output_key_t": ["observation", "action"],
        "output_key_tp1": ["observation"],
        "end_key": "truncated",
        "_idx": 1,
        "_is_full": True,
        "__target__": "humanoidverse.agents.buffers.trajectory.TrajectoryDictBufferMultiDim",
    }
    (path / "config.json").write_text(json.dumps(config, indent=4))
    # Physical row r holds absolute time r + 4 for r < 1 (newest) and r otherwise.
    times = np.array([4, 1, 2, 3])
    state = np.stack(np.broadcast_arrays(times[:, None], np.arange(env_count)[None]), -1)
    truncated = np.zeros((rows, env_count, 1), dtype=bool)
    truncated[2, 1, 0] = True  # env 1 ends at time 2
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5["observation-state"] = state.astype(np.float32)
        h5["action"] = np.zeros((rows, env_count, 2), dtype=np.float32)
        h5["truncated"] = truncated


def test_a_bfm_zero_online_checkpoint_loads_and_samples(tmp_path: Path) -> None:
    bfm_zero_checkpoint(tmp_path / "bfm")
    loaded = load_buffer(tmp_path / "bfm")
    assert isinstance(loaded, TrajectoryDictBufferMultiDim)
    assert (loaded.n_dim, loaded.size(), loaded.end_key) == (2, 12, "truncated")
    batch = loaded.sample(64)
    assert batch["action"].shape == (64, 2)
    seen = set(pairs(batch))
    assert all(env == env_next and t_next == t + 1 for t, env, t_next, env_next in seen)
    assert not any(t == 2 and env == 1 for t, env, _, _ in seen)
    assert {t for t, *_ in seen} <= {1, 2, 3}


def test_a_nested_tuple_end_key_survives_a_save_and_load(tmp_path: Path) -> None:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=5, n_dim=2, end_key=("info", "truncated"), seed=0
    )
    for t in range(7):
        row = step(t, 2, {1} if t == 4 else set())
        row["info"] = {"truncated": row.pop("truncated")}
        buffer.extend(row)
    buffer.save(tmp_path / "nested")
    loaded = load_buffer(tmp_path / "nested")
    assert loaded.end_key == ("info", "truncated")
    assert loaded.trajectories().stop.tolist() == buffer.trajectories().stop.tolist()
    assert not any(t == 4 and env == 1 for t, env, _, _ in pairs(loaded.sample(200)))


def test_a_batch_with_zero_envs_is_refused() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2)
    with pytest.raises(ValueError, match="at least one env"):
        buffer.extend({"observation": np.zeros((1, 0, 3)), "done": np.zeros((1, 0, 1), bool)})


# ------------------------------------------------------------------ writes from odd sources
@pytest.mark.parametrize("capacity", [1, 2, 5])
def test_extending_a_time_env_buffer_from_its_own_overlapping_rows_equals_extending_a_copy(
    capacity: int,
) -> None:
    def filled() -> TrajectoryDictBufferMultiDim:
        buffer = TrajectoryDictBufferMultiDim(capacity=capacity, n_dim=2, end_key="truncated")
        for t in range(capacity + 2):
            buffer.extend(step(t, 3, {t % 3}))
        return buffer

    buffer, twin = filled(), filled()
    begin = (buffer.cursor - 1) % capacity
    storage = buffer.storage
    assert storage is not None
    source = {
        "observation": {"state": storage["observation"]["state"][begin:]},
        "truncated": storage["truncated"][begin:],
    }
    copy = {
        "observation": {"state": source["observation"]["state"].clone()},
        "truncated": source["truncated"].clone(),
    }
    buffer.extend(source)
    twin.extend(copy)
    after, expected = buffer.storage, twin.storage
    assert after is not None and expected is not None
    assert torch.equal(after["observation"]["state"], expected["observation"]["state"])
    assert torch.equal(after["truncated"], expected["truncated"])
    assert buffer.trajectories().stop.tolist() == twin.trajectories().stop.tolist()


def test_big_endian_steps_are_stored_with_their_values() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2, end_key="truncated")
    data = step(5, 2, {1})
    data["observation"]["state"] = data["observation"]["state"].astype(">f8")
    buffer.extend(data)
    storage = buffer.storage
    assert storage is not None
    assert storage["observation"]["state"][0].tolist() == [[5.0, 0.0], [5.0, 1.0]]


def test_numpy_integers_are_accepted_for_every_size_argument() -> None:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=np.int64(6), n_dim=np.int8(2), seq_length=np.uint16(2), end_key="truncated"
    )  # type: ignore[arg-type]
    for t in range(4):
        buffer.extend(step(t, 2, set()))
    out = buffer.sample(np.int64(4), seq_length=np.int32(2))  # type: ignore[arg-type]
    assert out["observation"]["state"].shape == (4, 2)


def test_a_requires_grad_input_leaves_no_graph_in_storage_or_samples() -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2, end_key="truncated")
    weight = torch.ones(1, requires_grad=True)
    for t in range(3):
        data = step(t, 2, set())
        data["observation"]["state"] = torch.from_numpy(data["observation"]["state"]) * weight
        buffer.extend(data)
    storage = buffer.storage
    assert storage is not None
    batch = buffer.sample(4)
    for out in (storage["observation"]["state"], batch["observation"]["state"],
                batch["next"]["observation"]["state"]):
        assert (out.requires_grad, out.grad_fn) == (False, None)


def test_a_first_extend_whose_boundaries_cannot_be_allocated_leaves_the_buffer_new(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def out_of_memory(self: object, env_count: int) -> None:
        raise MemoryError("no room for the boundaries")

    buffer = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2, end_key="truncated", seed=0)
    with monkeypatch.context() as patch:
        patch.setattr(OnlineBoundaries, "_allocate", out_of_memory)
        with pytest.raises(MemoryError, match="boundaries"):
            buffer.extend(step(0, 2, set()))
    assert (buffer.storage, len(buffer), buffer.cursor) == (None, 0, 0)
    twin = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2, end_key="truncated", seed=0)
    for b in (buffer, twin):
        for t in range(3):
            b.extend(step(t, 2, {1} if t == 1 else set()))
    assert buffer.trajectories().stop.tolist() == twin.trajectories().stop.tolist()

"""Buffers with a prioritized sampler: weighted batches, priority updates, windows, saving."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from bufcore import DictBuffer, TrajectoryDictBufferMultiDim, load_buffer
from bufcore.errors import CorruptCheckpointError
from bufcore.inspect import inspect_path, read_leaf, render, summarize_checkpoint
from bufcore.sampling import prioritized, priority_maths
from bufcore.sampling.prioritized import PrioritizedSampler
from tests.support import DEVICES, reseal

P_VALUE = 1e-6


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def rows_buffer(capacity: int = 8, rows: int = 10, **options: Any) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=0, sampler=PrioritizedSampler(**options))
    buffer.extend({"obs": torch.arange(float(rows))[:, None], "act": torch.arange(rows)})
    return buffer


def online_buffer(
    reduction: str = "max", steps: int = 20, **options: Any
) -> TrajectoryDictBufferMultiDim:
    """[12, 2] rows: env 0 ends a trajectory every 5 steps, env 1 every 7; ``steps`` written."""
    sampler = PrioritizedSampler(reduction=reduction, **options)  # type: ignore[arg-type]
    buffer = TrajectoryDictBufferMultiDim(
        capacity=12, n_dim=2, seq_length=3, seed=0, sampler=sampler
    )
    for step in range(steps):
        done = torch.tensor([[step % 5 == 4, step % 7 == 6]])
        buffer.extend({"observation": torch.full((1, 2, 1), float(step)), "done": done})
    return buffer


# ------------------------------------------------------------------- batches
def test_a_batch_is_the_index_plus_a_gather_with_weights_and_rows() -> None:
    buffer = rows_buffer(eps=0.0)
    buffer.update_priority(buffer.sample_index(8), torch.arange(8.0))
    twin = DictBuffer.from_state_dict(buffer.state_dict())  # the same beta step
    index = buffer.sample_index(64, generator=generator(1))
    batch = twin.sample(64, generator=generator(1))
    assert torch.equal(batch["act"], buffer.storage["act"][index.rows])
    assert torch.equal(batch["_weight"], index.weights)
    assert torch.equal(batch["_index"], torch.stack([index.rows, index.writes], 1))


def test_a_window_batch_is_the_index_plus_a_gather_with_weights_and_rows() -> None:
    buffer = online_buffer(eps=0.0)
    buffer.update_priority(buffer.sample_index(12, 3), torch.arange(1.0, 13.0))
    state = buffer.state_dict()
    indexed, sampled = (TrajectoryDictBufferMultiDim.from_state_dict(state) for _ in range(2))
    index = indexed.sample_index(12, 3, generator=generator(1))
    batch = sampled.sample(12, 3, generator=generator(1))
    rows = buffer.storage["observation"].reshape(24, 1)  # flat rows: time * 2 + env
    assert torch.equal(batch["observation"], rows[index.rows])
    assert torch.equal(batch["next"]["observation"], rows[(index.rows + 2) % 24])
    assert torch.equal(batch["_weight"], index.weights)
    assert torch.equal(batch["_index"], torch.stack([index.rows, index.writes], 1))


def test_a_window_out_receives_the_weights_and_the_index_too() -> None:
    buffer = online_buffer()
    expected = buffer.sample(6, 3, generator=generator(2))
    out = {
        "observation": torch.empty(6, 1),
        "next": {"observation": torch.empty(6, 1)},
        "_weight": torch.empty(6),
        "_index": torch.empty(6, 2, dtype=torch.int64),
    }
    assert buffer.sample(6, 3, generator=generator(2), out=out) is out
    assert torch.equal(out["next"]["observation"], expected["next"]["observation"])
    for key in ("observation", "_weight", "_index"):
        assert torch.equal(out[key], expected[key])


def test_a_caller_generator_leaves_the_buffer_stream_alone() -> None:
    buffer = rows_buffer()
    state = buffer._generator.get_state()
    buffer.sample(16, generator=generator(5))
    assert torch.equal(buffer._generator.get_state(), state)


def test_out_receives_the_weights_and_the_index_too() -> None:
    buffer = rows_buffer()
    expected = buffer.sample(4, generator=generator(2))
    out = {
        "obs": torch.empty(4, 1),
        "act": torch.empty(4, dtype=torch.int64),
        "_weight": torch.empty(4),
        "_index": torch.empty(4, 2, dtype=torch.int64),
    }
    assert buffer.sample(4, generator=generator(2), out=out) is out
    for key, value in expected.items():
        assert torch.equal(out[key], value)


def test_an_out_without_the_reserved_leaves_is_refused_before_drawing() -> None:
    buffer = rows_buffer()
    steps = buffer.sampler.steps
    with pytest.raises(ValueError, match="_weight"):
        buffer.sample(4, out={"obs": torch.empty(4, 1), "act": torch.empty(4, dtype=torch.int64)})
    assert buffer.sampler.steps == steps


def test_a_failed_sample_neither_anneals_beta_nor_moves_the_stream() -> None:
    buffer = rows_buffer()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("gather failed")

    state, steps = buffer._generator.get_state(), buffer.sampler.steps
    buffer._storage.gather = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="gather failed"):
        buffer.sample(4)
    assert buffer.sampler.steps == steps
    assert torch.equal(buffer._generator.get_state(), state)


@pytest.mark.parametrize("key", ["_weight", "_index", "_sampler"])
def test_reserved_keys_are_refused_at_the_first_extend(key: str) -> None:
    buffer = DictBuffer(capacity=4, sampler=PrioritizedSampler())
    with pytest.raises(ValueError, match="reserved"):
        buffer.extend({key: torch.zeros(2), "obs": torch.zeros(2)})
    assert len(buffer) == 0 and not buffer._storage.allocated


# ------------------------------------------------------------------- updates
def test_updates_skip_rows_overwritten_since_they_were_drawn() -> None:
    buffer = rows_buffer(capacity=8, rows=8, eps=0.0)
    index = buffer.sample_index(200)
    drawn = set(index.rows.tolist())
    buffer.extend({"obs": torch.zeros(3, 1), "act": torch.zeros(3, dtype=torch.int64)})
    overwritten = {0, 1, 2}
    updated = buffer.update_priority(index, torch.full((200,), 5.0))
    assert updated == sum(1 for row in index.rows.tolist() if row not in overwritten)
    priorities = buffer.sampler.priorities()
    for row in range(8):
        expected = 5.0 if row in drawn - overwritten else 1.0
        assert priorities[row] == expected


@pytest.mark.parametrize("refill", [2, 8])
def test_updates_after_a_clear_change_nothing(refill: int) -> None:
    buffer = rows_buffer(capacity=8, rows=8)
    index = buffer.sample_index(20)
    buffer.clear()
    buffer.extend({"obs": torch.zeros(refill, 1), "act": torch.zeros(refill, dtype=torch.int64)})
    assert buffer.update_priority(index, torch.full((20,), 9.0)) == 0
    assert buffer.sampler.priorities().tolist() == [1.0] * refill


@pytest.mark.parametrize("capacity", [1, 2, 5, 8])
def test_an_index_drawn_before_a_load_state_dict_updates_nothing(capacity: int) -> None:
    buffer = rows_buffer(capacity=capacity, rows=capacity)
    index = buffer.sample_index(4)
    other = rows_buffer(capacity=capacity, rows=2 * capacity)  # its rows hold other data
    buffer.load_state_dict(other.state_dict())
    before = buffer.sampler.priorities()
    assert buffer.update_priority(index, torch.full((4,), 9.0)) == 0
    assert torch.equal(buffer.sampler.priorities(), before)
    assert buffer.update_priority(buffer.sample_index(4), torch.full((4,), 9.0)) == 4


def test_an_online_index_drawn_before_a_load_state_dict_updates_nothing() -> None:
    buffer = online_buffer(steps=10)  # every row written once: the count a load gives too
    index = buffer.sample_index(6, 3)  # 2 windows of 3 rows
    buffer.load_state_dict(online_buffer(steps=10).state_dict())
    before = buffer.sampler.priorities()
    assert buffer.update_priority(index, torch.full((6,), 9.0)) == 0
    assert torch.equal(buffer.sampler.priorities(), before)


def test_a_batch_index_updates_as_the_sample_index_does() -> None:
    buffer = rows_buffer(eps=0.0)
    batch = buffer.sample(6)
    assert buffer.update_priority(batch["_index"], torch.full((6,), 3.0)) == 6
    assert set(buffer.sampler.priorities()[batch["_index"][:, 0]].tolist()) == {3.0}
    assert buffer.sampler.max_priority == 3.0


@pytest.mark.parametrize("value", [math.nan, -1.0, math.inf])
def test_a_bad_priority_raises_and_changes_nothing(value: float) -> None:
    buffer = rows_buffer()
    index = buffer.sample_index(4)
    before = buffer.sampler.priorities()
    with pytest.raises(ValueError, match="priority"):
        buffer.update_priority(index, torch.tensor([1.0, value, 1.0, 1.0]))
    assert torch.equal(buffer.sampler.priorities(), before)


@pytest.mark.parametrize(
    ("index", "error", "message"),
    [
        (torch.zeros(3, 2), TypeError, "integer rows"),
        (torch.zeros(3, dtype=torch.int64), ValueError, r"\[n, 2\]"),
        ([0, 1], TypeError, "SampleIndex"),
        (torch.tensor([[99, 1]]), IndexError, r"index: expected rows in \[0, 8\)"),
    ],
)
def test_a_malformed_index_raises_typed_errors(
    index: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        rows_buffer().update_priority(index, [1.0] * 3)  # type: ignore[arg-type]


def test_an_index_without_write_counts_is_refused() -> None:
    uniform = DictBuffer(capacity=4)
    uniform.extend({"obs": torch.zeros(4)})
    with pytest.raises(ValueError, match="no write counts"):
        rows_buffer().update_priority(uniform.sample_index(2), [1.0, 1.0])


def test_a_buffer_without_a_prioritized_sampler_refuses_updates() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"obs": torch.zeros(4)})
    with pytest.raises(TypeError, match="not a PrioritizedSampler"):
        buffer.update_priority(buffer.sample_index(2), [1.0, 1.0])


def test_priorities_drive_what_a_dict_buffer_draws() -> None:
    buffer = rows_buffer(capacity=8, rows=8, alpha=1.0, eps=0.0)
    every = torch.arange(8)
    index = buffer.sample_index(1)
    # An index over every row, drawn at the current write counts.
    full = type(index)(every, 1, writes=torch.ones(8, dtype=torch.int64))
    buffer.update_priority(full, torch.arange(8.0))
    drawn = np.bincount(buffer.sample(100_000)["act"].numpy(), minlength=8)
    assert drawn[0] == 0
    assert chisquare(drawn[1:], np.arange(1.0, 8.0) / 28 * 100_000).pvalue > P_VALUE


# ------------------------------------------------------------------- windows
def valid_windows(buffer: TrajectoryDictBufferMultiDim, need: int) -> list[tuple[int, int]]:
    table = buffer.trajectories()
    return [
        (start, env)
        for env, first, last in zip(
            table.env.tolist(), table.start.tolist(), table.stop.tolist(), strict=True
        )
        for start in range(first, last - need + 2)
    ]


@pytest.mark.parametrize("rounds", [4, 0], ids=["rejection", "exact"])
@pytest.mark.parametrize("reduction", ["max", "mean"])
def test_windows_are_drawn_in_proportion_to_their_rows_priorities(
    reduction: str, rounds: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rounds 0: every window comes from the exact draw over all windows (the fallback).
    monkeypatch.setattr(prioritized, "_ROUNDS", rounds)
    buffer = online_buffer(reduction, alpha=0.8, eps=0.0)
    held = len(buffer) * 2
    priorities = np.random.default_rng(3).random(held) * 4
    priorities[5] = 0.0
    buffer.sampler.update(np.arange(held), priorities)
    seq, need = 3, 4
    windows = valid_windows(buffer, need)

    def window_rows(start: int, env: int) -> list[int]:
        return [(start + j) % 12 * 2 + env for j in range(seq)]

    reduce = np.max if reduction == "max" else np.mean
    weights = np.array([reduce(priorities[window_rows(s, e)]) ** 0.8 for s, e in windows])
    first_rows = [window_rows(s, e)[0] for s, e in windows]
    draws = 60_000
    drawn = buffer.sample_index(draws * seq, seq).rows.view(draws, seq)[:, 0].numpy()
    observed = np.array([(drawn == row).sum() for row in first_rows])
    assert observed.sum() == draws  # every drawn window is a valid one
    assert chisquare(observed, weights / weights.sum() * draws).pvalue > P_VALUE


def test_a_windows_weight_is_on_each_of_its_rows() -> None:
    buffer = online_buffer(alpha=1.0, beta=1.0, eps=0.0)
    held = len(buffer) * 2
    priorities = np.linspace(1.0, 2.0, held)
    buffer.sampler.update(np.arange(held), priorities)
    index = buffer.sample_index(30, 3)
    rows = index.rows.view(10, 3).numpy()
    assert index.weights is not None
    weights = index.weights.view(10, 3).numpy()
    expected = (priorities[rows].max(axis=1) / priorities[: held].min()) ** -1.0
    assert weights == pytest.approx(np.repeat(expected[:, None], 3, axis=1), rel=1e-6)


def test_windows_keep_the_trajectory_positions_sample_index_gives() -> None:
    buffer = online_buffer()
    index = buffer.sample_index(30, 3)
    table = buffer.trajectories()
    assert index.trajectory is not None
    env = index.env.view(10, 3)[:, 0]
    assert torch.equal(table.env[index.trajectory], env)


def test_no_window_long_enough_raises_and_keeps_the_stream() -> None:
    buffer = online_buffer()
    state = buffer._generator.get_state()
    with pytest.raises(ValueError, match="No trajectories with length >= 9"):
        buffer.sample(8, 8)
    assert torch.equal(buffer._generator.get_state(), state)


def test_online_updates_skip_overwritten_rows() -> None:
    buffer = online_buffer(eps=0.0)
    index = buffer.sample_index(300, 3)
    written_over = {(buffer.cursor * 2) + e for e in range(2)}
    done = torch.zeros(1, 2, dtype=torch.bool)
    buffer.extend({"observation": torch.zeros(1, 2, 1), "done": done})
    updated = buffer.update_priority(index, torch.full((300,), 7.0))
    assert updated == sum(1 for row in index.rows.tolist() if row not in written_over)


# -------------------------------------------------------------- save and load
def test_a_saved_dict_buffer_loads_with_its_sampler_and_stream(tmp_path: Path) -> None:
    buffer = rows_buffer(alpha=0.5, beta=0.2, eps=0.01)
    buffer.update_priority(buffer.sample_index(8), torch.linspace(0.0, 3.0, 8))
    buffer.save(tmp_path / "b")
    loaded = load_buffer(tmp_path / "b")
    assert isinstance(loaded.sampler, PrioritizedSampler)
    assert loaded.sampler.config() == buffer.sampler.config()
    assert torch.equal(loaded.sampler.priorities(), buffer.sampler.priorities())
    for _ in range(3):
        ours, theirs = buffer.sample(32), loaded.sample(32)
        for key in ours:
            assert torch.equal(ours[key], theirs[key])
        buffer.update_priority(ours["_index"], ours["obs"][:, 0])
        loaded.update_priority(theirs["_index"], theirs["obs"][:, 0])


def test_the_priorities_are_a_dataset_of_buffer_hdf5(tmp_path: Path) -> None:
    buffer = rows_buffer()
    buffer.save(tmp_path / "b")
    with h5py.File(tmp_path / "b" / "buffer.hdf5", "r") as h5:
        stored = h5["_sampler-priority"][()]
    assert stored.dtype == np.float64 and stored.tolist() == buffer.sampler.priorities().tolist()
    state = (tmp_path / "b" / "state.json").read_text()
    assert '"sampler"' in state and '"priority"' not in state


def test_inspect_sees_the_sampler_and_its_leaf(tmp_path: Path) -> None:
    buffer = rows_buffer(alpha=0.5)
    buffer.sample_index(4)
    buffer.save(tmp_path / "b")
    summary = summarize_checkpoint(tmp_path / "b")
    assert ("_sampler", "priority") in [row.key_path for row in summary.spec]
    assert read_leaf(tmp_path / "b", ("_sampler", "priority")).tolist() == [1.0] * 8
    assert summary.sampler is not None
    assert (summary.sampler.kind, summary.sampler.steps) == ("prioritized", 1)
    assert summary.sampler.options["alpha"] == 0.5
    text = "\n".join(render(inspect_path(tmp_path / "b")))
    assert "sampler    prioritized (alpha 0.5" in text


def test_a_summary_gives_the_quantiles_of_the_saved_priorities_and_weights(
    tmp_path: Path,
) -> None:
    buffer = rows_buffer(alpha=1.0, beta=0.5, anneal_steps=None, eps=0.0)
    buffer.update_priority(buffer.sample_index(8, generator=generator(3)), torch.full((8,), 4.0))
    buffer.save(tmp_path / "b")
    summary = summarize_checkpoint(tmp_path / "b")
    assert summary.sampler is not None and summary.sampler.stats is not None
    stored = buffer.sampler.priorities().numpy()
    assert summary.sampler.stats == {
        **priority_maths.priority_quantiles(stored),
        **priority_maths.importance_quantiles(stored, alpha=1.0, beta=0.5),
    }
    assert summary.sampler.stats == {key: value for key, value in buffer.sampler.stats().items()
                                     if key not in ("beta", "max_priority")}


def test_an_empty_prioritized_buffer_summarizes_with_no_priority_figures(
    tmp_path: Path,
) -> None:
    DictBuffer(capacity=4, sampler=PrioritizedSampler()).save(tmp_path / "b")
    summary = summarize_checkpoint(tmp_path / "b")
    assert summary.sampler is not None and summary.sampler.stats is not None
    assert set(summary.sampler.stats.values()) == {None}
    assert "priorities: none held" in "\n".join(render(inspect_path(tmp_path / "b")))


def test_saved_priorities_a_load_refuses_are_refused_by_the_summary(tmp_path: Path) -> None:
    rows_buffer().save(tmp_path / "b")
    payload = tmp_path / "b" / "buffer.hdf5"
    with h5py.File(payload, "r+") as h5:
        h5["_sampler-priority"][2] = -1.0
    raw = payload.read_bytes()

    def point_at(manifest: dict[str, Any]) -> None:
        entry = manifest["files"]["buffer.hdf5"]
        size = entry["block_bytes"]
        entry["size"] = len(raw)
        entry["sha256_blocks"] = [
            hashlib.sha256(raw[i : i + size]).hexdigest() for i in range(0, len(raw), size)
        ]

    reseal(tmp_path / "b", point_at)
    for read in (summarize_checkpoint, load_buffer):
        with pytest.raises(CorruptCheckpointError, match=r"\['_sampler'\]\['priority'\]"):
            read(tmp_path / "b")


def test_a_partial_load_keeps_the_sampler_and_stream(tmp_path: Path) -> None:
    buffer = rows_buffer()
    buffer.update_priority(buffer.sample_index(8), torch.arange(8.0))
    buffer.save(tmp_path / "b")
    partial = DictBuffer.load(tmp_path / "b", leaves=["act"])
    assert partial._storage.absent == {("obs",)}
    assert torch.equal(partial.sample_index(16).rows, buffer.sample_index(16).rows)


def test_a_state_dict_round_trips_in_memory() -> None:
    buffer = rows_buffer()
    buffer.update_priority(buffer.sample_index(8), torch.arange(8.0))
    copy = DictBuffer.from_state_dict(buffer.state_dict())
    assert torch.equal(copy.sampler.priorities(), buffer.sampler.priorities())
    assert torch.equal(copy.sample_index(16).weights, buffer.sample_index(16).weights)


def test_an_empty_prioritized_buffer_saves_and_loads(tmp_path: Path) -> None:
    DictBuffer(capacity=4, sampler=PrioritizedSampler(alpha=0.3)).save(tmp_path / "b")
    loaded = load_buffer(tmp_path / "b")
    assert isinstance(loaded.sampler, PrioritizedSampler) and loaded.sampler.alpha == 0.3
    loaded.extend({"obs": torch.zeros(2)})
    assert loaded.sample(2)["_weight"].tolist() == [1.0, 1.0]


def test_a_saved_online_buffer_loads_with_its_sampler_and_stream(tmp_path: Path) -> None:
    buffer = online_buffer("mean")
    buffer.update_priority(buffer.sample_index(30, 3), torch.rand(30, generator=generator()))
    buffer.save(tmp_path / "o")
    loaded = load_buffer(tmp_path / "o")
    assert loaded.sampler.reduction == "mean"
    for _ in range(3):
        ours, theirs = buffer.sample_index(30, 3), loaded.sample_index(30, 3)
        assert torch.equal(ours.rows, theirs.rows) and torch.equal(ours.weights, theirs.weights)


def test_loading_a_state_without_a_sampler_keeps_the_given_one() -> None:
    uniform = DictBuffer(capacity=8, seed=0)
    uniform.extend({"obs": torch.zeros(5, 1), "act": torch.zeros(5, dtype=torch.int64)})
    buffer = rows_buffer(eps=0.0)
    sampler = buffer.sampler
    buffer.update_priority(buffer.sample_index(8), torch.full((8,), 4.0))
    buffer.load_state_dict(uniform.state_dict())
    assert buffer.sampler is sampler
    assert buffer.sampler.priorities().tolist() == [4.0] * 5  # the largest priority seen


def test_a_mangled_sampler_state_is_a_corrupt_checkpoint(tmp_path: Path) -> None:
    state = rows_buffer().state_dict()
    state["state"]["sampler"]["config"]["alpha"] = -1
    with pytest.raises(ValueError, match=r"state\['sampler'\]\['config'\].*alpha"):
        DictBuffer.from_state_dict(state)
    state = rows_buffer().state_dict()
    state["rows"][("_sampler", "priority")] = torch.full((8,), math.nan, dtype=torch.float64)
    with pytest.raises(ValueError, match="priority"):
        DictBuffer.from_state_dict(state)


@pytest.mark.parametrize("device", DEVICES)
def test_prioritized_rows_and_windows_on_every_device(device: str, tmp_path: Path) -> None:
    rows = DictBuffer(capacity=8, device=device, seed=0, sampler=PrioritizedSampler())
    rows.extend({"obs": torch.arange(10.0, device=device)[:, None]})
    batch = rows.sample(6)
    assert batch["_weight"].device == batch["_index"].device == batch["obs"].device
    assert rows.update_priority(batch["_index"], batch["obs"][:, 0]) == 6
    windows = TrajectoryDictBufferMultiDim(
        capacity=12, n_dim=2, seq_length=3, device=device, seed=0, sampler=PrioritizedSampler()
    )
    for step in range(20):
        done = torch.tensor([[step % 5 == 4, False]], device=device)
        windows.extend({"observation": torch.zeros(1, 2, 1, device=device), "done": done})
    index = windows.sample_index(12, 3)
    assert index.rows.device == index.weights.device == index.writes.device
    assert windows.update_priority(index, torch.ones(12, device=device)) == 12
    windows.save(tmp_path / "w")
    loaded = load_buffer(tmp_path / "w")
    assert torch.equal(loaded.sample_index(12, 3).rows, windows.sample_index(12, 3).rows)


def test_an_update_of_a_buffer_never_written_is_refused() -> None:
    buffer = DictBuffer(capacity=4, sampler=PrioritizedSampler())
    with pytest.raises(ValueError, match="holds no rows"):
        buffer.update_priority(torch.tensor([[0, 1]]), [1.0])

"""Trajectory windows against a plain-Python model built from the end flags.

The model keeps every written row's flags, takes the surviving ones (the last ``capacity`` time
rows), and cuts each env column into trajectories: one starts at the oldest surviving row and
after every flagged row, and one ends at every flagged row and at the newest row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.buffers.online import TrajectoryDictBufferMultiDim
from bufcore.sampling.boundaries import OnlineBoundaries
from tests.support import valid_starts


@dataclass
class Case:
    capacity: int
    env_count: int
    blocks: list[list[list[bool]]]  # extends of [n][E] end flags
    seq_length: int
    offset: int
    weighting: str

    @property
    def rows(self) -> list[list[bool]]:
        return [row for block in self.blocks for row in block]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    capacity = draw(st.integers(1, 6))
    env_count = draw(st.integers(1, 3))
    row = st.lists(st.booleans(), min_size=env_count, max_size=env_count)
    blocks = draw(st.lists(st.lists(row, max_size=2 * capacity + 1), min_size=1, max_size=6))
    return Case(
        capacity=capacity,
        env_count=env_count,
        blocks=blocks,
        seq_length=draw(st.integers(1, 4)),
        offset=draw(st.integers(0, 1)),
        weighting=draw(st.sampled_from(["trajectory", "window"])),
    )


def model_trajectories(case: Case) -> list[tuple[int, int, int]]:
    """(env, first absolute time, last absolute time) of every surviving trajectory."""
    rows = case.rows
    steps = len(rows)
    surviving = range(max(0, steps - case.capacity), steps)
    result = []
    for env in range(case.env_count):
        first = None
        for t in surviving:
            first = t if first is None else first
            if rows[t][env] or t == steps - 1:
                result.append((env, first, t))
                first = None
    return result


def model_valid_starts(case: Case) -> list[tuple[int, int]]:
    need = case.seq_length + case.offset
    return sorted(
        (t, env)
        for env, first, last in model_trajectories(case)
        for t in range(first, last - need + 2)
    )


@settings(max_examples=150)
@given(cases())
def test_every_valid_start_is_listed_and_nothing_else(case: Case) -> None:
    boundaries = OnlineBoundaries(case.capacity, device=torch.device("cpu"))
    for block in case.blocks:
        boundaries.extend(torch.tensor(block, dtype=torch.bool).reshape(-1, case.env_count))
    table = boundaries.table()
    got_trajectories = sorted(
        zip(table.env.tolist(), table.start.tolist(), table.stop.tolist(), strict=True)
    )
    assert got_trajectories == sorted(model_trajectories(case))
    start, env = valid_starts(table, case.seq_length + case.offset)
    assert sorted(zip(start.tolist(), env.tolist(), strict=True)) == model_valid_starts(case)


def tagged_block(first: int, block: list[list[bool]], env_count: int) -> dict[str, Any]:
    """Rows ``[n, E, ...]`` whose observation is (absolute time, env)."""
    n = len(block)
    time = np.broadcast_to(np.arange(first, first + n)[:, None], (n, env_count))
    env = np.broadcast_to(np.arange(env_count)[None], (n, env_count))
    return {
        "observation": np.stack([time, env], -1).astype(np.int64),
        "done": np.array(block, dtype=bool).reshape(n, env_count, 1),
    }


@settings(max_examples=100)
@given(cases(), st.integers(0, 2**16))
def test_sampled_windows_lie_inside_one_trajectory_with_next_rows_after_them(
    case: Case, seed: int
) -> None:
    buffer = TrajectoryDictBufferMultiDim(
        capacity=case.capacity,
        n_dim=2,
        seq_length=case.seq_length,
        output_key_tp1=["observation"] if case.offset else [],
        weighting=case.weighting,
        seed=seed,
    )
    written = 0
    for block in case.blocks:
        buffer.extend(tagged_block(written, block, case.env_count))
        written += len(block)
    batch_size = 4 * case.seq_length
    valid = set(model_valid_starts(case))
    if not valid:
        with pytest.raises(ValueError):
            buffer.sample(batch_size)
        return
    batch = buffer.sample(batch_size)
    rows = batch["observation"].view(4, case.seq_length, 2)
    owner = {
        (t, env): (first, last)
        for env, first, last in model_trajectories(case)
        for t in range(first, last + 1)
    }
    for window in rows.tolist():
        t0, env = window[0]
        assert (t0, env) in valid
        assert window == [[t0 + j, env] for j in range(case.seq_length)]
        _, last = owner[(t0, env)]
        assert t0 + case.seq_length - 1 + case.offset <= last
    if case.offset:
        after = batch["next"]["observation"].view(4, case.seq_length, 2)
        assert torch.equal(after[..., 0], rows[..., 0] + 1)
        assert torch.equal(after[..., 1], rows[..., 1])


# ------------------------------------------------------------------------ expert buffer
@st.composite
def expert_cases(draw: st.DrawFn) -> tuple[list[int], int, int, str]:
    lengths = draw(st.lists(st.integers(1, 9), min_size=1, max_size=6))
    return (
        lengths,
        draw(st.integers(1, 5)),
        draw(st.integers(0, 1)),
        draw(st.sampled_from(["trajectory", "window"])),
    )


def expert_buffer(
    lengths: list[int], seq_length: int, offset: int, weighting: str, seed: int
) -> TrajectoryDictBuffer:
    """Episodes laid end to end; each row's observation is (global row, episode)."""
    episodes = []
    first = 0
    for index, length in enumerate(lengths):
        rows = np.arange(first, first + length)
        episodes.append(
            {
                "observation": np.stack([rows, np.full(length, index)], 1),
                "motion_id": np.full(length, index),
            }
        )
        first += length
    return TrajectoryDictBuffer(
        episodes,
        seq_length=seq_length,
        output_key_tp1=["observation"] if offset else [],
        weighting=weighting,
        seed=seed,
    )


def expert_valid_starts(lengths: list[int], need: int) -> list[int]:
    firsts = np.cumsum([0, *lengths[:-1]]).tolist()
    return [f + k for f, n in zip(firsts, lengths, strict=True) for k in range(n - need + 1)]


@settings(max_examples=100)
@given(expert_cases())
def test_every_valid_expert_start_is_listed_and_nothing_else(
    case: tuple[list[int], int, int, str],
) -> None:
    lengths, seq_length, offset, weighting = case
    buffer = expert_buffer(lengths, seq_length, offset, weighting, seed=0)
    start, env = valid_starts(buffer.trajectories(), seq_length + offset)
    assert start.tolist() == expert_valid_starts(lengths, seq_length + offset)
    assert set(env.tolist()) <= {0}


@settings(max_examples=100)
@given(expert_cases(), st.integers(0, 2**16))
def test_sampled_expert_windows_stay_inside_one_episode(
    case: tuple[list[int], int, int, str], seed: int
) -> None:
    lengths, seq_length, offset, weighting = case
    buffer = expert_buffer(lengths, seq_length, offset, weighting, seed)
    valid = set(expert_valid_starts(lengths, seq_length + offset))
    if not valid:
        with pytest.raises(ValueError, match="No trajectories"):
            buffer.sample(4 * seq_length)
        return
    batch = buffer.sample(4 * seq_length)
    rows = batch["observation"].view(4, seq_length, 2)
    for window in rows.tolist():
        first, episode = window[0]
        assert first in valid
        assert window == [[first + j, episode] for j in range(seq_length)]
    if offset:
        after = batch["next"]["observation"].view(4, seq_length, 2)
        assert torch.equal(after[..., 0], rows[..., 0] + 1)
        assert torch.equal(after[..., 1], rows[..., 1])

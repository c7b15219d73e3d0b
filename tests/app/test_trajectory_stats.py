"""Trajectory statistics without Streamlit: lengths from end flags against the buffers' own
trajectory tables, samplable fractions, bins."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from app.trajectory_stats import (
    Trajectories,
    env_length_counts,
    expert_from_leaves,
    from_end_flags,
    length_bins,
    samplability,
    samplable_curve,
)
from bufcore import TrajectoryDictBuffer, TrajectoryDictBufferMultiDim
from bufcore.inspect import WindowSettings


def _settings(offset: int, seq_length: int = 1) -> WindowSettings:
    return WindowSettings(seq_length, offset, "trajectory", ("done",), None, None, None)


def _sorted(traj: Trajectories) -> list[tuple[int, int]]:
    return sorted(zip(traj.env.tolist(), traj.length.tolist(), strict=True))


@pytest.mark.parametrize("capacity", [1, 2, 7, 10])
@pytest.mark.parametrize("envs", [1, 3])
@pytest.mark.parametrize("steps", [1, 5, 23])
def test_lengths_from_physical_end_flags_match_the_online_buffers_table(
    capacity: int, envs: int, steps: int
) -> None:
    buffer = TrajectoryDictBufferMultiDim(capacity=capacity, n_dim=2, end_key="done")
    generator = torch.Generator().manual_seed(capacity * 100 + envs * 10 + steps)
    for _ in range(steps):
        done = torch.rand(1, envs, 1, generator=generator) < 0.3
        buffer.extend({"observation": torch.randn(1, envs, 2), "done": done})
    rows = len(buffer)
    end = buffer.storage["done"][:rows].numpy()
    lazy = from_end_flags(end, cursor=buffer.cursor, full=buffer.is_full)
    table = buffer.trajectories()
    loaded = Trajectories(env=table.env.numpy(), length=table.lengths.numpy())
    assert _sorted(lazy) == _sorted(loaded)


@pytest.mark.parametrize("lengths", [[1], [2, 3], [5, 1, 7], [4, 4, 4, 4, 4]])
def test_expert_lengths_from_leaves_match_the_expert_buffer(lengths: list[int]) -> None:
    episodes = [
        {"observation": np.zeros((n, 2), np.float32), "motion_id": np.full((n, 1), 10 + i)}
        for i, n in enumerate(lengths)
    ]
    buffer = TrajectoryDictBuffer(episodes)
    lazy = expert_from_leaves(buffer.storage["done"].numpy(), buffer.storage["motion_id"].numpy())
    assert lazy.length.tolist() == buffer.lengths.tolist() == lengths
    assert lazy.motion_id.tolist() == list(buffer.motion_ids)


@pytest.mark.parametrize(("seq_length", "offset"), [(1, 0), (1, 1), (2, 1), (3, 0), (7, 1)])
def test_samplability_counts_trajectories_windows_and_rows_a_window_can_return(
    seq_length: int, offset: int
) -> None:
    lengths = np.array([1, 2, 3, 5, 8])
    stats = samplability(lengths, _settings(offset), seq_length)
    need = seq_length + offset
    assert stats.need == need
    assert stats.samplable_trajectories == sum(1 for n in lengths if n >= need)
    assert stats.windows == sum(max(0, n - need + 1) for n in lengths)
    # Rows covered by some window's t rows, counted one by one.
    covered = sum(
        len({s + i for s in range(n - need + 1) for i in range(seq_length)}) for n in lengths
    )
    assert stats.samplable_transitions == covered
    assert stats.transitions == lengths.sum()


def test_samplability_of_no_trajectories_is_zero_not_a_division_error() -> None:
    stats = samplability(np.array([], dtype=np.int64), _settings(1), 2)
    assert stats.trajectory_fraction == 0.0 and stats.transition_fraction == 0.0


@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("lengths", [[1], [2, 2], [1, 3, 9, 9, 30]])
def test_the_samplable_curve_agrees_with_samplability_at_every_seq_length(
    offset: int, lengths: list[int]
) -> None:
    values = np.array(lengths)
    curve = samplable_curve(values, _settings(offset))
    for seq, traj, rows in zip(curve.seq_length, curve.trajectory_fraction,
                               curve.transition_fraction, strict=True):
        stats = samplability(values, _settings(offset), int(seq))
        assert traj == pytest.approx(stats.trajectory_fraction)
        assert rows == pytest.approx(stats.transition_fraction)


@pytest.mark.parametrize("lengths", [[1], [1, 2], [3, 3, 3], list(range(1, 500, 7))])
def test_length_bins_are_whole_numbers_covering_every_length(lengths: list[int]) -> None:
    edges = length_bins(np.array(lengths), max_bins=60)
    assert len(edges) - 1 <= 60
    assert edges[0] <= min(lengths) and edges[-1] > max(lengths)
    assert np.issubdtype(edges.dtype, np.integer)


def test_env_length_counts_put_each_trajectory_in_its_env_row() -> None:
    traj = Trajectories(env=np.array([0, 0, 2]), length=np.array([1, 5, 5]))
    counts = env_length_counts(traj, 3, np.array([1, 3, 6]))
    assert counts.tolist() == [[1, 1], [0, 0], [0, 1]]

"""Episode boundaries: the full scan (REFERENCE §3.1) and the incremental online tables."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bufcore.sampling.boundaries import OnlineBoundaries, find_start_stop_traj

CPU = torch.device("cpu")


def flags_1d(rows: int, ends: list[int]) -> torch.Tensor:
    end = torch.zeros(rows, dtype=torch.bool)
    end[ends] = True
    return end


def as_lists(result: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> tuple[list, list, list]:
    start, stop, lengths = result
    return start.tolist(), stop.tolist(), lengths.tolist()


# ------------------------------------------------------------ REFERENCE §3.1 examples
@pytest.mark.parametrize("shape", [(9,), (9, 1), (9, 3)])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.float32])
@pytest.mark.parametrize("at_capacity", [False, True])
def test_the_scan_never_modifies_its_input(
    shape: tuple[int, ...], dtype: torch.dtype, at_capacity: bool
) -> None:
    end = torch.zeros(shape, dtype=dtype)
    end[2] = 1
    before = end.clone()
    find_start_stop_traj(end, at_capacity=at_capacity, cursor=4 if at_capacity else None)
    assert torch.equal(end, before)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64, torch.float32])
def test_numeric_flags_scan_like_bool_flags(dtype: torch.dtype) -> None:
    end = flags_1d(9, [2, 6])
    expected = as_lists(find_start_stop_traj(end, at_capacity=True, cursor=4))
    assert as_lists(find_start_stop_traj(end.to(dtype), at_capacity=True, cursor=4)) == expected


def test_not_at_capacity_the_last_row_ends_the_episode_in_progress() -> None:
    got = as_lists(find_start_stop_traj(flags_1d(9, [2, 6]), at_capacity=False))
    assert got == ([[0], [3], [7]], [[2], [6], [8]], [3, 4, 2])


def test_at_capacity_without_cursor_the_first_trajectory_wraps_around() -> None:
    got = as_lists(find_start_stop_traj(flags_1d(9, [2, 6]), at_capacity=True))
    assert got == ([[7], [3]], [[2], [6]], [5, 4])


def test_at_capacity_the_cursor_row_ends_a_trajectory() -> None:
    got = as_lists(find_start_stop_traj(flags_1d(9, [2, 6]), at_capacity=True, cursor=4))
    assert got == ([[7], [3], [5]], [[2], [4], [6]], [5, 2, 2])


def test_at_capacity_without_any_end_the_whole_ring_is_one_trajectory() -> None:
    got = as_lists(find_start_stop_traj(flags_1d(9, []), at_capacity=True))
    assert got == ([[0]], [[8]], [9])


def test_two_dimensional_flags_not_at_capacity() -> None:
    end = torch.zeros(5, 2, dtype=torch.bool)
    end[1, 0] = end[3, 1] = True
    start, _, lengths = find_start_stop_traj(end, at_capacity=False)
    assert start.tolist() == [[0, 0], [2, 0], [0, 1], [4, 1]]
    assert lengths.tolist() == [2, 3, 4, 1]


def test_two_dimensional_flags_at_capacity_with_cursor() -> None:
    end = torch.zeros(5, 2, dtype=torch.bool)
    end[1, 0] = end[3, 1] = True
    start, _, lengths = find_start_stop_traj(end, at_capacity=True, cursor=2)
    assert start.tolist() == [[3, 0], [2, 0], [4, 1], [3, 1]]
    assert lengths.tolist() == [4, 1, 4, 1]


def test_a_negative_cursor_counts_from_the_end() -> None:
    end = flags_1d(9, [2, 6])
    negative = as_lists(find_start_stop_traj(end, at_capacity=True, cursor=-1))
    assert negative == as_lists(find_start_stop_traj(end, at_capacity=True, cursor=8))


def test_a_cursor_that_is_not_an_int_is_refused() -> None:
    with pytest.raises(TypeError, match="cursor"):
        find_start_stop_traj(flags_1d(4, [1]), at_capacity=True, cursor=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("cursor", [4, -5])
def test_a_cursor_outside_the_ring_is_refused(cursor: int) -> None:
    with pytest.raises(ValueError, match=r"cursor: expected an int in \[-4, 3\]"):
        find_start_stop_traj(flags_1d(4, [1]), at_capacity=True, cursor=cursor)


@pytest.mark.parametrize("shape", [(0,), (2, 2, 2)])
def test_flags_that_are_empty_or_three_dimensional_are_refused(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="end"):
        find_start_stop_traj(torch.zeros(shape, dtype=torch.bool))


# ---------------------------------------------------------------- online tables
def online_physical(boundaries: OnlineBoundaries) -> list[tuple[int, int, int]]:
    """(physical start, env, length) of every live trajectory, sorted."""
    table = boundaries.table()
    cap = boundaries.capacity
    return sorted(
        (s % cap, e, t - s + 1)
        for s, e, t in zip(
            table.start.tolist(), table.env.tolist(), table.stop.tolist(), strict=True
        )
    )


def scanned_physical(ring: torch.Tensor, rows: int, cursor: int, full: bool) -> list:
    start, _, lengths = find_start_stop_traj(ring[:rows], at_capacity=full, cursor=cursor - 1)
    return sorted((s, e, n) for (s, e), n in zip(start.tolist(), lengths.tolist(), strict=True))


def test_the_reference_full_buffer_example_gives_its_four_trajectories() -> None:
    boundaries = OnlineBoundaries(6, device=CPU)
    for t in range(8):
        boundaries.extend(torch.tensor([[t == 2, t == 4]]))
    table = boundaries.table()
    got = list(zip(table.env.tolist(), table.start.tolist(), table.stop.tolist(), strict=True))
    assert got == [(0, 2, 2), (0, 3, 7), (1, 2, 4), (1, 5, 7)]


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("env_count", [1, 3])
def test_one_step_extends_match_a_full_rescan_after_every_step(
    capacity: int, env_count: int
) -> None:
    generator = torch.Generator().manual_seed(capacity * 10 + env_count)
    boundaries = OnlineBoundaries(capacity, device=CPU)
    ring = torch.zeros(capacity, env_count, dtype=torch.bool)
    for step in range(4 * capacity + 3):
        flags = torch.rand(1, env_count, generator=generator) < 0.3
        ring[step % capacity] = flags[0]
        boundaries.extend(flags)
        rows = min(step + 1, capacity)
        full = step + 1 >= capacity
        expected = scanned_physical(ring, rows, (step + 1) % capacity, full)
        assert online_physical(boundaries) == expected


@pytest.mark.parametrize("capacity", [1, 2, 5, 8])
@pytest.mark.parametrize("sizes", [[3, 1, 4], [1, 9], [12], [2, 2, 2, 2, 2]])
def test_block_extends_equal_one_step_extends(capacity: int, sizes: list[int]) -> None:
    generator = torch.Generator().manual_seed(sum(sizes) + capacity)
    flags = torch.rand(sum(sizes), 2, generator=generator) < 0.35
    stepwise = OnlineBoundaries(capacity, device=CPU)
    for row in flags:
        stepwise.extend(row[None])
    blocks = OnlineBoundaries(capacity, device=CPU)
    for part in torch.split(flags, sizes):
        blocks.extend(part)
    assert online_physical(blocks) == online_physical(stepwise)
    assert (blocks.oldest, blocks.newest) == (stepwise.oldest, stepwise.newest)


@pytest.mark.parametrize("steps", [0, 3, 5, 11])
def test_rebuilding_from_physical_flags_equals_the_incremental_tables(steps: int) -> None:
    capacity = 5
    generator = torch.Generator().manual_seed(steps)
    flags = torch.rand(steps, 2, generator=generator) < 0.3
    incremental = OnlineBoundaries(capacity, device=CPU)
    ring = torch.zeros(capacity, 2, dtype=torch.bool)
    for t, row in enumerate(flags):
        incremental.extend(row[None])
        ring[t % capacity] = row
    rebuilt = OnlineBoundaries(capacity, device=CPU)
    rebuilt.extend(torch.ones(2, 2, dtype=torch.bool))
    rows = min(steps, capacity)
    rebuilt.rebuild(ring[:rows], cursor=steps % capacity, is_full=steps >= capacity)
    assert online_physical(rebuilt) == online_physical(incremental)


def test_an_env_whose_episode_never_ends_does_not_disturb_the_others() -> None:
    capacity = 4
    boundaries = OnlineBoundaries(capacity, device=CPU)
    for _ in range(50):
        boundaries.extend(torch.tensor([[False, True]]))
    assert online_physical(boundaries) == sorted(
        [(2, 0, 4), (0, 1, 1), (1, 1, 1), (2, 1, 1), (3, 1, 1)]
    )


def test_flags_with_another_env_count_are_refused_and_change_nothing() -> None:
    boundaries = OnlineBoundaries(3, device=CPU)
    boundaries.extend(torch.tensor([[True, False]]))
    before = online_physical(boundaries)
    with pytest.raises(ValueError, match="expected 2 envs"):
        boundaries.extend(torch.tensor([[True, False, True]]))
    assert online_physical(boundaries) == before


def test_an_empty_extend_is_a_no_op() -> None:
    boundaries = OnlineBoundaries(3, device=CPU)
    boundaries.extend(torch.zeros(0, 2, dtype=torch.bool))
    assert len(boundaries) == 0
    assert boundaries.table().env.numel() == 0


def test_find_start_stop_traj_reads_numpy_flags_in_either_byte_order() -> None:
    native = find_start_stop_traj(torch.tensor([0, 1, 0, 1]), True)
    for flags in (np.array([0, 1, 0, 1], "<i2"), np.array([0, 1, 0, 1], ">i2"), [0, 1, 0, 1]):
        got = find_start_stop_traj(flags, True)
        assert all(torch.equal(a, b) for a, b in zip(got, native, strict=True))


@pytest.mark.parametrize(
    "end",
    [
        torch.zeros(4, device="meta"),
        torch.zeros(4, 1).to_sparse(),
        torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)], layout=torch.jagged),
        ["a", "b"],
    ],
)
def test_find_start_stop_traj_refuses_flags_without_dense_numbers_naming_end(end: Any) -> None:
    with pytest.raises(TypeError, match=r"^end: "):
        find_start_stop_traj(end, True)


@pytest.mark.parametrize("at_capacity", ["no", 1, None])
def test_find_start_stop_traj_refuses_an_at_capacity_that_is_not_a_bool(at_capacity: Any) -> None:
    with pytest.raises(TypeError, match=r"^at_capacity: expected a bool"):
        find_start_stop_traj(torch.tensor([0, 1]), at_capacity)

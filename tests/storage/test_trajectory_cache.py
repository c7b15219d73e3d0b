"""TrajectoryCache: RLinf's FIFO ring of slots of flattened trajectories (REFERENCE §9.3)."""

from __future__ import annotations

import pytest
import torch

from bufcore.storage.trajectory_cache import TrajectoryCache
from bufcore.tree import KeyPath


def rows(trajectory_id: int, count: int) -> dict[KeyPath, torch.Tensor]:
    """``count`` rows whose values say ``trajectory_id`` and the row."""
    values = 100 * trajectory_id + torch.arange(count)
    return {("x",): values.float()[:, None].repeat(1, 2), ("obs", "flag"): values % 2 == 0}


def held(cache: TrajectoryCache, trajectory_id: int) -> list[float]:
    got = cache.get(trajectory_id)
    assert got is not None
    return got[("x",)][:, 0].tolist()


def test_the_reference_example_evicts_first_in_first_out() -> None:
    cache = TrajectoryCache(2)
    for trajectory_id, count in [(1, 4), (2, 3), (3, 2)]:
        cache.put(trajectory_id, rows(trajectory_id, count), count)
    assert cache.cache == {2: 1, 3: 0}
    assert cache.slot_length == 4
    assert cache.get(1) is None
    assert held(cache, 2) == [200, 201, 202]
    assert held(cache, 3) == [300, 301]


def test_put_returns_the_evicted_id() -> None:
    cache = TrajectoryCache(1)
    assert cache.put(1, rows(1, 2), 2) is None
    assert cache.put(2, rows(2, 2), 2) == 1


def test_putting_a_cached_id_again_overwrites_it_in_place() -> None:
    cache = TrajectoryCache(2)
    cache.put(1, rows(1, 2), 2)
    cache.put(2, rows(2, 2), 2)
    cache.put(1, rows(5, 2), 2)
    assert cache.cache == {1: 0, 2: 1}
    assert held(cache, 1) == [500, 501]


def test_a_longer_trajectory_grows_the_slots_and_keeps_the_cached_rows() -> None:
    cache = TrajectoryCache(3)
    cache.put(1, rows(1, 2), 2)
    cache.put(2, rows(2, 5), 5)
    assert cache.slot_length == 5
    assert held(cache, 1) == [100, 101]
    assert held(cache, 2) == [200, 201, 202, 203, 204]
    assert cache.buffers[("x",)].shape == (15, 2)


def test_every_row_of_a_cached_trajectory_sits_at_slot_times_length_plus_local() -> None:
    cache = TrajectoryCache(2)
    cache.put(7, rows(7, 3), 3)
    cache.put(8, rows(8, 2), 2)
    slot = cache.cache[8]
    assert cache.buffers[("x",)][slot * cache.slot_length + 1, 0] == 801


@pytest.mark.parametrize("count", [1, 5, 17])
def test_an_unbounded_cache_keeps_everything(count: int) -> None:
    cache = TrajectoryCache(None)
    for trajectory_id in range(count):
        assert cache.put(trajectory_id, rows(trajectory_id, 2), 2) is None
    assert [held(cache, i) for i in range(count)] == [[100 * i, 100 * i + 1] for i in range(count)]


def test_an_unbounded_cache_reuses_a_discarded_slot_without_evicting() -> None:
    cache = TrajectoryCache(None)
    for trajectory_id in range(4):
        cache.put(trajectory_id, rows(trajectory_id, 1), 1)
    cache.discard(1)
    cache.put(9, rows(9, 1), 1)
    assert sorted(cache.cache) == [0, 2, 3, 9]
    assert held(cache, 0) == [0]


def test_reserve_allocates_so_that_the_puts_do_not() -> None:
    cache = TrajectoryCache(None)
    cache.reserve(6, 3, rows(0, 6))
    buffer = cache.buffers[("x",)]
    for trajectory_id in range(3):
        cache.put(trajectory_id, rows(trajectory_id, 6), 6)
    assert cache.buffers[("x",)] is buffer


def test_clear_forgets_everything_and_the_cache_fills_again() -> None:
    cache = TrajectoryCache(2)
    cache.put(1, rows(1, 2), 2)
    cache.clear()
    assert (len(cache), cache.nbytes, cache.get(1)) == (0, 0, None)
    cache.put(2, rows(2, 3), 3)
    assert held(cache, 2) == [200, 201, 202]


@pytest.mark.parametrize("size", [0, -1])
def test_a_cache_needs_a_slot(size: int) -> None:
    with pytest.raises(ValueError, match="max_size: expected an int >= 1"):
        TrajectoryCache(size)

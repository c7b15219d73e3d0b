"""RLinf's sliding window and bucketize mapping (REFERENCE §9.4), drawing exactly n rows."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from bufcore.sampling.chunk_window import ChunkWindow, SlidingWindowSampler, locate

COUNTS = [(0, 4), (1, 3), (2, 2)]  # (trajectory id, rows): the reference's example


def newest(items: list[tuple[int, int]]) -> Callable[[int], list[tuple[int, int]]]:
    return lambda k: items[-k:] if k else items


def test_the_reference_example_with_a_window_of_two() -> None:
    window = SlidingWindowSampler(2).window(0, newest(COUNTS))
    assert window.ids == (1, 2)
    assert window.ends.tolist() == [3, 5]
    draw = locate(window, torch.arange(5))
    assert [window.ids[p] for p in draw.position.tolist()] == [1, 1, 1, 2, 2]
    assert draw.local.tolist() == [0, 1, 2, 0, 1]


def test_a_window_of_zero_takes_every_trajectory() -> None:
    window = SlidingWindowSampler(0).window(0, newest(COUNTS))
    assert window.ids == (0, 1, 2)
    assert window.ends.tolist() == [4, 7, 9]
    draw = locate(window, torch.arange(9))
    assert draw.position.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2]
    assert draw.local.tolist() == [0, 1, 2, 3, 0, 1, 2, 0, 1]


@pytest.mark.parametrize("count", [1, 5, 1000])
def test_a_draw_returns_exactly_count_rows(count: int) -> None:
    sampler = SlidingWindowSampler(2)
    draw = sampler.draw(sampler.window(0, newest(COUNTS)), count, torch.Generator().manual_seed(0))
    assert draw.position.shape == draw.local.shape == (count,)


def test_every_row_of_the_window_is_equally_likely() -> None:
    sampler = SlidingWindowSampler(0)
    window = sampler.window(0, newest(COUNTS))
    draw = sampler.draw(window, 90_000, torch.Generator().manual_seed(1))
    global_rows = window.starts[draw.position] + draw.local
    frequency = torch.bincount(global_rows, minlength=9).double() / 90_000
    # 9 rows, 10k draws each expected: a binomial std of ~0.001; 5 sigma.
    assert torch.allclose(frequency, torch.full((9,), 1 / 9, dtype=torch.float64), atol=0.005)


def test_the_window_is_recomputed_only_when_the_version_changes() -> None:
    items = list(COUNTS)
    sampler = SlidingWindowSampler(2)
    first = sampler.window(3, newest(items))
    items.append((3, 7))
    assert sampler.window(3, newest(items)) is first
    assert sampler.window(4, newest(items)).ids == (2, 3)


def test_a_window_is_empty_before_anything_was_added() -> None:
    window = ChunkWindow.of([])
    assert window.total == 0
    with pytest.raises(ValueError, match="holds no rows"):
        SlidingWindowSampler(0).draw(window, 1, torch.Generator())


@pytest.mark.parametrize(("count", "error"), [(0, ValueError), (-3, ValueError), (2.0, TypeError)])
def test_a_draw_needs_at_least_one_row(count: object, error: type[Exception]) -> None:
    sampler = SlidingWindowSampler(0)
    with pytest.raises(error, match="num_chunks"):
        sampler.draw(sampler.window(0, newest(COUNTS)), count, torch.Generator())


def test_a_negative_window_is_refused() -> None:
    with pytest.raises(ValueError, match="sample_window_size: expected an int >= 0"):
        SlidingWindowSampler(-1)

"""Window sampling: valid starts, exact weighting, priorities, rejection and its fallback."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from bufcore.sampling.boundaries import OnlineBoundaries
from bufcore.sampling.windows import (
    TrajectoryTable,
    check_weighting,
    draw_categorical,
    draw_from_table,
    sample_window_starts,
    window_index,
)
from tests.support import valid_starts

DRAWS = 60_000


def table(spans: list[tuple[int, int, int]]) -> TrajectoryTable:
    """Trajectories from (env, start, stop) triples."""
    env, start, stop = (
        torch.tensor(column, dtype=torch.long) for column in zip(*spans, strict=True)
    )
    return TrajectoryTable(env=env, start=start, stop=stop)


def within(observed: int, probability: float, draws: int = DRAWS) -> bool:
    """Whether a count is within 5 binomial standard deviations of its expectation."""
    mean = draws * probability
    sigma = (draws * probability * (1 - probability)) ** 0.5
    return abs(observed - mean) <= 5 * sigma + 1e-9


def test_every_trajectory_has_length_minus_need_plus_one_valid_starts() -> None:
    start, env = valid_starts(table([(0, 0, 5), (1, 10, 11), (0, 20, 22)]), need=3)
    assert list(zip(start.tolist(), env.tolist(), strict=True)) == [
        (0, 0),
        (1, 0),
        (2, 0),
        (3, 0),
        (20, 0),
    ]


def test_weighting_accepts_only_the_two_names() -> None:
    assert check_weighting("window") == "window"
    with pytest.raises(ValueError, match="weighting: expected one of"):
        check_weighting("rows")


def test_categorical_draws_never_pick_a_zero_weight() -> None:
    generator = torch.Generator().manual_seed(0)
    weights = torch.tensor([0.0, 1e-12, 0.0, 5.0, 0.0])
    drawn = set(draw_categorical(weights, DRAWS, generator).tolist())
    assert drawn <= {1, 3}


def test_priorities_one_three_zero_sample_trajectories_in_ratio_one_to_three() -> None:
    generator = torch.Generator().manual_seed(1)
    spans = table([(0, 0, 9), (0, 10, 19), (0, 20, 29)])
    start, _ = draw_from_table(
        spans,
        count=DRAWS,
        need=2,
        weighting="trajectory",
        generator=generator,
        priorities=torch.tensor([1.0, 3.0, 0.0]),
    )
    counts = torch.bucketize(start, torch.tensor([9, 19]), right=True).bincount(minlength=3)
    assert within(int(counts[0]), 0.25)
    assert within(int(counts[1]), 0.75)
    assert int(counts[2]) == 0


def test_trajectory_weighting_picks_eligible_trajectories_uniformly_then_a_uniform_start() -> None:
    generator = torch.Generator().manual_seed(2)
    spans = table([(0, 0, 1), (0, 2, 11), (1, 0, 3)])
    start, env = draw_from_table(
        spans, count=DRAWS, need=3, weighting="trajectory", generator=generator
    )
    seen = Counter(zip(start.tolist(), env.tolist(), strict=True))
    expected = {(t, 0): 0.5 / 8 for t in range(2, 10)} | {(t, 1): 0.5 / 2 for t in (0, 1)}
    assert set(seen) == set(expected)
    assert all(within(seen[key], p) for key, p in expected.items())


def test_window_weighting_covers_every_valid_window_uniformly() -> None:
    generator = torch.Generator().manual_seed(3)
    spans = table([(0, 0, 1), (0, 2, 11), (1, 0, 3)])
    start, env = draw_from_table(
        spans, count=DRAWS, need=3, weighting="window", generator=generator
    )
    seen = Counter(zip(start.tolist(), env.tolist(), strict=True))
    valid = valid_starts(spans, 3)
    expected = set(zip(valid[0].tolist(), valid[1].tolist(), strict=True))
    assert set(seen) == expected
    assert all(within(seen[key], 1 / len(expected)) for key in expected)


def test_no_trajectory_long_enough_reports_the_length_range_and_the_need() -> None:
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"length >= 5 to sample 4 slices.*lengths 2\.\.3"):
        draw_from_table(
            table([(0, 0, 1), (0, 2, 4)]),
            count=4,
            need=5,
            weighting="trajectory",
            generator=generator,
        )


def test_zero_priority_on_every_long_enough_trajectory_is_refused() -> None:
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="priority zero"):
        draw_from_table(
            table([(0, 0, 1), (0, 2, 9)]),
            count=4,
            need=3,
            weighting="trajectory",
            generator=generator,
            priorities=torch.tensor([1.0, 0.0]),
        )


def test_window_index_is_slice_major_and_wraps_the_ring() -> None:
    index = window_index(
        torch.tensor([8, 1]), torch.tensor([1, 0]), length=3, capacity=10, env_count=2
    )
    assert index.tolist() == [17, 19, 1, 2, 4, 6]


def short_and_long(capacity: int) -> OnlineBoundaries:
    """Env 0 ends every row (length-1 trajectories); env 1 never ends."""
    boundaries = OnlineBoundaries(capacity, device=torch.device("cpu"))
    for _ in range(capacity + 3):
        boundaries.extend(torch.tensor([[True, False]]))
    return boundaries


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_rejection_with_mostly_ineligible_trajectories_still_draws_exactly(weighting: str) -> None:
    capacity = 40
    boundaries = short_and_long(capacity)
    generator = torch.Generator().manual_seed(4)
    start, env = sample_window_starts(
        boundaries, count=DRAWS // 10, need=4, weighting=weighting, generator=generator
    )
    assert set(env.tolist()) == {1}
    seen = Counter(start.tolist())
    valid = list(range(boundaries.oldest, boundaries.newest - 2))
    assert sorted(seen) == valid
    assert all(within(seen[t], 1 / len(valid), DRAWS // 10) for t in valid)


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_rejection_sampling_with_no_eligible_trajectory_raises(weighting: str) -> None:
    boundaries = short_and_long(5)
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match=r"length >= 6 to sample 3 slices.*lengths 1\.\.5"):
        sample_window_starts(boundaries, count=3, need=6, weighting=weighting, generator=generator)


def test_rejection_and_the_exact_table_draw_agree_on_trajectory_weighting() -> None:
    boundaries = OnlineBoundaries(12, device=torch.device("cpu"))
    generator = torch.Generator().manual_seed(5)
    for _ in range(30):
        boundaries.extend(torch.rand(1, 3, generator=generator) < 0.25)
    rejection = sample_window_starts(
        boundaries, count=DRAWS, need=2, weighting="trajectory", generator=generator
    )
    exact = draw_from_table(
        boundaries.table(), count=DRAWS, need=2, weighting="trajectory", generator=generator
    )
    a = Counter(zip(*(x.tolist() for x in rejection), strict=True))
    b = Counter(zip(*(x.tolist() for x in exact), strict=True))
    assert set(a) == set(b)
    for key in b:
        assert within(a[key], b[key] / DRAWS)


@pytest.mark.parametrize("capacity", [1, 2, 5])
@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_a_failed_rejection_sample_leaves_the_generator_as_it_was(
    capacity: int, weighting: str
) -> None:
    boundaries = short_and_long(capacity)
    generator = torch.Generator().manual_seed(0)
    before = generator.get_state()
    with pytest.raises(ValueError, match="No trajectories with length"):
        sample_window_starts(
            boundaries, count=3, need=capacity + 1, weighting=weighting, generator=generator
        )
    assert torch.equal(generator.get_state(), before)
    twin = torch.Generator().manual_seed(0)
    options = {"count": 5, "need": 1, "weighting": weighting}
    after = sample_window_starts(boundaries, generator=generator, **options)
    fresh = sample_window_starts(boundaries, generator=twin, **options)
    assert all(torch.equal(a, b) for a, b in zip(after, fresh, strict=True))

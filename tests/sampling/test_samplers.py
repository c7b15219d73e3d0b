"""The Sampler protocol's implementations: what they draw, from what, and their state."""

from __future__ import annotations

import pytest
import torch

from bufcore.sampling.samplers import (
    OnlineWindows,
    PriorityWindows,
    RingPosition,
    UniformRows,
    WindowRequest,
)
from bufcore.sampling.windows import TrajectoryTable, window_weights


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(("length", "envs"), [(1, 1), (2, 1), (7, 3)])
def test_uniform_rows_draw_every_filled_cell_and_nothing_else(length: int, envs: int) -> None:
    index = UniformRows().draw(RingPosition(length, 9, envs), 4000, generator())
    assert sorted(set(index.rows.tolist())) == list(range(length * envs))
    assert bool((index.time < length).all()) and bool((index.env < envs).all())


def test_uniform_rows_refuse_a_window_request() -> None:
    with pytest.raises(ValueError, match="draws rows, not windows"):
        UniformRows().draw(RingPosition(3, 3), 1, generator(), window=WindowRequest(2, 2))


def test_a_window_sampler_refuses_a_request_without_a_window() -> None:
    sampler = OnlineWindows(4, device=torch.device("cpu"))
    with pytest.raises(ValueError, match="draws windows"):
        sampler.draw(RingPosition(1, 4), 1, generator())


def online_sampler(weighting: str = "trajectory") -> OnlineWindows:
    sampler = OnlineWindows(8, device=torch.device("cpu"), weighting=weighting)  # type: ignore[arg-type]
    # Env 0: trajectories of 3 and 5 rows; env 1: one of 8 rows.
    ends = torch.zeros(8, 2, dtype=torch.bool)
    ends[2, 0] = ends[7, 0] = ends[7, 1] = True
    sampler.extend(ends)
    return sampler


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_online_windows_lie_inside_one_trajectory_of_one_env(weighting: str) -> None:
    sampler = online_sampler(weighting)
    index = sampler.draw(RingPosition(8, 8, 2), 500, generator(), window=WindowRequest(3, 3))
    windows = index.rows.view(500, 3)
    env = windows % 2
    time = windows // 2
    assert bool((env == env[:, :1]).all())
    assert bool((time[:, 1:] - time[:, :-1] == 1).all())
    # Env 0's 3-row trajectory fits one window (start 0); its 5-row one starts at 3..5.
    starts = set(time[env[:, 0] == 0, 0].tolist())
    assert starts <= {0, 3, 4, 5}


def test_locate_gives_each_window_its_trajectory_position() -> None:
    sampler = online_sampler()
    request = WindowRequest(2, 2, locate=True)
    index = sampler.draw(RingPosition(8, 8, 2), 200, generator(), window=request)
    table = sampler.trajectories()
    assert index.trajectory is not None
    first_time = index.rows.view(200, 2)[:, 0] // 2
    assert bool((table.start[index.trajectory] <= first_time).all())
    assert bool((first_time + 1 <= table.stop[index.trajectory]).all())


def test_without_locate_no_trajectory_is_computed() -> None:
    index = online_sampler().draw(
        RingPosition(8, 8, 2), 4, generator(), window=WindowRequest(2, 2)
    )
    assert index.trajectory is None


def test_reset_forgets_every_trajectory() -> None:
    sampler = online_sampler()
    sampler.reset()
    assert len(sampler.trajectories().start) == 0


def table(lengths: list[int]) -> TrajectoryTable:
    stop = torch.cumsum(torch.tensor(lengths), 0) - 1
    start = stop - torch.tensor(lengths) + 1
    return TrajectoryTable(env=torch.zeros(len(lengths), dtype=torch.long), start=start, stop=stop)


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_priority_windows_draw_trajectories_with_the_window_weights(weighting: str) -> None:
    lengths = [2, 5, 9]
    priorities = torch.tensor([0.0, 1.0, 3.0])
    sampler = PriorityWindows(table(lengths), priorities, weighting=weighting)  # type: ignore[arg-type]
    draws = 20_000
    index = sampler.draw(
        RingPosition(16, 16), draws, generator(), window=WindowRequest(3, 3, locate=True)
    )
    assert index.trajectory is not None
    seen = torch.bincount(index.trajectory, minlength=3).double() / draws
    weights = window_weights(
        torch.tensor(lengths), need=3, weighting=weighting, priorities=priorities  # type: ignore[arg-type]
    )
    expected = weights / weights.sum()
    # 20k draws: the standard error of each frequency is below 0.004.
    assert torch.allclose(seen, expected, atol=0.02)


def test_priority_windows_refuse_priorities_that_are_not_one_per_trajectory() -> None:
    sampler = PriorityWindows(table([2, 3]), torch.ones(2), weighting="trajectory")
    with pytest.raises(ValueError, match="one per trajectory"):
        sampler.priorities = torch.ones(3)
    assert sampler.priorities.tolist() == [1.0, 1.0]


def test_with_weighting_shares_the_trajectories_and_leaves_the_original_alone() -> None:
    sampler = online_sampler()
    view = sampler.with_weighting("window")
    assert (sampler.weighting, view.weighting) == ("trajectory", "window")
    assert torch.equal(view.trajectories().start, sampler.trajectories().start)


def test_a_window_sampler_state_round_trips() -> None:
    sampler = PriorityWindows(table([2, 3]), torch.tensor([0.25, 0.75]), weighting="window")
    twin = PriorityWindows(table([2, 3]), torch.ones(2), weighting="trajectory")
    twin.load_state_dict(sampler.state_dict())
    assert twin.state_dict() == sampler.state_dict() == {
        "weighting": "window", "priorities": [0.25, 0.75]
    }


def test_a_bad_sampler_state_is_refused_and_changes_nothing() -> None:
    sampler = PriorityWindows(table([2, 3]), torch.ones(2), weighting="trajectory")
    with pytest.raises(ValueError, match="weighting"):
        sampler.load_state_dict({"weighting": "rows", "priorities": [1.0, 2.0]})
    with pytest.raises(ValueError, match="one per trajectory"):
        sampler.load_state_dict({"weighting": "window", "priorities": [1.0]})
    assert sampler.state_dict() == {"weighting": "trajectory", "priorities": [1.0, 1.0]}


def test_window_weights_refuse_an_unknown_weighting_and_mismatched_priorities() -> None:
    with pytest.raises(ValueError, match="weighting"):
        window_weights(torch.tensor([3]), need=2, weighting="rows")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one per trajectory"):
        window_weights(torch.tensor([3, 4]), need=2, weighting="window",
                       priorities=torch.ones(3))

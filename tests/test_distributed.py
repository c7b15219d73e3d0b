"""bufcore.distributed without a process group: a single process is rank 0 of 1, and every
helper behaves as the one-rank case. Real groups (gloo with 2 and 3 ranks, nccl on a GPU) are
tested in tests/distributed/."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from bufcore import distributed


def test_without_a_group_this_process_is_rank_zero_of_one() -> None:
    assert (distributed.is_initialized(), distributed.rank(), distributed.world_size()) == (
        False, 0, 1,
    )


def test_a_rank_option_of_none_is_this_processs_rank() -> None:
    assert distributed.check_rank(None) == 0
    assert distributed.check_rank(5) == 5


@pytest.mark.parametrize(
    ("rank", "error"), [(-1, ValueError), (2**31, ValueError), ("0", TypeError), (True, TypeError)]
)
def test_a_malformed_rank_is_refused_naming_it(rank: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="rank"):
        distributed.check_rank(rank)


def test_all_reduce_sum_of_one_rank_is_the_tensor_itself() -> None:
    tensor = torch.tensor([1.5, 2.0])
    assert distributed.all_reduce_sum(tensor) is tensor


def test_a_json_gather_of_one_rank_is_a_list_of_its_value() -> None:
    assert distributed.all_gather_json({"a": [1, 2.5, None]}) == [{"a": [1, 2.5, None]}]


@pytest.mark.parametrize("value", [torch.zeros(1), {1, 2}, {("a",): 1}])
def test_a_value_that_is_not_json_is_refused_also_without_a_group(value: Any) -> None:
    with pytest.raises(TypeError, match="JSON"):
        distributed.all_gather_json(value)


def test_a_checked_gather_of_one_rank_raises_what_the_check_raised() -> None:
    def check() -> int:
        raise KeyError("no such motion")

    with pytest.raises(KeyError, match="no such motion"):
        distributed.all_gather_checked(check)


# ------------------------------------------------------------------------------- shards
@pytest.mark.parametrize(
    ("count", "world", "bounds"),
    [
        (10, 3, [(0, 4), (4, 7), (7, 10)]),  # REFERENCE §9.6's example
        (3, 3, [(0, 1), (1, 2), (2, 3)]),
        (2, 3, [(0, 1), (1, 2), (2, 2)]),
        (0, 2, [(0, 0), (0, 0)]),
        (7, 1, [(0, 7)]),
    ],
)
def test_shards_split_items_contiguously_the_first_ranks_taking_one_more(
    count: int, world: int, bounds: list[tuple[int, int]]
) -> None:
    assert [
        distributed.shard_bounds(count, rank=rank, world_size=world) for rank in range(world)
    ] == bounds


def test_a_shard_without_a_group_is_everything() -> None:
    assert distributed.shard_bounds(5) == (0, 5)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"count": -1}, ValueError, "count"),
        ({"count": 3, "world_size": 0}, ValueError, "world_size"),
        ({"count": 3, "rank": 2, "world_size": 2}, ValueError, r"rank: .* in \[0, 2\)"),
        ({"count": 3.0}, TypeError, "count"),
    ],
)
def test_a_malformed_shard_request_is_refused_naming_the_argument(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        distributed.shard_bounds(**options)


def test_one_process_gets_its_value_back_as_the_ranks_of_a_group_would() -> None:
    assert distributed.all_gather_json({"pair": (1, 2), "nan": math.nan, 3: "x"}) == [
        {"pair": [1, 2], "nan": pytest.approx(math.nan, nan_ok=True), "3": "x"}
    ]


@pytest.mark.parametrize("together", [False, True])
def test_leaving_without_a_group_does_nothing(together: bool) -> None:
    distributed.leave_group(together=together)
    assert not distributed.is_initialized()
    assert distributed.world_size() == 1

"""Real gloo process groups of 2 and 3 ranks with uneven data per rank: the helpers of
``bufcore.distributed``, TD-EMA statistics, curriculum rounds, per-rank sample streams and the
rank-0 run log.

Starting a rank is the slow part (importing torch), so each group is launched once per world
size and runs every check (tests/distributed/worker.py); each test below judges one behaviour
from what the ranks recorded."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from bufcore.runs.runlog import read_metrics
from tests.distributed.expected import (
    assert_td_ema_matches,
    one_process_draws,
    one_process_round,
)
from tests.distributed.launch import launch
from tests.distributed.worker import MOTIONS, STEPS, occupancy

pytestmark = pytest.mark.slow

Group = tuple[int, list[dict[str, Any]], Path]


@pytest.fixture(scope="module", params=[2, 3], ids=lambda world: f"{world}_ranks")
def group(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Group:
    world: int = request.param
    workdir = tmp_path_factory.mktemp(f"gloo_{world}")
    return world, launch(world, workdir), workdir


def part(group: Group, name: str) -> list[dict[str, Any]]:
    """Every rank's record of one check, in rank order."""
    return [ranks[name] for ranks in group[1]]


# ------------------------------------------------------------------------------- helpers
def test_every_rank_sees_the_group_and_its_own_place_in_it(group: Group) -> None:
    world = group[0]
    seen = [(h["is_initialized"], h["rank"], h["world_size"]) for h in part(group, "helpers")]
    assert seen == [(True, rank, world) for rank in range(world)]


def test_all_reduce_sum_is_the_exact_sum_in_rank_order_on_every_rank(group: Group) -> None:
    world, helpers = group[0], part(group, "helpers")
    floats = [0.1 * (rank + 1) for rank in range(world)]
    in_rank_order = floats[0]
    for value in floats[1:]:
        in_rank_order += value
    for seen in helpers:
        assert seen["int_sum"] == [world * (world + 1) // 2, 10 * world * (world - 1) // 2]
        assert seen["float_sum"] == [in_rank_order, 1e-3 * world] == helpers[0]["float_sum"]
        assert seen["cpu_sum"] == [float(sum(range(world)))]


def test_json_gathers_bring_every_ranks_metadata_in_rank_order(group: Group) -> None:
    world = group[0]
    for seen in part(group, "helpers"):
        gathered = seen["gathered"]
        assert [g["rank"] for g in gathered] == list(range(world))
        assert [g["x"][1] for g in gathered] == ["é" * rank for rank in range(world)]
        assert all(math.isnan(g["x"][0]) for g in gathered)


def test_a_value_that_is_not_json_on_one_rank_fails_every_rank_naming_it(group: Group) -> None:
    world, helpers = group[0], part(group, "helpers")
    last = helpers[-1]["bad_json"]
    assert last["type"] == "TypeError" and "not JSON serializable" in last["message"]
    for seen in helpers[:-1]:
        assert seen["bad_json"]["type"] == "TypeError"
        assert seen["bad_json"]["message"].startswith(f"rank {world - 1}: ")


def test_shard_bounds_give_each_item_to_exactly_one_rank(group: Group) -> None:
    shards = [tuple(h["shard"]) for h in part(group, "helpers")]
    covered = [i for start, end in shards for i in range(start, end)]
    assert covered == list(range(10))


# -------------------------------------------------------------------------------- TD-EMA
def test_td_ema_statistics_equal_one_process_over_the_concatenated_data(group: Group) -> None:
    world = group[0]
    for seen in part(group, "td_ema"):
        assert_td_ema_matches(seen, world)


def test_td_ema_statistics_are_identical_on_every_rank(group: Group) -> None:
    states = part(group, "td_ema")
    assert all(state == states[0] for state in states)


# ---------------------------------------------------------------------------- curriculum
def test_each_rank_evaluated_only_its_share_of_the_motions(group: Group) -> None:
    shares = [c["share"] for c in part(group, "curriculum")]
    assert sorted(m for share in shares for m in share) == MOTIONS
    assert all(len(share) < len(MOTIONS) for share in shares)


def test_a_round_gathered_from_the_ranks_equals_the_one_process_round(group: Group) -> None:
    expected = one_process_round()
    for seen in part(group, "curriculum"):
        assert seen["round"] == expected["round"]
        assert seen["priorities"] == expected["priorities"]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("twice", r"1 motion\(s\) were evaluated on more than one rank: 10 \(ranks 0 and "),
        ("missing", r"motion\(s\) of the buffer were evaluated on no rank: \["),
    ],
)
def test_a_round_with_a_motion_twice_or_nowhere_fails_on_every_rank(
    group: Group, case: str, message: str
) -> None:
    for seen in part(group, "curriculum"):
        assert seen[case]["type"] == "ValueError"
        assert re.search(message, seen[case]["message"])


def test_a_bad_share_on_one_rank_fails_every_rank_naming_that_rank(group: Group) -> None:
    world, rounds = group[0], part(group, "curriculum")
    assert rounds[-1]["bad_share"]["message"].startswith("emd_by_motion[16]: expected a finite")
    for seen in rounds[:-1]:
        assert seen["bad_share"]["type"] == "ValueError"
        assert seen["bad_share"]["message"].startswith(f"rank {world - 1}: emd_by_motion[16]")


def test_refused_rounds_leave_history_and_priorities_as_they_were(group: Group) -> None:
    for seen in part(group, "curriculum"):
        assert seen["rounds_after_errors"] == 1
        assert seen["priorities_after_errors"] == seen["priorities"]


# ------------------------------------------------------------------------------- streams
def test_buffers_take_the_groups_rank_and_ranks_draw_different_batches(group: Group) -> None:
    world, streams = group[0], part(group, "streams")
    assert [s["rank"] for s in streams] == list(range(world))
    assert len({tuple(s["draws"]) for s in streams}) == world


def test_rank_zero_draws_what_a_single_process_draws(group: Group) -> None:
    assert part(group, "streams")[0]["draws"] == one_process_draws()


# ------------------------------------------------------------------------------- run log
def test_only_rank_zero_writes_the_run_log(group: Group) -> None:
    world, logs, workdir = group[0], part(group, "run_log"), group[2]
    assert [log["writes"] for log in logs] == [True] + [False] * (world - 1)
    written, _ = read_metrics(workdir / "run" / "metrics.jsonl")
    assert written == logs[0]["records"]
    assert [r["kind"] for r in written] == ["train"] * STEPS + ["eval"]
    assert [r.get("loss", r.get("emd")) for r in written] == [0.0, 1.0, 2.0, 1.0]


def test_rank_zeros_records_hold_every_ranks_figures(group: Group) -> None:
    world, workdir = group[0], group[2]
    written, _ = read_metrics(workdir / "run" / "metrics.jsonl")
    for step, record in enumerate(written[:STEPS]):
        assert record["ranks"] == {
            "occupancy": [occupancy(rank) for rank in range(world)],
            "sampled": [4 * (step + 1) * (rank + 1) for rank in range(world)],
        }
    assert "ranks" not in written[STEPS]


def test_every_rank_returns_the_same_figures_it_helped_gather(group: Group) -> None:
    logs = part(group, "run_log")
    figures = [[r.get("ranks") for r in log["records"]] for log in logs]
    assert all(f == figures[0] for f in figures)


@pytest.mark.parametrize(
    ("case", "error", "own", "others"),
    [
        ("mismatch", "ValueError", "per_rank: rank {last} passed ['occupancy']",
         "per_rank: rank {last} passed ['occupancy']"),
        ("bad_figure", "TypeError", "per_rank['occupancy']: expected one number, got list",
         "rank {last}: per_rank['occupancy']"),
    ],
)
def test_figures_that_differ_or_are_malformed_fail_every_rank_and_write_nothing(
    group: Group, case: str, error: str, own: str, others: str
) -> None:
    world, logs, workdir = group[0], part(group, "run_log"), group[2]
    last = world - 1
    assert logs[-1][case]["type"] == error
    assert logs[-1][case]["message"].startswith(own.format(last=last))
    for log in logs[:-1]:
        assert log[case]["type"] == error
        assert log[case]["message"].startswith(others.format(last=last))
    lines = (workdir / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [0, 1, 2, 3]

"""A run checkpoint saved by 2 real gloo ranks: each rank's buffers land in their own
directory and load back on their rank; a save failing on one rank leaves the previous
checkpoint; 3 ranks are refused it, and load it once resharded to 3 (rows conserved).

Each group is launched once (start-up dominates); the tests judge what the ranks recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bufcore import reshard_run_checkpoint
from bufcore.persist.run_checkpoint import run_layout
from tests.distributed.launch import launch
from tests.distributed.rank_worker import WORKER_PATH, rows_of

pytestmark = pytest.mark.slow

Saved = tuple[Path, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Saved:
    workdir = tmp_path_factory.mktemp("ranks_save")
    checkpoint = workdir / "two"
    return checkpoint, launch(2, workdir, worker=WORKER_PATH, args=("save", str(checkpoint)))


@pytest.fixture(scope="module")
def three(saved: Saved, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    checkpoint = saved[0]
    resharded = checkpoint.with_name("three")
    reshard_run_checkpoint(checkpoint, resharded, world_size=3)
    workdir = tmp_path_factory.mktemp("ranks_load")
    return launch(3, workdir, worker=WORKER_PATH,
                  args=("load", str(checkpoint), str(resharded)))


def test_two_ranks_save_one_checkpoint_with_a_directory_per_rank(saved: Saved) -> None:
    layout = run_layout(saved[0])
    assert (layout.world_size, layout.names, layout.replicated) == (2, ("expert", "train"),
                                                                    ("expert",))
    assert json.loads((saved[0] / "run.json").read_text())["step"] == 1


def test_each_rank_loads_its_own_rows_and_continues_its_stream(saved: Saved) -> None:
    for rank, seen in enumerate(saved[1]):
        assert seen["loaded"]["train"] == rows_of(rank)
        assert seen["loaded"]["rank"] == rank
        assert seen["loaded"]["draws"] == seen["draws_after_save"]
        assert seen["loaded"]["expert"] == [0, 1, 2]


def test_a_save_failing_on_one_rank_fails_on_every_rank_and_keeps_the_checkpoint(
    saved: Saved,
) -> None:
    torn = [seen["torn"] for seen in saved[1]]
    assert torn[1] == {"type": "OSError", "message": "disk full on rank 1"}
    assert torn[0] is not None and torn[0]["message"].startswith("rank 1: ")
    assert json.loads((saved[0] / "run.json").read_text())["step"] == 1
    assert not [p for p in saved[0].parent.iterdir() if p.name.startswith(".two.")]


def test_three_ranks_are_refused_the_two_rank_checkpoint(three: list[dict[str, Any]]) -> None:
    for seen in three:
        error = seen["two"]["error"]
        assert error["type"] == "WorldSizeError"
        assert "saved by 2 ranks, loaded by 3" in error["message"]
        assert "reshard_run_checkpoint(" in error["message"]


def test_three_ranks_load_the_resharded_checkpoint_with_every_row(
    three: list[dict[str, Any]],
) -> None:
    shares = [seen["three"]["loaded"]["train"] for seen in three]
    assert [v for share in shares for v in share] == rows_of(0) + rows_of(1)
    assert [len(share) for share in shares] == [3, 3, 2]
    assert [seen["three"]["loaded"]["expert"] for seen in three] == [[0, 1, 2]] * 3

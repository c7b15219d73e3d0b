"""``bufcore demo --nproc 2``: a small run on two spawned gloo ranks runs to completion, rank 0
logs every rank's figures, and the run checkpoint holds each rank's buffers (loadable by rank,
refused by another world size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bufcore import WorldSizeError, load_run_buffers, read_metrics
from bufcore.cli import main
from bufcore.persist.run_checkpoint import run_layout

pytestmark = pytest.mark.slow

ARGS = ["--steps", "60", "--envs", "5", "--motions", "5", "--eval-every", "30",
        "--capacity", "100"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranks") / "run"
    assert main(["demo", "--out", str(out), "--nproc", "2", "--quiet", *ARGS]) == 0
    return out


def records(run: Path) -> list[dict]:
    return read_metrics(run / "metrics.jsonl")[0]


def test_the_run_finishes_and_rank_0_logs_it_once(run: Path) -> None:
    logged = records(run)
    assert logged[0]["kind"] == "run" and logged[0]["world_size"] == 2
    assert logged[-1]["kind"] == "end" and logged[-1]["step"] == 60
    assert [r["step"] for r in logged if r["kind"] == "eval"] == [30, 60]


def test_buffer_records_carry_each_ranks_figures_with_envs_split(run: Path) -> None:
    last = [r for r in records(run) if r["kind"] == "buffer"][-1]
    # 5 envs over 2 ranks: 3 and 2 envs, 60 steps each.
    assert last["ranks"]["transitions"] == [180, 120]
    assert last["train"]["transitions"] == 180  # rank 0's own figures


def test_the_checkpoint_holds_every_ranks_buffers(run: Path) -> None:
    layout = run_layout(run / "checkpoint")
    assert (layout.world_size, layout.names, layout.replicated) == (
        2, ("expert", "train", "z"), ("expert",))
    envs = [load_run_buffers(run / "checkpoint", rank=r, world_size=2)["train"].storage[
        "observation"]["state"].shape[1] for r in range(2)]
    assert envs == [3, 2]


def test_the_checkpoint_is_refused_to_one_process(run: Path) -> None:
    with pytest.raises(WorldSizeError, match="saved by 2 ranks, loaded by 1"):
        load_run_buffers(run / "checkpoint")


def test_curriculum_priorities_are_the_same_on_every_rank(run: Path) -> None:
    experts = [load_run_buffers(run / "checkpoint", rank=r, world_size=2)["expert"]
               for r in range(2)]
    assert experts[0].priorities.tolist() == experts[1].priorities.tolist()

"""A run saved by several ranks on the Overview page and in ``bufcore inspect``: every rank's
buffer is listed (``train/rank_1``) and the ranks' occupancy is shown side by side.

The run is the demo run's checkpoint resharded in place to 2 ranks (what a 2-rank run saves)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.overview import rank_rows
from app.run_data import read_source
from bufcore import reshard_run_checkpoint
from bufcore.inspect import inspect_path, render
from tests.app.conftest import Dashboard


@pytest.fixture
def two_ranks(run_copy: Path) -> Path:
    reshard_run_checkpoint(run_copy / "checkpoint", run_copy / "checkpoint", world_size=2,
                           replicated=["expert"])
    return run_copy


def test_every_ranks_buffer_is_read_under_its_rank_name(two_ranks: Path) -> None:
    data = read_source(two_ranks, roots=[two_ranks.parent])
    names = [entry.name for entry in data.buffers]
    assert names == ["expert/rank_0", "expert/rank_1", "train/rank_0", "train/rank_1",
                     "z/rank_0", "z/rank_1"]
    assert all(entry.summary is not None for entry in data.buffers)


def test_rank_rows_put_each_ranks_occupancy_side_by_side(two_ranks: Path) -> None:
    data = read_source(two_ranks, roots=[two_ranks.parent])
    rows = {row["buffer"]: row for row in rank_rows(data.buffers)}
    assert list(rows) == ["expert", "train", "z"]
    assert list(rows["z"]) == ["buffer", "held", "rank 0", "rank 1", "rows in all"]
    z = [e.summary for e in data.buffers if e.name.startswith("z/")]
    assert rows["z"]["held"] == "sharded"
    assert rows["z"]["rows in all"] == sum(s.length for s in z if s is not None)


def test_a_replicated_buffers_rows_in_all_are_one_ranks(two_ranks: Path) -> None:
    data = read_source(two_ranks, roots=[two_ranks.parent])
    assert data.run is not None and data.run.replicated == ("expert",)
    rows = {row["buffer"]: row for row in rank_rows(data.buffers, data.run.replicated)}
    expert = next(e.summary for e in data.buffers if e.name == "expert/rank_0")
    assert expert is not None
    assert rows["expert"]["held"] == "replicated"
    assert rows["expert"]["rows in all"] == expert.length
    assert rows["train"]["held"] == "sharded"


def test_a_one_rank_run_has_no_rank_rows(demo_run: Path) -> None:
    assert rank_rows(read_source(demo_run, roots=[demo_run.parent]).buffers) == []


def test_the_overview_shows_a_ranks_table(dashboard: Dashboard, two_ranks: Path) -> None:
    at = dashboard("overview", two_ranks)
    assert not at.exception
    assert "Ranks" in [header.value for header in at.subheader]
    tables = [frame.value for frame in at.dataframe]
    ranks = next(t for t in tables if "rank 1" in t.columns)
    assert list(ranks["buffer"]) == ["expert", "train", "z"]
    assert list(ranks["held"]) == ["replicated", "sharded", "sharded"]
    assert any("Saved by 2 ranks" in caption.value for caption in at.caption)


def test_inspect_lists_the_ranks_occupancy_side_by_side(two_ranks: Path) -> None:
    inspection = inspect_path(two_ranks)
    lines = render(inspection)
    assert "ranks: 2 (rows held / capacity, by rank)" in lines
    train = next(line for line in lines if line.strip().startswith("train ") and "rank 1" in line)
    lengths = [s.length for name, s in inspection.buffers if name.startswith("train/")]
    assert f"(total {sum(lengths):,})" in train
    assert "buffer train/rank_1: TrajectoryDictBufferMultiDim" in "\n".join(lines)


def test_inspect_counts_a_replicated_buffers_rows_once(two_ranks: Path) -> None:
    inspection = inspect_path(two_ranks)
    lines = render(inspection)
    expert = next(line for line in lines if line.strip().startswith("expert ") and "rank 1" in line)
    length = next(s.length for name, s in inspection.buffers if name == "expert/rank_0")
    assert expert.endswith(f"(replicated: {length:,} in all)")

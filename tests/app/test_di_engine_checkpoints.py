"""The dashboard lists DI-engine buffer checkpoints (issue 20) with their kind, without crashing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bufcore import AdvancedReplayBuffer, EpisodeReplayBuffer, NaiveReplayBuffer
from tests.app.conftest import Dashboard


def write_checkpoints(folder: Path) -> dict[str, str]:
    """One checkpoint of each DI-engine kind under ``folder``; name -> kind."""
    naive = NaiveReplayBuffer(replay_buffer_size=4, seed=0)
    naive.push([{"obs": torch.zeros(2), "tag": f"t{i}"} for i in range(5)], 0)
    naive.save(folder / "naive")
    advanced = AdvancedReplayBuffer(replay_buffer_size=4, seed=0, storage="packed")
    advanced.push([{"obs": torch.zeros(2)} for _ in range(3)], 0)
    advanced.sample(2, 0)
    advanced.save(folder / "advanced")
    episode = EpisodeReplayBuffer(replay_buffer_size=3, seed=0)
    episode.push([[{"t": t} for t in range(n)] for n in (2, 5)], 0)
    episode.save(folder / "episode")
    return {"naive": "NaiveReplayBuffer", "advanced": "AdvancedReplayBuffer",
            "episode": "EpisodeReplayBuffer"}


@pytest.mark.parametrize("name", ["naive", "advanced", "episode"])
def test_overview_lists_a_di_engine_checkpoint_with_its_kind(
    dashboard: Dashboard, tmp_path: Path, name: str
) -> None:
    kinds = write_checkpoints(tmp_path)
    at = dashboard("overview", tmp_path / name)
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["buffer"]) == [name] and list(table["kind"]) == [kinds[name]]


def test_a_run_holding_di_engine_checkpoints_lists_them_all(
    dashboard: Dashboard, run_copy: Path
) -> None:
    kinds = write_checkpoints(run_copy / "checkpoint" / "buffers")
    at = dashboard("overview", run_copy)
    assert not at.exception
    table = at.dataframe[0].value
    listed = dict(zip(table["buffer"], table["kind"], strict=True))
    assert {name: listed[name] for name in kinds} == kinds


def test_an_episode_buffer_shows_no_size_when_full(dashboard: Dashboard, tmp_path: Path) -> None:
    write_checkpoints(tmp_path)
    at = dashboard("overview", tmp_path / "episode")
    row = at.dataframe[0].value.iloc[0]
    assert row["when full"] == "" and row["length"] == 7

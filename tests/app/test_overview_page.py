"""The Overview page on a demo run, and its messages for what cannot be read."""

from __future__ import annotations

from pathlib import Path

from tests.app.conftest import Dashboard


def test_overview_lists_every_buffer_of_the_demo_run(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("overview", demo_run)
    assert not at.exception
    table = at.dataframe[0].value
    assert sorted(table["buffer"]) == ["expert", "train", "z"]
    kinds = dict(zip(table["buffer"], table["kind"], strict=True))
    assert kinds["train"] == "TrajectoryDictBufferMultiDim"

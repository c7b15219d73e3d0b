"""Tables in collapsed expanders (``ui.lazy_expander``): the page sends them only once the
expander is open. The Replay page's and the RLinf views' are pinned beside their pages'
tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.conftest import Dashboard

# (page, query, the expander's key) on the demo run.
LAZY_TABLES = [
    ("sampling_lab", {"buffer": "train"}, "lab_table"),
    ("overview", {}, "ov_leaves_train"),
    ("overview", {}, "ov_latest_eval"),
    ("curriculum", {}, "cur_table"),
]


@pytest.mark.parametrize(("page", "query", "key"), LAZY_TABLES)
def test_a_closed_expander_sends_no_table_and_an_open_one_sends_it(
    dashboard: Dashboard, demo_run: Path, page: str, query: dict[str, str], key: str
) -> None:
    closed = dashboard(page, demo_run, query=query)
    opened = dashboard(page, demo_run, query=query, opened=(key,))
    assert not closed.exception and not opened.exception
    assert len(opened.dataframe) == len(closed.dataframe) + 1
    assert len(opened.expander) == len(closed.expander)


def test_the_newest_train_record_is_open_from_the_start(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("overview", demo_run)
    tables = [frame.value for frame in at.dataframe]
    assert any(list(table.columns) == ["metric", "value"] for table in tables)

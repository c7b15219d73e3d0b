"""The browser bench's command line (bench/dashboard_browser.py), without a browser."""

from __future__ import annotations

from bench.dashboard_browser import _pages


def test_the_page_list_splits_on_commas_and_an_empty_item_is_the_overview() -> None:
    assert _pages("fifo, curriculum,") == ("fifo", "curriculum", "")

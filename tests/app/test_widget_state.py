"""No page sets a widget's value through session state while also giving it a default (a
pattern Streamlit warns about): every page is opened on a copy of the demo run and each of its
buttons pressed in turn, with Streamlit's widget-state warning collected."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.conftest import PAGES, Dashboard


@pytest.mark.parametrize("page", sorted(PAGES))
def test_pressing_every_button_of_a_page_logs_no_widget_state_warning(
    dashboard: Dashboard, run_copy: Path, widget_warnings: list[str], page: str
) -> None:
    at = dashboard(page, run_copy)
    pressed = 0
    while pressed < len(at.button):  # a press may add buttons (Drop the session copy)
        at.button[pressed].click().run()
        assert not at.exception
        pressed += 1
    assert widget_warnings == []

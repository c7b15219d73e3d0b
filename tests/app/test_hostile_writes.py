"""Visiting pages never writes into a run: every page, every button but the Curriculum's
Save, and the run directory's checksums are the same after as before."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.app.conftest import PAGES, Dashboard

SAVE_KEY = "cur_save"  # the one control that writes (a new checkpoint version)


def tree(root: Path) -> dict[str, str]:
    """Relative path -> kind and content hash of every entry under ``root``."""
    out = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        if path.is_symlink():
            out[name] = "link"
        elif path.is_file():
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[name] = "dir"
    return out


@pytest.mark.parametrize("buffer", ["train", "expert", "z"])
@pytest.mark.parametrize("page", PAGES)
def test_a_page_and_its_buttons_leave_the_run_unchanged(
    dashboard: Dashboard, run_copy: Path, page: str, buffer: str
) -> None:
    before = tree(run_copy)
    at = dashboard(page, run_copy)
    pickers = [box for box in at.selectbox if box.key == "buffer" and buffer in box.options]
    if pickers:
        pickers[0].select(buffer).run()
    for index in range(len(at.button)):
        button = at.button[index]
        if button.key != SAVE_KEY:
            button.click().run()
    assert not at.exception
    assert tree(run_copy) == before


def test_the_curriculum_save_only_adds_files_and_changes_none(
    dashboard: Dashboard, run_copy: Path
) -> None:
    before = tree(run_copy)
    # Other options than the run's: its own priorities are already saved, so nothing is written.
    at = dashboard("curriculum", run_copy, query={"cur_mode": "lin"})
    at.button(key=SAVE_KEY).click().run()
    assert not at.exception
    after = tree(run_copy)
    assert len(after) > len(before)
    assert {name: after.get(name) for name in before} == before

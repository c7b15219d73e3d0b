"""Hostile paths typed in the sidebar (or put in the link's ``open_path``): each is refused
with a message naming it, on every page, never a traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.run_data import read_source
from app.sources import resolve_under_roots
from tests.app.conftest import PAGES, Dashboard


def messages(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.info, *at.error, *at.warning])


def typed_paths(run: Path) -> dict[str, str]:
    """Name -> a hostile path, made next to the run (under ``run.parent``, the root)."""
    root = run.parent
    (root / "a-file.txt").write_text("not a run")
    (root / "link-out").symlink_to("/etc")
    (root / "not-a-run").mkdir()
    return {
        "a file": str(root / "a-file.txt"),
        "a link out of the roots": "link-out",
        "a directory that is not a run": "not-a-run",
        "the parent": "..",
        "a traversal": "demo/../../../../etc",
        "the home directory": "~",
        "an unknown user's home": "~no-such-user-here",
        "a name too long for the file system": "x" * 5000,
        "a null byte": "demo\x00",
        "a path that does not exist": "no/such/run",
    }


NAMES = [
    "a file", "a link out of the roots", "a directory that is not a run", "the parent",
    "a traversal", "the home directory", "an unknown user's home",
    "a name too long for the file system", "a null byte", "a path that does not exist",
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("page", PAGES)
def test_a_hostile_typed_path_is_refused_on_every_page(
    dashboard: Dashboard, run_copy: Path, page: str, name: str
) -> None:
    typed = typed_paths(run_copy)[name]
    at = dashboard(page, roots=(run_copy.parent,))
    at.sidebar.text_input(key="open_path").input(typed).run()
    assert not at.exception
    assert at.sidebar.error, f"no message for {typed!r:.60}"


@pytest.mark.parametrize("page", PAGES)
def test_a_typed_run_under_the_roots_is_shown(
    dashboard: Dashboard, run_copy: Path, page: str
) -> None:
    at = dashboard(page, roots=(run_copy.parent,))
    at.sidebar.text_input(key="open_path").input("demo").run()
    assert not at.exception
    assert not at.sidebar.error
    assert "Showing the typed path" in "\n".join(c.value for c in at.sidebar.caption)


@pytest.mark.parametrize("typed", ["~no-such-user-here", "~no-such-user-here/runs", "demo\x00"])
def test_resolve_under_roots_refuses_an_unknown_home_or_a_null_byte_with_a_value_error(
    tmp_path: Path, typed: str
) -> None:
    with pytest.raises(ValueError, match=r"home directory|null byte"):
        resolve_under_roots(typed, [tmp_path])


@pytest.mark.parametrize("length", [256, 5000])
def test_resolve_under_roots_takes_a_name_too_long_for_the_file_system_as_a_missing_path(
    tmp_path: Path, length: int
) -> None:
    assert resolve_under_roots("x" * length, [tmp_path]) == tmp_path / ("x" * length)


# ------------------------------------------------------------ links out of the roots
def link_out(run: Path, part: str, outside: Path) -> Path:
    """Move ``run/part`` to ``outside/part`` and leave a symbolic link to it in its place
    (``reprioritized`` is made first, empty, as a user's link to a scratch disk would be)."""
    inside = run / part
    moved = outside / part
    moved.parent.mkdir(parents=True, exist_ok=True)
    if inside.exists():
        shutil.move(inside, moved)
    else:
        moved.mkdir(parents=True)
    inside.symlink_to(moved, target_is_directory=True)
    return moved


READ_LINKS = ["checkpoint", "checkpoint/buffers", "checkpoint/buffers/train",
              "checkpoint/buffers/expert"]


@pytest.mark.parametrize("part", READ_LINKS)
def test_a_run_part_linked_out_of_the_roots_is_not_read(
    run_copy: Path, tmp_path: Path, part: str
) -> None:
    outside = tmp_path / "outside"
    link_out(run_copy, part, outside)
    data = read_source(run_copy, roots=(run_copy.parent,))
    linked = [entry for entry in data.buffers
              if str(entry.path.relative_to(run_copy)).startswith(part)]
    assert linked, "the test should link at least one buffer out"
    for entry in linked:
        assert entry.summary is None
        assert entry.error is not None and "outside the dashboard's roots" in entry.error


@pytest.mark.parametrize("part", READ_LINKS)
def test_the_overview_names_a_part_linked_out_of_the_roots(
    dashboard: Dashboard, run_copy: Path, tmp_path: Path, part: str
) -> None:
    link_out(run_copy, part, tmp_path / "outside")
    at = dashboard("overview", roots=(run_copy.parent,))
    assert not at.exception
    assert any("outside the dashboard's roots" in e.value for e in at.error)


def test_run_json_behind_a_link_out_of_the_roots_is_not_read(
    run_copy: Path, tmp_path: Path
) -> None:
    link_out(run_copy, "checkpoint", tmp_path / "outside")
    data = read_source(run_copy, roots=(run_copy.parent,))
    assert data.run is None
    assert any("run.json" in error and "outside" in error for error in data.errors)


@pytest.mark.parametrize("part", ["checkpoint", "checkpoint/buffers/expert", "reprioritized"])
def test_save_never_writes_or_reads_through_a_link_out_of_the_roots(
    dashboard: Dashboard, run_copy: Path, tmp_path: Path, part: str
) -> None:
    outside = tmp_path / "outside"
    link_out(run_copy, part, outside)
    before = sorted(str(p) for p in outside.rglob("*"))
    at = dashboard("curriculum", roots=(run_copy.parent,))
    saves = [button for button in at.button if button.key == "cur_save"]
    if saves:
        saves[0].click().run()
    assert not at.exception
    assert sorted(str(p) for p in outside.rglob("*")) == before
    if part == "reprioritized":
        assert any(e.value.startswith("Not saved") and "outside the dashboard's roots" in e.value
                   for e in at.error)
    else:  # the expert buffer behind the link is never read, so there is nothing to save
        assert not saves


def test_a_typed_path_through_a_linked_checkpoint_is_refused(
    dashboard: Dashboard, run_copy: Path, tmp_path: Path
) -> None:
    link_out(run_copy, "checkpoint", tmp_path / "outside")
    at = dashboard("overview", roots=(run_copy.parent,))
    at.sidebar.text_input(key="open_path").input("demo/checkpoint/buffers/train").run()
    assert not at.exception
    assert any("outside the dashboard's roots" in e.value for e in at.sidebar.error)


@pytest.mark.parametrize("page", PAGES)
def test_a_refused_typed_path_replaces_the_run_in_the_main_area(
    dashboard: Dashboard, run_copy: Path, page: str
) -> None:
    at = dashboard(page, roots=(run_copy.parent,))  # the demo run, picked from the list
    at.sidebar.text_input(key="open_path").input("/etc").run()
    assert not at.exception
    assert any(e.value.startswith("Not opened: /etc") for e in at.main.error)
    assert not at.get("plotly_chart") and not at.get("vega_lite_chart")
    assert not at.dataframe and not at.metric

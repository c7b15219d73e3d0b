"""Hostile paths typed in the sidebar (or put in the link's ``open_path``): each is refused
with a message naming it, on every page, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

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


# Compare picks only among the sources found under the roots: it has no path box.
TYPING_PAGES = [page for page in PAGES if page != "compare"]
NAMES = [
    "a file", "a link out of the roots", "a directory that is not a run", "the parent",
    "a traversal", "the home directory", "an unknown user's home",
    "a name too long for the file system", "a null byte", "a path that does not exist",
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("page", TYPING_PAGES)
def test_a_hostile_typed_path_is_refused_on_every_page(
    dashboard: Dashboard, run_copy: Path, page: str, name: str
) -> None:
    typed = typed_paths(run_copy)[name]
    at = dashboard(page, roots=(run_copy.parent,))
    at.sidebar.text_input(key="open_path").input(typed).run()
    assert not at.exception
    assert at.sidebar.error, f"no message for {typed!r:.60}"


@pytest.mark.parametrize("page", TYPING_PAGES)
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

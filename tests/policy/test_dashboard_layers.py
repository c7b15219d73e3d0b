"""The dashboard's rules (DESIGN §1, §4), checked by reading imports and calls.

- ``app/`` imports from bufcore only its public surface (``from bufcore import X`` with X in
  ``bufcore.__all__``, or ``import bufcore``) and the read-only view ``bufcore.inspect``; imports
  inside functions count too.
- ``pages/`` imports only ``app``, Streamlit, pandas, numpy and the standard library less the
  modules that reach the system (os, shutil, subprocess, pickle, io); no bufcore.
- Nothing in ``app/`` or ``pages/`` imports plotly: every chart is a Vega-Lite spec
  (``app/vega.py``), so no page loads Plotly's bundle (~1 s of every fresh tab).
- Only ``app/ui.py``, ``app/loaders.py``, ``app/main.py`` and ``app/serve.py`` import
  Streamlit; the rest of ``app/`` is plain functions testable without it. ``app/`` never
  imports ``pages``.
- None opens files: all disk I/O goes through bufcore (its persist layer). The one exception,
  ``app/serve.py``, reads Streamlit's installed ``index.html`` once (one call).
- bufcore never imports the dashboard.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import bufcore
from tests.policy.test_layers import ROOT, imported, io_violations, module_id, modules

APP = ROOT / "app"
PAGES = ROOT / "pages"
SYSTEM_MODULES = ("os", "shutil", "subprocess", "pickle", "io")
PAGE_IMPORTS = (
    "app", "streamlit", "pandas", "numpy",
    *(name for name in sys.stdlib_module_names if name not in SYSTEM_MODULES),
)
STREAMLIT_MODULES = ("app.ui", "app.loaders", "app.main", "app.serve")
# The one file app/ reads itself, and why: Streamlit's installed index.html, read once at
# start to serve it with the server's base URL set (app/serve.py); no run data. One call.
PACKAGE_FILE_READS = {"app.serve": "calls .read_text() on line"}


def dashboard_module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def page_violations(source: str, module: str) -> list[str]:
    """Imports of a page that are not ``app``, the UI libraries or the standard library."""
    return [
        f"{module} imports {name}"
        for name in imported(source, module)
        if name.split(".")[0] not in PAGE_IMPORTS
    ]


def bufcore_violations(source: str, module: str) -> list[str]:
    """Imports of an ``app/`` module from bufcore beyond ``bufcore`` and ``bufcore.inspect``."""
    found = []
    for name in imported(source, module):
        if name.split(".")[0] != "bufcore" or name in ("bufcore", "bufcore.inspect"):
            continue
        if name.count(".") != 1 or name.split(".")[1] not in bufcore.__all__:
            found.append(f"{module} imports {name}, not bufcore or bufcore.inspect")
    return found


def app_violations(source: str, module: str) -> list[str]:
    found = [
        f"{module} imports {name}"
        for name in imported(source, module)
        if name.split(".")[0] in ("pages", "plotly")
        or (name.split(".")[0] == "streamlit" and module not in STREAMLIT_MODULES)
    ]
    io = io_violations(source, module)
    allowed = PACKAGE_FILE_READS.get(module)
    read = [violation for violation in io if allowed is not None and allowed in violation]
    return found + [violation for violation in io if len(read) != 1 or violation not in read]


@pytest.mark.parametrize(
    "source",
    ["from bufcore.inspect import summarize_checkpoint", "import os",
     "from bufcore import load_buffer", "import bufcore", "import plotly.express as px"],
)
def test_the_page_check_flags_imports_beyond_app_and_the_ui_libraries(source: str) -> None:
    assert len(page_violations(source, "pages.x")) == 1


def test_the_page_check_accepts_app_streamlit_and_the_standard_library() -> None:
    source = "import streamlit as st\nimport math\nfrom app import ui"
    assert page_violations(source, "pages.x") == []


@pytest.mark.parametrize(
    "source",
    [
        "from bufcore.runs.summary import summarize_checkpoint",
        "import bufcore.persist.checkpoint",
        "def f():\n    from bufcore.tree import format_key_path",
        "from bufcore import _private",
        "from bufcore.inspect.x import y",
    ],
)
def test_the_app_bufcore_check_flags_anything_but_bufcore_and_its_inspect_view(
    source: str,
) -> None:
    assert len(bufcore_violations(source, "app.x")) == 1


def test_the_app_bufcore_check_accepts_bufcore_and_bufcore_inspect() -> None:
    source = (
        "import bufcore\nfrom bufcore import load_buffer\nfrom bufcore.inspect import read_leaf\n"
        "import bufcore.inspect\ndef f():\n    from bufcore import inspect"
    )
    assert bufcore_violations(source, "app.x") == []


@pytest.mark.parametrize(
    "source",
    ["import streamlit", "from pages import x", "open('f')", "import plotly.graph_objects as go"],
)
def test_the_app_check_flags_streamlit_pages_plotly_and_files(source: str) -> None:
    assert len(app_violations(source, "app.x")) == 1


def test_only_the_serving_module_may_read_a_file_itself_and_only_once() -> None:
    source = "from pathlib import Path\nhtml = Path('index.html').read_text()"
    assert app_violations(source, "app.serve") == []
    assert len(app_violations(source, "app.ui")) == 1
    assert len(app_violations(source + "\nmore = Path('x').read_text()", "app.serve")) == 2


@pytest.mark.parametrize("path", modules(PAGES), ids=module_id)
def test_pages_import_only_app_and_the_ui_libraries(path: Path) -> None:
    assert page_violations(path.read_text(encoding="utf-8"), dashboard_module(path)) == []


@pytest.mark.parametrize("path", modules(PAGES), ids=module_id)
def test_pages_open_no_files(path: Path) -> None:
    assert io_violations(path.read_text(encoding="utf-8"), dashboard_module(path)) == []


@pytest.mark.parametrize("path", modules(APP), ids=module_id)
def test_app_imports_only_bufcore_and_bufcore_inspect(path: Path) -> None:
    assert bufcore_violations(path.read_text(encoding="utf-8"), dashboard_module(path)) == []


@pytest.mark.parametrize("path", modules(APP), ids=module_id)
def test_app_keeps_streamlit_to_ui_imports_no_plotly_and_opens_no_files(path: Path) -> None:
    assert app_violations(path.read_text(encoding="utf-8"), dashboard_module(path)) == []


@pytest.mark.parametrize("path", [*modules(APP), *modules(PAGES)], ids=module_id)
def test_every_dashboard_module_opens_with_a_docstring(path: Path) -> None:
    assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", modules(ROOT / "bufcore"), ids=module_id)
def test_bufcore_never_imports_the_dashboard(path: Path) -> None:
    names = imported(path.read_text(encoding="utf-8"), dashboard_module(path))
    assert [n for n in names if n.split(".")[0] in ("app", "pages")] == []

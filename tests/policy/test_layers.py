"""The layer rules of DESIGN §1, checked by reading every module's imports and calls.

1. Imports point down the layers only (core -> storage/sampling/curriculum/stats -> persist ->
   buffers -> runs -> inspect -> cli); the packages of one layer never import each other, and
   the core files import each other only in the order errors, checks, tree, fields, rng,
   distributed. ``distributed`` is a core file, not a layer above ``buffers`` as DESIGN §1
   draws it: the statistics, the curriculum, the buffers and the run logs all use it (README
   "Development"). The command reads through ``bufcore`` and ``bufcore.inspect`` only (besides
   the demo run it starts).
2. Only ``bufcore/persist/`` opens files, imports h5py, starts threads or calls
   ``torch.save``/``torch.load``.
3. No Streamlit or plotly under ``bufcore/`` (the dashboard's ``pages/`` rule joins this file
   with the dashboard).
4. Only ``bufcore/distributed.py`` touches ``torch.distributed`` (imports it or reaches it as
   ``torch.distributed``); every other module asks it.

Imports inside functions count as well. The checkers are tested on small snippets first, so a
rule that silently stopped matching would fail here too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import bufcore

BUFCORE = Path(bufcore.__file__).parent
ROOT = BUFCORE.parent
CORE_ORDER = ("errors", "checks", "tree", "fields", "rng", "distributed")
LAYERS: tuple[tuple[str, ...], ...] = (
    CORE_ORDER,
    ("storage", "sampling", "curriculum", "stats"),
    ("persist",),
    ("buffers",),
    ("runs",),
    ("inspect",),
    ("cli",),
)
CLI_IMPORTS = ("bufcore", "bufcore.inspect", "bufcore.runs.demo")
"""What ``bufcore/cli.py`` may import from bufcore: the public surface, the read-only view and
the demo run that ``bufcore demo`` starts (``bufcore.runs.demo`` and its modules)."""
LAYER_OF = {part: layer for layer, parts in enumerate(LAYERS) for part in parts}
IO_MODULES = ("h5py", "threading", "concurrent", "mmap")
LOCKS = {"Lock", "RLock"}
"""What may be taken from ``threading`` outside persist: locks guard shared state (the sample
output pool) and start no thread."""
IO_FUNCTIONS = {
    ("open",),
    ("os", "open"),
    ("os", "fdopen"),
    ("io", "open"),
    ("torch", "save"),
    ("torch", "load"),
    ("np", "load"),
    ("np", "save"),
    ("np", "fromfile"),
}
IO_METHODS = ("read_text", "write_text", "read_bytes", "write_bytes", "open", "tofile")
UI_MODULES = ("streamlit", "plotly")
DISTRIBUTED_MODULE = "bufcore.distributed"


def modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def dotted(path: Path) -> str:
    """``bufcore/persist/atomic.py`` -> ``bufcore.persist.atomic``."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, module: str) -> list[str]:
    """Every module ``source`` imports (at any depth), relative imports resolved."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            if base == "bufcore":  # from bufcore import X: name what is taken from it
                names.extend(f"bufcore.{alias.name}" for alias in node.names)
            else:
                names.append(base)
    return names


def part_of(module: str) -> str | None:
    """The layer part of a bufcore module (``bufcore.persist.atomic`` -> ``persist``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "bufcore" else None


def layer_violations(source: str, module: str) -> list[str]:
    """Imports of ``module`` (a dotted bufcore module) that break rule 1."""
    here = part_of(module)
    if here is None:  # bufcore/__init__.py: the public surface imports from every layer
        return []
    found = []
    for name in imported(source, module):
        if name.split(".")[0] != "bufcore":
            continue
        there = part_of(name)
        if here == "cli":
            if not _public_or_demo(name):
                found.append(f"{module} imports {name}, not bufcore, bufcore.inspect or the demo")
            continue
        if there is None or there not in LAYER_OF:
            found.append(f"{module} imports {name}, which is not a layer of DESIGN §1")
            continue
        if there == here:
            continue
        if here in CORE_ORDER and there in CORE_ORDER:
            if CORE_ORDER.index(there) > CORE_ORDER.index(here):
                found.append(f"core {module} imports {name}, later in {CORE_ORDER}")
        elif LAYER_OF[there] >= LAYER_OF[here]:
            found.append(
                f"{module} (layer {LAYER_OF[here]}) imports {name} (layer {LAYER_OF[there]})"
            )
    return found


def _public_or_demo(name: str) -> bool:
    """Whether the command may import ``name``: a public name of ``bufcore``,
    ``bufcore.inspect``, or the demo run's package."""
    if name in CLI_IMPORTS or name.startswith("bufcore.runs.demo."):
        return True
    return name.count(".") == 1 and name.split(".")[1] in bufcore.__all__


def io_violations(source: str, module: str) -> list[str]:
    """File I/O, h5py or threads in ``module`` (rule 2)."""
    found = [
        f"{module} imports {name}"
        for name in imported(source, module)
        if name.split(".")[0] in IO_MODULES and name != "threading"
    ]
    found += thread_violations(source, module)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and (function.id,) in IO_FUNCTIONS:
            found.append(f"{module} calls {function.id}() on line {node.lineno}")
        elif isinstance(function, ast.Attribute):
            owner = function.value.id if isinstance(function.value, ast.Name) else None
            if (owner, function.attr) in IO_FUNCTIONS or function.attr in IO_METHODS:
                found.append(f"{module} calls .{function.attr}() on line {node.lineno}")
    return found


def thread_violations(source: str, module: str) -> list[str]:
    """``threading`` imported for anything but its locks (a lock starts no thread)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name == "threading" for a in node.names):
            found.append(f"{module} imports threading")
        elif isinstance(node, ast.ImportFrom) and node.module == "threading":
            names = {alias.name for alias in node.names}
            if not names <= LOCKS:
                found.append(f"{module} imports {', '.join(sorted(names - LOCKS))} from threading")
    return found


def ui_violations(source: str, module: str) -> list[str]:
    """Streamlit or plotly imported under ``bufcore/`` (rule 3)."""
    return [
        f"{module} imports {name}"
        for name in imported(source, module)
        if name.split(".")[0] in UI_MODULES
    ]


def distributed_violations(source: str, module: str) -> list[str]:
    """Uses of ``torch.distributed`` in ``module`` other than ``bufcore.distributed`` (rule 4):
    an import of it (or of something from it), or an attribute ``torch.distributed``."""
    if module == DISTRIBUTED_MODULE:
        return []
    found = [
        f"{module} imports {name}"
        for name in imported(source, module)
        if name == "torch.distributed" or name.startswith("torch.distributed.")
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "torch":
            found += [
                f"{module} imports distributed from torch"
                for alias in node.names
                if alias.name == "distributed"
            ]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "distributed"
            and isinstance(node.value, ast.Name)
            and node.value.id == "torch"
        ):
            found.append(f"{module} reaches torch.distributed on line {node.lineno}")
    return found


# ------------------------------------------------------------------ the checkers themselves
@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("bufcore.storage.ring", "from bufcore.persist.atomic import publish_file"),
        ("bufcore.storage.ring", "import bufcore.sampling.windows"),
        ("bufcore.persist.checkpoint.write", "def f():\n    from bufcore.buffers import registry"),
        ("bufcore.checks", "from bufcore.tree import KeyPath"),
        ("bufcore.buffers.expert", "from bufcore import DictBuffer"),
        ("bufcore.sampling.windows", "from ..storage import ring"),
        ("bufcore.runs.summary", "from bufcore.inspect import read_leaf"),
        ("bufcore.cli", "from bufcore.runs.sources import inspect_path"),
        ("bufcore.cli", "def f():\n    from bufcore.persist.checkpoint import load_checkpoint"),
        ("bufcore.cli", "from bufcore import _private"),
    ],
)
def test_the_layer_check_flags_an_import_that_points_up_or_sideways(
    module: str, source: str
) -> None:
    assert len(layer_violations(source, module)) == 1


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("bufcore.buffers.expert", "from bufcore.persist.checkpoint import OpenedCheckpoint"),
        ("bufcore.persist.checkpoint.read", "from bufcore.persist import snapshot"),
        ("bufcore.fields", "from bufcore.checks import check_int"),
        ("bufcore.cli", "from bufcore.runs.demo import run_demo"),
        ("bufcore.cli", "from bufcore.runs.demo.progress import Progress"),
        ("bufcore.cli", "from bufcore.inspect import render\nfrom bufcore import load_buffer"),
        ("bufcore.inspect", "from bufcore.runs.summary import summarize_checkpoint"),
        ("bufcore.sampling.boundaries", "from .windows import TrajectoryTable"),
    ],
)
def test_the_layer_check_accepts_an_import_that_points_down(module: str, source: str) -> None:
    assert layer_violations(source, module) == []


@pytest.mark.parametrize(
    "source",
    [
        "import h5py",
        "import threading",
        "with open(p) as f:\n    pass",
        "import os\nos.open(p, 0)",
        "path.write_text('x')",
        "import torch\ntorch.save(x, f)",
        "def f():\n    from concurrent.futures import ThreadPoolExecutor",
        "from threading import Thread",
        "from threading import Lock, Timer",
    ],
)
def test_the_io_check_flags_file_access(source: str) -> None:
    assert len(io_violations(source, "bufcore.buffers.x")) == 1


def test_the_io_check_accepts_locks_from_threading() -> None:
    assert io_violations("from threading import Lock, RLock", "bufcore.storage.x") == []


def test_the_io_check_accepts_code_without_file_access() -> None:
    assert io_violations("import torch\nx = torch.zeros(3)\npath.exists()", "bufcore.x") == []


@pytest.mark.parametrize("source", ["import streamlit as st", "from plotly import graph_objects"])
def test_the_ui_check_flags_streamlit_and_plotly(source: str) -> None:
    assert len(ui_violations(source, "bufcore.x")) == 1


@pytest.mark.parametrize(
    "source",
    [
        "import torch.distributed as dist",
        "from torch import distributed",
        "from torch.distributed import all_reduce",
        "import torch\nok = torch.distributed.is_initialized()",
        "def f():\n    import torch.distributed.rpc",
    ],
)
def test_the_distributed_check_flags_torch_distributed_outside_its_module(source: str) -> None:
    assert len(distributed_violations(source, "bufcore.stats.td_ema")) == 1


def test_the_distributed_check_accepts_bufcore_distributed_itself_and_its_callers() -> None:
    assert distributed_violations("import torch.distributed as dist", DISTRIBUTED_MODULE) == []
    assert distributed_violations("from bufcore import distributed", "bufcore.stats.x") == []


# ------------------------------------------------------------------------- the rules
BUFCORE_MODULES = modules(BUFCORE)


def module_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", BUFCORE_MODULES, ids=module_id)
def test_every_import_points_down_the_layers(path: Path) -> None:
    assert layer_violations(path.read_text(encoding="utf-8"), dotted(path)) == []


@pytest.mark.parametrize(
    "path", [p for p in BUFCORE_MODULES if "persist" not in p.parts], ids=module_id
)
def test_only_persist_touches_files_or_starts_threads(path: Path) -> None:
    assert io_violations(path.read_text(encoding="utf-8"), dotted(path)) == []


@pytest.mark.parametrize("path", BUFCORE_MODULES, ids=module_id)
def test_no_library_module_imports_streamlit_or_plotly(path: Path) -> None:
    assert ui_violations(path.read_text(encoding="utf-8"), dotted(path)) == []


@pytest.mark.parametrize("path", BUFCORE_MODULES, ids=module_id)
def test_only_bufcore_distributed_touches_torch_distributed(path: Path) -> None:
    assert distributed_violations(path.read_text(encoding="utf-8"), dotted(path)) == []


@pytest.mark.parametrize("path", BUFCORE_MODULES, ids=module_id)
def test_every_module_opens_with_a_docstring_naming_its_job(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert docstring, f"{module_id(path)} has no opening docstring"


def test_importing_bufcore_leaves_pot_unimported() -> None:
    # A fresh interpreter: this process imported POT already (the EMD tests).
    code = "import sys, bufcore; print('ot' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert result.stdout.strip() == "False"

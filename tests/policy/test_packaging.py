"""What a wheel ships: every bufcore subpackage (a bare ``packages = ["bufcore"]`` did not)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

from setuptools import Distribution, find_namespace_packages
from setuptools.config.pyprojecttoml import apply_configuration, read_configuration

import bufcore

ROOT = Path(bufcore.__file__).parent.parent


def test_the_package_pattern_selects_every_bufcore_package() -> None:
    config = read_configuration(ROOT / "pyproject.toml", expand=False)
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_namespace_packages(where=str(ROOT), include=include))
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "bufcore").rglob("__init__.py")
    }
    assert on_disk <= shipped
    assert {"bufcore.stats", "bufcore.runs.demo", "bufcore.persist"} <= shipped


def test_every_public_name_loads_from_the_module_it_is_listed_under() -> None:
    homes = bufcore._HOMES
    assert sorted(homes) == sorted(bufcore.__all__)
    for name, home in homes.items():
        assert getattr(bufcore, name).__module__ == home


def test_import_bufcore_loads_no_torch_so_the_command_answers_ctrl_c_at_once() -> None:
    probe = "import sys, bufcore, bufcore.cli; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert (result.returncode, result.stdout) == (0, "False\n"), result.stderr
def test_setuptools_reads_the_project_table_without_a_warning() -> None:
    # A `license = {text = ...}` table printed a SetuptoolsDeprecationWarning per build step.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        distribution = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert [str(w.message) for w in caught] == []
    assert distribution.metadata.license_expression == "Apache-2.0"

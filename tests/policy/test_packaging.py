"""What a wheel ships: every bufcore subpackage (a bare ``packages = ["bufcore"]`` did not)."""

from __future__ import annotations

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


def test_setuptools_reads_the_project_table_without_a_warning() -> None:
    # A `license = {text = ...}` table printed a SetuptoolsDeprecationWarning per build step.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        distribution = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert [str(w.message) for w in caught] == []
    assert distribution.metadata.license_expression == "Apache-2.0"

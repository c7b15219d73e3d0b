"""What a wheel ships: every bufcore subpackage (a bare ``packages = ["bufcore"]`` did not)."""

from __future__ import annotations

from pathlib import Path

from setuptools import find_namespace_packages
from setuptools.config.pyprojecttoml import read_configuration

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

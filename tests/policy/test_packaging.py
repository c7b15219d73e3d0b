"""What a wheel ships: every bufcore subpackage (a bare ``packages = ["bufcore"]`` did not)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_namespace_packages

import bufcore

ROOT = Path(bufcore.__file__).parent.parent


def test_the_package_pattern_selects_every_bufcore_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    shipped = set(find_namespace_packages(where=str(ROOT), include=include))
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "bufcore").rglob("__init__.py")
    }
    assert on_disk <= shipped
    assert {"bufcore.stats", "bufcore.runs.demo", "bufcore.persist"} <= shipped

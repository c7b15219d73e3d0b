"""Which directories the dashboard finds and which typed paths it accepts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.sources import (
    ROOTS_ENV,
    RUNS_ENV,
    DashboardConfig,
    OutsideRootsError,
    discover,
    resolve_under_roots,
)


def test_config_reads_runs_and_roots_and_counts_each_run_as_a_root(tmp_path: Path) -> None:
    run, root = tmp_path / "run", tmp_path / "root"
    run.mkdir()
    root.mkdir()
    config = DashboardConfig.from_environment({RUNS_ENV: str(run), ROOTS_ENV: str(root)})
    assert config.runs == (run.resolve(),)
    assert config.roots == (root.resolve(), run.resolve())


def test_config_round_trips_through_its_environment(tmp_path: Path) -> None:
    config = DashboardConfig((tmp_path / "a",), (tmp_path, tmp_path / "a"))
    assert DashboardConfig.from_environment(config.environment()) == config


def test_config_defaults_to_runs_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    assert DashboardConfig.from_environment({}).roots == ((tmp_path / "runs").resolve(),)


def test_a_path_inside_a_root_resolves(tmp_path: Path) -> None:
    (tmp_path / "exp").mkdir()
    assert resolve_under_roots("exp", [tmp_path]) == (tmp_path / "exp").resolve()
    assert resolve_under_roots(str(tmp_path / "exp"), [tmp_path]) == (tmp_path / "exp").resolve()


@pytest.mark.parametrize("typed", ["/etc", "../..", "exp/../../.."])
def test_a_path_outside_every_root_is_refused_naming_it(tmp_path: Path, typed: str) -> None:
    root = tmp_path / "a" / "b"
    root.mkdir(parents=True)
    with pytest.raises(OutsideRootsError, match="outside the dashboard's roots"):
        resolve_under_roots(typed, [root])


def test_a_symbolic_link_out_of_the_roots_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(tmp_path, root / "escape")
    with pytest.raises(OutsideRootsError):
        resolve_under_roots("escape", [root])


def test_an_empty_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty path"):
        resolve_under_roots("  ", [tmp_path])


def test_discover_finds_runs_under_a_root_and_not_inside_them(
    demo_run: Path, tmp_path: Path
) -> None:
    import shutil

    shutil.copytree(demo_run, tmp_path / "group" / "exp1")
    (tmp_path / "notes").mkdir()
    sources = discover(DashboardConfig((), (tmp_path,)))
    assert [(s.label, s.kind) for s in sources] == [("group/exp1", "run directory")]


def test_discover_lists_named_runs_first(demo_run: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(demo_run, tmp_path / "a")
    shutil.copytree(demo_run, tmp_path / "b")
    config = DashboardConfig(((tmp_path / "b").resolve(),), (tmp_path.resolve(),))
    assert [s.label for s in discover(config)] == ["b", "a"]


def test_discover_finds_a_lone_buffer_checkpoint(demo_run: Path, tmp_path: Path) -> None:
    import shutil

    shutil.copytree(demo_run / "checkpoint" / "buffers" / "z", tmp_path / "zbuf")
    [source] = discover(DashboardConfig((), (tmp_path,)))
    assert (source.label, source.kind) == ("zbuf", "buffer checkpoint")

"""The demo's run directory: anything that is not a previous demo run's is refused up front."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bufcore import RunLogger, ZBuffer
from bufcore.persist.run_checkpoint import save_run_checkpoint
from bufcore.runs.demo import DemoOptions, run_demo
from bufcore.runs.demo.rundir import start_fresh
from tests.support import TINY_DEMO

TINY = TINY_DEMO


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root``: a file's bytes, None for a directory."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def _foreign_checkpoint(run: Path) -> None:
    (run / "checkpoint").mkdir()
    (run / "checkpoint" / "notes.txt").write_text("mine")


def _metrics_directory(run: Path) -> None:
    (run / "metrics.jsonl").mkdir()
    (run / "metrics.jsonl" / "part-0").write_text("mine")


def _foreign_motions(run: Path) -> None:
    (run / "motions").mkdir()
    (run / "motions" / "walk.h5").write_bytes(b"my motion data")


def _motions_file(run: Path) -> None:
    (run / "motions").write_text("mine")


def _your_runs_log(run: Path) -> None:
    with RunLogger(run) as log:
        log.log("train", 1, {"loss": 0.5})


def _your_runs_checkpoint(run: Path) -> None:
    buffer = ZBuffer(2, 1)
    save_run_checkpoint(run / "checkpoint", buffers={"z": buffer.save}, state={"step": 3})


def _foreign_history(run: Path) -> None:
    (run / "checkpoints" / "best").mkdir(parents=True)


def _history_of_your_run(run: Path) -> None:
    buffer = ZBuffer(2, 1)
    save_run_checkpoint(run / "checkpoints" / "step-000010", buffers={"z": buffer.save},
                        state={"step": 10})


def _metrics_link(run: Path) -> None:
    elsewhere = run.parent / f"{run.name}-elsewhere.jsonl"
    elsewhere.write_text("mine")
    (run / "metrics.jsonl").symlink_to(elsewhere)


@pytest.mark.parametrize(
    ("make", "entry"),
    [
        (_foreign_checkpoint, "checkpoint"),
        (_metrics_directory, "metrics.jsonl"),
        (_foreign_motions, "motions"),
        (_motions_file, "motions"),
        (_metrics_link, "metrics.jsonl"),
        (_your_runs_log, "metrics.jsonl"),
        (_your_runs_checkpoint, "checkpoint"),
        (_foreign_history, "checkpoints"),
        (_history_of_your_run, "checkpoints"),
    ],
    ids=["checkpoint-not-a-run-checkpoint", "metrics-a-directory", "motions-with-other-files",
         "motions-a-file", "metrics-a-link", "metrics-of-another-run",
         "run-checkpoint-of-another-run", "checkpoints-with-other-entries",
         "checkpoints-of-another-run"],
)
def test_a_demo_entry_holding_something_else_is_refused_before_anything_is_written(
    tmp_path: Path, make: Callable[[Path], None], entry: str
) -> None:
    make(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(FileExistsError, match=rf"{entry}: not what a demo run writes there"):
        run_demo(tmp_path, TINY)
    assert tree(tmp_path) == before


def _git_and_env(run: Path) -> None:
    (run / ".git").mkdir()
    (run / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (run / ".env").write_text("TOKEN=mine\n")


def _another_savers_staging(run: Path) -> None:
    # Staging of a name the demo does not write is not the demo's own.
    (run / ".notes.txt.staging-1-abc").write_text("mine")


@pytest.mark.parametrize("make", [_git_and_env, _another_savers_staging],
                         ids=["git-and-env", "foreign-staging"])
def test_a_directory_holding_only_hidden_entries_is_refused_naming_them(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    make(tmp_path)
    before = tree(tmp_path)
    with pytest.raises(FileExistsError, match=r"holds \.\S+, .*which a demo run does not write"):
        run_demo(tmp_path, TINY)
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    "name",
    [".metrics.jsonl.staging-999999999-0a1b", ".checkpoint.staging-999999999-0a1b",
     ".checkpoint.old-999999999-0a1b"],
)
def test_staging_left_by_a_killed_demo_save_is_no_reason_to_refuse(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).mkdir()
    run_demo(tmp_path, TINY)
    assert (tmp_path / "metrics.jsonl").stat().st_size > 0


def test_a_previous_demo_run_with_more_motion_files_is_replaced(tmp_path: Path) -> None:
    run_demo(tmp_path / "run", DemoOptions(**{**TINY.to_json(), "motions": 20}))
    assert (tmp_path / "run" / "motions" / "motions_002.h5").is_file()
    run_demo(tmp_path / "run", TINY)
    listed = (tmp_path / "run" / "motions" / "motions.txt").read_text().split()
    assert listed == ["motions_000.h5"]


def test_an_empty_log_left_by_a_run_stopped_at_once_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_bytes(b"")
    run_demo(tmp_path, TINY)
    assert (tmp_path / "metrics.jsonl").stat().st_size > 0


def test_start_fresh_on_a_missing_directory_moves_nothing(tmp_path: Path) -> None:
    assert start_fresh(tmp_path / "run") is None
    assert list(tmp_path.iterdir()) == []


def test_start_fresh_empties_a_previous_demo_run(tmp_path: Path) -> None:
    run_demo(tmp_path / "run", TINY)
    assert start_fresh(tmp_path / "run") is None
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
    assert list((tmp_path / "run").iterdir()) == []


def test_start_fresh_moves_a_run_holding_dashboard_saves_aside_with_them(tmp_path: Path) -> None:
    run_demo(tmp_path / "run", TINY)
    saved = tmp_path / "run" / "reprioritized" / "expert-exp-1"
    saved.mkdir(parents=True)
    before = tree(tmp_path / "run")
    aside = start_fresh(tmp_path / "run")
    assert aside is not None and aside.parent == tmp_path
    assert aside.name.startswith("run.") and not (tmp_path / "run").exists()
    assert tree(aside) == before
    run_demo(tmp_path / "run", TINY)  # the name is free for the new run


@pytest.mark.parametrize("make", [_foreign_checkpoint, _your_runs_log, _foreign_history])
def test_start_fresh_refuses_anything_else_and_touches_nothing(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    make(tmp_path)
    (tmp_path / "reprioritized").mkdir()
    before = tree(tmp_path)
    with pytest.raises(FileExistsError, match="not what a demo run writes there"):
        start_fresh(tmp_path)
    assert tree(tmp_path) == before

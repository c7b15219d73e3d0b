"""``bufcore demo --dashboard`` (``make demo``): the run and the dashboard start, stop and fail
together; tried with stand-in children (``serve_children.py``), then for real."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bufcore.cli import build_parser, demo_arguments, demo_options
from bufcore.persist.run_checkpoint import read_run_state
from bufcore.runs.demo import DemoOptions, run_demo
from bufcore.runs.demo.serve import serve
from tests.support import TINY_DEMO, session_members, wait_until_serving

REPO = Path(__file__).resolve().parents[2]
CHILDREN = Path(__file__).with_name("serve_children.py")
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def child(role: str, behaviour: str, run_dir: Path, notes: Path) -> list[str]:
    return [sys.executable, str(CHILDREN), role, behaviour, str(run_dir), str(notes)]


def serve_with(tmp_path: Path, run: str, dashboard: str) -> tuple[int, list[str]]:
    """serve() with stand-ins, in this process; its status and the lines it printed."""
    notes = tmp_path / "notes"
    notes.mkdir()
    err = io.StringIO()
    status = serve(tmp_path / "runs" / "demo", child("run", run, tmp_path / "runs" / "demo", notes),
                   child("dashboard", dashboard, tmp_path / "runs" / "demo", notes), err=err)
    return status, err.getvalue().splitlines()


def gone(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


def test_the_dashboard_starts_at_the_runs_first_checkpoint(tmp_path: Path) -> None:
    status, _ = serve_with(tmp_path, "serve", "exit-soon")
    assert status == 3
    assert (tmp_path / "notes" / "dashboard.saw").read_text() == "True"


def test_the_dashboard_stopping_stops_the_run(tmp_path: Path) -> None:
    status, _ = serve_with(tmp_path, "serve", "exit-soon")
    assert status == 3  # the dashboard's own status
    assert gone(tmp_path / "notes" / "run.pid")
    assert not (tmp_path / "notes" / "run.end").exists()


def test_a_run_failing_before_its_first_checkpoint_starts_no_dashboard_and_ends_on_its_error(
    tmp_path: Path,
) -> None:
    status, lines = serve_with(tmp_path, "fail-early", "serve")
    assert status == 1
    assert not (tmp_path / "notes" / "dashboard.pid").exists()
    assert lines == [
        "bufcore demo: error: runs/demo: holds notes.txt",
        "bufcore demo: the demo run failed (exit status 1): error: runs/demo: holds notes.txt",
    ]


def test_a_run_failing_later_stops_the_dashboard_and_its_error_comes_last(
    tmp_path: Path,
) -> None:
    status, lines = serve_with(tmp_path, "fail-later", "serve")
    assert status == 1
    assert gone(tmp_path / "notes" / "dashboard.pid")
    assert not (tmp_path / "notes" / "dashboard.end").exists()
    assert lines[-1] == ("bufcore demo: the demo run failed (exit status 1): OSError: [Errno 28] "
                         "No space left on device")


def test_a_run_that_finishes_leaves_the_dashboard_serving(tmp_path: Path) -> None:
    status, lines = serve_with(tmp_path, "finish", "serve-briefly")
    assert status == 0
    assert (tmp_path / "notes" / "dashboard.end").exists()  # it ended by itself, not stopped
    assert lines == []


def test_a_previous_run_holding_dashboard_saves_is_moved_aside_and_said_so(
    tmp_path: Path,
) -> None:
    run = tmp_path / "runs" / "demo"
    run_demo(run, TINY_DEMO)
    (run / "reprioritized" / "expert-exp-1").mkdir(parents=True)
    status, lines = serve_with(tmp_path, "serve", "exit-soon")
    assert status == 3
    aside = [p for p in (tmp_path / "runs").iterdir() if p.name != "demo"]
    assert len(aside) == 1 and (aside[0] / "reprioritized" / "expert-exp-1").is_dir()
    assert lines[0] == (f"bufcore demo: {run} held checkpoints saved from the dashboard; the "
                        f"run that made them is now {aside[0]}")
    assert not (run / "reprioritized").exists()


SERVE = """
import sys
from pathlib import Path
from bufcore.runs.demo.serve import serve
run, notes, child = Path({run!r}), Path({notes!r}), [sys.executable, {children!r}]
raise SystemExit(serve(run, [*child, "run", "serve", str(run), str(notes)],
                       [*child, "dashboard", "serve", str(run), str(notes)]))
"""


@pytest.mark.parametrize(
    ("signum", "whole_group"),
    [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGINT, True)],
    ids=["kill", "kill-INT", "ctrl-c-in-a-terminal"],
)
def test_a_stop_signal_stops_the_run_and_the_dashboard(
    tmp_path: Path, signum: int, whole_group: bool
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    code = SERVE.format(run=str(tmp_path / "demo"), notes=str(notes), children=str(CHILDREN))
    process = subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "serving\n"  # the dashboard is up
        if whole_group:  # what a terminal's Ctrl-C does
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 128 + signum
        assert err.splitlines()[-1] == "bufcore demo: stopped the run and the dashboard"
        assert session_members(process.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.parametrize(
    "options",
    [DemoOptions(), DemoOptions(seed=-3, steps=7, motions=2, envs=3, capacity=50, eval_every=2,
                                mode="bin", min_val=0.1, max_val=1e-1 * 3, scale=1 / 3,
                                live_seconds=12.5, prioritized=True)],
    ids=["defaults", "every-option-changed"],
)
def test_the_run_that_dashboard_starts_has_the_same_options(options: DemoOptions) -> None:
    args = build_parser().parse_args(demo_arguments(Path("/runs/demo"), options))
    assert demo_options(args) == options
    assert (args.out, args.quiet, args.dashboard) == (Path("/runs/demo"), True, None)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_bufcore_demo_dashboard_serves_a_fresh_run_from_its_first_checkpoint(
    tmp_path: Path,
) -> None:
    run = tmp_path / "runs" / "demo"
    run_demo(run, TINY_DEMO)  # a previous run with a save from the dashboard
    (run / "reprioritized" / "expert-exp-1").mkdir(parents=True)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bufcore.cli", "demo", "--out", str(run), "--live", "60",
         "--steps", "600", "--dashboard", str(port)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        start_new_session=True,
    )
    try:
        wait_until_serving(process, port)
        state = read_run_state(run / "checkpoint")  # this run's: its log has 600 steps
        assert state["options"]["steps"] == 600 and state["step"] < 600
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        assert process.returncode == 143
        assert out.splitlines()[0] == (f"bufcore dashboard: http://127.0.0.1:{port}/  "
                                       "(Ctrl-C stops it)")
        assert err.splitlines()[-1] == "bufcore demo: stopped the run and the dashboard"
        assert "Traceback" not in err
        assert session_members(process.pid) == []
        assert len(list((tmp_path / "runs").glob("demo.*/reprioritized"))) == 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def make_demo(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``make demo`` from the repository's Makefile in ``tmp_path``, with its install steps
    already done (their stamps in a stand-in venv whose ``bufcore`` is this checkout's)."""
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    key = hashlib.sha256((tmp_path / "pyproject.toml").read_bytes()).hexdigest()[:16]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for stamp in ("bin/python", ".torch", f".core-{key}", f".dashboard-{key}"):
        (venv / stamp).touch()
    (venv / "bin" / "bufcore").write_text(f'#!/bin/sh\nexec {sys.executable} -m bufcore.cli "$@"\n')
    (venv / "bin" / "bufcore").chmod(0o755)
    # As a user types it: not a sub-make of `make test` (whose MAKELEVEL would make the
    # messages read "make[1]:").
    top_level = {k: v for k, v in ENV.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(
        ["make", "--no-print-directory", "-f", str(REPO / "Makefile"), "demo", f"VENV={venv}",
         *arguments],
        cwd=tmp_path, env=top_level, capture_output=True, text=True, timeout=120,
    )


def test_make_demo_runs_bufcore_demo_with_the_dashboard_on_its_port(tmp_path: Path) -> None:
    result = make_demo(tmp_path, "-n", "PORT=8600")
    assert result.stdout.splitlines() == [
        f"{tmp_path / 'venv'}/bin/bufcore demo --out runs/demo --live --dashboard 8600"
    ]


@pytest.mark.slow
def test_make_demo_stops_on_a_refused_run_directory_with_the_reason_last(tmp_path: Path) -> None:
    (tmp_path / "runs" / "demo").mkdir(parents=True)
    (tmp_path / "runs" / "demo" / "notes.txt").write_text("mine")
    result = make_demo(tmp_path, f"PORT={free_port()}")
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines() if not line.startswith("make:")]
    assert ours[-1].startswith("bufcore demo: error: ")
    assert "holds notes.txt" in ours[-1]
    assert (tmp_path / "runs" / "demo" / "notes.txt").read_text() == "mine"

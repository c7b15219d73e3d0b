"""The ``bufcore`` command, run as a user runs it: in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from bufcore import DictBuffer, load_buffer
from tests.support import as_from_a_terminal, interrupt_once_serving

# A demo small enough for a subprocess test.
SMALL_DEMO = (
    "--steps", "60", "--motions", "3", "--envs", "4", "--capacity", "30", "--eval-every", "30",
)


def bufcore(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bufcore.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def test_demo_writes_a_run_and_reports_the_curriculum_with_progress_on_stderr(
    tmp_path: Path,
) -> None:
    result = bufcore("demo", "--out", str(tmp_path / "run"), *SMALL_DEMO)
    assert result.returncode == 0, result.stderr
    assert "60/60 steps" in result.stderr.splitlines()[-1]
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"demo run written to {tmp_path / 'run'} (60 env steps x 4 envs")
    assert lines[1].startswith("mean EMD per round: ")
    assert lines[-1] == f"next: bufcore inspect {tmp_path / 'run'}"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "checkpoint", "checkpoints", "metrics.jsonl", "motions"
    ]
    assert len(load_buffer(tmp_path / "run" / "checkpoint" / "buffers" / "train")) == 30


def test_demo_defaults_to_runs_demo_and_quiet_prints_no_progress(tmp_path: Path) -> None:
    result = bufcore("demo", *SMALL_DEMO, "--quiet", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert (tmp_path / "runs" / "demo" / "metrics.jsonl").is_file()


def test_demo_into_a_directory_of_other_files_is_one_line_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = bufcore("demo", "--out", str(tmp_path), *SMALL_DEMO)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"bufcore demo: error: {tmp_path}: holds notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_demo_into_a_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = bufcore("demo", "--out", str(tmp_path / "file"), *SMALL_DEMO)
    assert (result.returncode, result.stderr) == (
        1, f"bufcore demo: error: {tmp_path / 'file'}: not a directory\n"
    )


def test_an_option_the_demo_refuses_is_one_line_naming_it(tmp_path: Path) -> None:
    result = bufcore("demo", "--out", str(tmp_path / "r"), "--min-val", "-1")
    assert (result.returncode, result.stderr) == (
        1, "bufcore demo: error: min_val: expected a number >= 0.0, got -1.0\n"
    )
    assert not (tmp_path / "r").exists()


def test_no_command_is_one_usage_line_and_exit_2() -> None:
    result = bufcore()
    assert result.returncode == 2
    assert result.stderr == (
        "bufcore: error: the following arguments are required: command (see bufcore --help)\n"
    )


def test_an_empty_out_is_refused_instead_of_meaning_the_working_directory(
    tmp_path: Path,
) -> None:
    result = bufcore("demo", "--out", "", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "bufcore demo: error: argument --out: expected a directory path, got an empty string "
        "(write . for the working directory) (see bufcore demo --help)\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("steps", ["lots", "0", "-3"])
def test_a_bad_count_names_the_option_and_exits_2(steps: str) -> None:
    result = bufcore("demo", "--steps", steps)
    assert result.returncode == 2
    assert result.stderr == (
        f"bufcore demo: error: argument --steps: expected an int >= 1, got {steps!r} "
        "(see bufcore demo --help)\n"
    )


@pytest.mark.parametrize("command", [(), ("demo",)])
def test_help_shows_an_example(command: tuple[str, ...]) -> None:
    result = bufcore(*command, "--help")
    assert result.returncode == 0
    assert "examples:\n  bufcore demo --out runs/demo" in result.stdout


def test_every_demo_flag_reaches_the_options_the_run_logs(tmp_path: Path) -> None:
    flags = {"seed": "3", "mode": "bin", "min-val": "0.4", "max-val": "1.5", "scale": "3",
             "live": "0.5"}
    args = [part for name, value in flags.items() for part in (f"--{name}", value)]
    result = bufcore("demo", "--out", str(tmp_path / "run"), *SMALL_DEMO, *args, "--quiet")
    assert result.returncode == 0, result.stderr
    first = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    options = first["options"]
    assert (options["seed"], options["mode"], options["min_val"], options["max_val"],
            options["scale"], options["live_seconds"]) == (3, "bin", 0.4, 1.5, 3.0, 0.5)
    assert (options["steps"], options["motions"], options["envs"], options["capacity"],
            options["eval_every"]) == (60, 3, 4, 30, 30)


@pytest.mark.parametrize("output", [(), ("--json",)], ids=["text", "json"])
def test_inspect_into_a_closed_pipe_prints_no_error_and_exits_141(
    tmp_path: Path, output: tuple[str, ...]
) -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"obs": torch.zeros(2, 3)})
    buffer.save(tmp_path / "ckpt")
    # The reader closes its end before the command (still importing torch) writes anything.
    process = subprocess.Popen(
        [sys.executable, "-m", "bufcore.cli", "inspect", str(tmp_path / "ckpt"), *output],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert process.stdout is not None
    process.stdout.close()
    _, stderr = process.communicate(timeout=300)
    assert (process.returncode, stderr) == (141, "")


def test_ctrl_c_during_a_demo_is_one_line_and_exit_130(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "bufcore.cli", "demo", "--out", str(tmp_path / "run"),
         "--steps", "1000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    assert process.stderr is not None
    try:
        first = process.stderr.readline()  # the progress line: the run is under way
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert first.startswith("[")
    assert process.returncode == 130
    assert err.splitlines() == ["bufcore demo: interrupted"]
    assert out == ""


def _importing_torch(pid: int) -> bool:
    """Whether the process has begun loading torch's library (Linux: its memory map)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_ctrl_c_while_the_demo_is_still_importing_torch_is_one_line_and_exit_130(
    tmp_path: Path,
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "bufcore.cli", "demo", "--out", str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        while process.poll() is None and not _importing_torch(process.pid):
            time.sleep(0.001)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert (process.returncode, err, out) == (130, "bufcore demo: interrupted\n", "")
    assert not (tmp_path / "run").exists()


def test_dashboard_runs_the_launcher_with_absolute_paths_and_the_port(tmp_path: Path) -> None:
    from bufcore.cli import dashboard_command

    command = dashboard_command(
        [Path("runs/a"), tmp_path / "b"], [Path("more")], 8600, python="py", cwd=tmp_path
    )
    assert command == [
        "py", "-m", "app", str(tmp_path / "runs/a"), str(tmp_path / "b"), "--port", "8600",
        "--root", str(tmp_path / "more"),
    ]


@pytest.mark.parametrize("has_runs", [True, False])
def test_dashboard_without_runs_or_roots_roots_at_runs_under_the_working_directory(
    tmp_path: Path, has_runs: bool
) -> None:
    from bufcore.cli import dashboard_command

    if has_runs:
        (tmp_path / "runs").mkdir()
    command = dashboard_command([], [], 8501, python="py", cwd=tmp_path)
    root = tmp_path / "runs" if has_runs else tmp_path
    assert command == ["py", "-m", "app", "--port", "8501", "--root", str(root)]


def test_dashboard_without_streamlit_says_to_install_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    from bufcore import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(
        cli.importlib.util, "find_spec",
        lambda name, *a: None if name == "streamlit" else real(name),
    )
    assert cli.main(["dashboard"]) == 1
    assert capsys.readouterr().err == (
        "bufcore dashboard: error: streamlit is not installed; install the dashboard extra: "
        "pip install -e '.[dashboard]'\n"
    )


def test_dashboard_without_app_beside_bufcore_says_a_source_checkout_is_needed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from bufcore import cli

    monkeypatch.setattr(cli, "repository_root", lambda: tmp_path)
    assert cli.main(["dashboard"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"bufcore dashboard: error: the dashboard's source (app/) is not "
                          f"beside bufcore/ in {tmp_path}")
    assert err.endswith("install the dashboard extra: pip install -e '.[dashboard]'\n")
    assert err.count("\n") == 1


def test_dashboard_becomes_the_launcher_in_the_repository_root_with_it_on_the_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bufcore import cli

    calls: list[tuple[str, list[str], Path, dict[str, str]]] = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "elsewhere")
    monkeypatch.setattr(cli.os, "chdir", lambda path: calls.append(("chdir", [], path, {})))
    monkeypatch.setattr(
        cli.os, "execve", lambda exe, argv, env: calls.append((exe, argv, Path(), env))
    )
    cli.main(["dashboard", "--port", "8600"])
    repo = cli.repository_root()
    assert [call[0] for call in calls] == ["chdir", sys.executable]
    assert calls[0][2] == repo
    assert calls[1][1] == [sys.executable, "-m", "app", "--port", "8600", "--root", str(tmp_path)]
    assert calls[1][3]["PYTHONPATH"] == f"{repo}{os.pathsep}elsewhere"


@pytest.mark.slow
def test_ctrl_c_stops_bufcore_dashboard_with_one_line_and_exit_130(tmp_path: Path) -> None:
    # One supervisor: `bufcore dashboard` becomes `python -m app`, which stops Streamlit.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "bufcore.cli", "dashboard", "--root", str(tmp_path),
         "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    _, err = interrupt_once_serving(process, port)
    assert (process.returncode, err.splitlines()[-1]) == (130, "python -m app: stopped")
    assert "Traceback" not in err and "interrupted" not in err


def test_dashboard_on_a_missing_run_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = bufcore("dashboard", str(tmp_path / "nope"))
    assert (result.returncode, result.stderr) == (
        1, f"bufcore dashboard: error: {tmp_path / 'nope'}: no such directory\n"
    )


def test_dashboard_with_a_port_that_is_not_a_number_is_a_usage_error() -> None:
    result = bufcore("dashboard", "--port", "web")
    assert result.returncode == 2
    assert "--port" in result.stderr and result.stderr.count("\n") == 1


def test_the_command_line_never_imports_the_dashboard() -> None:
    # Layer rule: bufcore sits below app/; `bufcore dashboard` execs `python -m app`.
    probe = (
        "import sys, bufcore.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('app', 'streamlit')))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120)
    assert (result.returncode, result.stdout) == (0, "[]\n")


def test_dashboard_help_shows_an_example() -> None:
    result = bufcore("dashboard", "--help")
    assert result.returncode == 0
    assert "examples:\n  bufcore dashboard runs/demo" in result.stdout

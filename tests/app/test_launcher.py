"""``python -m app``: the command line it builds, what it refuses, and a real start and stop."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from streamlit.runtime.scriptrunner import magic

import app.__main__ as launcher
from app.serve import base_script, index_html, page_names, page_routes
from app.sources import ROOTS_ENV, RUNS_ENV, DashboardConfig
from tests.support import interrupt_once_serving, session_members, wait_until_serving

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_the_command_runs_the_entry_script_local_headless_without_usage_stats() -> None:
    command = launcher.streamlit_command(8600, python="py")
    assert command[:5] == ["py", "-m", "streamlit", "run", str(REPO / "app" / "serve.py")]
    assert option(command, "--server.address") == "127.0.0.1"
    assert option(command, "--server.port") == "8600"
    assert option(command, "--server.headless") == "true"
    assert option(command, "--browser.gatherUsageStats") == "false"
    assert option(command, "--client.toolbarMode") == "minimal"


def test_the_command_turns_source_watching_off() -> None:
    # Watching costs the server five times a page's script run, per run.
    command = launcher.streamlit_command(8600, python="py")
    assert option(command, "--server.fileWatcherType") == "none"


def test_the_command_turns_the_full_collection_after_every_run_off() -> None:
    # A full gc.collect(2) with torch imported held the GIL ~0.2 s after each run.
    command = launcher.streamlit_command(8600, python="py")
    assert option(command, "--runner.postScriptGC") == "false"


def test_the_command_turns_magic_off() -> None:
    command = launcher.streamlit_command(8600, python="py")
    assert option(command, "--runner.magicEnabled") == "false"


SCRIPTS = [REPO / "app" / "main.py", *sorted((REPO / "pages").glob("*.py"))]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_no_page_relies_on_magic(script: Path) -> None:
    # With magic off, a statement Streamlit's magic would have written shows nothing.
    tree = magic.add_magic(script.read_text(), str(script))
    written = [node for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and node.attr == "transparent_write"]
    assert written == [], f"{script.name}: line {written[0].lineno if written else 0}"


@pytest.mark.parametrize("port", [0, -1, 65536, True, "8501"])
def test_a_port_out_of_range_is_refused_naming_the_option(port: object) -> None:
    with pytest.raises(launcher.LaunchError, match="--port"):
        launcher.streamlit_command(port)  # type: ignore[arg-type]


def test_runs_and_roots_reach_the_dashboard_through_its_environment(tmp_path: Path) -> None:
    run, root = tmp_path / "run", tmp_path / "root"
    run.mkdir()
    root.mkdir()
    launch = launcher.build_launch([run], [root], 8601)
    config = DashboardConfig.from_environment(launch.environment)
    assert config.runs == (run.resolve(),)
    assert config.roots == (root.resolve(), run.resolve())
    assert launch.url == "http://127.0.0.1:8601/"


def test_no_runs_and_no_roots_leave_the_dashboard_its_default_root() -> None:
    launch = launcher.build_launch([], [], 8501)
    assert launch.environment == {RUNS_ENV: "", ROOTS_ENV: ""}


@pytest.mark.parametrize("what", ["run", "root"])
def test_a_missing_directory_is_refused_naming_it(tmp_path: Path, what: str) -> None:
    missing = tmp_path / "missing"
    runs, roots = ([missing], []) if what == "run" else ([], [missing])
    with pytest.raises(launcher.LaunchError, match="missing: no such directory"):
        launcher.build_launch(runs, roots, 8501)


def test_a_file_given_as_a_run_is_refused_as_not_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(launcher.LaunchError, match="file: not a directory"):
        launcher.build_launch([tmp_path / "file"], [], 8501)


def test_main_without_streamlit_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(launcher, "streamlit_missing", lambda: True)
    assert launcher.main([]) == 1
    assert capsys.readouterr().err == (
        "python -m app: error: streamlit is not installed; install the dashboard extra: "
        "pip install -e '.[dashboard]'\n"
    )


def test_main_on_a_missing_run_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert launcher.main([str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert err == f"python -m app: error: run directory {tmp_path / 'nope'}: no such directory\n"


def test_main_on_a_port_in_use_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert launcher.main(["--port", str(port)]) == 1
    assert capsys.readouterr().err.endswith(f"--port {port}: already in use on 127.0.0.1; "
                                            "pick another\n")


@pytest.mark.slow
def test_the_dashboard_serves_on_its_port_and_ctrl_c_stops_it_with_exit_130(
    demo_run: Path,
) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", str(demo_run), "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    out, err = interrupt_once_serving(process, port)
    assert process.returncode == 130
    assert out.splitlines()[0] == f"bufcore dashboard: http://127.0.0.1:{port}/  (Ctrl-C stops it)"
    assert err.splitlines()[-1] == "python -m app: stopped"
    assert "Traceback" not in err


def served_page(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}") as reply:
        assert reply.headers["Cache-Control"] == "no-cache", path
        return str(reply.read().decode())


def start_dashboard(run: Path, port: int, **env: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "app", str(run), "--port", str(port)],
        env={**os.environ, "PYTHONPATH": str(REPO), **env}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=REPO,
    )
    return process


@pytest.mark.slow
def test_every_page_url_answers_a_page_that_names_the_server_base(demo_run: Path) -> None:
    # Without the base, Streamlit's frontend probes /<page>/_stcore/health (a 404) first and
    # waits 100 ms: every link to a page but the default one paid it.
    port = free_port()
    process = start_dashboard(demo_run, port)
    try:
        wait_until_serving(process, port)
        for name in page_names():
            html = served_page(port, f"/{name}?buffer=train")
            assert base_script(name) in html, name
            assert html.index(base_script(name)) < html.index('<script type="module"'), name
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


@pytest.mark.slow
def test_under_a_base_url_path_the_page_urls_carry_it(demo_run: Path) -> None:
    port = free_port()
    process = start_dashboard(demo_run, port, STREAMLIT_SERVER_BASE_URL_PATH="bufcore")
    try:
        wait_until_serving(process, port, base="bufcore")
        assert base_script("replay") in served_page(port, "/bufcore/replay?buffer=train")
        assert base_script("") in served_page(port, "/bufcore/")
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)


def test_the_default_page_and_every_page_script_get_a_route() -> None:
    paths = {route.path for route in page_routes("<head></head>", "")}
    assert paths == {"/", *(f"/{script.stem}" for script in (REPO / "pages").glob("*.py"))}


def test_under_a_base_path_every_route_carries_it() -> None:
    paths = {route.path for route in page_routes("<head></head>", "bufcore")}
    assert {"/bufcore/", "/bufcore/replay", "/bufcore/td_ema"} <= paths
    assert all(path.startswith("/bufcore/") for path in paths)


def test_each_page_route_answers_the_base_script_of_its_own_page() -> None:
    for route in page_routes("<html><head></head></html>", ""):
        name = route.path.strip("/")
        reply = asyncio.run(route.endpoint(None))  # the endpoint reads nothing of the request
        assert base_script(name) in reply.body.decode(), route.path


def test_the_base_script_goes_first_in_the_head() -> None:
    html = index_html("<html><head><script>x()</script></head></html>", "replay")
    assert html.index(base_script("replay")) < html.index("<script>x()")


def test_a_page_without_a_head_is_refused() -> None:
    with pytest.raises(ValueError, match=r"index\.html: expected a <head>"):
        index_html("<html><body></body></html>", "")


# `bufcore dashboard` as a script starts it in the background (`cmd &`): the shell starts the
# job with SIGINT ignored, so only a handler the launcher installs itself sees `kill -INT`.
SCRIPT = '"$@" & echo $!; wait $!'


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "signum"),
    [("script", signal.SIGTERM), ("script", signal.SIGINT), ("supervisor", signal.SIGTERM)],
    ids=["kill-from-a-script", "kill-INT-from-a-script", "SIGTERM-from-a-supervisor"],
)
def test_a_stop_signal_leaves_no_process_of_the_dashboard(
    demo_run: Path, how: str, signum: int
) -> None:
    port = free_port()
    command = [sys.executable, "-m", "bufcore.cli", "dashboard", str(demo_run),
               "--port", str(port)]
    if how == "script":
        command = ["sh", "-c", SCRIPT, "sh", *command]
    # A session of its own: every process it starts is found by session id afterwards.
    process = subprocess.Popen(
        command, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True,
    )
    try:
        assert process.stdout is not None
        dashboard = int(process.stdout.readline()) if how == "script" else process.pid
        _, err = interrupt_once_serving(process, port, signum=signum, pid=dashboard)
        assert process.returncode == 128 + signum
        assert err.splitlines()[-1] == "python -m app: stopped"
        assert session_members(process.pid) == []
    finally:  # whatever failed, leave no dashboard behind
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

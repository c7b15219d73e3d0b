"""``python -m app [RUN_DIR ...] [--port N] [--root DIR ...]``: start the dashboard.

Runs ``streamlit run app/serve.py`` (Streamlit over ``app/main.py``, see :mod:`app.serve`)
bound to 127.0.0.1 (a dashboard is not a public server), headless, with usage statistics and
source watching off, and hands it the run directories and roots through the environment
variables :class:`app.sources.DashboardConfig` reads. It prints the URL first. Bad input (a
missing directory, a port in use or out of range) is one line on stderr and exit status 1.
SIGINT (Ctrl-C) and SIGTERM (``kill``) stop Streamlit and then this process, with one line and
exit status 128 + the signal (130, 143), however it was started: from a terminal, in a
script's background (which starts it with SIGINT ignored), or by a supervisor that signals
this process alone.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from app.sources import DashboardConfig

DEFAULT_PORT = 8501
HOST = "127.0.0.1"
ENTRY = Path(__file__).resolve().parent / "serve.py"
PROG = "python -m app"
INSTALL_HINT = "install the dashboard extra: pip install -e '.[dashboard]'"


class LaunchError(ValueError):
    """The dashboard cannot start with these arguments (the message says why, in one line)."""


@dataclass(frozen=True)
class Launch:
    """What to run: the command line, the environment to add, and the URL it will serve.

    Attributes:
        command: ``python -m streamlit run .../app/serve.py`` with its server flags.
        environment: The dashboard's variables (:meth:`DashboardConfig.environment`).
        url: ``http://127.0.0.1:PORT/``.
    """

    command: list[str]
    environment: dict[str, str]
    url: str


def streamlit_command(port: int, *, python: str = sys.executable, entry: Path = ENTRY) -> list[str]:
    """The ``streamlit run`` command line for ``port``: local only, headless, no usage stats,
    and none of the per-run work a reader of runs does not need.

    Each flag below cut a cost that ``bench.dashboard_browser`` and a py-spy profile of the
    server over fresh tabs showed:

    - ``fileWatcherType none``: Streamlit otherwise polls the dashboard's sources and, after
      every script run, walks every imported module's path (torch's thousands): five times the
      CPU of the run itself, 0.35 s of a fresh TD-EMA tab. A user does not edit the dashboard
      while reading runs; a developer who does restarts it.
    - ``runner.postScriptGC false``: Streamlit otherwise runs a full ``gc.collect(2)`` after
      every script run, ~0.2 s with torch imported, holding the GIL while the run's last
      messages wait to be sent; Replay's Resample waited on it (median 0.23 s -> 0.20 s).
      Streamlit runs it to keep memory from building up between runs; Python's own
      generational collector still runs, and over 40 fresh tabs of four pages the server grew
      408 -> 445 MB without it and 406 -> 439 MB with it.
    - ``runner.magicEnabled false``: the pages write nothing through "magic" (a bare
      expression shown as if passed to ``st.write``; ``test_no_page_relies_on_magic`` pins
      that), and rewriting a page's syntax tree for it costs a fresh session ~15 ms per
      script, paid again whenever the last tab closes (Streamlit then drops its compiled
      scripts).

    Raises:
        LaunchError: ``port`` is not an int in 1..65535.
    """
    check_port(port)
    return [
        python, "-m", "streamlit", "run", str(entry),
        "--server.address", HOST,
        "--server.port", str(port),
        "--server.headless", "true",
        "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "minimal",
        "--server.fileWatcherType", "none",
        "--runner.postScriptGC", "false",
        "--runner.magicEnabled", "false",
    ]


def check_port(port: int) -> int:
    """``port`` if it is an int in 1..65535.

    Raises:
        LaunchError: it is not (the message names ``--port``).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise LaunchError(f"--port: expected a port number in 1..65535, got {port!r}")
    return port


def check_directories(paths: Sequence[str | os.PathLike[str]], what: str) -> tuple[Path, ...]:
    """The paths resolved, each an existing directory.

    Raises:
        LaunchError: one is missing or not a directory (the message names it and ``what``).
    """
    resolved = []
    for path in paths:
        full = Path(path).expanduser().resolve()
        if not full.is_dir():
            problem = "not a directory" if full.exists() else "no such directory"
            raise LaunchError(f"{what} {path}: {problem}")
        resolved.append(full)
    return tuple(resolved)


def build_launch(
    runs: Sequence[str | os.PathLike[str]],
    roots: Sequence[str | os.PathLike[str]],
    port: int,
    *,
    python: str = sys.executable,
) -> Launch:
    """Check the arguments and assemble what to run (nothing is started).

    Raises:
        LaunchError: a run directory or root is missing, or the port is out of range.
    """
    run_dirs = check_directories(runs, "run directory")
    root_dirs = check_directories(roots, "--root")
    config = DashboardConfig(run_dirs, tuple(dict.fromkeys((*root_dirs, *run_dirs))))
    return Launch(streamlit_command(port, python=python), config.environment(),
                  f"http://{HOST}:{port}/")


def port_in_use(port: int, host: str = HOST) -> bool:
    """Whether something already listens on ``host:port`` (so Streamlit would fail late)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def streamlit_missing() -> bool:
    """Whether the ``streamlit`` package cannot be imported here."""
    return importlib.util.find_spec("streamlit") is None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """``RUN_DIR ...``, ``--port N`` and ``--root DIR`` (repeatable)."""
    parser = _Parser(
        prog=PROG,
        description="Start the bufcore dashboard on 127.0.0.1 and print its URL.",
        epilog="examples:\n  python -m app runs/demo\n  python -m app --root runs --port 8600\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR",
                        help="run directories or checkpoints to show first")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help="a directory whose runs are listed and under which typed paths "
                        "may be opened (repeatable; default: runs/ under the working directory)")
    return parser


def main(argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None) -> int:
    """Start the dashboard and wait for it; the exit status."""
    args = build_parser().parse_args(argv)
    if streamlit_missing():
        print(f"{PROG}: error: streamlit is not installed; {INSTALL_HINT}", file=sys.stderr)
        return 1
    try:
        launch = build_launch(args.runs, args.root, args.port)
        if port_in_use(args.port):
            raise LaunchError(f"--port {args.port}: already in use on {HOST}; pick another")
    except LaunchError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return 1
    env = {**(os.environ if environ is None else environ), **launch.environment}
    print(f"bufcore dashboard: {launch.url}  (Ctrl-C stops it)", flush=True)
    stopper = _Stopper()
    with stopper.installed():
        try:
            process = subprocess.Popen(launch.command, env=env)
            stopper.started(process)
            return process.wait()
        except StopSignal as stop:
            stopper.stop_child()
            print(f"{PROG}: stopped", file=sys.stderr)
            return 128 + stop.signum


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignal(Exception):
    """SIGINT or SIGTERM arrived (:attr:`signum` says which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Stopper:
    """Turns SIGINT and SIGTERM into :class:`StopSignal` while a child runs, and stops it.

    The handlers go in before the child starts, whatever the parent left them: a script's
    ``bufcore dashboard &`` starts it with SIGINT ignored, which would leave Streamlit
    running after ``kill -INT``. A signal that arrives while the child is being started
    (before there is a child to stop) is held and raised as soon as there is one, so no
    child is ever left without a parent that knows it
    (``tests/app/test_launcher.py::test_a_stop_signal_leaves_no_process_of_the_dashboard``).
    """

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.pending: int | None = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        self.pending = signum
        if self.process is not None:
            raise StopSignal(signum)

    def started(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        if self.pending is not None:  # it came while Popen ran
            raise StopSignal(self.pending)

    def stop_child(self) -> None:
        """SIGTERM to the child now (a terminal's Ctrl-C may have reached it too; Streamlit
        takes either), SIGKILL if it is still there after 10 s. Further signals are ignored
        meanwhile: a second Ctrl-C must not cut the stop short."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
        if self.process is None:
            return
        for send, wait in ((self.process.terminate, 10.0), (self.process.kill, None)):
            with contextlib.suppress(ProcessLookupError):
                send()
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


if __name__ == "__main__":
    raise SystemExit(main())

"""``bufcore demo --dashboard`` (what ``make demo`` runs): the demo run and the dashboard on
it, two child processes that this one starts, watches and stops together.

1. The run directory is made fresh (:func:`~bufcore.runs.demo.rundir.start_fresh`: a previous
   demo run is cleared, or moved aside whole when it holds checkpoints saved from the
   dashboard), so whatever appears in it is the new run's.
2. The run starts. Its stderr passes through here line by line, and its last line is kept.
3. At its first checkpoint (``checkpoint/run.json`` appears, seconds after the start) the
   dashboard starts, so every page has data on its first screen.
4. Then: the dashboard stopping (Ctrl-C, ``kill``, a port in use) stops the run; the run
   failing stops the dashboard and its error is printed last; the run finishing leaves the
   dashboard serving.

SIGINT and SIGTERM stop both children and exit 128 + the signal. The run is started with
SIGINT ignored, so a terminal's Ctrl-C (which reaches the whole process group) stops it only
through here, without a second message; every stop is a SIGTERM from here, then SIGKILL after
a grace period. Signals are only noted in the handler and acted on by the poll loop, so one
that arrives while a child is being started is never lost
(``tests/runs/test_demo_serve.py::test_a_stop_signal_stops_the_run_and_the_dashboard``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from bufcore.persist.run_checkpoint import CHECKPOINT_DIR, RUN_STATE
from bufcore.runs.demo.rundir import start_fresh

PROG = "bufcore demo"
POLL_SECONDS = 0.2
# How long a child may take to stop after SIGTERM (the dashboard stops Streamlit first,
# allowing it 10 s) before SIGKILL.
STOP_SECONDS = 15.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def serve(
    run_dir: Path,
    run_command: Sequence[str],
    dashboard_command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``run_command`` (a demo run writing ``run_dir``) and, from its first checkpoint on,
    ``dashboard_command`` beside it, until one of them ends or a signal stops both.

    Returns:
        The exit status: the dashboard's when it stopped, the run's when it failed, or
        128 + the signal that stopped both.

    Raises:
        FileExistsError, NotADirectoryError: ``run_dir`` holds something a demo run may
            not replace (nothing is started).
    """
    stream = sys.stderr if err is None else err
    moved = start_fresh(run_dir)
    if moved is not None:
        print(f"{PROG}: {run_dir} held checkpoints saved from the dashboard; the run that "
              f"made them is now {moved}", file=stream, flush=True)
    together = _Together(stream)
    with together.handling_signals():
        try:
            together.run = together.start(run_command, env, cwd, run=True)
            first = run_dir / CHECKPOINT_DIR / RUN_STATE
            while not (first.exists() or together.run_done):
                if (status := together.poll()) is not None:
                    return status
            together.dashboard = together.start(dashboard_command, env, cwd, run=False)
            while (status := together.poll()) is None:
                continue
            return status
        finally:
            together.stop_all()


class _Together:
    """The two children, the run's stderr passing through, and the signal that stops both."""

    def __init__(self, err: TextIO) -> None:
        self.err = err
        self.run: subprocess.Popen[bytes] | None = None
        self.dashboard: subprocess.Popen[bytes] | None = None
        self.run_done = False
        self.signal: int | None = None
        self._selector = selectors.DefaultSelector()
        self._partial = b""
        self._last_line = ""

    @contextlib.contextmanager
    def handling_signals(self) -> Iterator[None]:
        """While inside, SIGINT and SIGTERM are only noted; :meth:`poll` acts on them (it
        returns within :data:`POLL_SECONDS`), so a signal during a child's start is never
        lost."""
        def note(signum: int, frame: object) -> None:
            self.signal = signum

        previous = {signum: signal.signal(signum, note) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def start(
        self, command: Sequence[str], env: Mapping[str, str] | None, cwd: Path | None, *,
        run: bool,
    ) -> subprocess.Popen[bytes]:
        """Start a child; the run's stderr is piped through here and it ignores SIGINT."""
        process = subprocess.Popen(
            list(command),
            env=None if env is None else dict(env),
            cwd=cwd,
            stderr=subprocess.PIPE if run else None,
            preexec_fn=_ignore_sigint if run else None,
        )
        if process.stderr is not None:
            os.set_blocking(process.stderr.fileno(), False)
            self._selector.register(process.stderr, selectors.EVENT_READ)
        return process

    def poll(self) -> int | None:
        """Pass the run's stderr through for a moment; the exit status if a signal, the
        dashboard's exit or the run's failure ends it all (None while it goes on)."""
        self._pass_stderr(POLL_SECONDS)
        if self.signal is not None:
            self.stop_all()
            print(f"{PROG}: stopped the run and the dashboard", file=self.err, flush=True)
            return 128 + self.signal
        if self.dashboard is not None and (code := self.dashboard.poll()) is not None:
            return _status(code)
        if self.run is not None and not self.run_done and (code := self.run.poll()) is not None:
            self._pass_stderr(0)  # its last words
            if code != 0:
                self.stop_all()
                print(f"{PROG}: the demo run failed ({_how(code)}){self._last_words()}",
                      file=self.err, flush=True)
                return _status(code)
            self.run_done = True
        return None

    def _pass_stderr(self, timeout: float) -> None:
        if not self._selector.get_map():  # the run's stderr is closed: just wait
            time.sleep(timeout)
            return
        for key, _ in self._selector.select(timeout):
            while True:  # all there is now
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    break
                if not data:
                    self._close(key.fileobj)
                    break
                self._show(data)

    def _show(self, data: bytes) -> None:
        self.err.write(data.decode(errors="replace"))
        self.err.flush()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if line.strip():
                self._last_line = line.decode(errors="replace").strip()

    def _last_words(self) -> str:
        last = self._partial.decode(errors="replace").strip() or self._last_line
        last = last.removeprefix(f"{PROG}: ")  # the run is a `bufcore demo` too
        return f": {last}" if last else ""

    def stop_all(self) -> None:
        """SIGTERM to every child still running, SIGKILL after :data:`STOP_SECONDS`."""
        children = [p for p in (self.dashboard, self.run) if p is not None and p.poll() is None]
        for process in children:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        for process in children:
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for key in list(self._selector.get_map().values()):
            self._close(key.fileobj)

    def _close(self, pipe: Any) -> None:
        self._selector.unregister(pipe)
        pipe.close()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _status(code: int) -> int:
    """A child's exit status as a shell reports it (128 + N for one killed by signal N)."""
    return 128 - code if code < 0 else code


def _how(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"

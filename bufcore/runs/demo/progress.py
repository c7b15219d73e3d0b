"""A progress bar for the demo on a terminal, and a few plain lines anywhere else."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

_WIDTH = 30


class Progress:
    """Shows ``done / total`` steps with a status text.

    On a terminal the bar redraws in place (at most ten times a second); elsewhere (a log
    file, CI) one line is printed per tenth of the run, so logs stay short.

    Args:
        total: Steps in the run.
        stream: Where to draw (stderr by default).
        clock: Monotonic time, for the redraw rate and the elapsed seconds.
    """

    def __init__(
        self,
        total: int,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self._interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self._drawn_at = -1.0
        self._tenth = -1
        self._last = ""
        self._closed = False

    def update(self, done: int, status: str) -> None:
        """Show that ``done`` of ``total`` steps are done, with ``status`` after the bar."""
        now = self.clock()
        if self._interactive:
            if now - self._drawn_at < 0.1 and done < self.total:
                return
            self._drawn_at = now
            self._last = self._line(done, status, now)
            self.stream.write("\r" + self._last)
        else:
            tenth = done * 10 // self.total
            if tenth == self._tenth:
                return
            self._tenth = tenth
            self.stream.write(self._line(done, status, now) + "\n")
        self.stream.flush()

    def _line(self, done: int, status: str, now: float) -> str:
        filled = done * _WIDTH // self.total
        bar = "#" * filled + "-" * (_WIDTH - filled)
        return f"[{bar}] {done}/{self.total} steps, {now - self.started:5.1f} s, {status}"

    def close(self) -> None:
        """End the bar's line (on a terminal); idempotent."""
        if self._interactive and not self._closed:
            self.stream.write("\n")
            self.stream.flush()
        self._closed = True

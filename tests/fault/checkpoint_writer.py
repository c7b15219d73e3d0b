"""A writer process for the crash tests: forks savers that the test kills at chosen moments.

Run as a script, it imports bufcore once and then serves commands read from stdin, one per line,
answering each with one line on stdout:

- ``loop PATH LOG K``: fork a child that saves :func:`generation` ``K``, ``K + 1``, ... to
  ``PATH`` forever, appending each ``k`` to ``LOG`` (flushed and fsynced) once its save returned.
  Answers the child's pid.
- ``die PATH POINT K``: fork a child that saves generation ``K`` to ``PATH`` and SIGKILLs itself
  at ``POINT`` (one of :data:`KILL_POINTS`). Answers the child's pid.
- ``reap PID``: wait for that child to end. Answers its wait status.

Forking from one process that already imported torch keeps each restart at a few milliseconds
instead of the seconds a fresh interpreter needs.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import bufcore.persist.atomic
import bufcore.persist.checkpoint.write
from bufcore import DictBuffer

CAPACITY = 16_384
# Point -> (module, attribute, the call on which the child kills itself).
KILL_POINTS: dict[str, tuple[Any, str, int]] = {
    # payload half written, nothing published yet
    "mid-write": (bufcore.persist.checkpoint.write, "_write_rows", 2),
    # swapped in; the old checkpoint still sits in staging
    "after-publish": (bufcore.persist.atomic, "fsync_path", 2),
}


def rows_of(k: int) -> int:
    """Rows that generation ``k`` holds, so that config.json's ``_idx`` also tells ``k`` apart."""
    return CAPACITY - k % 7


def generation(k: int) -> DictBuffer:
    """A buffer whose every value says ``k``: leaves equal ``k``, the bool leaf ``k`` is odd.

    The seed (state.json) is ``k`` too, so each of the three files pins the generation.
    """
    rows = rows_of(k)
    buffer = DictBuffer(capacity=CAPACITY, seed=k)
    buffer.extend(
        {
            "observation": {
                "state": np.full((rows, 32), k, np.float32),
                "deep": {"x": np.full((rows, 4), k, np.int64)},
            },
            "action": np.full((rows, 8), k, np.float64),
            "terminated": np.full((rows, 1), k % 2 == 1),
        }
    )
    return buffer


def _save_forever(path: Path, log: Path, first: int) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    k = first
    while True:
        generation(k).save(path)
        os.write(fd, f"{k}\n".encode())
        os.fsync(fd)
        k += 1


def _save_and_die(path: Path, point: str, k: int) -> None:
    module, name, call = KILL_POINTS[point]
    original = getattr(module, name)
    calls = 0

    def killing(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(module, name, killing)
    generation(k).save(path)


def _fork(work: Callable[..., None], *args: Any) -> int:
    pid = os.fork()
    if pid == 0:  # child: never returns into the command loop
        try:
            work(*args)
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    return pid


def main() -> None:
    for line in sys.stdin:
        command, *args = line.split()
        if command == "loop":
            path, log, first = args
            answer = _fork(_save_forever, Path(path), Path(log), int(first))
        elif command == "die":
            path, point, k = args
            answer = _fork(_save_and_die, Path(path), point, int(k))
        elif command == "reap":
            _, answer = os.waitpid(int(args[0]), 0)
        else:
            raise ValueError(f"unknown command {line!r}")
        print(answer, flush=True)


if __name__ == "__main__":
    main()

"""Stand-ins for the two children of ``bufcore demo --dashboard`` (:func:`serve`'s tests).

``python serve_children.py run BEHAVIOUR RUN_DIR NOTES`` acts as the demo run and
``python serve_children.py dashboard BEHAVIOUR RUN_DIR NOTES`` as the dashboard. Each writes
its pid to ``NOTES/<role>.pid`` first and ``NOTES/<role>.end`` when it ends by itself; the
dashboard writes into ``NOTES/dashboard.saw`` whether the run's first checkpoint existed when
it started.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

WAIT_S = 60.0


def checkpoint(run_dir: Path) -> None:
    (run_dir / "checkpoint").mkdir(parents=True, exist_ok=True)
    (run_dir / "checkpoint" / "run.json").write_text("{}")


def main(role: str, behaviour: str, run_dir: Path, notes: Path) -> int:
    (notes / f"{role}.pid").write_text(str(os.getpid()))
    if role == "dashboard":
        (notes / "dashboard.saw").write_text(str((run_dir / "checkpoint" / "run.json").exists()))
        print("serving", flush=True)
        time.sleep({"serve": WAIT_S, "exit-soon": 0.5, "serve-briefly": 1.5}[behaviour])
        (notes / "dashboard.end").write_text("")
        return 3 if behaviour == "exit-soon" else 0
    if behaviour == "fail-early":
        print("bufcore demo: error: runs/demo: holds notes.txt", file=sys.stderr)
        return 1
    time.sleep(0.5)
    checkpoint(run_dir)
    if behaviour == "fail-later":
        time.sleep(1.0)
        print("warming up", file=sys.stderr)
        print("OSError: [Errno 28] No space left on device", file=sys.stderr)
        return 1
    if behaviour == "finish":
        (notes / "run.end").write_text("")
        return 0
    time.sleep(WAIT_S)
    (notes / "run.end").write_text("")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])))

"""A writer process for the tailing test: two runs of metrics into one run directory.

``python metrics_writer.py RUN_DIR FIRST SECOND GO`` logs steps ``0 .. FIRST-1`` (a fresh
``metrics.jsonl``), creates ``GO.done`` and waits until the file ``GO`` exists (the reader has
read the first run), then starts a new run (fresh again) and logs steps ``0 .. SECOND-1``.
The values are :func:`metrics`, so the reader can check every record.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

from bufcore.runs.runlog import RunLogger

WAIT_S = 60.0


def metrics(run: int, step: int) -> dict[str, Any]:
    """Step ``step`` of run ``run``: NaN and inf now and then, and lines of varied length: up to
    ~1.3 KiB, and every 97th 256 KiB longer, which the kernel copies in over many pages (a
    reader polling meanwhile finds such a line half there)."""
    return {
        "run": run,
        "loss": math.nan if step % 7 == 0 else step / 8,
        "emd": [1.0, math.inf if step % 11 == 0 else 2.0],
        "pad": "x" * (step % 13 * 100) + ("y" * 2**18 if step % 97 == 0 else ""),
    }


def log_run(run_dir: Path, run: int, steps: int) -> None:
    with RunLogger(run_dir) as logger:
        for step in range(steps):
            logger.log("train", step, metrics(run, step))
            if step % 500 == 0:
                time.sleep(0.002)  # let the reader in mid-run


def done_path(go: Path) -> Path:
    """The file the writer creates when the first run is written."""
    return go.with_name(f"{go.name}.done")


def main(run_dir: Path, first: int, second: int, go: Path) -> None:
    log_run(run_dir, 1, first)
    done_path(go).touch()
    deadline = time.monotonic() + WAIT_S
    while not go.exists():
        if time.monotonic() > deadline:
            sys.exit("the reader never caught up")
        time.sleep(0.005)
    log_run(run_dir, 2, second)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))

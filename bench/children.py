"""Running one measurement in a fresh interpreter, as DESIGN §6 asks of headline numbers.

The prioritized and memmap rows each start ``python -m <module> '<json spec>'`` per
measurement: this checkout first on the path, the thread pools sized as the spec says, and the
JSON object the child prints last taken as its result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_json_child(
    module: str, spec_json: str, *, what: str, threads: int, timeout_s: float
) -> dict[str, Any]:
    """``python -m module spec_json`` in a fresh interpreter; the JSON object of its last
    stdout line.

    Args:
        module: The child's module (``bench.memmap``, say).
        spec_json: Its one argument.
        what: How an error names the measurement.
        threads: ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` of the child.
        timeout_s: Seconds the child may run.

    Raises:
        RuntimeError: the child exited non-zero or printed nothing (its stderr's tail is in
            the message).
        subprocess.TimeoutExpired: it ran over ``timeout_s``.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    done = subprocess.run(
        [sys.executable, "-m", module, spec_json],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode or not lines:
        raise RuntimeError(
            f"{what}: child failed (exit {done.returncode}):\n{done.stderr.strip()[-3000:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result

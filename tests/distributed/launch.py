"""Start a real process group of :mod:`tests.distributed.worker` ranks and collect what each saw.

Each rank is its own ``python`` process (started as a subprocess, so a test can time it out and
kill it), joined through a FileStore in the test's directory; gloo is bound to the loopback
interface, so nothing leaves 127.0.0.1. Every process started is killed and reaped in a
``finally``, whatever happens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("worker.py")
# Starting a rank is mostly importing torch: seconds each on a busy two-core machine.
LAUNCH_TIMEOUT_S = 300.0


def launch(
    world: int,
    workdir: Path,
    *,
    backend: str = "gloo",
    device: str = "cpu",
    worker: Path = WORKER,
    args: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """Run ``world`` ranks of ``worker`` (passed ``args`` after the usual ones) to the end;
    each rank's result, in rank order.

    Raises:
        AssertionError: a rank failed or ran past :data:`LAUNCH_TIMEOUT_S` (the message holds
            every rank's output).
    """
    workdir.mkdir(parents=True, exist_ok=True)
    store = workdir / "store"
    env = {
        **os.environ,
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    logs = [workdir / f"rank_{rank}.log" for rank in range(world)]
    processes: list[subprocess.Popen[bytes]] = []
    timed_out = False
    try:
        for rank, log in enumerate(logs):
            with log.open("wb") as output:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, str(worker), backend, device, str(rank), str(world),
                         str(store), str(workdir), *args],
                        cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
                    )
                )
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        for process in processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    codes = [process.returncode for process in processes]
    if timed_out or any(codes):
        outputs = "\n".join(
            f"--- rank {rank} (exit {code}):\n{log.read_text(errors='replace')[-4000:]}"
            for rank, (code, log) in enumerate(zip(codes, logs, strict=True))
        )
        reason = f"timed out after {LAUNCH_TIMEOUT_S} s" if timed_out else "a rank failed"
        raise AssertionError(f"{world} ranks on {backend}: {reason}\n{outputs}")
    return [
        json.loads((workdir / f"rank_{rank}.json").read_text(encoding="utf-8"))
        for rank in range(world)
    ]

"""Helpers shared by test modules: the device list, a fake expert buffer, a window model, and
hand edits of checkpoints."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore.persist.checkpoint.format import manifest_checksum
from bufcore.runs.demo import DemoOptions
from bufcore.sampling.windows import TrajectoryTable, window_counts

# CUDA cases run wherever a GPU is present (the device check machine); CPU runs everywhere.
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ),
]


class FakeExpertBuffer:
    """An expert buffer that records every priority update."""

    def __init__(self, motion_ids: list[int], *, fail: bool = False) -> None:
        self.motion_ids = list(motion_ids)
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.fail = fail

    def update_priorities(self, priorities: torch.Tensor, idxs: torch.Tensor) -> None:
        if self.fail:
            raise RuntimeError("buffer refused the update")
        self.calls.append((priorities.clone(), idxs.clone()))



def valid_starts(table: TrajectoryTable, need: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every valid window start ``(time, env)`` of the table, trajectory by trajectory."""
    counts = window_counts(table, need)
    owner = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
    first = torch.cumsum(counts, 0) - counts
    position = torch.arange(len(owner), device=counts.device) - first[owner]
    return table.start[owner] + position, table.env[owner]


def reseal(checkpoint: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``change`` to a checkpoint's manifest and give it a matching checksum again, as
    anyone editing a checkpoint by hand could."""
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    change(manifest)
    manifest["checksum"] = manifest_checksum(manifest)
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))


def rewrite_file(checkpoint: Path, name: str, raw: bytes) -> None:
    """Replace a small file of a checkpoint by ``raw`` and re-seal its manifest entry."""
    (checkpoint / name).write_bytes(raw)

    def point_at(manifest: dict[str, Any]) -> None:
        manifest["files"][name] = {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}

    reseal(checkpoint, point_at)


# A demo run of a fraction of a second: 60 steps of 4 envs over 3 short motions.
TINY_DEMO = DemoOptions(
    steps=60, motions=3, envs=4, capacity=30, z_capacity=64, eval_every=30, min_length=12,
    max_length=30, batch_size=64,
)


def wait_until_serving(process: subprocess.Popen[str], port: int, *, base: str = "") -> None:
    """Wait (up to 60 s) until a dashboard answers its health check on ``port`` (under the
    base URL path ``base``, Streamlit's ``server.baseUrlPath``, when one is set).

    Raises:
        OSError: it did not, or ``process`` exited first.
    """
    deadline = time.monotonic() + 60
    while True:
        try:
            root = f"http://127.0.0.1:{port}/" + (f"{base}/" if base else "")
            with urllib.request.urlopen(f"{root}_stcore/health") as reply:
                assert reply.read() == b"ok"
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise
            time.sleep(0.3)


def as_from_a_terminal() -> None:
    """``preexec_fn`` giving a child Ctrl-C's default disposition, as a terminal's shell does.

    A test run started in the background by a non-interactive shell (``make test &``) inherits
    SIGINT ignored, and a program rightly leaves an ignored SIGINT ignored; a test of what Ctrl-C
    does must not depend on how the suite was started.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_once_serving(
    process: subprocess.Popen[str],
    port: int,
    *,
    signum: int = signal.SIGINT,
    pid: int | None = None,
) -> tuple[str, str]:
    """Wait until the dashboard ``process`` serves on ``port``, send ``signum`` (Ctrl-C's
    SIGINT by default) to it (or to ``pid``, a process it started), and return its stdout and
    stderr; it is killed if it outlives the test."""
    try:
        wait_until_serving(process, port)
        os.kill(process.pid if pid is None else pid, signum)
        return process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def session_members(session: int) -> list[str]:
    """The command lines of the processes (zombies left out) in session ``session`` (Linux's
    /proc): what a stopped dashboard must not leave behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # it ended meanwhile
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(f"{entry.name}: {command}")
    return found

"""A reader polling read_metrics while another process writes: nothing lost, repeated or torn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bufcore.runs.runlog import METRICS_FILE, read_metrics
from tests.runs.metrics_writer import done_path, metrics

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("metrics_writer.py")
FIRST, SECOND = 10_000, 3_000
HANG_GUARD_S = 60.0


def values(record: dict[str, Any]) -> str:
    """The logged values of a record as comparable text (NaN equal to NaN)."""
    return json.dumps({k: v for k, v in record.items() if k not in ("step", "time", "kind")})


def test_a_polling_reader_gets_every_record_once_in_order_across_a_new_run(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    paths = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(tmp_path), str(FIRST), str(SECOND), str(go)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
        cwd=REPO,
    )
    runs: list[list[dict[str, Any]]] = [[]]
    problems: list[str] = []
    offset, polls = 0, 0
    deadline = time.monotonic() + HANG_GUARD_S
    try:
        while time.monotonic() < deadline:
            finished = writer.poll() is not None
            first_written = done_path(go).exists()
            records, new_offset = read_metrics(tmp_path / METRICS_FILE, offset, problems=problems)
            polls += 1
            if new_offset < offset:  # a new run: start over
                runs.append([])
            runs[-1].extend(records)
            unchanged = new_offset == offset and not records
            if unchanged:
                time.sleep(0.0005)  # leave the CPU to the writer
            offset = new_offset
            if first_written and unchanged:
                go.touch()  # the first run is read to its end: start the second
            if finished and unchanged:
                break
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == 0
    assert problems == []
    assert len(runs) == 2
    for run, (records, count) in enumerate(zip(runs, (FIRST, SECOND), strict=True), start=1):
        assert [r["step"] for r in records] == list(range(count))
        assert [values(r) for r in records] == [values(metrics(run, s)) for s in range(count)]
    assert polls > 2

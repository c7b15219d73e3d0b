"""``bufcore demo --resume``: a demo killed after a checkpoint and resumed is the uninterrupted run.

The determinism tests compare every metrics record (without its ``time``) and every checkpoint
file's content (:func:`tests.fixtures.demo_digests.run_digests`: buffers' rows, ``run.json``,
the kept checkpoints) plus the final loop state, between a run that was never stopped and one
stopped after a checkpoint and resumed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore.cli import main
from bufcore.errors import MissingStateError
from bufcore.persist.jsonl import LineAppender
from bufcore.persist.loop_state import read_loop_state
from bufcore.runs.demo import DemoOptions, resume_demo, run_demo
from bufcore.runs.demo import loop as demo_loop
from tests.fixtures.demo_digests import run_digests
from tests.support import TINY_DEMO

REPO = Path(__file__).parents[2]
# Paced so that a kill lands mid-run: the 60 steps take about 3 s after torch is loaded.
LIVE = dataclasses.replace(TINY_DEMO, live_seconds=3.0)
PRIORITIZED = dataclasses.replace(TINY_DEMO, prioritized=True)


def _no_sleep(seconds: float) -> None:
    """``--live`` pacing skipped: the records are the same, only their times differ."""


def _records(run: Path) -> list[dict[str, Any]]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in lines]


def _loop_state(run: Path) -> dict[str, Any]:
    return read_loop_state(run / "checkpoint" / "loop", "rank_0.hdf5")


def assert_same_run(got: Path, expected: Path) -> None:
    """Same records, same checkpoint contents (buffers, run.json, kept checkpoints), same
    final loop state, tensor for tensor."""
    a, b = run_digests(got), run_digests(expected)
    assert a["records"] == b["records"]
    assert a["files"] == b["files"]
    assert _records(got) == _records(expected)
    flat_a, flat_b = _flatten(_loop_state(got)), _flatten(_loop_state(expected))
    assert flat_a.keys() == flat_b.keys()
    for key, value in flat_a.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, flat_b[key]), key
        else:
            assert value == flat_b[key], key


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}/{key}"))
        return out
    return {prefix: value}


def _stopped_at(run: Path, options: DemoOptions, step: int) -> None:
    """Run the demo in this process and stop it (as a crash would) as step ``step`` begins."""
    real = demo_loop._Loop.env_step

    def stopping(self: Any, at: int, logger: Any) -> None:
        if at == step:
            raise KeyboardInterrupt
        real(self, at, logger)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(demo_loop._Loop, "env_step", stopping)
        with pytest.raises(KeyboardInterrupt):
            run_demo(run, options, sleep=_no_sleep)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("whole") / "run"
    run_demo(run, LIVE, sleep=_no_sleep)
    return run


def test_a_demo_killed_after_its_first_checkpoint_and_resumed_is_the_uninterrupted_run(
    tmp_path: Path, uninterrupted: Path
) -> None:
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # The options the CLI has no flags for (TINY_DEMO's lengths, batch size) need the API.
    code = ("import json, sys; from bufcore.runs.demo import DemoOptions, run_demo; "
            "run_demo(sys.argv[1], DemoOptions(**json.loads(sys.argv[2])))")
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(run), json.dumps(LIVE.to_json())], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "checkpoint" / "run.json").exists():
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.005)
        seed = random.randrange(2**32)
        time.sleep(random.Random(seed).uniform(0.0, 1.5))  # a random moment after it
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL, f"the run ended before the kill (seed {seed})"
    killed_at = json.loads((run / "checkpoint" / "run.json").read_text())["step"]
    assert killed_at < LIVE.steps

    assert main(["demo", "--resume", str(run), "--quiet"]) == 0

    assert_same_run(run, uninterrupted)


@pytest.fixture(scope="module")
def prioritized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("prioritized") / "run"
    run_demo(run, PRIORITIZED)
    return run


# Just after the first checkpoint (12), mid-way to the second (30), just after it, at the last.
@pytest.mark.parametrize("step", [13, 31, 60])
def test_a_prioritized_demo_stopped_between_checkpoints_resumes_to_the_uninterrupted_run(
    tmp_path: Path, prioritized: Path, step: int
) -> None:
    whole = prioritized
    run = tmp_path / "run"
    _stopped_at(run, PRIORITIZED, step)

    resume_demo(run)

    assert_same_run(run, whole)


def test_a_run_stopped_after_its_last_checkpoint_but_before_its_end_record_gets_it(
    tmp_path: Path, uninterrupted: Path
) -> None:
    run = tmp_path / "run"
    run_demo(run, LIVE, sleep=_no_sleep)
    log = run / "metrics.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:-2]))  # the last checkpoint record and the end record

    resume_demo(run, sleep=_no_sleep)

    assert_same_run(run, uninterrupted)


def test_resuming_a_finished_run_writes_nothing_and_reports_its_result(
    tmp_path: Path, uninterrupted: Path
) -> None:
    run = tmp_path / "run"
    run_demo(run, TINY_DEMO)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}

    result = resume_demo(run)

    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before
    assert len(result.mean_emd) == 2
    assert result.options == TINY_DEMO


def test_the_log_is_cut_back_to_the_checkpoint_in_a_new_file_before_the_run_goes_on(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    _stopped_at(run, TINY_DEMO, 29)  # checkpoint at 12; train records at 16 ... 28 follow it
    log = run / "metrics.jsonl"
    with log.open("ab") as file:
        file.write(b'{"step": 29, "time": 1.0, "kind": "tr')  # a line the kill tore
    inode = log.stat().st_ino
    seen: list[list[int]] = []
    real = demo_loop.drive

    def watched(loop: Any, first: int, *args: Any, **kwargs: Any) -> None:
        seen.append([r["step"] for r in _records(run)])
        real(loop, first, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("bufcore.runs.demo.resume.drive", watched)
        resume_demo(run)

    assert max(seen[0]) == 12
    assert log.stat().st_ino != inode  # a reader tailing it starts over


def test_a_kept_copy_of_the_checkpoint_left_by_the_killed_run_is_replaced(
    tmp_path: Path, uninterrupted: Path
) -> None:
    run = tmp_path / "run"
    _stopped_at(run, LIVE, 20)
    # Killed after keeping checkpoint/ as checkpoints/step-000012, before saving the next one.
    demo_loop.keep_run_checkpoint(run / "checkpoint", run / "checkpoints" / "step-000012")

    resume_demo(run, sleep=_no_sleep)

    assert_same_run(run, uninterrupted)


def test_options_given_with_resume_that_differ_from_the_saved_ones_are_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    _stopped_at(run, TINY_DEMO, 20)
    before = (run / "metrics.jsonl").read_bytes()

    code = main(["demo", "--resume", str(run), "--steps", "90", "--seed", "0", "--envs", "5",
                 "--quiet"])

    error = capsys.readouterr().err
    assert code == 1
    assert "steps (saved 60, given 90)" in error and "envs (saved 4, given 5)" in error
    assert "seed" not in error.split("differ")[0]  # the same value is no conflict
    assert (run / "metrics.jsonl").read_bytes() == before


def test_options_equal_to_the_saved_ones_are_accepted(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _stopped_at(run, TINY_DEMO, 20)

    code = main(["demo", "--resume", str(run), "--steps", "60", "--envs", "4", "--quiet"])

    assert code == 0
    assert _records(run)[-1]["kind"] == "end"


def test_a_checkpoint_from_before_resuming_existed_is_refused_naming_the_missing_piece(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    _stopped_at(run, TINY_DEMO, 20)
    for file in (run / "checkpoint" / "loop").iterdir():
        file.unlink()
    (run / "checkpoint" / "loop").rmdir()

    with pytest.raises(MissingStateError, match=r"loop/rank_0\.hdf5") as caught:
        resume_demo(run)
    assert caught.value.missing == ["loop/rank_0.hdf5"]


def test_a_run_still_writing_its_log_is_not_resumed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _stopped_at(run, TINY_DEMO, 20)
    appender = LineAppender(run / "metrics.jsonl", fresh=False)  # as a running demo holds it
    try:
        with pytest.raises(ValueError, match="still being written"):
            resume_demo(run)
    finally:
        appender.close()


def test_a_log_behind_its_checkpoint_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _stopped_at(run, TINY_DEMO, 20)
    log = run / "metrics.jsonl"
    log.write_bytes(log.read_bytes().splitlines(keepends=True)[0])  # the run record only

    with pytest.raises(ValueError, match="behind the checkpoint"):
        resume_demo(run)


def test_resume_and_dashboard_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--resume", str(tmp_path), "--dashboard"]) == 1
    assert "--dashboard: not with --resume" in capsys.readouterr().err

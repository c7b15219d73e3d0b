"""``bufcore demo --resume`` of a run saved by 2 ranks: a ``--nproc 2`` demo SIGKILLed (parent
and ranks) after a checkpoint and resumed is the uninterrupted ``--nproc 2`` run; each rank of
its checkpoint reads back with ``bufcore.resume(run, rank=r)``; a conflicting ``--nproc`` and a
missing rank loop file are refused by name.

What is compared (as ``tests/runs/test_resume.py`` does for one process): every metrics record
without its ``time``, every checkpoint file's content (:func:`tests.fixtures.demo_digests.
run_digests`: each rank's buffers, ``run.json``, kept checkpoints) and each rank's final loop
state, tensor for tensor.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

import bufcore
from bufcore import load_run_buffers
from bufcore.cli import main
from bufcore.errors import MissingStateError
from bufcore.persist.loop_state import read_loop_state
from bufcore.runs.demo import resume_demo
from bufcore.runs.demo.ranks import run_demo_ranks
from tests.fixtures.demo_digests import run_digests
from tests.support import TINY_DEMO

pytestmark = pytest.mark.slow

REPO = Path(__file__).parents[2]
WORLD = 2
# Paced so that the kill lands mid-run: the 60 steps last at least 3 s once the ranks are up.
LIVE = dataclasses.replace(TINY_DEMO, live_seconds=3.0)
# The kill comes once the log holds a record of a step in this range (the first checkpoint is
# at step 12), plus up to 0.3 s (6 paced steps): always before the last step, 60.
KILL_AFTER_STEPS = (13, 45)
JITTER_S = 0.3


def _records(run: Path) -> list[dict[str, Any]]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "time"} for line in lines]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}/{key}"))
        return out
    return {prefix: value}


def assert_same_run(got: Path, expected: Path) -> None:
    """Same records, same checkpoint contents, same final loop state on every rank."""
    a, b = run_digests(got), run_digests(expected)
    assert a["records"] == b["records"]
    assert a["files"] == b["files"]
    assert any("rank_1" in name for name in a["files"])  # every rank's buffers were compared
    assert _records(got) == _records(expected)
    for rank in range(WORLD):
        name = f"rank_{rank}.hdf5"
        flat_a = _flatten(read_loop_state(got / "checkpoint" / "loop", name))
        flat_b = _flatten(read_loop_state(expected / "checkpoint" / "loop", name))
        assert flat_a.keys() == flat_b.keys()
        for key, value in flat_a.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(value, flat_b[key]), (rank, key)
            else:
                assert value == flat_b[key], (rank, key)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("whole") / "run"
    run_demo_ranks(run, LIVE, nproc=WORLD)
    return run


@pytest.fixture
def finished(tmp_path: Path, uninterrupted: Path) -> Path:
    """A copy of the uninterrupted run to change."""
    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    return run


def _group_members(group: int) -> list[int]:
    """The processes of process group ``group`` (the launcher and its ranks)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # gone meanwhile
            if int(stat.rsplit(")", 1)[1].split()[2]) == group:
                members.append(int(entry.name))
    return members


def _dead(pid: int) -> bool:
    """Whether ``pid`` exited (gone, or a zombie: it holds no file any more)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _logged_step(run: Path) -> int:
    """The step of the last whole record in the run's log (-1 before the first)."""
    try:
        lines = (run / "metrics.jsonl").read_bytes().split(b"\n")[:-1]
    except FileNotFoundError:
        return -1
    return int(json.loads(lines[-1])["step"]) if lines else -1


def test_a_two_rank_demo_killed_after_a_checkpoint_and_resumed_is_the_uninterrupted_run(
    tmp_path: Path, uninterrupted: Path
) -> None:
    run = tmp_path / "run"
    seed = random.randrange(2**32)
    chance = random.Random(seed)
    kill_after, jitter = chance.randint(*KILL_AFTER_STEPS), chance.uniform(0.0, JITTER_S)
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    # The options the CLI has no flags for (TINY_DEMO's lengths, batch size) need the API.
    code = ("import json, sys; from bufcore.runs.demo import DemoOptions; "
            "from bufcore.runs.demo.ranks import run_demo_ranks; "
            "run_demo_ranks(sys.argv[1], DemoOptions(**json.loads(sys.argv[2])), nproc=2)")
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(run), json.dumps(LIVE.to_json())], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    members: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not ((run / "checkpoint" / "run.json").exists()
                   and _logged_step(run) >= kill_after):
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.005)
        time.sleep(jitter)
        members = _group_members(process.pid)
        os.killpg(process.pid, signal.SIGKILL)  # the launcher and both ranks at once
    finally:
        process.wait()
        deadline = time.monotonic() + 60
        while not all(_dead(pid) for pid in members) and time.monotonic() < deadline:
            time.sleep(0.005)
    assert process.returncode == -signal.SIGKILL, f"the run ended before the kill (seed {seed})"
    assert len(members) == 1 + WORLD, members
    killed_at = json.loads((run / "checkpoint" / "run.json").read_text())["step"]
    assert killed_at < LIVE.steps, f"seed {seed}"

    # --nproc equal to the saved world size is no conflict.
    assert main(["demo", "--resume", str(run), "--nproc", "2", "--quiet"]) == 0

    assert_same_run(run, uninterrupted)


@pytest.mark.parametrize("rank", range(WORLD))
def test_resume_reads_each_rank_of_a_two_rank_checkpoint_in_one_process(
    uninterrupted: Path, rank: int
) -> None:
    resumed = bufcore.resume(uninterrupted, rank=rank)

    assert (resumed.rank, resumed.world_size, resumed.step) == (rank, WORLD, LIVE.steps)
    own = load_run_buffers(uninterrupted / "checkpoint", rank=rank, world_size=WORLD)
    for name, buffer in own.items():
        torch.testing.assert_close(resumed.buffers[name].state_dict()["rows"],
                                   buffer.state_dict()["rows"], rtol=0, atol=0)
    saved = read_loop_state(uninterrupted / "checkpoint" / "loop", f"rank_{rank}.hdf5")
    assert torch.equal(resumed.generators["envs"].get_state(),
                       saved["generators"]["envs"]["state"])
    assert resumed.loop["episodes"] == saved["episodes"]
    assert resumed.curriculum is not None and len(resumed.curriculum.history) == 2
    assert resumed.td_ema is not None


def test_the_ranks_resume_their_own_envs(uninterrupted: Path) -> None:
    envs = [bufcore.resume(uninterrupted, rank=r).buffers["train"].storage["observation"][
        "state"].shape[1] for r in range(WORLD)]
    assert envs == [2, 2]  # TINY_DEMO's 4 envs over 2 ranks
    states = [bufcore.resume(uninterrupted, rank=r).generators["envs"].get_state()
              for r in range(WORLD)]
    assert not torch.equal(states[0], states[1])


def test_resume_of_a_rank_beyond_the_checkpoints_world_size_is_refused(
    uninterrupted: Path,
) -> None:
    with pytest.raises(ValueError, match=r"rank: expected an int in \[0, 2\) .*got 2"):
        bufcore.resume(uninterrupted, rank=WORLD)


@pytest.mark.parametrize("nproc", [1, 3])
def test_resume_with_another_nproc_than_the_run_was_saved_by_is_refused_by_name(
    finished: Path, capsys: pytest.CaptureFixture[str], nproc: int
) -> None:
    log = (finished / "metrics.jsonl").read_bytes()

    code = main(["demo", "--resume", str(finished), "--nproc", str(nproc), "--quiet"])

    assert code == 1
    assert f"nproc: the run was saved by 2 ranks, given {nproc}" in capsys.readouterr().err
    assert (finished / "metrics.jsonl").read_bytes() == log


@pytest.mark.parametrize("rank", range(WORLD))
def test_a_checkpoint_missing_a_ranks_loop_file_is_refused_naming_it(
    finished: Path, rank: int
) -> None:
    (finished / "checkpoint" / "loop" / f"rank_{rank}.hdf5").unlink()
    log = (finished / "metrics.jsonl").read_bytes()

    with pytest.raises(MissingStateError, match=rf"loop/rank_{rank}\.hdf5") as caught:
        resume_demo(finished)

    assert caught.value.missing == [f"loop/rank_{rank}.hdf5"]
    assert (finished / "metrics.jsonl").read_bytes() == log


def test_every_rank_refuses_a_checkpoint_missing_another_ranks_loop_file(
    finished: Path,
) -> None:
    (finished / "checkpoint" / "loop" / "rank_1.hdf5").unlink()

    with pytest.raises(MissingStateError, match=r"loop/rank_1\.hdf5"):
        bufcore.resume(finished, rank=0)


def test_resuming_a_finished_two_rank_run_writes_nothing_and_reports_its_result(
    finished: Path,
) -> None:
    before = {p: p.stat().st_mtime_ns for p in finished.rglob("*")}

    result = resume_demo(finished)

    assert {p: p.stat().st_mtime_ns for p in finished.rglob("*")} == before
    eval_records = [r for r in _records(finished) if r["kind"] == "eval"]
    assert result.mean_emd == [r["mean_emd"] for r in eval_records]
    assert result.options == LIVE

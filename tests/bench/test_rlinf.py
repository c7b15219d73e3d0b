"""The rlinf bench row: its children measure writes, cached and cold samples and memory at tiny
sizes, RLinf's buffer is compiled from a checkout or a git directory with only its logging
stubbed, the parent rotates, skips RLinf without its repository and removes its scratch files,
and the report divides medians and states the targets. No timings are asserted; no test needs
RLinf's repository (a stand-in of its three modules, built on bufcore's buffer, is written)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from bench import rlinf
from bench.cli import parse_args, parts_from, rlinf_config_from
from bench.rlinf import (
    BUFCORE,
    CACHED,
    COLD,
    COLD_DISK,
    DICTBUFFER,
    MEMORY,
    RAW_FILES,
    RAW_READ,
    RAW_WRITE,
    RLINF,
    RLINF_FSYNC,
    WRITE,
    RlinfConfig,
    RlinfSpec,
)

STAND_IN = {
    "rlinf/utils/nested_dict_process.py": "import torch\n",
    "rlinf/data/schema/embodied_types.py": "from bufcore import Trajectory\n",
    "rlinf/data/storage/replay/buffer.py": (
        "from bufcore import TrajectoryReplayBuffer as _Bufcore\n"
        "from rlinf.data.schema.embodied_types import Trajectory\n"
        "from rlinf.utils.logging import get_logger\n\n\n"
        "class TrajectoryReplayBuffer(_Bufcore):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        self.logger = get_logger()\n"
        "        super().__init__(*args, **kwargs)\n"
    ),
}


@pytest.fixture(autouse=True)
def _restore_process() -> Iterator[None]:
    # measure() sets torch's thread count and load_rlinf() registers rlinf modules, as the
    # child process does; keep the suite's.
    threads = torch.get_num_threads()
    before = set(sys.modules)
    yield
    torch.set_num_threads(threads)
    for name in set(sys.modules) - before:
        if name == "rlinf" or name.startswith("rlinf."):
            del sys.modules[name]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory laid out as RLinf's repository, holding the stand-in modules."""
    root = tmp_path / "RLinf"
    for relative, text in STAND_IN.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def tiny(op: str, implementation: str, scratch: Path, mirror: Path | str = "absent",
         trajectories: int = 4) -> RlinfSpec:
    return RlinfSpec(op, implementation, str(scratch), steps=4, envs=3, obs_floats=8,
                     trajectories=trajectories, calls=2, blocks=2, mirror=str(mirror))


def records(child: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["op"], r["subject"]): r for r in child["records"]}


@pytest.mark.parametrize(
    ("op", "implementation", "expected"),
    [
        (WRITE, BUFCORE, {(WRITE, BUFCORE): "MB/s"}),
        (WRITE, RAW_WRITE, {(WRITE, RAW_WRITE): "MB/s", (WRITE, RAW_FILES): "MB/s"}),
        (CACHED, BUFCORE, {(CACHED, BUFCORE): "rows/s"}),
        (CACHED, DICTBUFFER, {(CACHED, DICTBUFFER): "rows/s"}),
        (COLD, BUFCORE, {(COLD, BUFCORE): "rows/s", (COLD_DISK, BUFCORE): "MB/s"}),
        (COLD, RAW_READ, {(COLD_DISK, RAW_READ): "MB/s"}),
    ],
)
def test_a_child_reports_each_of_its_subjects_with_a_rate_per_block(
    tmp_path: Path, op: str, implementation: str, expected: dict[tuple[str, str], str]
) -> None:
    child = rlinf.measure(tiny(op, implementation, tmp_path))
    got = records(child)
    assert {key: record["unit"] for key, record in got.items()} == expected
    for record in got.values():
        assert len(record["blocks"]) == 2
        assert record["rate"] > 0
    assert list(tmp_path.iterdir()) == []  # the child removed its files


def test_the_memory_child_reports_rss_heap_cache_and_disk(tmp_path: Path) -> None:
    child = rlinf.measure(tiny(MEMORY, BUFCORE, tmp_path, trajectories=60))
    memory = child["memory"]
    assert memory["trajectories"] == 60
    assert set(memory) == {"trajectories", "rss_mib", "rss_growth_mib",
                           "rss_growth_trimmed_mib", "traced_mib",
                           "traced_peak_mib", "cache_mib", "disk_mib", "seconds"}
    row = rlinf.row_bytes(8) * 4 * 3
    assert memory["cache_mib"] * 2**20 == rlinf.MEMORY_CACHE * row
    assert memory["disk_mib"] * 2**20 > 60 * row


def test_a_trajectory_holds_the_documented_leaves_and_row_bytes() -> None:
    from bufcore import Trajectory
    from bufcore.storage.trajectories import trajectory_rows

    trajectory = rlinf.make_trajectory(Trajectory, 0, 64, 64, rlinf.OBS_FLOATS)
    rows = trajectory_rows(trajectory, "t")
    assert rows is not None and rows.count == 64 * 64
    per_row = sum(t[0].nbytes for t in rows.rows.values())
    assert per_row == rlinf.row_bytes(rlinf.OBS_FLOATS) == 4163
    assert trajectory.dones is not None and list(trajectory.dones.shape) == [65, 64, 1]


@pytest.mark.parametrize("as_git", [False, True], ids=["checkout", "git directory"])
def test_rlinf_s_modules_load_from_its_repository_with_only_logging_stubbed(
    checkout: Path, as_git: bool
) -> None:
    mirror = checkout
    if as_git:
        for command in (["init", "-q"], ["add", "."],
                        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
            subprocess.run(["git", "-C", str(checkout), *command], check=True)
        for relative in STAND_IN:  # only the git objects hold them now
            (checkout / relative).unlink()
        mirror = checkout / ".git"
    assert rlinf.rlinf_unavailable(mirror) is None
    buffer_cls, trajectory_cls = rlinf.load_rlinf(mirror)
    assert buffer_cls.__module__ == "rlinf.data.storage.replay.buffer"
    assert sys.modules["rlinf.utils.logging"].get_logger().name == "rlinf"
    assert trajectory_cls.__name__ == "Trajectory"
    assert rlinf.rlinf_version(mirror).startswith("RLinf ")


@pytest.mark.parametrize(
    ("op", "expected"),
    [(WRITE, {(WRITE, RLINF), (WRITE, RLINF_FSYNC)}), (CACHED, {(CACHED, RLINF)}),
     (COLD, {(COLD, RLINF), (COLD_DISK, RLINF)})],
)
def test_the_rlinf_child_runs_the_buffer_it_loads(
    tmp_path: Path, checkout: Path, op: str, expected: set[tuple[str, str]]
) -> None:
    child = rlinf.measure(tiny(op, RLINF, tmp_path / "scratch", mirror=checkout))
    assert set(records(child)) == expected
    assert child["version"] == "RLinf (checkout)"


@pytest.mark.parametrize(
    ("mirror", "reason"),
    [("absent", "is not at"), ("empty", "neither a checkout")],
)
def test_a_missing_or_wrong_repository_says_why(tmp_path: Path, mirror: str, reason: str) -> None:
    (tmp_path / "empty").mkdir()
    assert reason in (rlinf.rlinf_unavailable(tmp_path / mirror) or "")
    with pytest.raises(RuntimeError, match=reason):
        rlinf.load_rlinf(tmp_path / mirror)


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"op": "read"}, "op"), ({"implementation": "cpprb"}, "implementation"),
     ({"op": MEMORY, "implementation": RAW_WRITE}, "implementation"), ({"steps": 0}, "steps"),
     ({"blocks": True}, "blocks")],
)
def test_a_bad_spec_is_refused_naming_the_field(fields: dict[str, Any], message: str) -> None:
    spec: dict[str, Any] = {"op": WRITE, "implementation": BUFCORE, "scratch": "x", **fields}
    with pytest.raises(ValueError, match=message):
        RlinfSpec(**spec)


def test_a_spec_survives_its_json_round_trip(tmp_path: Path) -> None:
    spec = tiny(COLD, RLINF, tmp_path)
    assert RlinfSpec.from_json(spec.to_json()) == spec


RATES = {
    (WRITE, BUFCORE): 50.0, (WRITE, RAW_WRITE): 100.0, (WRITE, RLINF): 80.0,
    (WRITE, RLINF_FSYNC): 40.0, (CACHED, BUFCORE): 600.0, (CACHED, DICTBUFFER): 1000.0,
    (CACHED, RLINF): 200.0, (COLD, BUFCORE): 30.0, (COLD_DISK, BUFCORE): 500.0,
    (COLD, RLINF): 10.0, (COLD_DISK, RLINF): 400.0, (COLD_DISK, RAW_READ): 2000.0,
}


SUBJECTS = {
    (WRITE, BUFCORE): [(WRITE, BUFCORE)],
    (WRITE, RAW_WRITE): [(WRITE, RAW_WRITE)],
    (WRITE, RLINF): [(WRITE, RLINF), (WRITE, RLINF_FSYNC)],
    (CACHED, BUFCORE): [(CACHED, BUFCORE)],
    (CACHED, DICTBUFFER): [(CACHED, DICTBUFFER)],
    (CACHED, RLINF): [(CACHED, RLINF)],
    (COLD, BUFCORE): [(COLD, BUFCORE), (COLD_DISK, BUFCORE)],
    (COLD, RLINF): [(COLD, RLINF), (COLD_DISK, RLINF)],
    (COLD, RAW_READ): [(COLD_DISK, RAW_READ)],
}
"""What each child records, as (op, subject)."""


def fake_child(spec: RlinfSpec) -> dict[str, Any]:
    base = {"op": spec.op, "implementation": spec.implementation, "version": "v",
            "trajectories": spec.trajectories}
    if spec.op == MEMORY:
        n = spec.trajectories
        return {**base, "memory": {"trajectories": n, "rss_mib": 100 + n / 2**10,
                                   "rss_growth_mib": n / 2**10,
                                   "rss_growth_trimmed_mib": n / 2**12, "traced_mib": n / 2**11,
                                   "traced_peak_mib": 1.0, "cache_mib": 0.5,
                                   "disk_mib": n * 0.125, "seconds": 0.1}}
    made = [
        {"op": op, "subject": subject, "unit": "rows/s" if op in (CACHED, COLD) else "MB/s",
         "rate": RATES[(op, subject)], "faults_per_call": 0.0, "blocks": []}
        for op, subject in SUBJECTS[(spec.op, spec.implementation)]
    ]
    return {**base, "records": made}


def test_the_parent_rotates_runs_memory_once_and_removes_its_scratch(tmp_path: Path) -> None:
    cfg = RlinfConfig(rounds=3, memory_sizes=(10, 30), scratch=str(tmp_path / "scratch"),
                      mirror=str(tmp_path))  # no RLinf there: its rows are skipped
    ran: list[tuple[str, str, int]] = []

    def runner(spec: RlinfSpec) -> dict[str, Any]:
        ran.append((spec.op, spec.implementation, spec.trajectories))
        (tmp_path / "scratch").mkdir(exist_ok=True)
        return fake_child(spec)

    results = rlinf.run(cfg, runner=runner, log=lambda message: None)
    writes = [name for op, name, _ in ran if op == WRITE]
    assert writes == [BUFCORE, RAW_WRITE, RAW_WRITE, BUFCORE, BUFCORE, RAW_WRITE]
    assert [(name, n) for op, name, n in ran if op == MEMORY] == [(BUFCORE, 10), (BUFCORE, 30)]
    assert RLINF not in {name for _, name, _ in ran}
    assert "is neither a checkout" in results.skipped[RLINF]
    assert results.stats[(WRITE, BUFCORE)].rates == [50.0, 50.0, 50.0]
    assert not (tmp_path / "scratch").exists()


def test_the_report_divides_medians_and_states_each_target(checkout: Path, tmp_path: Path) -> None:
    cfg = RlinfConfig(rounds=1, memory_sizes=(1024, 3072), scratch=str(tmp_path / "s"),
                      mirror=str(checkout))
    results = rlinf.run(cfg, runner=fake_child, log=lambda message: None)
    assert results.ratio(WRITE, BUFCORE, RAW_WRITE) == pytest.approx(0.5)
    assert results.ratio(CACHED, BUFCORE, RLINF) == pytest.approx(3.0)
    text = rlinf.render(results)
    assert "target: write bufcore / raw write+fsync = 0.50x (MISSED >= 0.7x)" in text
    assert "target: sample (cached) bufcore / DictBuffer = 0.60x (met >= 0.5x)" in text
    assert f"| {COLD_DISK} | {RAW_READ} | MB/s | 2,000 | 2,000 | 0.25x |  |" in text
    # 2048 more trajectories: 2 MiB more RSS, 1 MiB more heap -> 1024 and 512 bytes each.
    assert ("bufcore: per trajectory on disk, Python heap 512 B, RSS 1,024 B (256 B after "
            "malloc_trim)") in text
    payload = results.to_json()
    by_pair = {(r["op"], r["against"]): r for r in payload["ratios"]}
    assert by_pair[(WRITE, RAW_WRITE)]["met"] is False
    assert by_pair[(CACHED, DICTBUFFER)]["met"] is True
    assert by_pair[(CACHED, RLINF)]["target"] is None
    assert len(payload["memory"]) == 4


def test_slope_needs_two_sizes() -> None:
    assert rlinf.slope_bytes([{"trajectories": 5, "rss_mib": 1.0}], "rss_mib") is None


def test_the_cli_runs_rlinf_only_when_asked_with_its_options(tmp_path: Path) -> None:
    args = parse_args(["--only", "rlinf", "--rlinf-shape", "8", "4", "--rlinf-window", "7",
                       "--rlinf-memory-sizes", "5", "9", "--rlinf-mirror", str(tmp_path),
                       "--tmp-dir", str(tmp_path)])
    assert parts_from(args) == ("rlinf",)
    cfg = rlinf_config_from(args)
    assert (cfg.steps, cfg.envs, cfg.window, cfg.memory_sizes) == (8, 4, 7, (5, 9))
    assert cfg.mirror == str(tmp_path) and cfg.scratch == str(tmp_path / "rlinf")
    assert "rlinf" not in parts_from(parse_args([]))


def test_the_quick_rlinf_run_is_small() -> None:
    cfg = rlinf_config_from(parse_args(["--quick", "--only", "rlinf"]))
    assert (cfg.steps, cfg.envs, cfg.window, cfg.memory_sizes) == (16, 16, 20, (50, 200))

"""The prioritized bench row: its children measure every op, its parent runs each case once per
round in rotated order and skips missing peers with their reason, its report holds the ratios and
targets, and the torchrl extension loader says how to build what it cannot find. No timings are
asserted; no test needs torchrl or cpprb."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from bench import prioritized_headline as per
from bench import torchrl_ext
from bench.cli import parse_args, parts_from, prioritized_config_from
from bench.prioritized_headline import MIX, ROWS, SAMPLE_UPDATE, STEP, WINDOWS, PerConfig, PerSpec
from bench.report import write_with_machine

TINY_WINDOWS = {"capacity": 60, "batch": 32, "envs": 16, "seq_length": 4, "calls": 4, "blocks": 2}


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    # measure() sets torch's thread count, as the child process does; keep the suite's.
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("implementation", ["bufcore", "multinomial"])
def test_a_rows_child_reports_a_rate_and_faults_for_sample_and_update(implementation: str) -> None:
    spec = PerSpec(ROWS, implementation, capacity=1000, batch=64, calls=4, blocks=2)
    child = per.measure(spec)
    record = child["ops"][SAMPLE_UPDATE]
    assert set(child["ops"]) == {SAMPLE_UPDATE}
    assert record["rate"] > 0 and record["faults_per_call"] >= 0
    assert len(record["blocks"]) == 2


def test_a_windows_child_reports_the_step_the_mix_and_sample_and_update() -> None:
    child = per.measure(PerSpec(WINDOWS, "bufcore", **TINY_WINDOWS))  # type: ignore[arg-type]
    assert set(child["ops"]) == {STEP, MIX, SAMPLE_UPDATE}
    assert all(record["rate"] > 0 for record in child["ops"].values())


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"table": "cols"}, "table"),
        ({"implementation": "reverb"}, "implementation"),
        ({"table": WINDOWS, "implementation": "cpprb"}, "implementation"),
        ({"batch": 0}, "batch"),
        ({"table": WINDOWS, "batch": 30}, "multiple of seq_length"),
    ],
)
def test_a_bad_spec_is_refused_naming_the_field(fields: dict[str, Any], message: str) -> None:
    spec: dict[str, Any] = {"table": ROWS, "implementation": "bufcore", "capacity": 64,
                            "batch": 8, **fields}
    with pytest.raises(ValueError, match=message):
        PerSpec(**spec)


def test_a_spec_survives_its_json() -> None:
    spec = PerSpec(WINDOWS, "torchrl", 500, 1024, calls=8)
    assert PerSpec.from_json(spec.to_json()) == spec


def _fake_child(spec: PerSpec) -> dict[str, Any]:
    ops = [SAMPLE_UPDATE] if spec.table == ROWS else [STEP, MIX, SAMPLE_UPDATE]
    rate = {"bufcore": 300.0, "torchrl": 100.0, "cpprb": 200.0, "multinomial": 50.0}
    return {
        "table": spec.table,
        "implementation": spec.implementation,
        "capacity": spec.capacity,
        "batch": spec.batch,
        "version": "v",
        "ops": {op: {"unit": "steps/s", "rate": rate[spec.implementation],
                     "faults_per_call": 0.0} for op in ops},
    }


def test_each_case_runs_every_implementation_once_per_round_in_rotated_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(per, "unavailable", lambda name: None)
    calls: list[PerSpec] = []

    def runner(spec: PerSpec) -> dict[str, Any]:
        calls.append(spec)
        return _fake_child(spec)

    cfg = PerConfig(capacities=(100, 50), batches=(8,), rounds=3, window_capacity=60,
                    window_envs=16, window_batch=32, seq_length=4)
    results = per.run(cfg, runner=runner, log=lambda message: None)
    rows = [(s.capacity, s.implementation) for s in calls if s.table == ROWS]
    assert len(rows) == 3 * 2 * 4 and len(set(rows)) == 2 * 4
    firsts = [s.implementation for s in calls if s.table == ROWS and s.capacity == 100][::4]
    assert firsts == ["bufcore", "torchrl", "cpprb"]  # the order rotates by one each round
    stats = results.stats[(ROWS, 100, 8, SAMPLE_UPDATE, "torchrl")]
    assert stats.rates == [100.0] * 3 and len(results.loads) == len(calls)


def test_a_missing_peer_is_skipped_with_its_reason_and_named_in_the_report(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reasons = {"torchrl": "its C++ trees are unavailable; build them", "cpprb": None}
    monkeypatch.setattr(per, "unavailable", lambda name: reasons.get(name))
    cfg = PerConfig(capacities=(100,), batches=(8,), rounds=1, window_capacity=60,
                    window_envs=16, window_batch=32, seq_length=4)
    results = per.run(cfg, runner=_fake_child, log=lambda message: None)
    assert {key[4] for key in results.stats} == {"bufcore", "cpprb", "multinomial"}
    report = per.render(results)
    assert "torchrl: its C++ trees are unavailable; build them" in report
    assert "| 100 | 8 | 300 [300] 0.0f | - | 200 [200] 0.0f |" in report
    assert "1.50x (missed >= 3x)" in report  # vs cpprb


def test_the_report_gives_ratios_and_whether_each_target_is_met(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(per, "unavailable", lambda name: None)
    cfg = PerConfig(capacities=(100,), batches=(256, 1024), rounds=1, window_capacity=60,
                    window_envs=16, window_batch=32, seq_length=4)
    results = per.run(cfg, runner=_fake_child, log=lambda message: None)
    report = per.render(results)
    assert "3.00x (met >= 1x)" in report and "3.00x (met >= 1.5x)" in report
    assert "| mix | 300 [300] 0.0f | 100 [100] 0.0f | 3.00x (met >= 3x) |" in report
    write_with_machine(tmp_path / "per.json", results.to_json())
    assert '"implementation": "multinomial"' in (tmp_path / "per.json").read_text()


def test_only_prioritized_takes_its_own_options() -> None:
    args = parse_args(["--only", "prioritized", "--per-capacities", "4096", "--per-rounds", "2"])
    cfg = prioritized_config_from(args)
    assert parts_from(args) == ("prioritized",)
    assert (cfg.capacities, cfg.batches, cfg.rounds) == ((4096,), (256, 1024), 2)


@pytest.mark.slow
def test_a_child_runs_in_a_fresh_process() -> None:
    child = per.run_child(PerSpec(ROWS, "bufcore", capacity=1000, batch=64, calls=4, blocks=2))
    assert child["ops"][SAMPLE_UPDATE]["rate"] > 0


def test_torchrl_without_a_loadable_extension_says_how_to_build_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "_torchrl.cpython-311-x86_64-linux-gnu.so"
    broken.write_bytes(b"not an elf file")
    monkeypatch.setattr(torchrl_ext, "_active", None)
    monkeypatch.delitem(sys.modules, "torchrl.data.replay_buffers.samplers.prioritized", False)
    monkeypatch.setattr(torchrl_ext, "_prebuilt", lambda: broken)
    monkeypatch.setattr(torchrl_ext, "built_path", lambda: tmp_path / "missing" / "_torchrl.so")
    with pytest.raises(torchrl_ext.ExtensionMissing, match=r"python -m bench\.torchrl_ext") as err:
        torchrl_ext.activate()
    assert "prebuilt extension does not load" in str(err.value)


def test_torchrl_not_installed_is_reported_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torchrl_ext.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(torchrl_ext.ExtensionMissing, match="torchrl is not installed"):
        torchrl_ext.torchrl_dir()

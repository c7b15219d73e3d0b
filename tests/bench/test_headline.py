"""The headline benchmark's child, parent aggregation, targets and report (no timings asserted).

Children run in this process (``bench.isolated.measure``) except one, which runs through the
parent's ``run_child`` to check the real fresh-process path. None needs cpprb or torchrl.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from bench import headline, headline_report
from bench.child_spec import ChildSpec
from bench.cli import headline_config_from, parse_args, parts_from
from bench.headline import HeadlineConfig, HeadlineResults, rotation
from bench.isolated import (
    EXTEND,
    EXTEND_SETTLED,
    FILL_PRETOUCHED,
    FILL_UNTOUCHED,
    MIX,
    SAMPLE,
    SAMPLE_SETTLED,
    measure,
)
from bench.online_child import STEP
from bench.targets import FaultLimit, ProcessRatio, Stability

TINY = {"capacity": 4096, "batch": 256, "calls": 4, "blocks": 2, "mix_steps": 2}
TINY_ONLINE = {"capacity": 64, "batch": 64, "envs": 16, "calls": 3, "blocks": 2}
EXPECTED_OPS = {
    "steady": {FILL_UNTOUCHED, SAMPLE, EXTEND, MIX, SAMPLE_SETTLED, EXTEND_SETTLED},
    "prefill": {FILL_PRETOUCHED},
    "online": {STEP, SAMPLE, EXTEND},
}
NO_PEERS = {"bufcore": (), "per-leaf": (), "cpprb": ("no_such_module_x",), "torchrl": ("nope_y",)}


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    # measure() sets torch's thread count, as the child process does; keep the suite's.
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _spec(implementation: str, scenario: str) -> ChildSpec:
    sizes = TINY_ONLINE if scenario == "online" else TINY
    return ChildSpec(implementation=implementation, scenario=scenario, **sizes)  # type: ignore[arg-type]


@pytest.mark.parametrize("scenario", ["steady", "prefill", "online"])
@pytest.mark.parametrize("implementation", ["bufcore", "per-leaf"])
def test_child_reports_a_positive_rate_and_a_fault_count_for_every_op_of_its_scenario(
    implementation: str, scenario: str
) -> None:
    spec = _spec(implementation, scenario)
    out = json.loads(json.dumps(measure(spec)))  # the child prints exactly this as JSON
    assert (out["implementation"], out["scenario"], out["threads"]) == (
        implementation,
        scenario,
        1,
    )
    assert set(out["ops"]) == EXPECTED_OPS[scenario]
    for op, record in out["ops"].items():
        timed_once = op in (FILL_UNTOUCHED, FILL_PRETOUCHED)
        assert len(record["blocks"]) == (1 if timed_once else spec.blocks), op
        assert record["rate"] > 0, op
        assert record["faults_per_call"] >= 0, op
        rates = [block["rate"] for block in record["blocks"]]
        assert record["rate"] == statistics.median(rates), op


def test_child_through_run_child_runs_in_another_process_and_returns_its_json() -> None:
    out = headline.run_child(_spec("bufcore", "prefill"))
    assert out["pid"] != os.getpid()
    assert set(out["ops"]) == {FILL_PRETOUCHED}
    assert out["ops"][FILL_PRETOUCHED]["rate"] > 0


def test_failing_child_raises_child_failed_naming_the_implementation_and_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = json.dumps(
        {"implementation": "per-leaf", "scenario": "steady", "capacity": 0, "batch": 1}
    )
    monkeypatch.setattr(ChildSpec, "to_json", lambda self: bad)
    with pytest.raises(headline.ChildFailed, match=r"per-leaf \(steady\)(.|\n)*capacity"):
        headline.run_child(_spec("per-leaf", "steady"))


@pytest.mark.parametrize(
    ("fields", "error", "names"),
    [
        ({"scenario": "bogus"}, ValueError, "scenario"),
        ({"scenario": "online", "implementation": "cpprb"}, ValueError, "implementation"),
        ({"capacity": 0}, ValueError, "capacity"),
        ({"batch": True}, TypeError, "batch"),
        ({"scenario": "online", "batch": 60}, ValueError, "batch"),
    ],
)
def test_child_spec_refuses_bad_fields_with_a_typed_error_naming_the_field(
    fields: dict[str, Any], error: type[Exception], names: str
) -> None:
    base: dict[str, Any] = {"implementation": "bufcore", "scenario": "steady", **TINY}
    with pytest.raises(error, match=names):
        ChildSpec(**{**base, **fields})


def test_child_spec_from_json_refuses_an_unknown_field_and_round_trips_a_known_one() -> None:
    spec = _spec("bufcore", "online")
    assert ChildSpec.from_json(spec.to_json()) == spec
    with pytest.raises(TypeError, match="unknown fields"):
        ChildSpec.from_json(json.dumps({**json.loads(spec.to_json()), "capcity": 3}))


@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_rotation_puts_every_implementation_at_every_position_within_count_rounds(
    count: int,
) -> None:
    names = [f"impl{i}" for i in range(count)]
    orders = rotation(names, count)
    for name in names:
        assert sorted(order.index(name) for order in orders) == list(range(count))
    assert all(sorted(order) == names for order in orders)


def _fake_runner(calls: list[tuple[str, str]]) -> headline.Runner:
    """A child that reports rate = 1000 * (number of its earlier runs + 1) for every op."""

    def runner(spec: ChildSpec) -> dict[str, Any]:
        calls.append((spec.implementation, spec.scenario))
        n = sum(1 for c in calls if c == (spec.implementation, spec.scenario))
        ops = {
            op: {"unit": "rows/s", "rate": 1000.0 * n, "faults_per_call": float(n)}
            for op in EXPECTED_OPS[spec.scenario]
        }
        return {
            "implementation": spec.implementation,
            "scenario": spec.scenario,
            "version": "v",
            "ops": ops,
        }

    return runner


def _fake_run(
    rounds: int, requires: dict[str, tuple[str, ...]]
) -> tuple[HeadlineResults, list[tuple[str, str]]]:
    calls: list[tuple[str, str]] = []
    results = headline.run(
        HeadlineConfig(rounds=rounds),
        runner=_fake_runner(calls),
        log=lambda message: None,
        requires=requires,
    )
    return results, calls


def test_parent_aggregates_median_min_max_and_faults_over_processes() -> None:
    results, _ = _fake_run(5, headline.REQUIRES | {"cpprb": (), "torchrl": ()})
    stats = results.get("transition", SAMPLE, "bufcore")
    assert stats is not None
    assert stats.rates == [1000.0, 2000.0, 3000.0, 4000.0, 5000.0]
    assert (stats.median, stats.low, stats.high, stats.median_faults) == (
        3000.0,
        1000.0,
        5000.0,
        3.0,
    )
    online = results.get("online", STEP, "per-leaf")
    assert online is not None and len(online.rates) == 5


def test_parent_runs_each_implementation_at_each_position_of_its_scenario() -> None:
    results, calls = _fake_run(4, headline.REQUIRES | {"cpprb": (), "torchrl": ()})
    for name in ("bufcore", "per-leaf", "cpprb", "torchrl"):
        stats = results.get("transition", SAMPLE, name)
        assert stats is not None and sorted(stats.positions) == [0, 1, 2, 3]
    assert len(calls) == 4 * (4 + 4 + 3)


def test_parent_reports_a_missing_peer_as_missing_and_never_starts_its_child() -> None:
    results, calls = _fake_run(2, NO_PEERS)
    assert results.missing == {"cpprb": ["no_such_module_x"], "torchrl": ["nope_y"]}
    assert {name for name, _ in calls} == {"bufcore", "per-leaf"}
    text = headline_report.render(results)
    assert "not installed (rows skipped): cpprb (missing no_such_module_x)" in text
    assert "n/a   sample: bufcore / cpprb" in text


def test_ratio_is_bufcore_median_over_peer_median_and_limits_judge_bufcore_alone() -> None:
    results = HeadlineResults(HeadlineConfig())
    for name, rates, faults in (
        ("bufcore", [3.0, 6.0, 9.0], [0.0, 12.0, 12.0]),
        ("per-leaf", [1.0, 2.0, 30.0], [0.0, 0.0, 0.0]),
    ):
        for position, (rate, fault) in enumerate(zip(rates, faults, strict=True)):
            child = {
                "implementation": name,
                "scenario": "steady",
                "ops": {SAMPLE: {"unit": "rows/s", "rate": rate, "faults_per_call": fault}},
            }
            results.add_child(child, 0, position)
    ratio = ProcessRatio("transition", SAMPLE, "per-leaf", 3.0)
    assert ratio.value(results) == 3.0 and ratio.verdict(results) == "PASS"
    assert Stability("transition", SAMPLE, 0.8).verdict(results) == "MISS"  # 3 / 6 = 0.5
    assert FaultLimit("transition", SAMPLE, 10.0).verdict(results) == "MISS"  # median 12
    assert FaultLimit("transition", EXTEND, 10.0).verdict(results) == "n/a"
    body = json.loads(json.dumps(headline_report.to_json(results)))
    assert body["ratio_definition"].startswith("median of bufcore")


def test_cli_quick_headline_defaults_and_headline_runs_first() -> None:
    cfg = headline_config_from(parse_args(["--quick"]))
    assert (cfg.capacity, cfg.rounds, cfg.online_capacity, cfg.threads) == (100_000, 3, 100, 1)
    full = headline_config_from(parse_args(["--rounds", "7"]))
    assert (full.capacity, full.rounds, full.online_capacity, full.online_envs) == (
        1_000_000,
        7,
        500,
        1024,
    )
    assert parts_from(parse_args([]))[0] == "headline"
    assert parts_from(parse_args(["--only", "headline"])) == ("headline",)


@pytest.mark.parametrize(
    "argv",
    [
        ["--rounds", "0"],
        ["--capacity", "0"],
        ["--online-capacity", "-5"],
        ["--traj-capacity", "0"],
        ["--threads", "0"],
        ["--blocks", "two"],
        ["--traj-block", "0"],
        ["--traj-block", "nan"],
    ],
)
def test_cli_refuses_a_zero_negative_or_non_numeric_count_instead_of_using_the_default(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    assert argv[0] in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fields", "error", "names"),
    [
        ({"rounds": 0}, ValueError, "rounds"),
        ({"online_capacity": 0}, ValueError, "capacity"),
        ({"batch": 1020}, ValueError, "seq_length"),
        ({"scenarios": ("steady", "warm")}, ValueError, "scenario"),
    ],
)
def test_headline_config_refuses_what_a_child_would_refuse_before_any_child_runs(
    fields: dict[str, Any], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=names):
        HeadlineConfig(**fields)

"""The memmap bench row: its children measure fill, sample and extend with faults and memory, the
open child compares copying with mapping, the parent skips what cannot run and removes its
scratch files, and the report states the targets. No timings are asserted; no test needs
torchrl."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from bench import memmap
from bench.cli import memmap_config_from, parse_args, parts_from
from bench.memmap import FILL, SAMPLE, MemmapConfig, MemmapSpec


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    # measure() sets torch's thread count, as the child process does; keep the suite's.
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def tiny(implementation: str, scratch: Path, rows: int = 300) -> MemmapSpec:
    return MemmapSpec(implementation, rows, str(scratch), batch=64, calls=2, blocks=2,
                      pool_batches=2)


@pytest.mark.parametrize("implementation", ["bufcore-file", "bufcore-ram"])
def test_a_child_reports_fill_sample_and_extend_with_faults_and_memory(
    tmp_path: Path, implementation: str
) -> None:
    child = memmap.measure(tiny(implementation, tmp_path))
    assert set(child["ops"]) == {FILL, SAMPLE, memmap.EXTEND}
    for record in child["ops"].values():
        assert record["rate"] > 0
        assert record["minor_faults_per_call"] >= 0 and record["major_faults_per_call"] >= 0
    assert set(child["memory_gib"]) == {"peak_rss", "rss", "rss_anon", "rss_file"}
    assert list(tmp_path.iterdir()) == []  # the child removed its files


def test_a_file_backed_child_says_whether_it_ran_out_of_core(tmp_path: Path) -> None:
    child = memmap.measure(tiny("bufcore-file", tmp_path))
    assert child["out_of_core"] is False  # a few hundred rows fit in memory


def test_the_open_child_times_save_copy_and_both_ways_of_sampling(tmp_path: Path) -> None:
    child = memmap.measure(tiny("open", tmp_path))
    assert set(child["ops"]) == {
        "save", "copy", "copy sample first", "copy sample next", "map sample first",
        "map sample next",
    }
    assert child["checkpoint_bytes"] > 0 and child["peak_rss_gib"]["copy"] > 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"implementation": "reverb"}, "implementation"), ({"rows": 0}, "rows"),
     ({"calls": True}, "calls")],
)
def test_a_bad_spec_is_refused_naming_the_field(fields: dict[str, Any], message: str) -> None:
    spec: dict[str, Any] = {"implementation": "bufcore-file", "rows": 10, "scratch": "x", **fields}
    with pytest.raises(ValueError, match=message):
        MemmapSpec(**spec)


def test_a_spec_survives_its_json_round_trip(tmp_path: Path) -> None:
    spec = tiny("torchrl-memmap", tmp_path)
    assert MemmapSpec.from_json(spec.to_json()) == spec


def fake_child(spec: MemmapSpec) -> dict[str, Any]:
    record = {"rate": 100.0, "minor_faults_per_call": 1.0, "major_faults_per_call": 0.0}
    memory = {"peak_rss": 1.0, "rss": 0.5, "rss_anon": 0.25, "rss_file": 0.25}
    if spec.implementation == "open":
        ops = {op: record for op in ("save", "copy", "copy sample first", "copy sample next",
                                     "map sample first", "map sample next")}
        return {"implementation": "open", "rows": spec.rows, "version": "bufcore", "ops": ops,
                "memory_gib": memory, "peak_rss_gib": {"copy": 1.5}, "checkpoint_bytes": 10**9}
    rate = 300.0 if spec.implementation == "bufcore-file" else 100.0
    return {"implementation": spec.implementation, "rows": spec.rows, "version": "v",
            "memory_gib": memory,
            "ops": {op: {**record, "rate": rate} for op in (FILL, SAMPLE, memmap.EXTEND)}}


def test_the_parent_skips_the_in_memory_buffer_where_it_does_not_fit_and_reports_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memmap, "ram_fits", lambda rows: rows < 1000)
    monkeypatch.setattr(memmap, "missing_modules", lambda name, requires: [])
    cfg = MemmapConfig(sizes=(10, 5000), open_rows=10, scratch=str(tmp_path / "scratch"))
    ran: list[tuple[str, int]] = []

    def runner(spec: MemmapSpec) -> dict[str, Any]:
        ran.append((spec.implementation, spec.rows))
        return fake_child(spec)

    results = memmap.run(cfg, runner=runner, log=lambda message: None)
    assert ran == [
        ("bufcore-file", 10), ("bufcore-ram", 10), ("torchrl-memmap", 10),
        ("bufcore-file", 5000), ("torchrl-memmap", 5000), ("open", 10),
    ]
    assert "bufcore-ram at 5,000" in results.skipped
    text = memmap.render(results)
    assert "bufcore-file / torchrl-memmap = 3.00x (met >= 2x)" in text
    assert "peak RSS at 5,000: 1.00 GiB (met < 8 GiB)" in text
    assert "copy into a backing file" in text and "map buffer.hdf5" in text
    assert not (tmp_path / "scratch").exists()


def test_a_peer_that_is_not_installed_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        memmap, "missing_modules",
        lambda name, requires: ["torchrl"] if name == "torchrl-memmap" else [],
    )
    cfg = MemmapConfig(sizes=(10,), open_rows=None, scratch=str(tmp_path / "s"))
    results = memmap.run(cfg, runner=fake_child, log=lambda message: None)
    assert "not installed" in results.skipped["torchrl-memmap at 10"]
    assert {c["implementation"] for c in results.children} == {"bufcore-file", "bufcore-ram"}


def test_the_cli_runs_memmap_only_when_asked_with_its_sizes(tmp_path: Path) -> None:
    args = parse_args(["--only", "memmap", "--memmap-rows", "1000", "6000",
                       "--memmap-open-rows", "0", "--tmp-dir", str(tmp_path)])
    assert parts_from(args) == ("memmap",)
    cfg = memmap_config_from(args)
    assert cfg.sizes == (1000, 6000) and cfg.open_rows is None
    assert cfg.scratch == str(tmp_path / "memmap")
    assert "memmap" not in parts_from(parse_args([]))


def test_the_quick_memmap_run_is_small() -> None:
    cfg = memmap_config_from(parse_args(["--quick", "--only", "memmap"]))
    assert cfg.sizes == (100_000,) and cfg.open_rows == 100_000

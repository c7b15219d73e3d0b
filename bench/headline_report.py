"""The headline's plain-text tables and its JSON file (``bench/results/headline.json``).

Three tables: the transition buffer (the headline ops), the settled-allocator diagnostic, and
the online ``[time, env]`` buffer. One row per op and implementation: the median of its
per-process rates with their minimum and maximum, min/median, median page faults per call, and
on a peer's row the ratio bufcore / this (medians over processes), its target and verdict. A
summary of every target follows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.blocks import ROWS_PER_S, SAMPLES_PER_S
from bench.child_spec import ONLINE_IMPLEMENTATIONS, TRANSITION_IMPLEMENTATIONS
from bench.headline import ONLINE, TRANSITION, HeadlineResults, Stats
from bench.isolated import (
    EXTEND,
    EXTEND_SETTLED,
    FILL_PRETOUCHED,
    FILL_UNTOUCHED,
    MIX,
    SAMPLE,
    SAMPLE_SETTLED,
)
from bench.online_child import STEP
from bench.report import format_table, machine
from bench.targets import HEADLINE_LIMITS, HEADLINE_RATIOS, FaultLimit, headline_ratio_for
from bench.workload import ROW_BYTES

HEADLINE_OPS = (SAMPLE, EXTEND, MIX, FILL_UNTOUCHED, FILL_PRETOUCHED)
SETTLED_OPS = (SAMPLE_SETTLED, EXTEND_SETTLED)
ONLINE_OPS = (STEP, EXTEND, SAMPLE)
ONLINE_LABELS = {
    "per-leaf": "per-leaf (seed: rescan after each extend)",
    "torchrl": "torchrl SliceSampler (cache_values=False)",
}
HEADER = [
    "op",
    "implementation",
    "unit",
    "median [min, max] over processes",
    "min/med",
    "faults/call",
    "bufcore/this",
    "target",
    "verdict",
]


def _rate(value: float, unit: str) -> str:
    if unit == ROWS_PER_S:
        return f"{value / 1e6:.3f}M"
    if unit == SAMPLES_PER_S:
        return f"{value / 1e3:,.1f}k"
    return f"{value:,.1f}"


def _cell(stats: Stats) -> str:
    unit = stats.unit
    return f"{_rate(stats.median, unit)} [{_rate(stats.low, unit)}, {_rate(stats.high, unit)}]"


def table_rows(
    results: HeadlineResults, table: str, ops: Sequence[str], names: Sequence[str]
) -> list[list[str]]:
    """One row per measured (op, implementation) of ``table``, grouped by op."""
    labels = ONLINE_LABELS if table == ONLINE else {}
    rows: list[list[str]] = []
    for op in ops:
        for name in names:
            stats = results.get(table, op, name)
            if stats is None:
                continue
            ratio = headline_ratio_for(table, op, name)
            value = None if ratio is None else ratio.value(results)
            target = "" if ratio is None or ratio.minimum is None else f">={ratio.minimum:g}x"
            rows.append(
                [
                    op,
                    labels.get(name, name),
                    stats.unit,
                    _cell(stats),
                    f"{stats.low / stats.median:.2f}",
                    f"{stats.median_faults:,.1f}",
                    "" if value is None else f"{value:.2f}x",
                    target,
                    "" if ratio is None else ratio.verdict(results),
                ]
            )
    return rows


def summary_lines(results: HeadlineResults) -> list[str]:
    """One line per target: verdict, value, target and margin."""
    lines: list[str] = []
    for ratio in HEADLINE_RATIOS:
        if ratio.minimum is None:
            continue
        what = f"{ratio.op}: bufcore / {ratio.against} (medians over processes)"
        value = ratio.value(results)
        if value is None:
            lines.append(f"  n/a   {what}: not measured")
            continue
        margin = value / ratio.minimum - 1
        lines.append(
            f"  {ratio.verdict(results)}  {what} = {value:.3f}x (target >= {ratio.minimum:g}x, "
            f"{'margin' if margin >= 0 else 'short by'} {abs(margin):.1%})"
        )
    for limit in HEADLINE_LIMITS:
        value = limit.value(results)
        if isinstance(limit, FaultLimit):
            what, target = f"{limit.op}: bufcore faults/call (median)", f"< {limit.maximum:g}"
        else:
            what, target = f"{limit.op}: bufcore min/median over processes", f">= {limit.minimum:g}"
        shown = "not measured" if value is None else f"= {value:.2f} (target {target})"
        lines.append(f"  {limit.verdict(results):<4}  {what} {shown}")
    return lines


def _environment(results: HeadlineResults) -> dict[str, Any]:
    return {
        **machine(),
        "versions": results.versions,
        "missing": results.missing,
        "seconds": round(results.seconds, 1),
    }


def render(results: HeadlineResults) -> str:
    """The printed headline: three tables and the target summary."""
    cfg = results.config
    env = _environment(results)
    versions = ", ".join(f"{k} {v}" for k, v in results.versions.items() if v)
    mix_rows = (1 + cfg.mix_samples) * cfg.batch
    gb = cfg.capacity * ROW_BYTES / 1e9
    online_gb = cfg.online_capacity * cfg.online_envs * ROW_BYTES / 1e9
    lines = [
        f"HEADLINE: each implementation in its own fresh Python process, {cfg.rounds} processes "
        f"per implementation and scenario, order rotated every round; {cfg.threads} torch "
        "thread; torch tensors in; no allocator settling, no pre-touching (except 'first fill "
        "(pre-touched)')",
        f"machine: {env['cpu']}, {env['cpus']} CPUs, {env['memory_gib']} GiB; python "
        f"{env['python']}, torch {env['torch']}; versions: {versions}",
    ]
    for name, lacking in results.missing.items():
        lines.append(f"not installed (rows skipped): {name} (missing {', '.join(lacking)})")
    lines += [
        "",
        f"transition buffer: capacity {cfg.capacity:,} rows x {ROW_BYTES:,} B = {gb:.2f} GB, "
        f"batch {cfg.batch}; per process: {cfg.blocks} timed blocks of {cfg.calls} calls "
        f"(mix: {cfg.mix_steps} steps of 1 extend + {cfg.mix_samples} samples = {mix_rows:,} rows "
        "moved each), the "
        "process's rate = median of its blocks; first fill = create + extend to capacity, one "
        "timed fill per process ('pre-touched': bench.memory.prefault of the fill's bytes "
        "first, in a separate process, the same for everyone)",
        "rates: rows/s in millions; median [min, max] over processes; min/med: slowest process "
        "over the median; faults/call: median over processes of minor page faults per call; "
        "bufcore/this: median of bufcore's per-process rates / median of this row's",
        "",
        format_table(HEADER, table_rows(results, TRANSITION, HEADLINE_OPS, _names(TRANSITION))),
    ]
    mix = results.get(TRANSITION, MIX, "bufcore")
    if mix is not None:
        lines.append(f"(bufcore mix = {mix.median / mix_rows:,.1f} steps/s, median)")
    lines += ["", "targets:", *summary_lines(results), ""]
    lines += [
        "DIAGNOSTIC (not headline): the same steady-state processes after "
        "bench.memory.settle_allocator(), measured after the headline blocks",
        "",
        format_table(HEADER, table_rows(results, TRANSITION, SETTLED_OPS, _names(TRANSITION))),
        "",
        f"online [time, env] buffer: [{cfg.online_capacity}, {cfg.online_envs}] rows "
        f"({online_gb:.2f} GB), filled untimed past its wrap with episodes of 50-500 steps; "
        f"step = extend [1, {cfg.online_envs}] + one sample of {cfg.batch} rows "
        f"({cfg.batch // cfg.seq_length} windows of {cfg.seq_length}, with next); sample: "
        "samples/s (window rows, next not counted); extend: rows/s",
        "",
        format_table(HEADER, table_rows(results, ONLINE, ONLINE_OPS, _names(ONLINE))),
        "",
        f"headline total {results.seconds:.0f} s",
    ]
    return "\n".join(lines)


def _names(table: str) -> tuple[str, ...]:
    return ONLINE_IMPLEMENTATIONS if table == ONLINE else TRANSITION_IMPLEMENTATIONS


def to_json(results: HeadlineResults) -> dict[str, Any]:
    """Everything: config, environment, per-op statistics, ratios, targets, every child."""
    ratios = [
        {**asdict(r), "value": r.value(results), "verdict": r.verdict(results)}
        for r in HEADLINE_RATIOS
    ]
    limits = [
        {"kind": type(t).__name__, **asdict(t), "value": t.value(results)}
        | {"verdict": t.verdict(results)}
        for t in HEADLINE_LIMITS
    ]
    return {
        "config": asdict(results.config),
        "environment": _environment(results),
        "ratio_definition": "median of bufcore's per-process rates / median of the peer's",
        "measurements": [
            {"table": table, "op": op, "implementation": name, **stats.to_json()}
            for (table, op, name), stats in results.stats.items()
        ],
        "ratios": ratios,
        "limits": limits,
        "children": results.children,
    }


def write_json(path: Path, results: HeadlineResults) -> None:
    """Write :func:`to_json` to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(results), indent=2) + "\n", encoding="utf-8")

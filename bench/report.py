"""The plain-text tables and the JSON file of one run.

One row per measurement: its median rate with the range of its repeats at each thread count,
and, on the row of whatever bufcore is compared with, the ratio bufcore / that row (medians, same
thread count), the target and PASS/MISS. A summary of the targets follows each table. The
transition table (DictBuffer, peers, ceilings, disk) comes first, the trajectory table
(:mod:`bench.trajectory`) second; either may be left out of a run.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from bench.runner import MB_PER_S, Config, Results
from bench.targets import (
    RATIOS,
    TRAJECTORY_BOUNDS,
    TRAJECTORY_RATIOS,
    Bound,
    Ratio,
    bound_for,
    ratio_for,
)
from bench.timing import Series
from bench.trajectory import OPS as TRAJECTORY_OPS
from bench.trajectory import SAMPLES_PER_S, US_PER_CALL, TrajectoryConfig
from bench.trajpeers import (
    BUFCORE_DRAW,
    BUFCORE_UPDATE,
    CACHED_TABLE,
    PER_LEAF,
    RESCAN,
    TORCHRL,
    TORCHRL_CACHED,
)
from bench.workload import ROW_BYTES

OPS = ("sample", "extend", "first fill", "save", "load (cold)")
ORDER = (
    "bufcore",
    "bufcore (fresh process)",
    "per-leaf",
    "torchrl",
    "cpprb",
    "1 array",
    "raw write+fsync",
    "raw read",
    BUFCORE_UPDATE,
    BUFCORE_DRAW,
    TORCHRL,
    TORCHRL_CACHED,
    PER_LEAF,
    RESCAN,
    CACHED_TABLE,
)
LABELS = {
    ("sample", "1 array"): "ceiling: index_select",
    ("extend", "1 array"): "ceiling: block copy_",
    ("first fill", "1 array"): "1 array (np.empty)",
    ("save", "raw write+fsync"): "ceiling: raw write+fsync",
    ("load (cold)", "raw read"): "ceiling: raw cold read",
}


# ----------------------------------------------------------------------------- numbers
def _rate(value: float, unit: str) -> str:
    if unit == MB_PER_S:
        return f"{value:,.0f}"
    if unit == SAMPLES_PER_S:
        return f"{value / 1e3:,.1f}k"
    if unit == US_PER_CALL:
        return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"
    return f"{value / 1e6:.3f}M"


def _cell(series: Series | None) -> str:
    if series is None:
        return "-"
    unit = series.unit
    return f"{_rate(series.median, unit)} ({_rate(series.low, unit)}-{_rate(series.high, unit)})"


def _faults_text(series: Series | None) -> str:
    faults = None if series is None else series.median_faults
    return "" if faults is None else f"{faults:,.0f}"


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _target_text(ratio: Ratio | None, bound: Bound | None = None, unit: str = "") -> str:
    if bound is not None:
        if bound.minimum is not None:
            return f">={_rate(bound.minimum, unit)}"
        if bound.maximum is not None:
            return f"<={_rate(bound.maximum, unit)}"
    return "" if ratio is None or ratio.minimum is None else f">={ratio.minimum:g}x"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; numbers-like columns right-aligned."""
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    left = {0, 1}

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _subjects(results: Results, op: str) -> list[str]:
    names = [s for (o, s) in results.series if o == op]
    return sorted(names, key=lambda s: ORDER.index(s) if s in ORDER else len(ORDER))


def table_rows(
    results: Results,
    threads: tuple[int, ...],
    ops: Sequence[str] = OPS,
    ratios: tuple[Ratio, ...] = RATIOS,
) -> list[list[str]]:
    """The table body: one row per (op, implementation), grouped by op.

    A row shows the ratio whose denominator it is, or the absolute target (:class:`Bound`) on it.
    """
    head, other = threads[0], threads[1:] if len(threads) > 1 else ()
    rows: list[list[str]] = []
    for op in ops:
        for subject in _subjects(results, op):
            by_threads = results.series[(op, subject)]
            unit = next(iter(by_threads.values())).unit
            ratio = ratio_for(op, subject, ratios)
            target: Ratio | Bound | None = ratio or bound_for(op, subject)
            row = [op, LABELS.get((op, subject), subject), unit, _cell(by_threads.get(head))]
            row += [_cell(by_threads.get(t)) for t in other]
            row.append(_faults_text(by_threads.get(head)))
            row.append(_ratio_text(ratio.value(results, head)) if ratio else "")
            row += [_ratio_text(ratio.value(results, t)) if ratio else "" for t in other]
            row.append(_target_text(ratio, bound_for(op, subject), unit))
            row.append(target.verdict(results, head) if target else "")
            row += [target.verdict(results, t) if target else "" for t in other]
            rows.append(row)
    return rows


def table_header(threads: tuple[int, ...]) -> list[str]:
    def name(t: int) -> str:
        return f"{t} thread{'s' if t > 1 else ''}"

    head, other = threads[0], threads[1:]
    return [
        "op",
        "implementation",
        "unit",
        f"{name(head)}: median (min-max)",
        *(f"{name(t)}: median (min-max)" for t in other),
        f"faults/call {head}T",
        f"bufcore/this {head}T",
        *(f"bufcore/this {t}T" for t in other),
        "target",
        f"verdict {head}T",
        *(f"{t}T" for t in other),
    ]


def _bound_line(bound: Bound, results: Results, threads: int) -> str:
    """``PASS``/``MISS``, the median, the limit and how far inside (or outside) it is."""
    series = results.get(bound.op, bound.subject, threads)
    what = f"{bound.op}: {bound.subject}"
    if series is None:
        return f"  n/a   {what}: not measured"
    unit, value = series.unit, series.median
    if bound.minimum is not None:
        limit, miss = f">= {_rate(bound.minimum, unit)}", "short by"
    else:
        # A time over its limit reads as "over by", a rate under its floor as "short by".
        limit, miss = f"<= {_rate(bound.maximum or 0.0, unit)}", "over by"
    margin = bound.margin(value)
    return (
        f"  {bound.verdict(results, threads)}  {what} = {_rate(value, unit)} {unit} (target "
        f"{limit} {unit}, {'margin' if margin >= 0 else miss} {abs(margin):.1%})"
    )


def summary_lines(
    results: Results,
    threads: int,
    ratios: tuple[Ratio, ...] = RATIOS,
    bounds: tuple[Bound, ...] = (),
) -> list[str]:
    """One line per target at the headline thread count: value, target, margin."""
    lines = [_bound_line(bound, results, threads) for bound in bounds]
    for ratio in ratios:
        if ratio.minimum is None:
            continue
        value = ratio.value(results, threads)
        what = f"{ratio.op}: bufcore / {LABELS.get(ratio.against, ratio.against[1])}"
        if value is None:
            lines.append(f"  n/a   {what}: not measured")
            continue
        margin = value / ratio.minimum - 1
        verdict = ratio.verdict(results, threads)
        lines.append(
            f"  {verdict}  {what} = {value:.3f}x (target >= {ratio.minimum:g}x, "
            f"{'margin' if margin >= 0 else 'short by'} {abs(margin):.1%})"
        )
    return lines


# ------------------------------------------------------------------------- environment
def cpu_model() -> str:
    """The CPU model name (from /proc/cpuinfo where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _filesystem(path: Path) -> str:
    """``device (fstype)`` of the mount holding ``path``."""
    target = path.resolve()
    best = ("", "unknown", "unknown")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, fstype, *_ = line.split()
            if target.is_relative_to(mount) and len(mount) > len(best[0]):
                best = (mount, device, fstype)
    except OSError:
        pass
    return f"{best[1]} ({best[2]}, mounted at {best[0]})"


def machine() -> dict[str, Any]:
    """The CPU, its count, the memory and the Python and torch versions of this machine."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def environment(cfg: Config, results: Results) -> dict[str, Any]:
    """Machine and software facts printed above the table and stored in the JSON."""
    return {
        **machine(),
        "versions": results.versions,
        "missing_peers": results.missing,
        "scratch_filesystem": _filesystem(cfg.tmp_dir),
        "row_bytes": ROW_BYTES,
        "checkpoint_bytes": results.checkpoint_bytes,
        "seconds": round(results.seconds, 1),
    }


# ------------------------------------------------------------------------------ output
def _transition_section(cfg: Config, results: Results, env: dict[str, Any]) -> list[str]:
    lines = [
        "bufcore benchmark (BFM-Zero transition: obs {state 67, last_action 29, "
        "privileged_state 217, history_actor 580}, action 29, z 256, reward 1 f32; "
        "terminated, truncated bool)",
        f"capacity {cfg.capacity:,} rows x {ROW_BYTES:,} B = {cfg.capacity * ROW_BYTES / 1e9:.2f} "
        f"GB per buffer; batch {cfg.batch_size}; steady state: {cfg.repeats} rounds x "
        f"{cfg.calls} calls; first fill: {cfg.fill_rows:,} rows into an empty buffer of that "
        f"capacity, {cfg.fill_repeats} rounds; checkpoint: {cfg.ckpt_rows:,} rows = "
        f"{results.checkpoint_bytes / 1e6:,.0f} MB, {cfg.disk_repeats} rounds, cold reads, "
        f"scratch on {env['scratch_filesystem']}",
        "rates: rows/s in millions of transitions per second; MB/s in 10^6 bytes per second; "
        "bufcore/this: median over rounds of bufcore's rate / this row's rate, both measured "
        "back to back in the round (same thread count)",
        "memory each timed allocation will use is pre-faulted first (this VM makes memory "
        "freed >2 s earlier ~40x slower to touch) and glibc's malloc thresholds are settled "
        "as in a long-running process (see bench/memory.py; the headline table measures fresh "
        "processes); faults/call: median minor page faults per extend/sample call",
    ]
    if any(fs in env["scratch_filesystem"] for fs in ("tmpfs", "ramfs")):
        lines.append("WARNING: the scratch directory is in memory; disk rates are not disk rates")
    lines += ["", format_table(table_header(cfg.threads), table_rows(results, cfg.threads)), ""]
    lines.append(f"targets at {cfg.threads[0]} thread (headline):")
    lines += summary_lines(results, cfg.threads[0])
    return lines


def _trajectory_section(traj: TrajectoryConfig, results: Results) -> list[str]:
    windows = traj.batch_size // traj.seq_length
    table = table_rows(results, traj.threads, ops=TRAJECTORY_OPS, ratios=TRAJECTORY_RATIOS)
    lines = [
        f"trajectory sampling (BFM-Zero online buffer, [time, env] rows, end key 'truncated', "
        f"episodes of 50-500 steps; batch {traj.batch_size} = {windows} windows of "
        f"{traj.seq_length}; samples = window rows, {traj.rounds} rounds of "
        f"~{traj.block_seconds:g} s blocks)",
        f"window index / index build: extend one time step of [{traj.index_capacity}, "
        f"{traj.index_envs}] end flags, then the rows of one batch, no payload; "
        "'update only'/'draw only' are bufcore's two halves; 'BFM-Zero cached table' is never "
        "updated (stale: a floor, not a design)",
        f"sample+next: obs, action, z, terminated, truncated, reward + next obs, terminated, from "
        f"a full, wrapped [{traj.capacity}, {traj.envs}] buffer ({traj.buffer_bytes / 1e9:.2f} "
        "GB), no extend in between; torchrl draws windows of seq+1 and splits them",
        "samples/s in thousands; bufcore/this: paired median of rate ratios (same round and "
        "thread count); faults/call: median minor page faults per call",
        "",
        format_table(table_header(traj.threads), table),
        "",
        f"trajectory targets at {traj.threads[0]} thread (headline):",
    ]
    lines += summary_lines(results, traj.threads[0], TRAJECTORY_RATIOS, TRAJECTORY_BOUNDS)
    return lines


def render(
    cfg: Config,
    results: Results,
    traj: TrajectoryConfig | None = None,
    *,
    transition: bool = True,
) -> str:
    """The whole printed report: the transition table and/or the trajectory table."""
    env = environment(cfg, results)
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    lines = [
        f"machine: {env['cpu']}, {env['cpus']} CPUs, {env['memory_gib']} GiB; "
        f"python {env['python']}, torch {env['torch']}",
        f"versions: {versions}",
    ]
    if results.missing:
        lines.append(f"not installed (rows skipped): {', '.join(results.missing)}")
    if transition:
        lines += ["", *_transition_section(cfg, results, env)]
    if traj is not None:
        lines += ["", *_trajectory_section(traj, results)]
    lines.append(f"total {results.seconds:.0f} s")
    return "\n".join(lines)


def _ratio_json(ratio: Ratio, results: Results, threads: Sequence[int]) -> dict[str, Any]:
    return {
        "op": ratio.op,
        "numerator": ratio.subject,
        "denominator": list(ratio.against),
        "minimum": ratio.minimum,
        "values": {str(t): ratio.value(results, t) for t in threads},
        "ratio_of_medians": {str(t): ratio.of_medians(results, t) for t in threads},
        "verdicts": {str(t): ratio.verdict(results, t) for t in threads},
    }


def _bound_json(bound: Bound, results: Results, threads: Sequence[int]) -> dict[str, Any]:
    return {
        "op": bound.op,
        "implementation": bound.subject,
        "minimum": bound.minimum,
        "maximum": bound.maximum,
        "medians": {str(t): bound.value(results, t) for t in threads},
        "verdicts": {str(t): bound.verdict(results, t) for t in threads},
    }


def to_json(
    cfg: Config,
    results: Results,
    traj: TrajectoryConfig | None = None,
    *,
    transition: bool = True,
) -> dict[str, Any]:
    """Everything measured, every repeat included (both parts share one file)."""
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()}
    measurements = [
        {
            "op": op,
            "implementation": subject,
            "label": LABELS.get((op, subject), subject),
            "threads": {str(t): s.to_json() for t, s in by_threads.items()},
        }
        for (op, subject), by_threads in results.series.items()
    ]
    out: dict[str, Any] = {
        "parts": [p for p, on in (("transition", transition), ("trajectory", traj)) if on],
        "config": config,
        "environment": environment(cfg, results),
        "measurements": measurements,
        "ratios": [_ratio_json(r, results, cfg.threads) for r in RATIOS] if transition else [],
    }
    if traj is not None:
        out["trajectory_config"] = asdict(traj)
        out["trajectory_ratios"] = [
            _ratio_json(r, results, traj.threads) for r in TRAJECTORY_RATIOS
        ]
        out["trajectory_bounds"] = [
            _bound_json(b, results, traj.threads) for b in TRAJECTORY_BOUNDS
        ]
    return out


def write_with_machine(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` after :func:`machine`'s description as JSON to ``path`` (parents
    created): what the prioritized and memmap rows save."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**machine(), **payload}, indent=1) + "\n")


def write_json(
    path: Path,
    cfg: Config,
    results: Results,
    traj: TrajectoryConfig | None = None,
    *,
    transition: bool = True,
) -> None:
    """Write :func:`to_json` to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = to_json(cfg, results, traj, transition=transition)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

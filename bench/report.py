"""The plain-text table and the JSON file of one run.

One row per measurement: its median rate with the range of its repeats at each thread count,
and, on the row of whatever bufcore is compared with, the ratio bufcore / that row (medians, same
thread count), the target and PASS/MISS. A summary of the targets follows the table.
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
from bench.targets import RATIOS, Ratio, ratio_for
from bench.timing import Series
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


def _target_text(ratio: Ratio | None) -> str:
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


def table_rows(results: Results, threads: tuple[int, ...]) -> list[list[str]]:
    """The table body: one row per (op, implementation), grouped by op."""
    head, other = threads[0], threads[1:] if len(threads) > 1 else ()
    rows: list[list[str]] = []
    for op in OPS:
        for subject in _subjects(results, op):
            by_threads = results.series[(op, subject)]
            unit = next(iter(by_threads.values())).unit
            ratio = ratio_for(op, subject)
            row = [op, LABELS.get((op, subject), subject), unit, _cell(by_threads.get(head))]
            row += [_cell(by_threads.get(t)) for t in other]
            row.append(_faults_text(by_threads.get(head)))
            row.append(_ratio_text(ratio.value(results, head)) if ratio else "")
            row += [_ratio_text(ratio.value(results, t)) if ratio else "" for t in other]
            row.append(_target_text(ratio))
            row.append(ratio.verdict(results, head) if ratio else "")
            row += [ratio.verdict(results, t) if ratio else "" for t in other]
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


def summary_lines(results: Results, threads: int) -> list[str]:
    """One line per target at the headline thread count: value, target, margin."""
    lines = []
    for ratio in RATIOS:
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
def _cpu_model() -> str:
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


def environment(cfg: Config, results: Results) -> dict[str, Any]:
    """Machine and software facts printed above the table and stored in the JSON."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "versions": results.versions,
        "missing_peers": results.missing,
        "scratch_filesystem": _filesystem(cfg.tmp_dir),
        "row_bytes": ROW_BYTES,
        "checkpoint_bytes": results.checkpoint_bytes,
        "seconds": round(results.seconds, 1),
    }


# ------------------------------------------------------------------------------ output
def render(cfg: Config, results: Results) -> str:
    """The whole printed report."""
    env = environment(cfg, results)
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v)
    lines = [
        "bufcore benchmark (BFM-Zero transition: obs {state 67, last_action 29, "
        "privileged_state 217, history_actor 580}, action 29, z 256, reward 1 f32; "
        "terminated, truncated bool)",
        f"machine: {env['cpu']}, {env['cpus']} CPUs, {env['memory_gib']} GiB; "
        f"python {env['python']}, torch {env['torch']}",
        f"versions: {versions}",
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
        "as in a long-running process; 'bufcore (fresh process)' is measured in a child that "
        "imports only torch and bufcore (see bench/memory.py, bench/fresh.py); "
        "faults/call: median minor page faults per extend/sample call",
    ]
    if any(fs in env["scratch_filesystem"] for fs in ("tmpfs", "ramfs")):
        lines.append("WARNING: the scratch directory is in memory; disk rates are not disk rates")
    if results.missing:
        lines.append(f"not installed (rows skipped): {', '.join(results.missing)}")
    lines += ["", format_table(table_header(cfg.threads), table_rows(results, cfg.threads)), ""]
    lines.append(f"targets at {cfg.threads[0]} thread (headline):")
    lines += summary_lines(results, cfg.threads[0])
    lines.append(f"total {results.seconds:.0f} s")
    return "\n".join(lines)


def to_json(cfg: Config, results: Results) -> dict[str, Any]:
    """Everything measured, every repeat included."""
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
    ratios = [
        {
            "op": r.op,
            "numerator": r.subject,
            "denominator": list(r.against),
            "minimum": r.minimum,
            "values": {str(t): r.value(results, t) for t in cfg.threads},
            "ratio_of_medians": {str(t): r.of_medians(results, t) for t in cfg.threads},
            "verdicts": {str(t): r.verdict(results, t) for t in cfg.threads},
        }
        for r in RATIOS
    ]
    return {
        "config": config,
        "environment": environment(cfg, results),
        "measurements": measurements,
        "ratios": ratios,
    }


def write_json(path: Path, cfg: Config, results: Results) -> None:
    """Write :func:`to_json` to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_json(cfg, results), indent=2) + "\n", encoding="utf-8")

"""Command-line options of ``python -m bench``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from bench.report import render, write_json
from bench.runner import Config, run

RESULTS = Path(__file__).resolve().parent / "results"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="bufcore against torchrl, cpprb, a per-leaf port and the machine's ceilings.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small, fast run: capacity 100,000, fewer repeats (numbers are noisier)",
    )
    parser.add_argument("--capacity", type=int, help="rows of the steady-state buffers")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument(
        "--fill-rows", type=int, help="rows of the first-fill buffers (default: min(capacity, 1M))"
    )
    parser.add_argument(
        "--ckpt-rows", type=int, help="rows of the checkpointed buffer (default 200,000)"
    )
    parser.add_argument("--repeats", type=int, help="steady-state rounds per peer")
    parser.add_argument("--calls", type=int, default=32, help="calls per timed block")
    parser.add_argument(
        "--fill-repeats",
        type=int,
        help="first-fill rounds (default 5: the order rotates, so each implementation takes "
        "each position once)",
    )
    parser.add_argument("--disk-repeats", type=int, help="save/load rounds")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[1, 2],
        help="torch thread counts; the first is the headline (default: 1 2)",
    )
    parser.add_argument(
        "--tmp-dir",
        type=Path,
        default=RESULTS / "tmp",
        help="scratch directory for checkpoints; must be on the disk to measure, not tmpfs",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "latest.json")
    return parser.parse_args(argv)


def config_from(args: argparse.Namespace) -> Config:
    """Defaults depend on ``--quick``; explicit options win."""
    quick = bool(args.quick)
    capacity = args.capacity or (100_000 if quick else 1_000_000)
    ckpt_default = 50_000 if quick else 200_000
    return Config(
        capacity=capacity,
        batch_size=args.batch_size,
        fill_rows=args.fill_rows or min(capacity, 1_000_000),
        ckpt_rows=args.ckpt_rows or min(capacity, ckpt_default),
        repeats=args.repeats or (5 if quick else 15),
        calls=args.calls,
        fill_repeats=args.fill_repeats or (2 if quick else 5),
        disk_repeats=args.disk_repeats or (2 if quick else 5),
        threads=tuple(args.threads),
        pool_batches=16,
        tmp_dir=args.tmp_dir,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the table, write the JSON; exit status 0."""
    args = parse_args(argv)
    cfg = config_from(args)
    results = run(cfg)
    print(render(cfg, results), flush=True)
    write_json(args.json, cfg, results)
    print(f"wrote {args.json}")
    return 0

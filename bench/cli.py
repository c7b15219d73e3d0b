"""Command-line options of ``python -m bench``.

A run has three parts, all on by default, in this order: ``headline`` (every implementation in
its own fresh process, :mod:`bench.headline`; first, before this process allocates anything),
then the in-process diagnostics ``transition`` (DictBuffer against the peers, the ceilings and
the disk) and ``trajectory`` (window indices and windows with ``next``,
:mod:`bench.trajectory`). ``--only PART`` runs one, ``--skip PART`` leaves one out.
``persist-engine`` (:mod:`bench.persist_engine`: bufcore's checkpoint engine against plain h5py
reads and writes, fresh processes) and ``prioritized`` (:mod:`bench.prioritized_headline`:
prioritized replay's sample + update against torchrl, cpprb and ``torch.multinomial``, fresh
processes) and ``memmap`` (:mod:`bench.memmap`: a file-backed DictBuffer past RAM against torchrl's
``LazyMemmapStorage``, fresh processes) and ``rlinf`` (:mod:`bench.rlinf`: the RLinf disk
trajectory buffer's writes, samples and memory against the raw disk, a DictBuffer and RLinf's own
code, fresh processes) run only when asked for with ``--only``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from bench import (
    headline,
    headline_report,
    memmap,
    persist_engine,
    prioritized_headline,
    rlinf,
    trajectory,
)
from bench.headline import HeadlineConfig
from bench.prioritized_headline import PerConfig
from bench.report import render, write_json, write_with_machine
from bench.runner import Config, Results, run
from bench.trajectory import TrajectoryConfig

RESULTS = Path(__file__).resolve().parent / "results"
PARTS = ("headline", "transition", "trajectory")
ON_REQUEST = ("persist-engine", "prioritized", "memmap", "rlinf")


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1.

    Zero is refused rather than read as "use the default" (options default to None, and
    ``args.x or default`` would turn 0 into the default silently).

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a whole number >= 1.
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0.

    Raises:
        argparse.ArgumentTypeError: ``text`` is not a finite number > 0.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="bufcore against torchrl, cpprb, a per-leaf port and the machine's ceilings.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small, fast run: capacity 100,000, 3 headline rounds, online buffers of 100 time "
        "rows, trajectory buffers of 400 time rows, fewer repeats and shorter blocks (numbers "
        "are noisier)",
    )
    part = parser.add_mutually_exclusive_group()
    part.add_argument("--only", choices=PARTS + ON_REQUEST, help="run only this part")
    part.add_argument("--skip", choices=PARTS, help="leave this part out")
    parser.add_argument("--capacity", type=positive_int, help="rows of the steady-state buffers")
    parser.add_argument("--batch-size", type=positive_int, default=1024)
    parser.add_argument(
        "--fill-rows",
        type=positive_int,
        help="rows of the first-fill buffers (default: min(capacity, 1M))",
    )
    parser.add_argument(
        "--ckpt-rows", type=positive_int, help="rows of the checkpointed buffer (default 200,000)"
    )
    parser.add_argument("--repeats", type=positive_int, help="steady-state rounds per peer")
    parser.add_argument("--calls", type=positive_int, default=32, help="calls per timed block")
    parser.add_argument(
        "--fill-repeats",
        type=positive_int,
        help="first-fill rounds (default 5: the order rotates, so each implementation takes "
        "each position once)",
    )
    parser.add_argument("--disk-repeats", type=positive_int, help="save/load rounds")
    parser.add_argument(
        "--threads",
        type=positive_int,
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
    head = parser.add_argument_group("headline part (fresh processes)")
    head.add_argument(
        "--rounds",
        type=positive_int,
        help="processes per implementation and scenario (default 5; --quick 3)",
    )
    head.add_argument(
        "--blocks", type=positive_int, default=5, help="timed blocks per op per process"
    )
    head.add_argument(
        "--mix-steps",
        type=positive_int,
        default=4,
        help="mix steps (1 extend + 16 samples) per block",
    )
    head.add_argument(
        "--online-capacity",
        type=positive_int,
        help="time rows of the online buffers (default 500, ~2.4 GB with 1024 envs; --quick 100)",
    )
    head.add_argument(
        "--online-envs", type=positive_int, default=1024, help="envs of the online buffers"
    )
    head.add_argument(
        "--headline-json", type=Path, default=RESULTS / "headline.json", help="headline JSON file"
    )
    engine = parser.add_argument_group("persist-engine part (fresh processes)")
    engine.add_argument(
        "--engine-rows",
        type=positive_int,
        nargs="+",
        help="rows of the checkpoints (default: 200000 1000000; --quick 50000)",
    )
    engine.add_argument(
        "--engine-rounds", type=positive_int, default=3, help="processes per op and implementation"
    )
    engine.add_argument(
        "--engine-json",
        type=Path,
        default=RESULTS / "persist_engine.json",
        help="persist-engine JSON file",
    )
    per = parser.add_argument_group("prioritized part (fresh processes)")
    per.add_argument(
        "--per-capacities",
        type=positive_int,
        nargs="+",
        help="rows of the prioritized buffers (default: 1000000 131072; --quick 131072)",
    )
    per.add_argument(
        "--per-batches", type=positive_int, nargs="+", help="rows per draw (default: 256 1024)"
    )
    per.add_argument(
        "--per-rounds",
        type=positive_int,
        help="processes per implementation and case (default 5; --quick 2)",
    )
    per.add_argument(
        "--per-json",
        type=Path,
        default=RESULTS / "prioritized.json",
        help="prioritized JSON file",
    )
    mm = parser.add_argument_group("memmap part (fresh processes; files under --tmp-dir)")
    mm.add_argument(
        "--memmap-rows",
        type=positive_int,
        nargs="+",
        help="transitions of the buffers, one table row per size (default: 1000000 6000000, "
        "4.7 and 28 GB; --quick 100000); the largest is where the targets apply",
    )
    mm.add_argument(
        "--memmap-open-rows",
        type=int,
        help="rows of the checkpoint opened file-backed (default 1000000; --quick 100000; "
        "0: skip; needs three times its bytes of disk)",
    )
    mm.add_argument(
        "--memmap-rounds", type=positive_int, default=1, help="processes per implementation"
    )
    mm.add_argument(
        "--memmap-calls", type=positive_int, default=8, help="calls per timed block"
    )
    mm.add_argument(
        "--memmap-blocks", type=positive_int, default=3, help="timed blocks per op and process"
    )
    mm.add_argument(
        "--memmap-json", type=Path, default=RESULTS / "memmap.json", help="memmap JSON file"
    )
    rl = parser.add_argument_group("rlinf part (fresh processes; files under --tmp-dir)")
    rl.add_argument(
        "--rlinf-rounds", type=positive_int, help="processes per implementation (default 3; "
        "--quick 2)"
    )
    rl.add_argument(
        "--rlinf-shape",
        type=positive_int,
        nargs=2,
        metavar=("T", "B"),
        help="steps and envs of each trajectory (default: 64 64; --quick 16 16)",
    )
    rl.add_argument(
        "--rlinf-window",
        type=positive_int,
        help="trajectories in the sampled window (default 100; --quick 20)",
    )
    rl.add_argument(
        "--rlinf-memory-sizes",
        type=positive_int,
        nargs="+",
        help="trajectories on disk of the memory rows (default: 100 1000 4000; --quick 50 200)",
    )
    rl.add_argument(
        "--rlinf-mirror",
        type=Path,
        help=f"RLinf's repository, a git directory or a checkout (default: ${rlinf.MIRROR_ENV} "
        f"or {rlinf.DEFAULT_MIRROR}); its rows are skipped when it is absent",
    )
    rl.add_argument(
        "--rlinf-json", type=Path, default=RESULTS / "rlinf.json", help="rlinf JSON file"
    )
    traj = parser.add_argument_group("trajectory part")
    traj.add_argument(
        "--traj-capacity",
        type=positive_int,
        help="time rows of the sample+next buffers (default 2000; --quick 400)",
    )
    traj.add_argument(
        "--traj-envs", type=positive_int, default=256, help="envs of the sample+next buffers"
    )
    traj.add_argument(
        "--index-shape",
        type=positive_int,
        nargs=2,
        default=[5000, 1024],
        metavar=("TIME", "ENVS"),
        help="end-flag ring of the index measurement (default: 5000 1024, BFM-Zero's)",
    )
    traj.add_argument("--seq-length", type=positive_int, default=8, help="rows per window")
    traj.add_argument(
        "--traj-rounds",
        type=positive_int,
        help="timed blocks per subject and thread count (default 9)",
    )
    traj.add_argument(
        "--traj-block",
        type=positive_float,
        help="seconds per timed block; calls per block are set from one call (default 0.25)",
    )
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


def headline_config_from(args: argparse.Namespace) -> HeadlineConfig:
    """Defaults depend on ``--quick``; explicit options win. Always the first thread count."""
    quick = bool(args.quick)
    return HeadlineConfig(
        capacity=args.capacity or (100_000 if quick else 1_000_000),
        batch=args.batch_size,
        rounds=args.rounds or (3 if quick else 5),
        calls=args.calls,
        blocks=args.blocks,
        mix_steps=args.mix_steps,
        online_capacity=args.online_capacity or (100 if quick else 500),
        online_envs=args.online_envs,
        seq_length=args.seq_length,
        threads=args.threads[0],
    )


def prioritized_config_from(args: argparse.Namespace) -> PerConfig:
    """Defaults depend on ``--quick``; explicit options win."""
    quick = bool(args.quick)
    return PerConfig(
        capacities=tuple(args.per_capacities or ((131_072,) if quick else (1_000_000, 131_072))),
        batches=tuple(args.per_batches or (256, 1024)),
        rounds=args.per_rounds or (2 if quick else 5),
        blocks=3 if quick else args.blocks,
        window_capacity=args.online_capacity or (100 if quick else 500),
        window_envs=args.online_envs,
        seq_length=args.seq_length,
        threads=args.threads[0],
    )


def memmap_config_from(args: argparse.Namespace) -> memmap.MemmapConfig:
    """Defaults depend on ``--quick``; explicit options win.

    Raises:
        SystemExit: ``--memmap-open-rows`` is negative.
    """
    quick = bool(args.quick)
    open_rows = args.memmap_open_rows
    if open_rows is None:
        open_rows = 100_000 if quick else 1_000_000
    if open_rows < 0:
        raise SystemExit(f"--memmap-open-rows: expected 0 or more, got {open_rows}")
    return memmap.MemmapConfig(
        sizes=tuple(args.memmap_rows or ((100_000,) if quick else (1_000_000, 6_000_000))),
        open_rows=open_rows or None,
        rounds=args.memmap_rounds,
        calls=args.memmap_calls,
        blocks=args.memmap_blocks,
        scratch=str(args.tmp_dir / "memmap"),
        threads=args.threads[0],
    )


def rlinf_config_from(args: argparse.Namespace) -> rlinf.RlinfConfig:
    """Defaults depend on ``--quick``; explicit options win."""
    quick = bool(args.quick)
    steps, envs = args.rlinf_shape or ((16, 16) if quick else (64, 64))
    mirror = args.rlinf_mirror or os.environ.get(rlinf.MIRROR_ENV) or rlinf.DEFAULT_MIRROR
    return rlinf.RlinfConfig(
        steps=steps,
        envs=envs,
        write_trajectories=8 if quick else 32,
        window=args.rlinf_window or (20 if quick else 100),
        blocks=3 if quick else 5,
        memory_sizes=tuple(args.rlinf_memory_sizes or ((50, 200) if quick else (100, 1000, 4000))),
        rounds=args.rlinf_rounds or (2 if quick else 3),
        scratch=str(args.tmp_dir / "rlinf"),
        mirror=str(mirror),
        threads=args.threads[0],
    )


def trajectory_config_from(args: argparse.Namespace) -> TrajectoryConfig:
    """Defaults depend on ``--quick``; explicit options win."""
    quick = bool(args.quick)
    return TrajectoryConfig(
        index_capacity=args.index_shape[0],
        index_envs=args.index_shape[1],
        capacity=args.traj_capacity or (400 if quick else 2000),
        envs=args.traj_envs,
        batch_size=args.batch_size,
        seq_length=args.seq_length,
        rounds=args.traj_rounds or (3 if quick else 9),
        block_seconds=args.traj_block or (0.05 if quick else 0.25),
        pool_batches=4 if quick else 8,
        threads=tuple(args.threads),
    )


def parts_from(args: argparse.Namespace) -> tuple[str, ...]:
    """The parts to run, in run order."""
    if args.only:
        return (args.only,)
    return tuple(p for p in PARTS if p != args.skip)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the tables, write the JSON; exit status 0."""
    args = parse_args(argv)
    cfg = config_from(args)
    traj = trajectory_config_from(args)
    parts = parts_from(args)
    if parts == ("persist-engine",):
        sizes = tuple(args.engine_rows or ((50_000,) if args.quick else (200_000, 1_000_000)))
        engine = persist_engine.run(sizes, args.engine_rounds, args.tmp_dir)
        print(persist_engine.render(engine), flush=True)
        args.engine_json.parent.mkdir(parents=True, exist_ok=True)
        args.engine_json.write_text(json.dumps(engine.to_json(), indent=1) + "\n")
        print(f"wrote {args.engine_json}", flush=True)
        return 0
    if parts == ("prioritized",):
        per_results = prioritized_headline.run(prioritized_config_from(args))
        print(prioritized_headline.render(per_results), flush=True)
        write_with_machine(args.per_json, per_results.to_json())
        print(f"wrote {args.per_json}", flush=True)
        return 0
    if parts == ("memmap",):
        mm_results = memmap.run(memmap_config_from(args))
        print(memmap.render(mm_results), flush=True)
        write_with_machine(args.memmap_json, mm_results.to_json())
        print(f"wrote {args.memmap_json}", flush=True)
        return 0
    if parts == ("rlinf",):
        rl_results = rlinf.run(rlinf_config_from(args))
        print(rlinf.render(rl_results), flush=True)
        write_with_machine(args.rlinf_json, rl_results.to_json())
        print(f"wrote {args.rlinf_json}", flush=True)
        return 0
    # The headline first, before this process allocates anything (its children start fresh).
    if "headline" in parts:
        measured = headline.run(headline_config_from(args))
        print(headline_report.render(measured), flush=True)
        headline_report.write_json(args.headline_json, measured)
        print(f"wrote {args.headline_json}", flush=True)
        if parts == ("headline",):
            return 0
        print(flush=True)
    started = time.perf_counter()
    results = Results()
    # Then the in-process diagnostics.
    if "transition" in parts:
        run(cfg, results)
    if "trajectory" in parts:
        trajectory.run(traj, results)
    results.seconds = time.perf_counter() - started
    shown = traj if "trajectory" in parts else None
    transition = "transition" in parts
    print(render(cfg, results, shown, transition=transition), flush=True)
    write_json(args.json, cfg, results, shown, transition=transition)
    print(f"wrote {args.json}")
    return 0

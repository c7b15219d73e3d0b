"""The ``bufcore`` command: ``bufcore demo`` runs the demo (fill, sample, save, reload)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from bufcore.checks import check_int
from bufcore.runs.demo import run_demo


def _count(text: str) -> int:
    """An argparse type: an int >= 1, refused as a usage error naming the option otherwise."""
    try:
        return check_int(int(text), "count", minimum=1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bufcore`` console script."""
    parser = argparse.ArgumentParser(prog="bufcore", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="fill, sample, save and reload a DictBuffer")
    demo.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to save the checkpoint (default: a temporary directory)",
    )
    demo.add_argument("--capacity", type=_count, default=1000, help="rows (default 1000)")
    demo.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        run_demo(args.dir, capacity=args.capacity, seed=args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

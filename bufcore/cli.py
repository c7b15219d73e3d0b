"""The ``bufcore`` command: ``bufcore demo`` runs the demo (fill, sample, save, reload);
``bufcore inspect PATH`` summarizes a checkpoint, run or BFM-Zero work directory."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from bufcore.checks import check_int
from bufcore.runs.demo import run_demo
from bufcore.runs.inspect import inspect_path, render, to_json

EXAMPLES = """examples:
  bufcore demo --dir /tmp/demo        fill, sample, save and reload a buffer
  bufcore inspect runs/exp1           summarize a run (or a checkpoint) without loading it
  bufcore inspect --help              what inspect reads and prints
"""
INSPECT_DESCRIPTION = """Summarize PATH without loading it (only metadata is read, never the rows):
  - a buffer checkpoint directory, bufcore's or BFM-Zero's: kind, capacity, length, cursor,
    full, a spec table with sizes, and the priorities of an expert buffer;
  - a run directory (metrics.jsonl, checkpoint/run.json, checkpoint/buffers/<name>/) or its
    checkpoint/ directory: the log's size and last step, the run's step, curriculum rounds
    and TD-EMA state, then every buffer;
  - a BFM-Zero work directory (checkpoint/buffers/<name>/; other files are ignored).
"""
INSPECT_EXAMPLES = """examples:
  bufcore inspect runs/exp1                          a run: log, run.json, every buffer
  bufcore inspect runs/exp1/checkpoint/buffers/train one buffer checkpoint
  bufcore inspect workdir --verify                   a BFM-Zero work directory; hash payloads
  bufcore inspect runs/exp1 --json | jq .buffers     machine-readable

exit status: 0 on success, 1 when PATH is missing, damaged or not one of these directories
(one line on stderr naming the file), 2 for a usage error.
"""


def _count(text: str) -> int:
    """An argparse type: an int >= 1, refused as a usage error naming the option otherwise."""
    try:
        return check_int(int(text), "count", minimum=1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bufcore`` console script."""
    parser = argparse.ArgumentParser(
        prog="bufcore",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    _add_inspect(commands)
    args = parser.parse_args(argv)
    if args.command == "demo":
        run_demo(args.dir, capacity=args.capacity, seed=args.seed)
    elif args.command == "inspect":
        return _inspect(args)
    return 0


def _add_inspect(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inspect = commands.add_parser(
        "inspect",
        help="summarize a checkpoint, run or BFM-Zero work directory without loading it",
        description=INSPECT_DESCRIPTION,
        epilog=INSPECT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inspect.add_argument("path", type=Path, metavar="PATH", help="the directory to summarize")
    inspect.add_argument(
        "--verify",
        action="store_true",
        help="also check every buffer.hdf5 against its manifest's sha256 (reads it whole)",
    )
    inspect.add_argument("--json", action="store_true", help="print JSON instead of text")


def _inspect(args: argparse.Namespace) -> int:
    """Print the summary of ``args.path``; bad input is one line on stderr and exit status 1."""
    try:
        inspection = inspect_path(args.path, verify=args.verify)
    except (OSError, ValueError) as err:  # bufcore's errors are ValueErrors
        message = str(err).replace("\n", "\\n").replace("\r", "\\r")
        print(f"bufcore inspect: error: {message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(to_json(inspection), indent=2))
    else:
        print("\n".join(render(inspection)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

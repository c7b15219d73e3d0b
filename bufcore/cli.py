"""The ``bufcore`` command: ``bufcore demo`` runs the demo training run; ``bufcore inspect
PATH`` summarizes a checkpoint, run or BFM-Zero work directory without loading it; ``bufcore
dashboard RUN`` starts the dashboard: this process becomes ``python -m app`` (``os.execve``; the
library never imports the dashboard, which sits above it).

Every command prints one clear line and exits non-zero on bad input (1 for a file or value
problem, 2 for a usage error), never a traceback; ``--help`` shows an example. Ctrl-C prints
``interrupted`` and exits 130, also in the first second, while torch is still being imported
(the library is imported inside :func:`main`, after a handler that ends the process at once is
in place: nothing has been written then); a reader that closes stdout early (``| head``) ends
the command quietly with 141, as a process killed by SIGPIPE.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

# Light (no torch): the library itself is imported by build_parser and the commands.
from bufcore import KeyPathError

if TYPE_CHECKING:
    from bufcore.runs.demo import DemoOptions, DemoResult

# What bufcore raises for bad input (CorruptFileError and StateError are ValueErrors; a
# MemoryError names the allocation a size asked for): one line, exit status 1. Anything else
# is a bug and keeps its traceback.
INPUT_ERRORS = (OSError, ValueError, KeyPathError, MemoryError)

DEMO_EXAMPLE = """\
examples:
  bufcore demo --out runs/demo                 # about 5 s on 2 cores
  bufcore demo --out runs/demo --live          # paced to last ~5 minutes, for a dashboard
  bufcore demo --out runs/demo --live --dashboard 8501   # what make demo runs
  bufcore demo --out runs/try --seed 3 --mode bin --steps 3000
  bufcore demo --out runs/per --prioritized --live --dashboard   # TD-prioritized replay
  bufcore demo --resume runs/demo              # continue a stopped run from its checkpoint
"""


INSPECT_DESCRIPTION = """Summarize PATH without loading it (only metadata is read, never the rows):
  - a buffer checkpoint directory, bufcore's or BFM-Zero's: kind, capacity, length, cursor,
    full, a spec table with sizes, and the priorities of an expert buffer; for a prioritized
    sampler its options, max priority, draws, beta, and the quantiles of its saved priorities
    and importance weights (the one per-row leaf read, 8 bytes a row);
  - a run directory (metrics.jsonl, checkpoint/run.json, checkpoint/buffers/<name>/) or its
    checkpoint/ directory: the log's records, last step and the lines it skipped, the run's
    step, curriculum rounds and TD-EMA state, then every buffer;
  - a BFM-Zero work directory (checkpoint/buffers/<name>/; other files are ignored);
  - an RLinf buffer directory (metadata.json + trajectory_index.json): trajectories, samples,
    format, shapes, what RLinf's default window and cache would hold, absent and orphan files.
"""
INSPECT_EXAMPLES = """examples:
  bufcore inspect runs/exp1                          a run: log, run.json, every buffer
  bufcore inspect runs/exp1/checkpoint/buffers/train one buffer checkpoint
  bufcore inspect workdir --verify                   a BFM-Zero work directory; hash payloads
  bufcore inspect runs/exp1 --json | jq .buffers     machine-readable
  bufcore inspect replay_buffer/rank_0               an RLinf buffer directory

exit status: 0 on success, 1 when PATH is missing, damaged or not one of these directories
(one line on stderr naming the file), 2 for a usage error.
"""
TOP_EXAMPLES = """examples:
  bufcore demo --out runs/demo        run the demo training run
  bufcore inspect runs/demo           summarize a run (or a checkpoint) without loading it
  bufcore inspect --help              what inspect reads and prints
  bufcore dashboard runs/demo         look inside it in the browser
"""
DASHBOARD_EXAMPLES = """examples:
  bufcore dashboard runs/demo                   one run, at http://127.0.0.1:8501/
  bufcore dashboard --root runs --port 8600     every run under runs/
"""
DASHBOARD_PORT = 8501
INSTALL_DASHBOARD = "install the dashboard extra: pip install -e '.[dashboard]'"


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (argparse prints the whole usage block before them)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _count(text: str) -> int:
    """An argparse type: an int >= 1, refused as a usage error naming the option otherwise."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected an int >= 1, got {text!r}")
    return count


def _directory(text: str) -> Path:
    """An argparse type: a non-empty path (``""`` would silently mean the working directory,
    which ``save("")`` refuses too)."""
    if not text:
        raise argparse.ArgumentTypeError(
            "expected a directory path, got an empty string (write . for the working directory)"
        )
    return Path(text)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _add_demo(commands: argparse._SubParsersAction[_Parser]) -> None:
    from bufcore.inspect import PRIORITY_MODES
    from bufcore.runs.demo import DemoOptions

    defaults = DemoOptions()
    demo = commands.add_parser(
        "demo",
        help="run the demo training run (curriculum learning on synthetic motions)",
        description="Run a small curriculum-learning loop in the shape of BFM-Zero's, built only "
        "from bufcore: expert motions, parallel tracking envs writing a [time, env] buffer, a z "
        "buffer, TD-EMA weighted value learning and EMD prioritisation. Writes metrics.jsonl, "
        "motions/, checkpoint/ and checkpoints/ (the earlier checkpoints) into --out.",
        epilog=DEMO_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--out", type=_directory, default=Path("runs/demo"),
                      help="run directory (default runs/demo)")
    demo.add_argument("--seed", type=int, default=None, help="default 0")
    demo.add_argument("--steps", type=_count, default=None,
                      help=f"env steps (default {defaults.steps})")
    demo.add_argument("--motions", type=_count, default=None,
                      help=f"expert motions (default {defaults.motions})")
    demo.add_argument("--envs", type=_count, default=None,
                      help=f"parallel envs (default {defaults.envs})")
    demo.add_argument("--capacity", type=_count, default=None,
                      help=f"time rows of the online buffer (default {defaults.capacity})")
    demo.add_argument("--eval-every", type=_count, default=None,
                      help=f"env steps per evaluation round (default {defaults.eval_every})")
    demo.add_argument("--prioritized", action="store_true", default=None,
                      help="draw the online buffer's windows by their TD errors (prioritized "
                      "replay, max over a window's rows) and log a 'replay' record every 25 "
                      "env steps")
    demo.add_argument("--live", type=_number, nargs="?", const=300.0, default=None,
                      metavar="SECONDS",
                      help="pace the run to last SECONDS (default 300) so a dashboard can "
                      "watch it grow")
    curriculum = demo.add_argument_group("curriculum (BFM-Zero's prioritization options)")
    curriculum.add_argument("--mode", choices=PRIORITY_MODES, default=None,
                            help=f"EMD -> priority transform (default {defaults.mode})")
    curriculum.add_argument("--min-val", type=_number, default=None,
                            help=f"lower EMD clamp (default {defaults.min_val})")
    curriculum.add_argument("--max-val", type=_number, default=None,
                            help=f"upper EMD clamp (default {defaults.max_val})")
    curriculum.add_argument("--scale", type=_number, default=None,
                            help=f"multiplier after clamping (default {defaults.scale})")
    demo.add_argument("--nproc", type=_count, default=None, metavar="N",
                      help="run data-parallel on N CPU processes (spawned, gloo on the loopback "
                      "interface): envs split over ranks, gradients averaged, curriculum "
                      "gathered, TD-EMA all-reduced; every rank's buffers are checkpointed "
                      "under checkpoint/buffers/<name>/rank_<r>/ (default 1: one process)")
    demo.add_argument("--resume", type=Path, default=None, metavar="RUN",
                      help="continue the demo run RUN from its latest checkpoint to its last "
                      "step (a run killed or stopped after a checkpoint), on as many ranks as "
                      "saved it; options and --nproc given with it must equal the run's, and "
                      "--out is not used")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.add_argument("--dashboard", type=_count, nargs="?", const=DASHBOARD_PORT, default=None,
                      metavar="PORT",
                      help=f"also serve the dashboard on the run, on 127.0.0.1:PORT (default "
                      f"{DASHBOARD_PORT}), from its first checkpoint on; stopping either stops "
                      "both. A previous demo run in --out is cleared first, or moved aside to "
                      "OUT.<date>-<time> when it holds checkpoints saved from the dashboard "
                      "(what make demo runs)")


def demo_options(args: argparse.Namespace) -> DemoOptions:
    """The run's options from ``bufcore demo``'s arguments."""
    from bufcore.runs.demo import DemoOptions

    return DemoOptions(**given_options(args))


# DemoOptions field -> bufcore demo's argument holding it (None there when not given).
_DEMO_FLAGS = {
    "seed": "seed", "steps": "steps", "motions": "motions", "envs": "envs",
    "capacity": "capacity", "eval_every": "eval_every", "mode": "mode", "min_val": "min_val",
    "max_val": "max_val", "scale": "scale", "live_seconds": "live", "prioritized": "prioritized",
}


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`DemoOptions` fields given on ``bufcore demo``'s command line (a resumed run
    checks them against its saved options; a new run takes the defaults for the rest)."""
    return {field: getattr(args, flag) for field, flag in _DEMO_FLAGS.items()
            if getattr(args, flag) is not None}


def demo_arguments(out: Path, options: DemoOptions) -> list[str]:
    """``bufcore demo`` arguments that run ``options`` into ``out`` quietly (the run that
    ``--dashboard`` starts as a child)."""
    flags = {"--seed": options.seed, "--steps": options.steps, "--motions": options.motions,
             "--envs": options.envs, "--capacity": options.capacity,
             "--eval-every": options.eval_every, "--mode": options.mode,
             "--min-val": options.min_val, "--max-val": options.max_val,
             "--scale": options.scale}
    if options.live_seconds is not None:
        flags["--live"] = options.live_seconds
    # str() of a float reads back as the same float.
    return ["demo", "--out", str(out), "--quiet",
            *(part for flag, value in flags.items() for part in (flag, str(value))),
            *(["--prioritized"] if options.prioritized else [])]


def _demo(args: argparse.Namespace) -> int:
    from bufcore.runs.demo import run_demo
    from bufcore.runs.demo.progress import Progress

    if args.resume is not None:
        return _resume_demo(args)
    options = demo_options(args)
    if args.nproc is not None and args.nproc > 1:
        return _demo_ranks(args, options)
    if args.dashboard is not None:
        return _demo_with_dashboard(args.out, options, args.dashboard)
    started = time.monotonic()
    progress = None if args.quiet else Progress(options.steps)
    try:
        result = run_demo(args.out, options, progress=progress)
    finally:
        # An error or Ctrl-C must not land on the progress bar's line.
        if progress is not None:
            progress.close()
    _report(result, options, time.monotonic() - started)
    sys.stdout.flush()  # a closed stdout fails here, where main reports it, not at exit
    return 0


def _demo_ranks(args: argparse.Namespace, options: DemoOptions) -> int:
    """``--nproc N``: the run on N spawned ranks (no progress bar: the ranks report at the end)."""
    from bufcore.runs.demo.ranks import run_demo_ranks

    if args.dashboard is not None:
        raise ValueError("--nproc: not with --dashboard (run it, then `bufcore dashboard OUT`)")
    started = time.monotonic()
    curve = run_demo_ranks(args.out, options, nproc=args.nproc)
    print(f"demo run written to {args.out} on {args.nproc} ranks ({options.steps} env steps x "
          f"{options.envs} envs in all, {len(curve)} evaluation rounds, "
          f"{time.monotonic() - started:.1f} s)")
    print(f"mean EMD per round: {' '.join(f'{v:.3f}' for v in curve)}")
    print(f"next: bufcore inspect {args.out}")
    sys.stdout.flush()
    return 0


def _resume_demo(args: argparse.Namespace) -> int:
    """``bufcore demo --resume RUN``: the run continued to its end, reported as a new one."""
    from bufcore.runs.demo.progress import Progress
    from bufcore.runs.demo.resume import resume_demo

    if args.dashboard is not None:
        raise ValueError("--dashboard: not with --resume; serve the run with bufcore dashboard "
                         f"{args.resume} beside it")
    started = time.monotonic()
    progress = None if args.quiet else Progress(1)  # resume_demo sets the run's total
    try:
        result = resume_demo(args.resume, given=given_options(args), nproc=args.nproc,
                             progress=progress)
    finally:
        if progress is not None:
            progress.close()
    if result.options is not None:
        _report(result, result.options, time.monotonic() - started)
    sys.stdout.flush()
    return 0


def _demo_with_dashboard(out: Path, options: DemoOptions, port: int) -> int:
    """The run as a child process and the dashboard on it (:func:`serve`)."""
    from bufcore.runs.demo.serve import serve

    repo = repository_root()
    problem = dashboard_problem(repo)
    if problem is not None:
        raise OSError(problem)
    cwd = Path.cwd()
    run_dir = out if out.is_absolute() else cwd / out
    # The parent is a root too: earlier demo runs moved aside there stay comparable.
    dashboard = dashboard_command([run_dir], [run_dir.parent], port, python=sys.executable,
                                  cwd=cwd)
    run = [sys.executable, "-m", "bufcore.cli", *demo_arguments(run_dir, options)]
    sys.stdout.flush()
    return serve(run_dir, run, dashboard, env=_launch_environment(repo), cwd=repo)


def _report(result: DemoResult, options: DemoOptions, seconds: float) -> None:
    curve = result.mean_emd
    print(
        f"demo run written to {result.run_dir} ({options.steps} env steps x {options.envs} "
        f"envs, {len(curve)} evaluation rounds, {seconds:.1f} s)"
    )
    change = (curve[-1] - curve[0]) / curve[0] * 100 if curve[0] else 0.0
    print(f"mean EMD per round: {' '.join(f'{v:.3f}' for v in curve)} ({change:+.0f}%)")
    hardest = sorted(result.last_emd, key=lambda m: -result.last_emd[m])[:3]
    shown = ", ".join(
        f"{m} (EMD {result.last_emd[m]:.3f}, p {result.last_priority[m]:.3f})" for m in hardest
    )
    print(f"hardest motions, now sampled most: {shown}")
    print(f"next: bufcore inspect {result.run_dir}")


def _add_inspect(commands: argparse._SubParsersAction[_Parser]) -> None:
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
    inspect.add_argument("--json", action="store_true",
                         help="print strict JSON instead of text (NaN and infinities as null)")


def _inspect(args: argparse.Namespace) -> int:
    from bufcore.inspect import inspect_path, render, to_json

    inspection = inspect_path(args.path, verify=args.verify)
    if args.json:
        # Strict JSON: to_json gives non-finite floats as null; a NaN left would be a bug.
        print(json.dumps(to_json(inspection), indent=2, allow_nan=False))
    else:
        print("\n".join(render(inspection)))
    # A reader that closed the pipe is found here, inside main's handlers, not at exit.
    sys.stdout.flush()
    return 0


def _add_dashboard(commands: argparse._SubParsersAction[_Parser]) -> None:
    dashboard = commands.add_parser(
        "dashboard",
        help="look inside runs and buffers in the browser (the dashboard extra)",
        description="Start the dashboard on 127.0.0.1 and print its URL; Ctrl-C stops it. Needs "
        "a source checkout (app/ beside bufcore/) with the dashboard extra installed.",
        epilog=DASHBOARD_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    dashboard.add_argument("runs", nargs="*", type=Path, metavar="RUN_DIR",
                           help="run directories or checkpoints to show first")
    dashboard.add_argument("--port", type=_count, default=DASHBOARD_PORT,
                           help=f"port on 127.0.0.1 (default {DASHBOARD_PORT})")
    dashboard.add_argument("--root", action="append", type=Path, default=[], metavar="DIR",
                           help="list the runs under DIR; typed paths must lie under a root "
                           "(repeatable; default runs/ under the working directory)")


def repository_root() -> Path:
    """The directory holding the ``bufcore`` package (and, in a source checkout, ``app/``)."""
    return Path(__file__).resolve().parent.parent


def dashboard_command(
    runs: Sequence[Path], roots: Sequence[Path], port: int, *, python: str, cwd: Path
) -> list[str]:
    """The ``python -m app`` command line for ``bufcore dashboard``.

    Paths are made absolute against ``cwd`` (the launcher runs in the repository root). With
    no run and no root, the root is what the user's working directory implies: its ``runs/``
    when that exists, else itself.
    """
    def absolute(path: Path) -> str:
        return str(path if path.is_absolute() else cwd / path)

    if not runs and not roots:
        roots = [cwd / "runs" if (cwd / "runs").is_dir() else cwd]
    command = [python, "-m", "app", *map(absolute, runs), "--port", str(port)]
    for root in roots:
        command += ["--root", absolute(root)]
    return command


def dashboard_problem(repo: Path) -> str | None:
    """Why the dashboard cannot start from ``repo``, or None when it can."""
    if not (repo / "app" / "main.py").is_file():
        return (f"the dashboard's source (app/) is not beside bufcore/ in {repo}; run it from "
                f"a source checkout and {INSTALL_DASHBOARD}")
    if importlib.util.find_spec("streamlit") is None:
        return f"streamlit is not installed; {INSTALL_DASHBOARD}"
    return None


def _dashboard(args: argparse.Namespace) -> int:
    repo = repository_root()
    problem = dashboard_problem(repo)
    if problem is not None:
        raise OSError(problem)
    for path in (*args.runs, *args.root):
        if not path.is_dir():
            raise NotADirectoryError(f"{path}: no such directory")
    command = dashboard_command(args.runs, args.root, args.port, python=sys.executable,
                                cwd=Path.cwd())
    sys.stdout.flush()
    sys.stderr.flush()
    replace_process(command, repo, _launch_environment(repo))
    return 0  # not reached: the launcher took over this process


def _launch_environment(repo: Path) -> dict[str, str]:
    """This environment with ``repo`` first on ``PYTHONPATH`` (the launcher imports ``app``)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(repo), path)))}


def replace_process(command: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Become ``command``, run in ``cwd`` with ``env`` (``os.execve``; returns only in tests).

    ``python -m app`` is the dashboard's one supervisor (it starts Streamlit, turns Ctrl-C and
    SIGTERM into a clean stop and exit 130): this process becomes it rather than waiting on it.
    """
    os.chdir(cwd)
    os.execve(command[0], command, env)


def build_parser() -> argparse.ArgumentParser:
    """The ``bufcore`` parser (imports torch and the library: the slow part of start-up)."""
    parser = _Parser(
        prog="bufcore",
        description="Replay buffers for PyTorch RL that you can look inside.",
        epilog=TOP_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_demo(commands)
    _add_inspect(commands)
    _add_dashboard(commands)
    return parser


COMMANDS = ("demo", "inspect", "dashboard")


@contextlib.contextmanager
def _interrupt_ends_at_once(name: str) -> Iterator[None]:
    """Inside the block, Ctrl-C prints ``NAME: interrupted`` and ends the process with 130 at
    once, for the imports of torch and the library: a ``KeyboardInterrupt`` raised inside them
    surfaces as whatever the half-run import makes of it (a traceback, even a RecursionError),
    and nothing is written yet that would need cleaning up. A SIGINT that is ignored (a
    background job) or handled by an embedding program is left as it is."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        os.write(2, f"{name}: interrupted\n".encode())
        os._exit(130)

    signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bufcore`` console script."""
    words = sys.argv[1:] if argv is None else list(argv)
    name = f"bufcore {words[0]}" if words and words[0] in COMMANDS else "bufcore"
    with _interrupt_ends_at_once(name):
        parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return _demo(args)
        if args.command == "inspect":
            return _inspect(args)
        if args.command == "dashboard":
            return _dashboard(args)
    except KeyboardInterrupt:
        print(f"bufcore {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``bufcore inspect RUN | head``): not an input error, and
        # nothing more can be printed; closing stdout keeps the exit-time flush from failing.
        with contextlib.suppress(BrokenPipeError):
            sys.stdout.close()
        return 141  # what a shell reports for a program ended by SIGPIPE
    except INPUT_ERRORS as err:
        # One line, whatever a file name or message holds.
        message = str(err).replace("\n", "\\n").replace("\r", "\\r")
        print(f"bufcore {args.command}: error: {message}", file=sys.stderr)
        return 1
    raise AssertionError(f"unhandled command {args.command}")  # argparse allows no other


if __name__ == "__main__":
    raise SystemExit(main())

"""``bufcore demo --resume RUN``: continue a demo run from its latest checkpoint to its end.

The run's parts are built as a new run builds them, around the buffers of the checkpoint
(:func:`bufcore.resume`), then every piece takes its saved state back
(:mod:`bufcore.runs.demo.state`), so from the checkpoint's step on the run does what the
uninterrupted run did: the same records (except their ``time``) and the same checkpoints.

The log: a run killed after its checkpoint at step ``S`` logged past it. Those records belong
to steps the resumed run takes again, so ``metrics.jsonl`` is first cut back, in one rename, to
the records up to the checkpoint (every record of steps ``<= S``: those of step ``S`` were
written before the checkpoint was saved, and its ``checkpoint`` record, written after, is
logged again if the kill came before it). A reader tailing the log sees a new file and reads it
from the start, so the dashboard shows one continuous run, never the steps that were lost.
A kept checkpoint the killed run left at ``checkpoints/step-S`` is removed (the next save keeps
it again).

A run saved by ``N > 1`` ranks (``--nproc N``) is continued on ``N`` ranks spawned as
``--nproc`` spawns them (:func:`~bufcore.runs.demo.ranks.spawn_ranks`): the world size is the
checkpoint's, and each rank resumes its own part (:func:`resume_rank`: its buffers, loop state,
and the global curriculum and TD-EMA). Rank 0 alone cuts the log, appends to it and removes
the kept checkpoint. This process checks everything first (options, every rank's loop state,
the log), so a run that cannot be resumed is refused before any rank starts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.buffers.online import TrajectoryDictBufferMultiDim
from bufcore.buffers.zbuffer import ZBuffer
from bufcore.errors import CorruptCheckpointError, MissingStateError, StateError
from bufcore.persist.jsonl import appender_holds, keep_prefix, read_lines
from bufcore.persist.run_checkpoint import (
    BUFFERS,
    METRICS_FILE,
    RUN_STATE,
    discard_kept_checkpoint,
)
from bufcore.runs.demo.loop import (
    GENERATORS,
    Buffers,
    DemoResult,
    _one_thread,
    build_loop,
    demo_result,
    drive,
)
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.demo.progress import Progress
from bufcore.runs.demo.ranks import RESUME_JOB, RankPlan, spawn_ranks
from bufcore.runs.demo.rundir import WRITER, check_memory, check_run_dir
from bufcore.runs.demo.state import check_complete, restore
from bufcore.runs.resume import ResumedRun, resume
from bufcore.runs.runlog import RunLogger


def saved_options(resumed: ResumedRun) -> DemoOptions:
    """The options a demo checkpoint was saved with.

    Raises:
        ValueError: the checkpoint is not a demo run's (its ``run.json`` lacks the demo's
            ``writer``).
        CorruptCheckpointError: the saved options are not valid demo options.
    """
    if resumed.state.get("writer") != WRITER:
        raise ValueError(f"run_dir: {resumed.run_dir} is not a demo run (its {RUN_STATE} was "
                         f"not written by {WRITER!r}); only demo runs resume with bufcore demo")
    try:
        return DemoOptions(**resumed.options)
    except (TypeError, ValueError) as err:
        raise CorruptCheckpointError(resumed.checkpoint / RUN_STATE,
                                     f"options: not valid demo options ({err})") from None


def check_same_options(saved: DemoOptions, given: Mapping[str, Any]) -> None:
    """Refuse options given with ``--resume`` that differ from the run's.

    Raises:
        ValueError: names each option that differs, with both values.
    """
    differ = [f"{name} (saved {getattr(saved, name)!r}, given {value!r})"
              for name, value in given.items() if getattr(saved, name) != value]
    if differ:
        raise ValueError(
            f"options: {', '.join(differ)} differ from the run's; a resumed run keeps the "
            "options it started with (leave them out, or start a new run)"
        )


def resume_demo(
    run_dir: str | Path,
    *,
    given: Mapping[str, Any] | None = None,
    nproc: int | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> DemoResult:
    """Continue the demo run at ``run_dir`` from its latest checkpoint to its last step.

    A run saved by ``N > 1`` ranks continues on ``N`` spawned ranks (the module docstring);
    ``progress``, ``clock`` and ``sleep`` serve one process only then (the ranks keep wall
    time).

    A run whose checkpoint is its last step's and whose log ends with its ``end`` record is
    finished: nothing is written and its result is returned.

    Args:
        run_dir: The demo run directory.
        given: Options (by :class:`DemoOptions` field name) the caller asked for; each must
            equal the saved one.
        nproc: The number of processes the caller asked for (``--nproc``); None for the
            checkpoint's world size, which it must equal.
        progress: Shows progress (its total is set to the run's steps); none by default.
        clock: Wall-clock time for the log's ``time`` field (and ``--live`` pacing).
        sleep: How ``--live`` waits.

    Raises:
        NotARunError, NoCheckpointError, NewerFormatError, MissingStateError: as
            :func:`bufcore.resume` (an older demo checkpoint lacks its loop state; an N-rank
            one must hold every rank's).
        ValueError: ``given`` differs from the saved options (names them), ``nproc`` from the
            checkpoint's world size, the run is not a demo run, another process is still
            writing its log, or the log holds no record of the checkpoint's step (it is
            behind the checkpoint).
        FileExistsError: the directory holds what a demo run does not write.
        CorruptCheckpointError: a checkpoint file is damaged.
        RuntimeError: a spawned rank failed (its output is above).
    """
    run = Path(run_dir)
    resumed = resume(run)
    options = saved_options(resumed)
    check_same_options(options, given or {})
    world = resumed.world_size
    if nproc is not None and nproc != world:
        raise ValueError(
            f"nproc: the run was saved by {world} rank{'s' * (world != 1)}, given {nproc}; a "
            "resumed run keeps its world size (each rank's envs and loop state are its own): "
            "leave --nproc out, or start a new run"
        )
    check_complete(resumed, prioritized=options.prioritized, generators=GENERATORS)
    check_run_dir(run)
    check_memory(options)
    log = run / METRICS_FILE
    if appender_holds(log):
        raise ValueError(f"run_dir: {run} is still being written ({METRICS_FILE} is open in a "
                         "running demo); stop it before resuming")
    kept = _kept_log(log, resumed.step)
    if world > 1:
        if not (resumed.step == options.steps and "end" in kept[1]):
            spawn_ranks(run, world, RESUME_JOB)
            resumed = resume(run)  # the finished run's checkpoint
        if resumed.curriculum is None:  # check_complete found it: only a run.json replaced since
            raise MissingStateError(["run.json's curriculum"],
                                    f"run_dir: {run}'s checkpoint holds no curriculum")
        return demo_result(run, options, resumed.curriculum)
    if progress is not None:
        progress.total = options.steps
    result = _continue(run, resumed, options, kept, progress, clock, sleep)
    if progress is not None:
        progress.close()
    return result


def resume_rank(run: Path) -> None:
    """Continue this process's rank of a data-parallel demo from the run's checkpoint (the
    group is up, and the launcher checked the run: :func:`resume_demo`)."""
    resumed = resume(run, rank=RankPlan.current().rank)
    options = saved_options(resumed)
    check_complete(resumed, prioritized=options.prioritized, generators=GENERATORS)
    kept = _kept_log(run / METRICS_FILE, resumed.step) if resumed.rank == 0 else (0, set())
    _continue(run, resumed, options, kept, None, time.time, time.sleep)


def _continue(
    run: Path,
    resumed: ResumedRun,
    options: DemoOptions,
    kept: tuple[int, set[str]],
    progress: Progress | None,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> DemoResult:
    """Build the loop around the checkpoint, give every piece its state and drive it from the
    checkpoint's step on. The log (cut back first at ``kept``: :func:`_kept_log`) and the kept
    checkpoints are rank 0's business; other ranks pass ``(0, set())``."""
    writes = resumed.rank == 0
    log = run / METRICS_FILE
    keep, logged = kept
    with _one_thread():
        try:
            loop = build_loop(run, options, _buffers(resumed))
            restore(loop, resumed)
        except StateError as err:
            raise CorruptCheckpointError(resumed.checkpoint, str(err)) from err
        if resumed.step == options.steps and "end" in logged:
            return loop.result()
        if writes:
            if keep < log.stat().st_size:
                keep_prefix(log, keep)
            discard_kept_checkpoint(run, resumed.step)
        started = clock() - (options.live_seconds or 0.0) * resumed.step / options.steps
        with RunLogger(run, clock=clock, fresh=False) as logger:
            if writes and "checkpoint" not in logged:
                logger.log("checkpoint", resumed.step, loop.checkpoint_record())
            drive(loop, resumed.step + 1, logger, progress, started=started, clock=clock,
                  sleep=sleep)
    return loop.result()


def _buffers(resumed: ResumedRun) -> Buffers:
    """The demo's three buffers from the checkpoint, each of the class the demo makes.

    Raises:
        CorruptCheckpointError: a buffer is of another class.
    """
    expert, online, zbuffer = (resumed.buffers[name] for name in ("expert", "train", "z"))
    if not (isinstance(expert, TrajectoryDictBuffer)
            and isinstance(online, TrajectoryDictBufferMultiDim)
            and isinstance(zbuffer, ZBuffer)):
        raise CorruptCheckpointError(
            resumed.checkpoint / BUFFERS, "expected the demo's buffers (expert: "
            "TrajectoryDictBuffer, train: TrajectoryDictBufferMultiDim, z: ZBuffer), got "
            f"{type(expert).__name__}, {type(online).__name__}, {type(zbuffer).__name__}")
    return Buffers(expert, online, zbuffer)


def _kept_log(log: Path, step: int) -> tuple[int, set[str]]:
    """Where to cut ``log`` (the end of its last record of a step ``<= step``) and the kinds of
    the records it keeps at ``step``.

    Raises:
        ValueError: no record of ``step`` is in the log (it is behind the checkpoint).
    """
    keep, offset = 0, 0
    kinds: set[str] = set()
    while True:
        tail = read_lines(log, offset)
        for line in tail.lines:
            record = _record(line.data)
            if record is not None and record[0] > step:
                return _checked(keep, kinds, log, step)
            if record is not None and record[0] == step:
                kinds.add(record[1])
            keep = line.end
        if not tail.lines:
            return _checked(keep, kinds, log, step)
        offset = tail.end


def _checked(keep: int, kinds: set[str], log: Path, step: int) -> tuple[int, set[str]]:
    if not kinds:
        raise ValueError(f"{log}: holds no record of step {step}, the checkpoint's: the log is "
                         "behind the checkpoint, so the resumed run's log would have a gap")
    return keep, kinds


def _record(data: bytes | None) -> tuple[int, str] | None:
    """A line's ``(step, kind)``, or None for a line that is not a record (left as it is)."""
    try:
        record = json.loads(data) if data is not None else None
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    step, kind = record.get("step"), record.get("kind")
    if isinstance(step, int) and not isinstance(step, bool) and isinstance(kind, str):
        return step, kind
    return None

"""Resume a run: everything a training loop needs, read back from its latest run checkpoint.

A loop that saves its run checkpoint with :func:`~bufcore.persist.run_checkpoint.
save_run_checkpoint` (buffers, ``run.json`` holding ``step`` and, where the run has them,
``options``, ``curriculum`` and ``td_ema``) and its own state as ``loop=`` (its generators
through :func:`generators_state`, plus whatever else it needs: environments, optimizers,
counters) can be continued with::

    resumed = bufcore.resume("runs/demo")
    online = resumed.buffers["train"]           # rows, ring position, sample stream, sampler
    policy_generator = resumed.generators["policy"]
    for step in range(resumed.step + 1, total + 1): ...

Each piece comes back through its own ``from_state_dict`` / ``load`` (DESIGN §1, the one state
idiom), so what it holds is exactly what was saved: a buffer continues its saved sample stream,
a generator its saved state. Data-parallel, each rank resumes its own part (``rank=``): its
buffers (``buffers/<name>/rank_<r>/`` of a checkpoint saved by ``N > 1`` ranks), their sample
streams and its ``loop/rank_<r>.hdf5``; the curriculum and TD-EMA are global (``run.json``).
Any rank of a checkpoint can be read in one process, no group needed (``world_size`` says how
many ranks saved it).

What cannot be resumed is refused with a :class:`~bufcore.errors.ResumeError` saying why: not
a run (:class:`~bufcore.errors.NotARunError`), no checkpoint yet
(:class:`~bufcore.errors.NoCheckpointError`), a file of a newer format
(:class:`~bufcore.errors.NewerFormatError`), or a piece missing, such as the loop state a
checkpoint written before resuming existed lacks (:class:`~bufcore.errors.MissingStateError`):
continuing without it would not be the same run, so it is not guessed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from bufcore.buffers.base import Buffer, load_buffer
from bufcore.checks import check_path
from bufcore.curriculum.curriculum import Curriculum, SamplingWeightHook
from bufcore.distributed import check_rank
from bufcore.errors import (
    CorruptCheckpointError,
    MissingStateError,
    NoCheckpointError,
    NotARunError,
    StateError,
)
from bufcore.persist.loop_state import LOOP_DIR, loop_file, read_loop_state
from bufcore.persist.run_checkpoint import (
    BUFFERS,
    CHECKPOINT_DIR,
    METRICS_FILE,
    RUN_STATE,
    read_run_state,
    run_layout,
)
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.stats.td_ema import TDStatsEMA

# The loop state's key for its generators (generators_state) and the buffer a curriculum's
# priorities live in (BFM-Zero's name for it).
GENERATORS_KEY = "generators"
EXPERT_BUFFER = "expert"


def generators_state(generators: Mapping[str, torch.Generator]) -> dict[str, Any]:
    """The ``"generators"`` entry of a loop state: each generator's device type and raw state
    (a uint8 tensor, saved in the loop-state file as it is)."""
    return {
        name: {"device_type": generator.device.type, "state": generator.get_state()}
        for name, generator in generators.items()
    }


@dataclass(frozen=True)
class ResumedRun:
    """What :func:`resume` read back from a run's latest checkpoint.

    Attributes:
        run_dir: The run directory.
        checkpoint: Its run checkpoint directory (``RUN/checkpoint``).
        step: The step the checkpoint was taken at: continue with ``step + 1``.
        rank: The rank whose part this is.
        options: The run's options as saved in ``run.json`` (``{}`` if it saved none).
        state: All of ``run.json`` (for what a loop saved there beyond the pieces below).
        buffers: Buffer name -> the buffer, rows, ring position, sampler and sample stream as
            saved (this rank's stream).
        curriculum: The curriculum over ``buffers["expert"]`` with its rounds (the priorities
            are the expert buffer's, restored with it), or None when the run saved none.
        td_ema: The TD-error statistics, or None when the run saved none.
        generators: The loop's generators (:func:`generators_state`), each at its saved state.
        loop: The rest of this rank's loop state, as saved (tensors on the CPU).
        world_size: How many ranks saved the checkpoint (1: one process).
    """

    run_dir: Path
    checkpoint: Path
    step: int
    rank: int
    options: dict[str, Any]
    state: dict[str, Any]
    buffers: dict[str, Buffer]
    curriculum: Curriculum | None
    td_ema: TDStatsEMA | None
    generators: dict[str, torch.Generator] = field(default_factory=dict)
    loop: dict[str, Any] = field(default_factory=dict)
    world_size: int = 1


def resume(
    run_dir: str | os.PathLike[str],
    *,
    rank: int = 0,
    device: str | torch.device | None = None,
    update_sampling_weight_by_id: SamplingWeightHook | None = None,
) -> ResumedRun:
    """Read back everything a training loop needs from the latest checkpoint of ``run_dir``.

    The run must not be saving meanwhile (stop it first): a checkpoint replaced while it is
    read is refused, since its pieces could come from two saves
    (``tests/runs/test_resume_pieces.py::test_a_checkpoint_replaced_while_it_is_read_is_refused``).

    Args:
        run_dir: The run directory (holding ``checkpoint/``).
        rank: Whose part to resume: the buffers' sample streams and ``loop/rank_<rank>.hdf5``;
            below the world size of a checkpoint saved by ``N > 1`` ranks (any rank reads a
            one-rank checkpoint's buffers, branching their streams).
        device: Where the buffers and TD-EMA go; None keeps the buffers' saved device (TD-EMA
            then on the CPU).
        update_sampling_weight_by_id: The curriculum's hook (it is not state), as
            :class:`~bufcore.Curriculum` takes it.

    Raises:
        NotARunError: ``run_dir`` is missing, not a directory, or holds neither
            ``metrics.jsonl`` nor ``checkpoint/``.
        NoCheckpointError: the run has published no checkpoint yet.
        NewerFormatError: ``run.json`` or the loop state is of a newer format version.
        MissingStateError: the checkpoint lacks the step or this rank's loop state (an older
            checkpoint), or, saved by ``N > 1`` ranks, any rank's loop state (every rank
            refuses alike, so none goes on alone), or holds a curriculum but no ``expert``
            buffer.
        CorruptCheckpointError: a file is damaged or malformed, an N-rank checkpoint lacks a
            rank's buffer, or the checkpoint was replaced while being read.
        TypeError, ValueError: ``run_dir``, ``rank`` or ``device`` is malformed, or ``rank``
            is not below an N-rank checkpoint's world size.
    """
    run = check_path(run_dir, "run_dir")
    stream = check_rank(rank)
    if not run.is_dir():
        raise NotARunError(f"run_dir: {run} is not a run directory ("
                           f"{'not a directory' if run.exists() else 'it does not exist'})")
    checkpoint = run / CHECKPOINT_DIR
    if not (checkpoint / RUN_STATE).is_file():
        if not (run / METRICS_FILE).exists() and not checkpoint.exists():
            raise NotARunError(f"run_dir: {run} holds neither {METRICS_FILE} nor "
                               f"{CHECKPOINT_DIR}/; not a run directory")
        raise NoCheckpointError(f"run_dir: {run} has no run checkpoint yet ({CHECKPOINT_DIR}/"
                                f"{RUN_STATE} is missing); nothing to resume from")
    with CheckpointSnapshot(checkpoint) as snapshot:
        resumed = _read(run, checkpoint, stream, device, update_sampling_weight_by_id)
        if snapshot.swapped():
            raise CorruptCheckpointError(checkpoint, "was replaced while it was read (is the "
                                                     "run still going?); stop it and resume")
    return resumed


def _read(
    run: Path,
    checkpoint: Path,
    rank: int,
    device: str | torch.device | None,
    hook: SamplingWeightHook | None,
) -> ResumedRun:
    state = read_run_state(checkpoint)
    layout = run_layout(checkpoint)
    world = layout.world_size
    # One-rank buffers serve any rank (each branches its own stream); N ranks' are per rank.
    if world > 1 and rank >= world:
        raise ValueError(f"rank: expected an int in [0, {world}) (the checkpoint was saved by "
                         f"{world} ranks), got {rank}")
    where = checkpoint / RUN_STATE
    step = state.get("step")
    missing = [] if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else [
        f"{RUN_STATE}['step']"]
    # Every rank's loop state of an N-rank checkpoint, not only this one's: ranks resuming
    # one run all refuse alike, so none goes on alone into a collective.
    missing += [f"{LOOP_DIR}/{loop_file(r)}" for r in (range(world) if world > 1 else [rank])
                if not (checkpoint / LOOP_DIR / loop_file(r)).is_file()]
    loop_path = checkpoint / LOOP_DIR / loop_file(rank)
    names = layout.names
    if "curriculum" in state and EXPERT_BUFFER not in names:
        missing.append(f"{BUFFERS}/{EXPERT_BUFFER}")
    if missing:
        raise MissingStateError(
            missing,
            f"{checkpoint}: lacks {', '.join(missing)}, which resuming needs. It was written by "
            "a bufcore (or a loop) that did not save it, so the run cannot continue exactly "
            "where it stopped; start a new run instead",
        )
    buffers = {name: load_buffer(layout.buffer_dir(name, rank), device, rank=rank)
               for name in names}
    try:
        curriculum = None if "curriculum" not in state else Curriculum.from_state_dict(
            buffers[EXPERT_BUFFER], state["curriculum"], update_sampling_weight_by_id=hook
        )
        ema_device = device if device is not None else "cpu"
        td_ema = None if "td_ema" not in state else TDStatsEMA.from_state_dict(
            state["td_ema"], device=ema_device
        )
    except StateError as err:
        raise CorruptCheckpointError(where, str(err)) from err
    loop = read_loop_state(loop_path.parent, loop_path.name)
    generators = _generators(loop.pop(GENERATORS_KEY, {}), loop_path)
    options = state.get("options", {})
    if not isinstance(options, dict):
        raise CorruptCheckpointError(where, f"options: expected an object, got {options!r:.80}")
    return ResumedRun(
        run_dir=run, checkpoint=checkpoint, step=cast(int, step), rank=rank, options=options,
        state=state, buffers=buffers, curriculum=curriculum, td_ema=td_ema,
        generators=generators, loop=loop, world_size=layout.world_size,
    )


def _generators(saved: Any, where: Path) -> dict[str, torch.Generator]:
    if not isinstance(saved, dict):
        raise CorruptCheckpointError(where, f"{GENERATORS_KEY}: expected an object")
    generators = {}
    for name, entry in saved.items():
        try:
            kind, raw = entry["device_type"], entry["state"]
            if not isinstance(kind, str) or not isinstance(raw, torch.Tensor):
                raise TypeError("device_type must be a str and state a tensor")
            generator = torch.Generator(device=kind)
            generator.set_state(raw.to(torch.uint8))
        except (KeyError, TypeError, ValueError, RuntimeError) as err:
            raise CorruptCheckpointError(
                where, f"{GENERATORS_KEY}[{name!r}]: not a generator's state ({err})"
            ) from None
        generators[name] = generator
    return generators

"""A training run's checkpoint: every buffer plus the run's own state, published as one directory.

Layout (DESIGN §3 "Runs"), BFM-Zero's ``checkpoint/`` with the run state beside the buffers::

    RUN/checkpoint/
    ├── buffers/
    │   ├── train/    a buffer checkpoint directory each (config.json, buffer.hdf5, ...)
    │   ├── expert/
    │   └── z/
    ├── loop/         a training loop's own state per rank, when it saves one (rank_0.hdf5, ...)
    └── run.json      {"format": "bufcore-run-checkpoint", "version": 1, "step": ..., ...}

Saved by ``N > 1`` ranks (:func:`save_rank_checkpoint`, every rank of the group calls it), each
buffer directory holds one buffer checkpoint per rank, and ``run.json`` records the world size
(and which buffers every rank holds alike, ``replicated``)::

    RUN/checkpoint/
    ├── buffers/
    │   ├── train/rank_0/  rank_1/   one buffer checkpoint directory each
    │   └── expert/rank_0/ rank_1/
    └── run.json      {..., "world_size": 2, "replicated": ["expert"]}

One rank (or no process group) writes exactly the layout above, so BFM-Zero's readers and
every earlier run read it as before; :func:`run_layout` reads both. All ranks stage their
buffers into one staging directory that rank 0 made, meet, and rank 0 publishes the whole
directory with one rename (a torn save, any rank failing, leaves the previous checkpoint).
:func:`save_checkpoint_for_ranks` writes a checkpoint for any number of ranks from one process
(resharding, ``bufcore.runs.ranks``).

A run that keeps its earlier checkpoints puts each under ``RUN/checkpoints/step-<step>/`` (six
digits or more, so names sort by step) with :func:`keep_run_checkpoint`, which hard-links the
files rather than writing them again; :func:`earlier_checkpoints` lists them and
:func:`owning_run` names the run of one.

The whole directory is staged and swapped in with one rename (:mod:`bufcore.persist.atomic`),
so a reader sees the previous checkpoint or the new one, never buffers from one save and run
state from another. What ``run.json`` holds beyond ``format`` and ``version`` is the run's
business (the demo writes its step, round, options, curriculum, TD-EMA and agent state).
``loop/rank_<r>.hdf5`` holds what rank ``r``'s loop needs beyond that to resume exactly (its
generators, environments, optimizers: :mod:`bufcore.persist.loop_state`); a checkpoint without
it loads as before, and :func:`bufcore.resume` refuses it.

Needed by (DESIGN rule 5): ``tests/persist/test_run_checkpoint.py`` (one directory published
whole, replacing only a run checkpoint; README Guarantees); the staging shared by ranks and its
barriers: ``tests/distributed/test_rank_checkpoints.py`` (a 2-rank save loads, and a save
that fails on one rank leaves the previous checkpoint).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bufcore import distributed
from bufcore.checks import check_int
from bufcore.errors import CorruptCheckpointError, NewerFormatError
from bufcore.persist.atomic import StagedDirectory, publish_directory
from bufcore.persist.checkpoint.format import parse_json, replaceable_checkpoint
from bufcore.persist.loop_state import LOOP_DIR, EncodedLoopState, loop_file, write_loop_state
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.persist.syscalls import fsync_path

# A run directory's layout: RUN/metrics.jsonl and RUN/checkpoint/{run.json, buffers/<name>/}.
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoint"
RUN_FORMAT = "bufcore-run-checkpoint"
RUN_VERSION = 1
RUN_STATE = "run.json"
BUFFERS = "buffers"
# BFM-Zero's own record of its checkpoint's moment, beside its buffers: {"time": <env steps>}.
TRAIN_STATUS = "train_status.json"
# Earlier checkpoints a run keeps, RUN/checkpoints/step-000450/ (see keep_run_checkpoint).
HISTORY_DIR = "checkpoints"
_KEPT = re.compile(r"step-(?P<step>[0-9]{6,})")
# A checkpoint of N > 1 ranks: buffers/<name>/rank_<r>/, and run.json's world size.
WORLD_SIZE = "world_size"
REPLICATED = "replicated"
_RANK_DIR = re.compile(r"rank_(?P<rank>0|[1-9][0-9]*)")
# run.json fields a save writes itself.
_RESERVED = ("format", "version", WORLD_SIZE, REPLICATED)
SaveTo = Callable[[Path], None]
_LOOP_FILE = re.compile(r"rank_(0|[1-9][0-9]*)\.hdf5")


def save_run_checkpoint(
    path: str | os.PathLike[str],
    *,
    buffers: Mapping[str, SaveTo],
    state: Mapping[str, Any],
    loop: Mapping[int, Mapping[str, Any]] | None = None,
) -> None:
    """Write a run checkpoint at ``path`` atomically (one process, the one-rank layout).

    Args:
        path: The checkpoint directory (``RUN/checkpoint``).
        buffers: Buffer name -> a function saving that buffer to the directory it is given
            (``buffer.save``); each lands in ``buffers/<name>/``.
        state: JSON-ready run state for ``run.json`` (``format`` and ``version`` are added).
        loop: Rank -> that rank's loop state (plain data whose leaves may be tensors: see
            :class:`~bufcore.persist.loop_state.EncodedLoopState`), each written to
            ``loop/rank_<r>.hdf5``; None writes no ``loop/`` (the checkpoint then cannot be
            resumed by :func:`bufcore.resume`).

    Raises:
        ValueError: ``path`` is empty; a buffer name is not a plain directory name, or
            ``state`` holds ``format``/``version`` (or ``world_size``/``replicated``) or is
            not JSON-ready, or a rank is not an int >= 0, or a loop state holds what a file
            cannot (checked before anything is written).
        TypeError: a loop state holds a value that is neither plain data nor a tensor.
        FileExistsError: ``path`` exists and is not a run checkpoint (it is left untouched).
    """
    save_checkpoint_for_ranks(path, buffers={n: [save] for n, save in buffers.items()},
                              state=state, loop=loop)


def save_checkpoint_for_ranks(
    path: str | os.PathLike[str],
    *,
    buffers: Mapping[str, Sequence[SaveTo]],
    state: Mapping[str, Any],
    replicated: Collection[str] = (),
    loop: Mapping[int, Mapping[str, Any]] | None = None,
) -> None:
    """Write, from one process, a run checkpoint of ``N`` ranks at ``path`` atomically.

    Args:
        path: The checkpoint directory.
        buffers: Buffer name -> one save function per rank, in rank order (the same count
            for every buffer). One rank writes ``buffers/<name>/``; ``N > 1`` ranks write
            ``buffers/<name>/rank_<r>/`` and ``world_size`` into ``run.json``.
        state: JSON-ready run state for ``run.json``.
        replicated: Names of buffers every rank holds alike (recorded with ``N > 1``).
        loop: Rank -> that rank's loop state, as :func:`save_run_checkpoint` writes it.

    Raises:
        ValueError: as :func:`save_run_checkpoint`; or buffers with different rank counts,
            none, or ``replicated`` naming a buffer not saved.
        TypeError: a loop state holds a value that is neither plain data nor a tensor.
        FileExistsError: ``path`` exists and is not a run checkpoint (it is left untouched).
    """
    counts = {len(saves) for saves in buffers.values()}
    if len(counts) > 1 or 0 in counts:
        raise ValueError(f"buffers: expected one save per rank for every buffer, got counts "
                         f"{sorted(counts)}")
    world = counts.pop() if counts else 1
    text = _run_text(list(buffers), state, replicated, world)
    loops = {}
    for rank, loop_state in (loop or {}).items():
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
            raise ValueError(f"loop: expected ranks as ints >= 0, got {rank!r}")
        loops[rank] = EncodedLoopState(loop_state)

    def write(staging: Path) -> None:
        for name, saves in buffers.items():
            for rank, save in enumerate(saves):
                save(buffer_dir(staging, name, rank, world))
        if loops:
            (staging / LOOP_DIR).mkdir()
            for rank, encoded in loops.items():
                write_loop_state(staging / LOOP_DIR / loop_file(rank), encoded)
        _finish(staging, world, text)

    publish_directory(
        path, write, replaceable=replaceable_run_checkpoint, kind="run checkpoint directory"
    )


def save_rank_checkpoint(
    path: str | os.PathLike[str],
    *,
    buffers: Mapping[str, SaveTo],
    state: Mapping[str, Any],
    replicated: Collection[str] = (),
    loop: Mapping[str, Any] | None = None,
) -> None:
    """Write a run checkpoint of every rank of the default process group at ``path``
    atomically; every rank calls it (a collective). Without a group, or with one rank, it is
    :func:`save_run_checkpoint` (the one-rank layout).

    Rank 0 checks ``path`` and makes the staging directory beside it; every rank saves its
    buffers into ``buffers/<name>/rank_<r>/`` there; when all have, rank 0 writes ``run.json``
    and publishes the whole directory with one rename. Each step is gathered with
    :func:`bufcore.distributed.all_gather_checked`, so a failure on any rank raises on every
    rank, and the previous checkpoint stays (the staging directory is removed). The ranks
    must share the file system ``path`` is on.

    Args:
        path: The checkpoint directory.
        buffers: This rank's buffers: name -> a function saving it to the directory it is
            given. Every rank passes the same names.
        state: JSON-ready run state; rank 0's is written.
        replicated: Names of buffers every rank holds alike (an expert buffer): recorded in
            ``run.json`` so that resharding copies them instead of dealing their rows out.
            The same on every rank.
        loop: This rank's loop state, written to ``loop/rank_<r>.hdf5`` (see
            :func:`save_run_checkpoint`); every rank passes one, or none does.

    Raises:
        ValueError: as :func:`save_run_checkpoint`, or ranks passing different buffer names
            or ``replicated``, or some ranks a loop state and others none (on every rank).
        TypeError: a loop state holds a value that is neither plain data nor a tensor (on
            every rank).
        FileExistsError: ``path`` exists and is not a run checkpoint (on every rank).
        Exception: whatever a rank's save raised (the other ranks raise its type).
    """
    world, own = distributed.world_size(), distributed.rank()
    if world == 1:
        save_checkpoint_for_ranks(path, buffers={n: [save] for n, save in buffers.items()},
                                  state=state, replicated=replicated,
                                  loop=None if loop is None else {0: loop})
        return
    text = ""
    encoded: EncodedLoopState | None = None

    def plan() -> dict[str, Any]:
        nonlocal text, encoded
        text = _run_text(list(buffers), state, replicated, world)
        encoded = None if loop is None else EncodedLoopState(loop)
        return {"buffers": sorted(buffers), "replicated": sorted(replicated),
                "loop": loop is not None}

    plans = distributed.all_gather_checked(plan)
    if any(other != plans[0] for other in plans):
        raise ValueError(
            "buffers: every rank must save the same buffers and replicated names, and a loop "
            "state on all ranks or none; got "
            + "; ".join(f"rank {r}: {p}" for r, p in enumerate(plans))
        )
    staged: StagedDirectory | None = None

    def open_staging() -> str:
        nonlocal staged
        if own != 0:
            return ""
        staged = StagedDirectory(path, replaceable=replaceable_run_checkpoint,
                                 kind="run checkpoint directory")
        if plans[0]["loop"]:
            (staged.path / LOOP_DIR).mkdir()
        return str(staged.path)

    try:
        staging = Path(distributed.all_gather_checked(open_staging)[0])

        def stage() -> None:
            for name, save in buffers.items():
                save(buffer_dir(staging, name, own, world))
            if encoded is not None:
                write_loop_state(staging / LOOP_DIR / loop_file(own), encoded)

        distributed.all_gather_checked(stage)

        def publish() -> None:
            if staged is not None:
                _finish(staging, world, text)
                staged.publish()

        distributed.all_gather_checked(publish)
    finally:
        if staged is not None:
            staged.discard()


def _run_text(
    names: list[str], state: Mapping[str, Any], replicated: Collection[str], world: int
) -> str:
    """run.json's text for a save of buffers ``names`` by ``world`` ranks.

    Raises:
        ValueError: a name is not a plain directory name, ``state`` holds a field the save
            writes or is not JSON-ready, or ``replicated`` names a buffer not saved.
    """
    for name in names:
        if not name or name in (".", "..") or "/" in name or name.startswith("."):
            raise ValueError(f"buffers: {name!r} is not a usable directory name")
    clash = set(_RESERVED) & set(state)
    if clash:
        raise ValueError(f"state: {sorted(clash)} are written by the save itself")
    if isinstance(replicated, str) or not set(replicated) <= set(names):
        raise ValueError(f"replicated: expected names among the buffers {sorted(names)}, got "
                         f"{replicated!r}")
    ranks = {WORLD_SIZE: world, REPLICATED: sorted(replicated)} if world > 1 else {}
    try:
        return json.dumps({"format": RUN_FORMAT, "version": RUN_VERSION, **state, **ranks},
                          allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"state: not plain JSON data ({err})") from None


def _finish(staging: Path, world: int, text: str) -> None:
    """Write run.json into ``staging`` and make the buffer and loop directories' entries
    durable (a buffer's own save fsyncs the directory it lands in, not the ones above it)."""
    folders = [staging / BUFFERS, *(staging / BUFFERS).glob("*")] if world > 1 else []
    for folder in [*folders, staging / LOOP_DIR]:
        if folder.is_dir():
            fsync_path(folder, directory=True)
    (staging / RUN_STATE).write_text(text + "\n", encoding="utf-8")
    fsync_path(staging / RUN_STATE)


def rank_dir_name(rank: int) -> str:
    """``rank_3``: the directory under ``buffers/<name>/`` of rank ``rank``'s buffer."""
    return f"rank_{rank}"


def buffer_dir(checkpoint: Path, name: str, rank: int, world_size: int) -> Path:
    """Where rank ``rank``'s buffer ``name`` lies in a checkpoint of ``world_size`` ranks:
    ``buffers/<name>/`` for one rank, ``buffers/<name>/rank_<r>/`` for more."""
    folder = checkpoint / BUFFERS / name
    return folder if world_size == 1 else folder / rank_dir_name(rank)


@dataclass(frozen=True)
class RunLayout:
    """Which ranks saved a run checkpoint and where each rank's buffers lie.

    Attributes:
        path: The checkpoint directory.
        world_size: How many ranks saved it (1: the one-rank layout, BFM-Zero's).
        names: The buffers' names, sorted.
        replicated: The buffers every rank holds alike (as saved; empty for one rank).
    """

    path: Path
    world_size: int
    names: tuple[str, ...]
    replicated: tuple[str, ...]

    def buffer_dir(self, name: str, rank: int) -> Path:
        """Rank ``rank``'s checkpoint directory of buffer ``name``."""
        return buffer_dir(self.path, name, rank, self.world_size)


def run_layout(path: str | os.PathLike[str]) -> RunLayout:
    """The layout of the run checkpoint ``path`` (bufcore's, of any world size, or a
    BFM-Zero ``checkpoint/`` without ``run.json``: one rank).

    Only names are looked at besides ``run.json``: a rank's buffer directory is checked
    when it is loaded.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: ``run.json`` is malformed (:func:`read_run_state`), its
            ``world_size`` or ``replicated`` are, or a buffer directory of an N-rank
            checkpoint does not hold exactly ``rank_0`` ... ``rank_<N-1>``.
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(f"path: {root} is not a directory")
    folder = root / BUFFERS
    names = tuple(sorted(
        entry.name for entry in (folder.iterdir() if folder.is_dir() else ())
        # Hidden entries are a save's staging directories; files are not buffers.
        if entry.is_dir() and not entry.is_symlink() and not entry.name.startswith(".")
    ))
    has_state = (root / RUN_STATE).is_file() or (root / RUN_STATE).is_symlink()
    state = read_run_state(root) if has_state else {}
    where = root / RUN_STATE
    world = state.get(WORLD_SIZE, 1)
    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise CorruptCheckpointError(where, f"run['world_size']: expected an int >= 1, got "
                                            f"{world!r:.80}")
    replicated = state.get(REPLICATED, [])
    if (not isinstance(replicated, list) or not all(isinstance(n, str) for n in replicated)
            or not set(replicated) <= set(names)):
        raise CorruptCheckpointError(
            where, f"run['replicated']: expected names among {list(names)}, got "
                   f"{replicated!r:.80}")
    if world > 1:
        expected = {rank_dir_name(rank) for rank in range(world)}
        for name in names:
            found = {e.name for e in (folder / name).iterdir() if not e.name.startswith(".")}
            if found != expected:
                raise CorruptCheckpointError(
                    folder / name, f"expected the buffer of each of {world} ranks "
                    f"(rank_0 ... rank_{world - 1}), found {sorted(found)}")
    return RunLayout(root, world, names, tuple(sorted(replicated)))


def _replaceable_buffer(path: Path) -> bool:
    """A buffer directory a save may replace: a buffer checkpoint, or one per rank."""
    if path.is_symlink() or not path.is_dir():
        return False
    entries = list(path.iterdir())
    if entries and all(_RANK_DIR.fullmatch(e.name) for e in entries):
        return all(not e.is_symlink() and e.is_dir() and replaceable_checkpoint(e)
                   for e in entries)
    return replaceable_checkpoint(path)


def replaceable_run_checkpoint(path: Path) -> bool:
    """Whether a save may replace the directory at ``path``: empty, or a run checkpoint that
    holds nothing but ``run.json`` of this format, buffer checkpoints under ``buffers/`` (one
    per buffer, or one per rank under ``buffers/<name>/rank_<r>/``) and loop states under
    ``loop/``."""
    entries = {entry.name: entry for entry in path.iterdir()}
    if not entries:
        return True
    if set(entries) - {RUN_STATE, BUFFERS, LOOP_DIR} or RUN_STATE not in entries:
        return False
    loops = entries.get(LOOP_DIR)
    if loops is not None and (loops.is_symlink() or not loops.is_dir() or not all(
        _LOOP_FILE.fullmatch(f.name) and not f.is_symlink() and f.is_file()
        for f in loops.iterdir()
    )):
        return False
    state_file, buffers = entries[RUN_STATE], entries.get(BUFFERS)
    if state_file.is_symlink() or not state_file.is_file():
        return False
    try:
        state = parse_json(state_file.read_bytes(), state_file)
    except (CorruptCheckpointError, OSError):
        return False
    if state.get("format") != RUN_FORMAT:
        return False
    if buffers is None:
        return True
    if buffers.is_symlink() or not buffers.is_dir():
        return False
    return all(_replaceable_buffer(b) for b in buffers.iterdir())


def read_run_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``run.json`` of the run checkpoint directory ``path``, format and version checked.

    It is read through the directory handle as checkpoint files are (no symbolic link is
    followed, a FIFO is refused).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: ``run.json`` is missing, not a regular file, not a JSON object,
            or of another format or version (the message names the field); a
            :class:`~bufcore.errors.NewerFormatError` when its version is above this bufcore's.
    """
    with CheckpointSnapshot(Path(path)) as snapshot:
        where = snapshot.path / RUN_STATE
        state = parse_json(snapshot.read(RUN_STATE), where)
    version = state.get("version")
    if state.get("format") == RUN_FORMAT and _newer(version):
        raise NewerFormatError(where, f"run['version']: expected {RUN_VERSION}, got {version}: "
                                      "written by a newer bufcore; upgrade bufcore to read it")
    for field, expected in (("format", RUN_FORMAT), ("version", RUN_VERSION)):
        found = state.get(field)
        if found != expected or isinstance(found, bool):
            raise CorruptCheckpointError(
                where, f"run[{field!r}]: expected {expected!r}, got {found!r:.80}"
            )
    return state


def _newer(version: Any) -> bool:
    return isinstance(version, int) and not isinstance(version, bool) and version > RUN_VERSION


def read_train_status(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``train_status.json`` BFM-Zero writes in its checkpoint directory ``path``.

    Read through the directory handle as checkpoint files are (no symbolic link is followed,
    a FIFO is refused); what its fields mean is the summary's business.

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: the file is missing, not a regular file or not a JSON object.
    """
    with CheckpointSnapshot(Path(path)) as snapshot:
        return parse_json(snapshot.read(TRAIN_STATUS), snapshot.path / TRAIN_STATUS)


def kept_name(step: int) -> str:
    """``step-000450``: the name under ``RUN/checkpoints/`` of the checkpoint taken at ``step``.

    Raises:
        ValueError: ``step`` is negative.
        TypeError: ``step`` is not an int.
    """
    return f"step-{check_int(step, 'step', minimum=0):06d}"


def keep_run_checkpoint(
    path: str | os.PathLike[str], destination: str | os.PathLike[str]
) -> None:
    """Publish a copy of the run checkpoint at ``path`` as ``destination`` (create-only).

    The files are hard links: bufcore never edits a published file (a save replaces the
    directory), so the copy costs neither time nor space until ``path`` is saved over, and
    then keeps the old files alive. Where the file system has no hard links they are copied
    (``tests/persist/test_run_checkpoint.py::
    test_a_kept_checkpoint_is_copied_where_the_file_system_has_no_hard_links``).
    Nobody may save to ``path`` meanwhile (the demo keeps its own checkpoint before it saves
    the next one).

    Raises:
        FileNotFoundError: ``path`` holds no ``run.json``.
        FileExistsError: anything is at ``destination``, or ``path`` is not a run checkpoint
            (a directory holding anything else).
    """
    source = Path(path)
    if not (source / RUN_STATE).is_file():
        raise FileNotFoundError(f"path: {source} holds no {RUN_STATE}; not a run checkpoint")
    if not replaceable_run_checkpoint(source):
        raise FileExistsError(f"path: {source} holds more than a run checkpoint")

    def write(staging: Path) -> None:
        try:
            shutil.copytree(source, staging, symlinks=True, copy_function=os.link,
                            dirs_exist_ok=True)
        except OSError:
            # No hard links here (FAT, some network file systems): copy instead, into an
            # empty staging directory (copying over a link would write into the original).
            shutil.rmtree(staging)
            shutil.copytree(source, staging, symlinks=True, copy_function=_copy_durably)

    publish_directory(destination, write, replaceable=lambda _: False,
                      kind="kept run checkpoint", replace=False)


def discard_kept_checkpoint(run_dir: str | os.PathLike[str], step: int) -> bool:
    """Remove ``run_dir/checkpoints/step-<step>/`` if it is there; whether it was.

    A run killed between keeping its checkpoint (:func:`keep_run_checkpoint`) and saving the
    next leaves that copy behind; resumed from that checkpoint, the run keeps it again at its
    next save, which would refuse to replace it (``tests/runs/test_resume.py::
    test_a_kept_copy_of_the_checkpoint_left_by_the_killed_run_is_replaced``).

    Raises:
        FileExistsError: the entry is not a run checkpoint (it is left alone).
    """
    kept = Path(run_dir) / HISTORY_DIR / kept_name(step)
    if not kept.is_symlink() and not kept.exists():
        return False
    if kept.is_symlink() or not kept.is_dir() or not replaceable_run_checkpoint(kept):
        raise FileExistsError(f"{kept}: not a kept run checkpoint; left alone")
    shutil.rmtree(kept)
    fsync_path(kept.parent, directory=True)
    return True


def _copy_durably(source: str, destination: str) -> None:
    shutil.copy2(source, destination)
    fsync_path(Path(destination))


def earlier_checkpoints(run_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(step, directory)`` of each checkpoint kept under ``run_dir/checkpoints/``, by step.

    Only names are looked at (nothing is read); entries that are not ``step-<digits>``
    directories (symbolic links included) are left out.
    """
    folder = Path(run_dir) / HISTORY_DIR
    if folder.is_symlink() or not folder.is_dir():
        return []
    kept = []
    for entry in folder.iterdir():
        match = _KEPT.fullmatch(entry.name)
        if match and not entry.is_symlink() and entry.is_dir():
            kept.append((int(match["step"]), entry))
    return sorted(kept)


def owning_run(checkpoint: str | os.PathLike[str]) -> Path | None:
    """The run directory that keeps ``checkpoint`` among its earlier checkpoints (it is
    ``RUN/checkpoints/step-<step>``), or None. Only the path's names are looked at."""
    path = Path(checkpoint)
    if _KEPT.fullmatch(path.name) and path.parent.name == HISTORY_DIR:
        return path.parent.parent
    return None

"""Run checkpoints across ranks: save every rank's buffers, load them back, reshard them.

A run trained data-parallel on ``N`` ranks saves each rank's buffers under one run checkpoint
(:func:`save_run_buffers`, a collective; layout in :mod:`bufcore.persist.run_checkpoint`:
``buffers/<name>/rank_<r>/`` for ``N > 1``, BFM-Zero's ``buffers/<name>/`` for one rank).
:func:`load_run_buffers` gives a rank its own buffers back, and refuses a group of another
size with :class:`~bufcore.errors.WorldSizeError`: rows belong to the rank that wrote them, and
quietly dropping or duplicating a rank's rows would change the run.

:func:`reshard_run_checkpoint` (offline, one process, no process group) rewrites an ``N``-rank
checkpoint as ``M`` ranks:

- A *replicated* buffer (every rank holds the same rows: an expert buffer) is copied: new rank
  ``r < N`` takes old rank ``r``'s copy and continues its sample stream; a rank ``r >= N``
  takes rank 0's and draws its own branch of that stream.
- A *sharded* buffer's rows are concatenated in rank order and dealt contiguously over the new
  ranks (:func:`bufcore.distributed.shard_bounds`, RLinf's split), without cutting a
  trajectory: a transition or z buffer (``DictBuffer``, ``ZBuffer``) deals its rows, oldest
  first; a multi-env trajectory buffer (``TrajectoryDictBufferMultiDim`` with ``n_dim=2``,
  whose trajectories each live in one env column) deals whole env columns, so every window
  that could be drawn before can be drawn after. Each new rank's buffer holds its rows as if
  written in that order (cursor after the newest), and draws the fresh stream of
  ``(seed, new rank)`` (:func:`bufcore.rng.stream_seed`). Rows are conserved: a share that
  would not fit the buffer's capacity is refused, not cut.

Buffers whose rows cannot be dealt this way (an expert buffer not marked replicated, a
one-env-axis trajectory buffer, a buffer with a prioritized sampler, whose priorities a new
ring would not keep) are refused with the reason; nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from bufcore import distributed
from bufcore.buffers.base import Buffer, load_buffer
from bufcore.buffers.online import TrajectoryDictBufferMultiDim
from bufcore.buffers.transition import DictBuffer
from bufcore.buffers.zbuffer import ZBuffer
from bufcore.checks import check_int
from bufcore.errors import WorldSizeError
from bufcore.persist.run_checkpoint import (
    REPLICATED,
    RUN_STATE,
    WORLD_SIZE,
    read_run_state,
    run_layout,
    save_checkpoint_for_ranks,
    save_rank_checkpoint,
)
from bufcore.rng import rank_state
from bufcore.tree import KeyPath

# Classes whose rows reshard deals out (the rest must be replicated).
_DEALT_ROWS = (DictBuffer, ZBuffer)


def save_run_buffers(
    path: str | os.PathLike[str],
    buffers: Mapping[str, Buffer],
    *,
    state: Mapping[str, Any],
    replicated: Collection[str] = (),
    loop: Mapping[str, Any] | None = None,
) -> None:
    """Save this rank's ``buffers`` and the run ``state`` as the run checkpoint ``path``;
    every rank of the default group calls it (see
    :func:`bufcore.persist.run_checkpoint.save_rank_checkpoint`). One process (or one rank)
    writes the one-rank layout.

    Args:
        path: The checkpoint directory (``RUN/checkpoint``).
        buffers: This rank's buffers by name; the same names on every rank.
        state: JSON-ready run state for ``run.json`` (rank 0's is written).
        replicated: Names of buffers every rank holds alike (resharding copies them).
        loop: This rank's training-loop state (what :func:`bufcore.resume` restores beyond
            the buffers), saved as ``loop/rank_<r>.hdf5``; every rank passes one, or none.

    Raises:
        ValueError: a name is not a plain directory name, ``state`` is not JSON-ready or
            holds a field the save writes, or ranks disagree on names or on passing a
            ``loop`` (on every rank).
        TypeError: ``loop`` holds a value that is neither plain data nor a tensor.
        FileExistsError: ``path`` exists and is not a run checkpoint.
    """
    save_rank_checkpoint(path, buffers={n: b.save for n, b in buffers.items()}, state=state,
                         replicated=replicated, loop=loop)


def load_run_buffers(
    path: str | os.PathLike[str],
    *,
    device: str | torch.device | None = None,
    rank: int | None = None,
    world_size: int | None = None,
) -> dict[str, Any]:
    """This rank's buffers of the run checkpoint ``path``, by name, each continuing the
    sample stream it saved.

    Args:
        path: The checkpoint directory.
        device: Where to put the tensors; None keeps each buffer's saved device.
        rank: Whose buffers; None for this process's rank (0 without a group).
        world_size: Among how many ranks; None for this process's group size (1 without one).
            Pass both to read one rank of a checkpoint offline.

    Raises:
        WorldSizeError: the checkpoint was saved by another number of ranks (the message
            names both and the :func:`reshard_run_checkpoint` call).
        ValueError: ``rank`` is not below ``world_size``.
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: run.json or a buffer's files are damaged or malformed.
    """
    world = (distributed.world_size() if world_size is None
             else check_int(world_size, "world_size", minimum=1))
    own = distributed.check_rank(rank)
    if own >= world:
        raise ValueError(f"rank: expected an int in [0, {world}), got {own}")
    layout = run_layout(path)
    if layout.world_size != world:
        raise WorldSizeError(layout.path, layout.world_size, world)
    return {name: load_buffer(layout.buffer_dir(name, own), device, rank=own)
            for name in layout.names}


def reshard_run_checkpoint(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    world_size: int,
    replicated: Collection[str] | None = None,
) -> None:
    """Rewrite the run checkpoint ``source`` for ``world_size`` ranks at ``destination``
    (how rows are redistributed: the module docstring). Offline: no process group is needed
    and none is used. Every buffer is read into memory first, then the new checkpoint is
    published atomically (``destination`` may be ``source``).

    ``run.json`` keeps the run's state as it was (curriculum, TD-EMA and the rest are global),
    with the new world size.

    Args:
        source: A run checkpoint of any world size (the one-rank layout included).
        destination: Where the resharded checkpoint goes; a run checkpoint there is replaced.
        world_size: The new number of ranks, >= 1.
        replicated: Names of the buffers every rank holds alike; None for what ``source``
            recorded (a one-rank checkpoint records none: name an expert buffer here).

    Raises:
        TypeError: a sharded buffer's class cannot be dealt (the message says to mark it
            replicated, or why not).
        ValueError: ``world_size < 1``; ``replicated`` names a buffer ``source`` lacks; the
            ranks' copies of a buffer differ in class or options, or (env columns) in time
            rows; fewer env columns than new ranks; or a share exceeds the capacity.
        FileExistsError: ``destination`` exists and is not a run checkpoint.
        FileNotFoundError: ``source`` is not a directory.
        CorruptCheckpointError: ``source``'s files are damaged or malformed.
    """
    world = check_int(world_size, "world_size", minimum=1, maximum=distributed.MAX_RANK + 1)
    layout = run_layout(source)
    copied = set(layout.replicated if replicated is None else replicated)
    if isinstance(replicated, str) or not copied <= set(layout.names):
        raise ValueError(f"replicated: expected names among {list(layout.names)}, got "
                         f"{replicated!r}")
    new: dict[str, list[Buffer]] = {}
    for name in layout.names:
        if name in copied:
            kept = layout.world_size
            new[name] = [_copied(layout.buffer_dir(name, r if r < kept else 0), r)
                         for r in range(world)]
        else:
            old = [load_buffer(layout.buffer_dir(name, r), rank=r)
                   for r in range(layout.world_size)]
            new[name] = _dealt(name, old, world)
    has_state = (layout.path / RUN_STATE).exists()
    saved = read_run_state(layout.path) if has_state else {}
    state = {k: v for k, v in saved.items() if k not in ("format", "version", WORLD_SIZE,
                                                          REPLICATED)}
    save_checkpoint_for_ranks(
        destination, buffers={n: [b.save for b in per_rank] for n, per_rank in new.items()},
        state=state, replicated=sorted(copied),
    )


def _copied(path: Path, rank: int) -> Buffer:
    """A replicated buffer for new rank ``rank``: the checkpoint at ``path``, drawing
    ``rank``'s stream (its own continued, or a branch of the saver's)."""
    buffer: Buffer = load_buffer(path, rank=rank)
    return buffer


def _dealt(name: str, old: Sequence[Buffer], world: int) -> list[Buffer]:
    """The old ranks' rows of buffer ``name`` dealt over ``world`` new ranks.

    Raises:
        TypeError: the class cannot be dealt.
        ValueError: the ranks' copies disagree, or a share does not fit.
    """
    first = old[0]
    kind = type(first).__name__
    windowed = isinstance(first, TrajectoryDictBufferMultiDim)
    columns = isinstance(first, TrajectoryDictBufferMultiDim) and first.n_dim == 2
    if not (isinstance(first, _DEALT_ROWS) or columns):
        raise TypeError(
            f"buffers[{name!r}]: a {kind}{' with n_dim=1' if windowed else ''} cannot have its "
            "rows dealt over ranks without cutting its trajectories or episodes; pass "
            f"replicated=[{name!r}] if every rank holds the same rows"
        )
    states = [buffer.state_dict() for buffer in old]
    configs = [_options(s["config"]) for s in states]
    for rank, state in enumerate(states):
        if type(old[rank]) is not type(first) or configs[rank] != configs[0]:
            raise ValueError(f"buffers[{name!r}]: rank {rank}'s {type(old[rank]).__name__} "
                             f"has other options than rank 0's {kind}: cannot deal its rows")
        if "sampler" in state["state"]:
            raise TypeError(
                f"buffers[{name!r}]: rank {rank}'s {kind} samples with a PrioritizedSampler, "
                "whose priorities a resharded ring would not keep; reshard is refused"
            )
    rows = [_chronological(s) for s in states]
    capacity = int(states[0]["config"]["capacity"])
    if columns:
        shares = _deal_env_columns(name, rows, world)
    else:
        shares = _deal_rows(name, rows, world, capacity)
    return [_rebuilt(first, states[0], share, capacity, rank)
            for rank, share in enumerate(shares)]


def _options(config: Mapping[str, Any]) -> dict[str, Any]:
    """A config without its ring position: what must agree between ranks' copies."""
    return {k: v for k, v in config.items() if k not in ("_idx", "_is_full")}


def _chronological(state: Mapping[str, Any]) -> dict[KeyPath, torch.Tensor]:
    """A state's rows, oldest first (physical order rotated at the cursor when full)."""
    cursor, full = int(state["config"]["_idx"]), bool(state["config"]["_is_full"])
    rows: Mapping[KeyPath, torch.Tensor] = state["rows"]
    if not full:
        return {path: rows_[:cursor] for path, rows_ in rows.items()}
    return {path: torch.cat([rows_[cursor:], rows_[:cursor]]) for path, rows_ in rows.items()}


def _deal_rows(
    name: str, rows: list[dict[KeyPath, torch.Tensor]], world: int, capacity: int
) -> list[dict[KeyPath, torch.Tensor]]:
    """Rows of every old rank concatenated in rank order, dealt contiguously.

    Raises:
        ValueError: a new rank's share exceeds ``capacity``.
    """
    paths = list(rows[0])
    joined = {p: torch.cat([r[p] for r in rows]) for p in paths}
    total = len(joined[paths[0]]) if paths else 0
    shares = []
    for rank in range(world):
        start, end = distributed.shard_bounds(total, rank=rank, world_size=world)
        if end - start > capacity:
            raise ValueError(
                f"buffers[{name!r}]: rank {rank} of {world} would get {end - start} rows, more "
                f"than the capacity {capacity}; reshard to at least "
                f"{-(-total // capacity)} ranks, or the rows would be lost"
            )
        shares.append({p: joined[p][start:end] for p in paths})
    return shares


def _deal_env_columns(
    name: str, rows: list[dict[KeyPath, torch.Tensor]], world: int
) -> list[dict[KeyPath, torch.Tensor]]:
    """Env columns of every old rank concatenated in rank order, dealt contiguously (each
    trajectory lives in one column, so none is cut).

    Raises:
        ValueError: the ranks hold different numbers of time rows, or fewer columns in all
            than new ranks.
    """
    paths = list(rows[0])
    lengths = [len(r[paths[0]]) if paths else 0 for r in rows]
    if len(set(lengths)) > 1:
        raise ValueError(f"buffers[{name!r}]: the ranks hold {lengths} time rows; env columns "
                         "can only be dealt between ranks that stepped alike")
    joined = {p: torch.cat([r[p] for r in rows], dim=1) for p in paths}
    columns = joined[paths[0]].shape[1] if paths else 0
    if columns < world:
        raise ValueError(f"buffers[{name!r}]: {columns} env columns in all cannot give each of "
                         f"{world} ranks one")
    shares = []
    for rank in range(world):
        start, end = distributed.shard_bounds(columns, rank=rank, world_size=world)
        shares.append({p: joined[p][:, start:end] for p in paths})
    return shares


def _rebuilt(
    like: Buffer,
    state: Mapping[str, Any],
    rows: dict[KeyPath, torch.Tensor],
    capacity: int,
    rank: int,
) -> Buffer:
    """A buffer of ``like``'s class and options holding ``rows`` (oldest first) for new rank
    ``rank``, drawing the fresh stream of ``(seed, rank)``."""
    count = len(next(iter(rows.values()))) if rows else 0
    saved = {k: v for k, v in state["state"].items() if k not in ("generator", "rank")}
    rebuilt = {
        **state,
        "config": {**state["config"], "_idx": count % capacity, "_is_full": count == capacity},
        "state": {**saved, **rank_state(rank)},
        "rows": rows,
    }
    return type(like).from_state_dict(rebuilt, rank=rank)

"""The one door to ``torch.distributed``: the default process group as bufcore's parts use it.

Training data-parallel (``torchrun``, gloo on CPU, nccl on GPU), every rank owns its buffers,
while the statistics that steer sampling must be global. The parts of bufcore (TD-EMA
statistics, the curriculum, sample streams, run logs) ask this module, and only this module
calls ``torch.distributed`` (``tests/policy/test_layers.py`` checks it):

- :func:`is_initialized`, :func:`rank`, :func:`world_size`: whether a default group is up, and
  this process's place in it (rank 0 of 1 without one, so single-process code is the 1-rank case);
  :func:`check_rank` resolves a ``rank=None`` option to this process's rank.
- :func:`all_reduce_sum`: the sum of a (small) tensor over the ranks, bit-identical on every rank.
- :func:`all_gather_json` and :func:`all_gather_checked`: every rank's small metadata (JSON data),
  in rank order, on every rank; the checked form makes a local check fail on every rank at once.
- :func:`shard_bounds`: the contiguous share of ``count`` items that a rank owns.
- :func:`join_file_group` and :func:`leave_group`: a gloo group joined through a file, for
  processes a program spawns itself (``bufcore demo --nproc N``).

Every collective here is one the whole group must enter; a function never returns early on one
rank while the others wait.

This module is a core file (DESIGN §1 lists ``distributed`` above ``buffers``): ``stats``,
``curriculum``, ``buffers`` and ``runs`` all call it, and imports only point down, so it sits in
the core and imports nothing of bufcore but ``checks``. README "Development" says so.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from bufcore.checks import check_int

T = TypeVar("T")

# torch's ranks are C ints.
MAX_RANK = 2**31 - 2
# The types the other ranks raise in turn when a local check fails (bufcore's own errors
# subclass them); any other exception reaches them as a RuntimeError.
_SHARED_ERRORS: tuple[type[Exception], ...] = (TypeError, ValueError, KeyError, IndexError)


def is_initialized() -> bool:
    """Whether a default process group is up in this process (torch built with
    ``torch.distributed`` and ``init_process_group`` called)."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank in the default group; 0 without one."""
    return _own_rank()


def world_size() -> int:
    """How many processes the default group holds; 1 without one."""
    return _own_size()


def _own_rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def _own_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def check_rank(value: Any, argument: str = "rank") -> int:
    """A rank option: an int >= 0, or None for this process's rank (0 without a group).

    Raises:
        TypeError: not an int or None.
        ValueError: negative or beyond a C int.
    """
    if value is None:
        return _own_rank()
    return check_int(value, argument, minimum=0, maximum=MAX_RANK)


def shard_bounds(
    count: int, *, rank: int | None = None, world_size: int | None = None
) -> tuple[int, int]:
    """``(start, end)``: the contiguous share of ``count`` items rank ``rank`` owns.

    RLinf's split (REFERENCE §9.6): ``q, r = divmod(count, world_size)``; the first ``r`` ranks
    own ``q + 1`` items, the others ``q``, in rank order, so every item has exactly one owner
    (10 items over 3 ranks: 0-3, 4-6, 7-9).

    Args:
        count: How many items there are, >= 0.
        rank: Whose share; None for this process's rank.
        world_size: Among how many ranks; None for this process's group size.

    Raises:
        TypeError: an argument is not an int (or None).
        ValueError: ``count < 0``, ``world_size < 1``, or ``rank`` outside ``[0, world_size)``.
    """
    count = check_int(count, "count", minimum=0)
    size = (
        _own_size()
        if world_size is None
        else check_int(world_size, "world_size", minimum=1, maximum=MAX_RANK + 1)
    )
    owner = check_rank(rank)
    if owner >= size:
        raise ValueError(f"rank: expected an int in [0, {size}), got {owner}")
    quotient, remainder = divmod(count, size)
    start = owner * quotient + min(owner, remainder)
    return start, start + quotient + (owner < remainder)


def join_file_group(
    store: str | os.PathLike[str], *, rank: int, world_size: int, timeout_s: float
) -> None:
    """Join (and make) the default gloo group of ``world_size`` processes meeting through the
    file ``store`` (a ``FileStore``; every process names the same path). Set
    ``GLOO_SOCKET_IFNAME=lo`` in the environment to keep the traffic on one machine.

    Raises:
        TypeError: ``rank`` or ``world_size`` is not an int.
        ValueError: ``world_size < 1`` or ``rank`` outside ``[0, world_size)``.
        RuntimeError: the group could not be formed within ``timeout_s``.
    """
    size = check_int(world_size, "world_size", minimum=1, maximum=MAX_RANK + 1)
    own = check_int(rank, "rank", minimum=0, maximum=size - 1)
    dist.init_process_group(
        "gloo",
        store=dist.FileStore(os.fspath(store), size),  # type: ignore[attr-defined]
        rank=own,
        world_size=size,
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def leave_group(*, together: bool = False) -> None:
    """Take down the default group (no-op without one).

    Args:
        together: Meet the other ranks first (a barrier): the end of a run every rank
            reached, so no rank closes its connections while a peer's gloo threads still work
            on them. A 2-rank demo rank that left alone aborted now and then with "terminate
            called without an active exception" (tests/runs/test_demo_ranks.py,
            test_resume_ranks.py). Leave it False after an error: the others may never come.
    """
    if is_initialized():
        if together:
            dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """The sum of ``tensor`` over the ranks, the same bits on every rank; ``tensor`` itself
    without a group.

    The ranks' tensors are gathered and added in rank order on every rank, so the result does
    not depend on the order a backend's reduction happens to take: ranks that keep running
    statistics from it never drift apart. One collective (an all-gather), meant for small
    tensors (a few statistics), since every rank holds all ranks' tensors for a moment.

    Args:
        tensor: Same shape and dtype on every rank. On a device the group's backend serves
            (the CPU for gloo, the current CUDA device for nccl) it is sent as it is; elsewhere
            it is copied there and the sum copied back.

    Returns:
        A new tensor on ``tensor``'s device (``tensor`` is not changed).
    """
    if not is_initialized():
        return tensor
    device = _collective_device()
    sent = tensor.detach().to(device).contiguous()
    parts = [torch.empty_like(sent) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, sent)
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total.to(tensor.device)


def all_gather_json(value: Any) -> list[Any]:
    """Every rank's ``value`` (JSON data: dicts with str keys, lists, str, numbers, bools,
    None), in rank order, on every rank; ``[value]`` without a group.

    Sent as UTF-8 JSON bytes in two all-gathers (lengths, then the padded bytes); nothing is
    pickled (``torch.distributed.all_gather_object`` would unpickle what other processes send).
    NaN and infinities travel as they are. What comes back is what JSON gives, with or without
    a group: tuples as lists, and int keys as str (as ``json.dumps`` writes them).

    Raises:
        TypeError: ``value`` (on any rank) is not JSON data; every rank raises.
    """
    return all_gather_checked(lambda: value)


def all_gather_checked(make: Callable[[], T]) -> list[T]:
    """Every rank's ``make()`` (JSON data), in rank order, on every rank, failing on all ranks
    together; ``[make()]`` (also through JSON) without a group.

    ``make`` runs here first. If it raises on any rank (or its result is not JSON data), the
    ranks still meet in the gather, then every rank raises: the failing rank its own exception,
    the others one of the same built-in type (``TypeError``, ``ValueError``, ``KeyError``,
    ``IndexError``; ``RuntimeError`` for any other) with ``"rank R: "`` and its message. No
    rank is left waiting in a collective that the failing rank never enters.

    Raises:
        Exception: ``make`` raised on some rank (the lowest such rank is named).
    """
    if not is_initialized():
        # Through JSON as well, so one process gets what a rank of a group would.
        return [json.loads(_encode(make()))]
    own: Exception | None = None
    try:
        payload = _encode({"value": make()})
    except Exception as err:  # every rank must reach the gather below
        own = err
        shared = next((t for t in _SHARED_ERRORS if isinstance(err, t)), RuntimeError)
        payload = _encode({"error": shared.__name__, "message": str(err)})
    replies = [json.loads(raw) for raw in _all_gather_bytes(payload)]
    failed = [(i, reply) for i, reply in enumerate(replies) if "error" in reply]
    if own is not None:
        raise own
    if failed:
        first, reply = failed[0]
        kind = {t.__name__: t for t in _SHARED_ERRORS}.get(reply["error"], RuntimeError)
        raise kind(f"rank {first}: {reply['message']}")
    return [reply["value"] for reply in replies]


def _encode(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON.

    Raises:
        TypeError: not JSON data (a tensor, a set, a non-str key).
    """
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as err:  # ValueError: a value that contains itself
        raise TypeError(f"expected JSON data to send to the other ranks: {err}") from err


def _all_gather_bytes(payload: bytes) -> list[bytes]:
    """Every rank's ``payload``, in rank order (payloads may differ in length)."""
    device = _collective_device()
    size = torch.tensor([len(payload)], dtype=torch.int64, device=device)
    sizes = [torch.empty_like(size) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, size)
    lengths = [int(s) for s in torch.cat(sizes).tolist()]
    padded = torch.zeros(max(lengths), dtype=torch.uint8)
    padded[: len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    sent = padded.to(device)
    parts = [torch.empty_like(sent) for _ in lengths]
    dist.all_gather(parts, sent)
    return [
        part[:length].cpu().numpy().tobytes() for part, length in zip(parts, lengths, strict=True)
    ]


def _collective_device() -> torch.device:
    """Where the default group's backend takes tensors: the current CUDA device for nccl
    alone, else the CPU (gloo, or a ``cpu:gloo,cuda:nccl`` pair)."""
    backend = str(dist.get_backend())
    if "nccl" in backend and "gloo" not in backend:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")

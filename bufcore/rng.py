"""Per-buffer random generators and their checkpointable state.

Each buffer owns a ``torch.Generator`` on its storage device, so sampling never touches the
global RNGs and never syncs a CUDA device with the host. :func:`generator_state` turns one into
plain JSON data (the raw state as base64) and :func:`restore_generator` sets it back, so a buffer
reloaded from a checkpoint continues the same sample stream.

Data-parallel ranks seed their buffers with one seed, and must still not draw the same batches:
a buffer's stream is seeded from ``(seed, rank)`` (:func:`stream_seed`). Rank 0 uses the seed
itself, so a single process (rank 0 of 1) draws exactly what it drew before ranks existed.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, overload

import torch

from bufcore.checks import check_seed, check_usable_device
from bufcore.errors import StateError, is_out_of_memory


def make_generator(device: torch.device, seed: int | None, *, rank: int = 0) -> torch.Generator:
    """A generator on ``device`` for rank ``rank``'s stream of ``seed`` (:func:`stream_seed`),
    or seeded nondeterministically when ``seed`` is ``None``.

    Raises:
        TypeError: ``seed`` is not an int or None.
        ValueError: ``seed`` is outside what a generator takes (``[-2**63, 2**64)``), or
            ``device`` is not usable here (no such device, or torch built without it).
    """
    seed = stream_seed(check_seed(seed), rank)
    generator = _generator_on(device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


@overload
def stream_seed(seed: int, rank: int) -> int: ...


@overload
def stream_seed(seed: None, rank: int) -> None: ...


def stream_seed(seed: int | None, rank: int) -> int | None:
    """The generator seed of rank ``rank``'s sample stream under ``seed``.

    Rank 0: ``seed`` itself (a single process keeps the stream it always had). Rank ``r > 0``:
    64 bits of ``sha256("bufcore.stream:{seed}:{r}")``, so every ``(seed, rank)`` pair gets its
    own stream, unrelated to the streams of ``seed + r`` or of other ranks. ``None`` stays
    ``None`` (each process then seeds nondeterministically).
    """
    if seed is None or rank == 0:
        return seed
    digest = hashlib.sha256(f"bufcore.stream:{seed}:{rank}".encode("ascii")).digest()
    return int.from_bytes(digest[:8], "little")


def check_buffer_device(device: torch.device) -> torch.device:
    """``device`` if a buffer can live there: usable in this process, with a random generator
    (the check every buffer constructor makes, for callers that must make it first).

    Raises:
        ValueError: no such device here, torch built without it, or no generator there
            (``"meta"``); the message names ``device``.
    """
    _generator_on(device)
    return device


def _generator_on(device: torch.device) -> torch.Generator:
    check_usable_device(device)
    try:
        return torch.Generator(device=device)
    except RuntimeError as err:  # a usable device without generators, such as "meta"
        raise ValueError(
            f"device: {str(device)!r} has no random generator, so a buffer there cannot sample"
        ) from err


def rank_state(rank: int) -> dict[str, int]:
    """The ``rank`` entry of a buffer's saved state: none for rank 0, whose stream is the seed's
    own, so a single process saves exactly what it saved before ranks existed."""
    return {"rank": rank} if rank else {}


def branch_generator(generator: torch.Generator, rank: int) -> None:
    """Reseed ``generator`` with rank ``rank``'s branch of its present state: 64 bits of
    ``sha256("bufcore.branch:{rank}:" + state)``, so each rank that takes over one saved stream
    draws its own, deterministically."""
    raw = generator.get_state().numpy().tobytes()
    digest = hashlib.sha256(f"bufcore.branch:{rank}:".encode("ascii") + raw).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little"))


def generator_state(generator: torch.Generator) -> dict[str, Any]:
    """JSON-ready state of ``generator``."""
    raw = generator.get_state().numpy().tobytes()
    return {"device_type": generator.device.type, "state": base64.b64encode(raw).decode("ascii")}


def restore_generator(
    generator: torch.Generator, state: dict[str, Any], *, where: str = "state['generator']"
) -> None:
    """Continue the saved stream on ``generator``.

    A state saved on another device type (the CPU's Mersenne Twister versus CUDA's Philox)
    cannot be set; the generator is then seeded from a hash of that state, which keeps loads
    deterministic but starts a different stream.

    Args:
        generator: The generator to set.
        state: What :func:`generator_state` returned.
        where: How error messages name the state.

    Raises:
        StateError: the state is malformed (part ``"state"``).
    """
    try:
        device_type = state["device_type"]
        encoded = state["state"]
        if not isinstance(device_type, str) or not isinstance(encoded, str):
            raise TypeError("device_type and state must be str")
        # A device type torch knows (a str alone would seed unknown ones silently).
        torch.device(device_type)
        raw = base64.b64decode(encoded, validate=True)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise StateError(
            "state", f"{where}: expected device_type and base64 state, got {state!r:.80}"
        ) from err
    if device_type == generator.device.type:
        try:
            generator.set_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        except (RuntimeError, ValueError) as err:  # ValueError: an empty state
            raise StateError(
                "state", f"{where}: not a valid {device_type} state ({err})"
            ) from err
    else:
        generator.manual_seed(int.from_bytes(hashlib.sha256(raw).digest()[:8], "little"))


@contextmanager
def undone_on_error(generator: torch.Generator, *, argument: str) -> Iterator[None]:
    """Draw inside this block; if the block raises, the generator is set back as it was.

    A sample can fail only after its draws: gathering an output too large for memory, say. A
    failed call must not shift the stream, so the state is saved first (about 0.5 us on the CPU;
    a CUDA generator's state is its seed and offset, read without a device sync). An allocation
    failure is re-raised as a ``MemoryError`` naming ``argument``.

    Raises:
        MemoryError: the block ran out of memory.
    """
    saved = generator.get_state()
    try:
        yield
    except BaseException as err:
        generator.set_state(saved)
        if is_out_of_memory(err) and not isinstance(err, MemoryError):
            raise MemoryError(f"{argument}: the output cannot be allocated ({err})") from err
        raise

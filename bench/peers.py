"""One adapter per buffer implementation, all with the same small interface.

An :class:`Implementation` knows how to turn a pool batch (a nested dict of torch tensors) into
the input its library takes (done once, outside every timed block) and how to create an empty
buffer of a given capacity. The buffer it creates is a :class:`Subject`: ``extend(prepared)``
and ``sample(batch_size)``, nothing else, so every phase treats every library alike.

Inputs are each library's natural one: bufcore and the per-leaf port take the nested dict of
tensors, torchrl a ``TensorDict`` of the same nesting, cpprb a flat dict of numpy arrays (nested
keys joined with ``__``; the arrays share memory with the tensors).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from bench.perleaf import PerLeafBuffer
from bench.workload import LEAVES, Nested, iter_leaves

CPPRB_SEPARATOR = "__"


class Subject(Protocol):
    """A buffer under test."""

    def extend(self, data: Any) -> None: ...

    def sample(self, batch_size: int) -> Any: ...


@dataclass(frozen=True)
class Implementation:
    """How to feed and build one implementation.

    Attributes:
        name: Row label in the table.
        prepare: Pool batch -> this implementation's input (untimed).
        create: Capacity -> an empty buffer (timed in the first-fill phase).
        version: Package versions, for the report ("" for code that lives in bench/).
    """

    name: str
    prepare: Callable[[Nested], Any]
    create: Callable[[int], Subject]
    version: str


def package_version(name: str) -> str:
    """Installed version of distribution ``name``, or ``"missing"``."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def available(module: str) -> bool:
    """Whether ``module`` imports (peers come from the optional ``bench`` extra)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------------------------ bufcore
class BufcoreSubject:
    """:class:`bufcore.DictBuffer` on the CPU."""

    def __init__(self, capacity: int) -> None:
        import bufcore

        self.buffer = bufcore.DictBuffer(capacity=capacity, device="cpu", seed=0)

    def extend(self, data: Any) -> None:
        self.buffer.extend(data)

    def sample(self, batch_size: int) -> Any:
        return self.buffer.sample(batch_size)


def bufcore_impl() -> Implementation:
    return Implementation(
        "bufcore", lambda batch: batch, BufcoreSubject, package_version("bufcore")
    )


# ----------------------------------------------------------------------------------- per-leaf
class PerLeafSubject:
    """The per-leaf port of BFM-Zero's seed buffer (:mod:`bench.perleaf`)."""

    def __init__(self, capacity: int) -> None:
        self.buffer = PerLeafBuffer(capacity)

    def extend(self, data: Any) -> None:
        self.buffer.extend(data)

    def sample(self, batch_size: int) -> Any:
        return self.buffer.sample(batch_size)


def perleaf_impl() -> Implementation:
    return Implementation("per-leaf", lambda batch: batch, PerLeafSubject, "")


# ------------------------------------------------------------------------------------ torchrl
class TorchrlSubject:
    """``ReplayBuffer(storage=LazyTensorStorage(capacity), batch_size=...)`` over TensorDicts."""

    def __init__(self, capacity: int, batch_size: int) -> None:
        from torchrl.data import (  # type: ignore[import-untyped]
            LazyTensorStorage,
            ReplayBuffer,
        )

        self.buffer = ReplayBuffer(storage=LazyTensorStorage(capacity), batch_size=batch_size)

    def extend(self, data: Any) -> None:
        self.buffer.extend(data)

    def sample(self, batch_size: int) -> Any:
        return self.buffer.sample()


def _to_tensordict(batch: Nested) -> Any:
    from tensordict import TensorDict  # type: ignore[import-untyped]

    rows = next(iter_leaves(batch))[1].shape[0]
    return TensorDict(batch, batch_size=[rows])


def torchrl_impl(batch_size: int) -> Implementation:
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    version = f"{package_version('torchrl')} (tensordict {package_version('tensordict')})"
    return Implementation(
        "torchrl",
        _to_tensordict,
        lambda capacity: TorchrlSubject(capacity, batch_size),
        version,
    )


# -------------------------------------------------------------------------------------- cpprb
def cpprb_env_dict() -> dict[str, dict[str, Any]]:
    """cpprb's ``env_dict`` for :data:`LEAVES` (flat names, numpy dtypes)."""
    return {
        CPPRB_SEPARATOR.join(leaf.path): {
            "shape": leaf.shape,
            "dtype": torch.empty(0, dtype=leaf.dtype).numpy().dtype,
        }
        for leaf in LEAVES
    }


class CpprbSubject:
    """``cpprb.ReplayBuffer(capacity, env_dict)``."""

    def __init__(self, capacity: int) -> None:
        import cpprb  # type: ignore[import-untyped]

        self.buffer = cpprb.ReplayBuffer(capacity, cpprb_env_dict())

    def extend(self, data: Any) -> None:
        self.buffer.add(**data)

    def sample(self, batch_size: int) -> Any:
        return self.buffer.sample(batch_size)


def _to_flat_numpy(batch: Nested) -> dict[str, Any]:
    return {CPPRB_SEPARATOR.join(path): tensor.numpy() for path, tensor in iter_leaves(batch)}


def cpprb_impl() -> Implementation:
    return Implementation("cpprb", _to_flat_numpy, CpprbSubject, package_version("cpprb"))


def peer_implementations(batch_size: int) -> tuple[list[Implementation], list[str]]:
    """The peers that can run here, and the names of those whose packages are missing."""
    found: list[Implementation] = [perleaf_impl()]
    missing: list[str] = []
    if available("torchrl") and available("tensordict"):
        found.append(torchrl_impl(batch_size))
    else:
        missing.append("torchrl")
    if available("cpprb"):
        found.append(cpprb_impl())
    else:
        missing.append("cpprb")
    return found, missing

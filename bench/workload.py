"""The data every benchmark moves: BFM-Zero's default transition and a pool of batches.

A transition (one row) is the observation dict ``{state: 67, last_action: 29,
privileged_state: 217, history_actor: 580}``, ``action: 29``, ``z: 256``, ``reward: 1`` (all
float32) and ``terminated``/``truncated`` (bool, width 1): 4,718 bytes of payload.

Every implementation receives the same batches, drawn once into a small pool that the timed
loops cycle through; the pool is larger than the last-level cache, so writes read their source
from memory rather than from cache, as they would with fresh rollouts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

KeyPath = tuple[str, ...]
Nested = dict[str, Any]


@dataclass(frozen=True)
class Leaf:
    """One stored field: key path, trailing shape and dtype."""

    path: KeyPath
    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        """Bytes per row."""
        count = 1
        for size in self.shape:
            count *= size
        return count * self.dtype.itemsize


LEAVES: tuple[Leaf, ...] = (
    Leaf(("observation", "state"), (67,), torch.float32),
    Leaf(("observation", "last_action"), (29,), torch.float32),
    Leaf(("observation", "privileged_state"), (217,), torch.float32),
    Leaf(("observation", "history_actor"), (580,), torch.float32),
    Leaf(("action",), (29,), torch.float32),
    Leaf(("z",), (256,), torch.float32),
    Leaf(("reward",), (1,), torch.float32),
    Leaf(("terminated",), (1,), torch.bool),
    Leaf(("truncated",), (1,), torch.bool),
)

ROW_BYTES = sum(leaf.nbytes for leaf in LEAVES)
"""Payload bytes of one transition (4,718)."""


def iter_leaves(batch: Nested) -> Iterator[tuple[KeyPath, torch.Tensor]]:
    """``(key path, tensor)`` for every leaf of a batch, in :data:`LEAVES` order."""
    for leaf in LEAVES:
        node: Any = batch
        for part in leaf.path:
            node = node[part]
        yield leaf.path, node


def make_batch(rows: int, generator: torch.Generator) -> Nested:
    """A nested batch of ``rows`` transitions with random contents (contiguous tensors)."""
    batch: Nested = {}
    for leaf in LEAVES:
        shape = (rows, *leaf.shape)
        if leaf.dtype == torch.bool:
            value = torch.rand(shape, generator=generator) < 0.01
        else:
            value = torch.randn(shape, generator=generator, dtype=leaf.dtype)
        node = batch
        for part in leaf.path[:-1]:
            node = node.setdefault(part, {})
        node[leaf.path[-1]] = value
    return batch


def make_pool(batches: int, rows: int, seed: int = 0) -> list[Nested]:
    """``batches`` distinct nested batches of ``rows`` transitions each."""
    generator = torch.Generator().manual_seed(seed)
    return [make_batch(rows, generator) for _ in range(batches)]


def slice_batch(batch: Nested, rows: int) -> Nested:
    """The first ``rows`` transitions of a nested batch (views)."""
    return {
        key: slice_batch(value, rows) if isinstance(value, dict) else value[:rows]
        for key, value in batch.items()
    }


def pack_rows(batch: Nested) -> torch.Tensor:
    """The batch as one contiguous ``uint8 [rows, ROW_BYTES]`` matrix (leaves side by side)."""
    parts = [
        tensor.reshape(tensor.shape[0], -1).view(torch.uint8) for _, tensor in iter_leaves(batch)
    ]
    return torch.cat(parts, dim=1).contiguous()

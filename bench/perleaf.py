"""The baseline: BFM-Zero's seed ``DictBuffer`` ported as it is written (one tensor per leaf).

Storage is a nested dict of zero-initialised tensors ``[capacity, *shape]`` allocated on the
first extend; ``extend`` writes ``storage[k][idx:end] = torch.as_tensor(v)`` leaf by leaf (two
slices at the wrap) and ``sample`` draws ``torch.randint`` indices and fancy-indexes every leaf
(``v[idx]``). No validation, no packing: this is what bufcore replaces and must not be slower
than.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

Nested = dict[str, Any]


def _allocate(data: Mapping[str, Any], capacity: int, device: torch.device) -> Nested:
    storage: Nested = {}
    for key, value in data.items():
        if isinstance(value, Mapping):
            storage[key] = _allocate(value, capacity, device)
        else:
            tensor = torch.as_tensor(value)
            storage[key] = torch.zeros(
                (capacity, *tensor.shape[1:]), dtype=tensor.dtype, device=device
            )
    return storage


def _gather(storage: Nested, index: torch.Tensor) -> Nested:
    return {
        key: _gather(value, index) if isinstance(value, dict) else value[index]
        for key, value in storage.items()
    }


class PerLeafBuffer:
    """FIFO ring over a nested dict of per-leaf tensors, in the style of BFM-Zero's seed.

    Args:
        capacity: Rows kept.
        device: Where the tensors live.
    """

    def __init__(self, capacity: int, device: str | torch.device = "cpu") -> None:
        self.capacity = capacity
        self.device = torch.device(device)
        self.storage: Nested | None = None
        self._idx = 0
        self._is_full = False

    def __len__(self) -> int:
        return self.capacity if self._is_full else self._idx

    @torch.no_grad()
    def extend(self, data: Mapping[str, Any]) -> None:
        """Append a nested batch whose leaves share a leading batch axis (<= capacity rows)."""
        if self.storage is None:
            self.storage = _allocate(data, self.capacity, self.device)
        rows = self._write(data, self.storage)
        self._idx = (self._idx + rows) % self.capacity

    def _write(self, data: Mapping[str, Any], storage: Nested) -> int:
        rows = 0
        for key, value in data.items():
            if isinstance(value, Mapping):
                rows = self._write(value, storage[key])
                continue
            rows = int(value.shape[0])
            end = self._idx + rows
            target = storage[key]
            if end >= self.capacity:
                diff = self.capacity - self._idx
                target[self._idx :] = torch.as_tensor(value[:diff], device=self.device)
                target[: rows - diff] = torch.as_tensor(value[diff:], device=self.device)
                self._is_full = True
            else:
                target[self._idx : end] = torch.as_tensor(value, device=self.device)
        return rows

    @torch.no_grad()
    def sample(self, batch_size: int) -> Nested:
        """``batch_size`` rows drawn uniformly with replacement (fancy indexing per leaf)."""
        if self.storage is None:
            raise ValueError("cannot sample: the buffer is empty")
        index = torch.randint(0, len(self), (batch_size,))
        return _gather(self.storage, index)

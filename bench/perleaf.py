"""The baselines: BFM-Zero's seed buffers ported as they are written (one tensor per leaf).

:class:`PerLeafBuffer` is the seed's ``DictBuffer``. Storage is a nested dict of
zero-initialised tensors ``[capacity, *shape]`` allocated on the first extend; ``extend`` writes
``storage[k][idx:end] = torch.as_tensor(v)`` leaf by leaf (two slices at the wrap) and
``sample`` draws ``torch.randint`` indices and fancy-indexes every leaf (``v[idx]``). No
validation, no packing: this is what bufcore replaces and must not be slower than.

:class:`PerLeafTrajectoryBuffer` is the seed's online ``TrajectoryDictBufferMultiDim`` with
``n_dim=2`` (REFERENCE §3-4): leaves ``[capacity, E, *shape]``, trajectory boundaries from a
full scan of the end flags (:func:`bufcore.sampling.boundaries.find_start_stop_traj`, the
reference's semantics) recomputed on the first sample after an extend, windows from :func:`get_idxs`
(ported with its off-by-one), and ``x[t, env]`` per leaf for the window rows and again at
``t + 1`` for ``next``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bufcore.sampling.boundaries import find_start_stop_traj

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


# ------------------------------------------------------------------ trajectory (online) buffer
def get_idxs(
    seq_length: int,
    num_slices: int,
    lengths: torch.Tensor,
    start_idx: torch.Tensor,
    storage_length: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """The reference's window draw (REFERENCE §3.3): ``[num_slices * seq_length, ndim]`` rows.

    A trajectory uniformly, then ``floor(rand * (L - seq_length - 1))`` as the start offset
    (never the last valid start: the reference's off-by-one, kept), then the slices of
    ``_tensor_slices_from_startend`` with the time column modulo ``storage_length``.
    """
    traj_idx = torch.randint(lengths.shape[0], (num_slices,), generator=generator)
    end_point = lengths[traj_idx] - seq_length - 1
    relative_starts = (torch.rand(num_slices, generator=generator) * end_point).floor()
    starts = torch.cat(
        [
            (start_idx[traj_idx, 0] + relative_starts.to(start_idx.dtype)).unsqueeze(1),
            start_idx[traj_idx, 1:],
        ],
        1,
    )
    arange = torch.zeros(seq_length, starts.shape[1], dtype=starts.dtype)
    arange[:, 0] = torch.arange(seq_length)
    rows = (starts[:, None, :] + arange[None]).flatten(0, 1)
    rows[:, 0] = rows[:, 0] % storage_length
    return rows


class PerLeafTrajectoryBuffer(PerLeafBuffer):
    """The seed's ``TrajectoryDictBufferMultiDim(n_dim=2)``: windows of one env's rows.

    Args:
        capacity: Time rows kept (leaves are ``[capacity, E, *shape]``).
        seq_length: Rows per window.
        output_key_t: Top-level keys returned for the window rows.
        output_key_tp1: Top-level keys returned under ``"next"`` (the row after each one).
        end_key: Top-level key of the end flags ``[n, E, 1]``.
        seed: Seed of the draws.
    """

    def __init__(
        self,
        capacity: int,
        *,
        seq_length: int,
        output_key_t: Sequence[str],
        output_key_tp1: Sequence[str],
        end_key: str,
        seed: int = 0,
    ) -> None:
        super().__init__(capacity)
        self.seq_length = seq_length
        self.output_key_t = list(output_key_t)
        self.output_key_tp1 = list(output_key_tp1)
        self.end_key = end_key
        self.generator = torch.Generator().manual_seed(seed)
        self._boundaries: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    @torch.no_grad()
    def extend(self, data: Mapping[str, Any]) -> None:
        """Append ``[n, E, ...]`` rows; the boundaries are recomputed on the next sample."""
        super().extend(data)
        self._boundaries = None

    def boundaries(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(start_idx, stop_idx, lengths)`` of the stored trajectories, cached until an extend.

        The reference's call: a full scan with the newest row (``_idx - 1``) as the cursor.
        """
        if self._boundaries is None:
            if self.storage is None:
                raise ValueError("cannot sample: the buffer is empty")
            end = self.storage[self.end_key].squeeze(-1)[: len(self)]
            self._boundaries = find_start_stop_traj(
                end, at_capacity=self._is_full, cursor=self._idx - 1
            )
        return self._boundaries

    @torch.no_grad()
    def sample(self, batch_size: int) -> Nested:
        """``batch_size // seq_length`` windows, slice-major, with ``"next"``."""
        if self.storage is None:
            raise ValueError("cannot sample: the buffer is empty")
        start_idx, _, lengths = self.boundaries()
        offset = 1 if self.output_key_tp1 else 0
        eligible = lengths >= self.seq_length + offset
        rows = get_idxs(
            self.seq_length,
            batch_size // self.seq_length,
            lengths[eligible],
            start_idx[eligible],
            self.capacity,
            self.generator,
        )
        time, env = rows.unbind(-1)
        output = {k: _gather_at(self.storage[k], time, env) for k in self.output_key_t}
        if self.output_key_tp1:
            after = (time + 1) % self.capacity
            output["next"] = {
                k: _gather_at(self.storage[k], after, env) for k in self.output_key_tp1
            }
        return output


def _gather_at(node: Any, time: torch.Tensor, env: torch.Tensor) -> Any:
    """``x[time, env]`` for every tensor of a nested dict (the reference's ``tree_map``)."""
    if isinstance(node, dict):
        return {key: _gather_at(value, time, env) for key, value in node.items()}
    return node[time, env]

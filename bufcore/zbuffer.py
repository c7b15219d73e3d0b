"""``ZBuffer``: a FIFO ring of latent ``z`` vectors (BFM-Zero's ``misc/zbuffer.py``).

Same ring arithmetic as :class:`bufcore.DictBuffer` (it shares :class:`RingStorage`), allocated
eagerly because the shape is known up front. Unlike the reference, sampling uses the buffer's own
generator instead of numpy's global RNG, inputs are validated, and it saves and loads in the
dict-family checkpoint format.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from bufcore import checkpoint
from bufcore.errors import CorruptCheckpointError
from bufcore.rng import generator_state, make_generator, restore_generator
from bufcore.storage import RingStorage
from bufcore.transition import check_count, resolve_device
from bufcore.tree import LeafSpec, dtype_from_name, dtype_name

_Z = ("z",)


@checkpoint.register_target("bufcore.ZBuffer", "humanoidverse.agents.misc.zbuffer.ZBuffer")
class ZBuffer(checkpoint.Loadable):
    """Ring of ``[dim]`` vectors.

    Args:
        capacity: Vectors kept.
        dim: Length of each vector.
        device: Where vectors live.
        dtype: Stored dtype.
        seed: Seed of the buffer's own generator; ``None`` for a nondeterministic one.

    Raises:
        ValueError: ``capacity`` or ``dim`` below 1, an unknown device.
        TypeError: ``dtype`` is not a torch dtype; non-int sizes or seed.
    """

    _checkpoint_target: str

    def __init__(
        self,
        capacity: int,
        dim: int,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        seed: int | None = None,
    ) -> None:
        check_count(capacity, "capacity")
        check_count(dim, "dim")
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype: expected a torch.dtype, got {dtype!r}")
        self.capacity = capacity
        self.dim = dim
        self.device = resolve_device(device)
        self.dtype = dtype
        self.seed = seed
        self._generator = make_generator(self.device, seed)
        self._storage = RingStorage(capacity, device=self.device)
        self._storage.allocate({_Z: LeafSpec((dim,), dtype)}, None)

    def __len__(self) -> int:
        return len(self._storage)

    def empty(self) -> bool:
        return len(self) == 0

    @property
    def cursor(self) -> int:
        return self._storage.cursor

    @property
    def is_full(self) -> bool:
        return self._storage.is_full

    def add(self, z: Any) -> None:
        """Append ``z`` of shape ``[n, dim]``; more than ``capacity`` keeps the last ones.

        Raises:
            ValueError: the shape is not ``[n, dim]``.
            TypeError: ``z`` is not numeric, or its dtype cannot be cast safely.
        """
        batch = self._storage.validate({"z": z}, argument="add")
        with torch.no_grad():
            self._storage.write(batch)

    def sample(self, num: int, device: str | torch.device | None = None) -> torch.Tensor:
        """``num`` vectors drawn uniformly with replacement: a fresh ``[num, dim]`` tensor.

        Raises:
            ValueError: the buffer is empty or ``num < 0``.
        """
        check_count(num, "num", minimum=0)
        if self.empty():
            raise ValueError("cannot sample: the z buffer is empty (add to it first)")
        index = torch.randint(len(self), (num,), generator=self._generator, device=self.device)
        z = self._storage.gather(index)[_Z]
        return z if device is None else z.to(resolve_device(device))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Publish a checkpoint directory at ``path`` atomically."""
        storage = self._storage
        payload = checkpoint.Payload(
            target=self._checkpoint_target,
            config={
                "capacity": self.capacity,
                "dim": self.dim,
                "device": str(self.device),
                "dtype": dtype_name(self.dtype),
                "_idx": storage.cursor,
                "_is_full": storage.is_full,
            },
            separator="-",
            batch_dims=1,
            spec=storage.spec or {},
            arrays=checkpoint.storage_arrays(storage),
            state={"seed": self.seed, "generator": generator_state(self._generator)},
        )
        checkpoint.save_payload(path, payload)

    @classmethod
    def _from_checkpoint(
        cls, reader: checkpoint.CheckpointReader, device: str | torch.device | None
    ) -> ZBuffer:
        where: Path = reader.path / checkpoint.CONFIG
        config = reader.config
        try:
            buffer = cls(
                checkpoint.config_value(config, "capacity", int, where=where),
                checkpoint.config_value(config, "dim", int, where=where),
                device
                if device is not None
                else checkpoint.config_value(config, "device", str, where=where),
                dtype_from_name(checkpoint.config_value(config, "dtype", str, where=where)),
            )
        except (TypeError, ValueError) as err:
            if isinstance(err, CorruptCheckpointError):
                raise
            raise CorruptCheckpointError(where, str(err)) from err
        # A fresh storage reads the rows; the eager allocation is replaced by the stored spec.
        storage = RingStorage(buffer.capacity, device=buffer.device)
        checkpoint.restore_storage(
            reader,
            storage,
            separator="-",
            cursor=config.get("_idx"),
            is_full=config.get("_is_full"),
        )
        if storage.spec is not None and storage.spec != buffer._storage.spec:
            raise CorruptCheckpointError(
                reader.path / checkpoint.PAYLOAD,
                f"stored z has {storage.spec}, config says dim {buffer.dim}, "
                f"{dtype_name(buffer.dtype)}",
            )
        if storage.spec is None:
            storage.allocate({_Z: LeafSpec((buffer.dim,), buffer.dtype)}, None)
        buffer._storage = storage
        generator = reader.state.get("generator")
        if generator is not None:
            try:
                restore_generator(buffer._generator, generator)
            except ValueError as err:
                raise CorruptCheckpointError(reader.path / checkpoint.STATE, str(err)) from err
        buffer.seed = reader.state.get("seed")
        return buffer

"""``ZBuffer``: a FIFO ring of latent ``z`` vectors (BFM-Zero's ``misc/zbuffer.py``).

Same ring arithmetic as :class:`bufcore.DictBuffer` (it shares :class:`RingStorage`), allocated
eagerly because the shape is known up front. Unlike the reference, sampling uses the buffer's own
generator instead of numpy's global RNG, inputs are validated, and it saves and loads in the
dict-family checkpoint format.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from bufcore.buffers.base import CheckpointedBuffer
from bufcore.checks import (
    MAX_COUNT,
    check_device,
    check_dtype,
    check_int,
    check_seed,
    check_usable_device,
)
from bufcore.fields import Field
from bufcore.persist.checkpoint import OpenedCheckpoint
from bufcore.rng import make_generator, undone_on_error
from bufcore.storage.ring import STORABLE, Batch, RingStorage
from bufcore.tree import LeafSpec, dtype_from_name, dtype_name

_Z = ("z",)


class ZBuffer(CheckpointedBuffer):
    """Ring of ``[dim]`` vectors.

    Args:
        capacity: Vectors kept.
        dim: Length of each vector.
        device: Where vectors live.
        dtype: Stored dtype.
        seed: Seed of the buffer's own generator; ``None`` for a nondeterministic one.

    Raises:
        ValueError: ``capacity`` or ``dim`` below 1, a dtype that cannot be stored (complex,
            float8), a device that is unknown or not usable in this process, a seed outside
            ``[-2**63, 2**64)``.
        TypeError: ``dtype`` is not a torch dtype; non-int sizes or seed.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = (
        "bufcore.ZBuffer",
        "humanoidverse.agents.misc.zbuffer.ZBuffer",
    )

    def __init__(
        self,
        capacity: int,
        dim: int,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
        seed: int | None = None,
    ) -> None:
        self.capacity = check_int(capacity, "capacity", minimum=1)
        self.dim = check_int(dim, "dim", minimum=1)
        self.dtype = check_dtype(dtype, "dtype", STORABLE)
        self.device = check_device(device)
        self.seed = check_seed(seed)
        self._generator = make_generator(self.device, self.seed)
        self._storage = RingStorage(self.capacity, device=self.device)
        self._storage.allocate({_Z: LeafSpec((self.dim,), dtype)}, None)

    def __repr__(self) -> str:
        return (
            f"ZBuffer(capacity={self.capacity}, dim={self.dim}, len={len(self)}, "
            f"device={str(self.device)!r})"
        )

    def add(self, z: Any) -> None:
        """Append ``z`` of shape ``[n, dim]``; more than ``capacity`` keeps the last ones.

        Raises:
            ValueError: the shape is not ``[n, dim]``.
            TypeError: ``z`` is not numeric, or its dtype cannot be cast safely.
        """
        tensor = self._storage.check_leaf(z, _Z, where="z")
        with torch.no_grad():
            self._storage.write(Batch({_Z: tensor}, int(tensor.shape[0]), None))

    def sample(self, num: int, device: str | torch.device | None = None) -> torch.Tensor:
        """``num`` vectors drawn uniformly with replacement: a fresh ``[num, dim]`` tensor.

        Raises:
            ValueError: the buffer is empty, ``num < 0``, or a device that is unknown or not
                usable in this process (all checked before anything is drawn).
            TypeError: ``num`` is not an int, or ``device`` not a str or ``torch.device``.
            MemoryError: the output cannot be allocated (the generator is left as it was).
        """
        num = check_int(num, "num", minimum=0, maximum=MAX_COUNT)
        target = None if device is None else check_usable_device(check_device(device))
        if self.empty():
            raise ValueError("cannot sample: the z buffer is empty (add to it first)")
        with undone_on_error(self._generator, argument="num"):
            index = torch.randint(len(self), (num,), generator=self._generator, device=self.device)
            z = self._storage.gather(index)[_Z]
            return z if target is None else z.to(target)

    # ------------------------------------------------------------ persistence
    def _config(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "dim": self.dim,
            "device": str(self.device),
            "dtype": dtype_name(self.dtype),
        }

    @classmethod
    def _init_kwargs(cls, opened: OpenedCheckpoint, config: Field, state: Field) -> dict[str, Any]:
        return {
            "capacity": config.key("capacity").integer(),
            "dim": config.key("dim").integer(),
            "device": config.key("device").text(),
            "dtype": config.key("dtype").parse(dtype_from_name),
        }

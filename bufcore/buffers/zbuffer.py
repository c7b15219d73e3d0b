"""``ZBuffer``: a FIFO ring of latent ``z`` vectors (BFM-Zero's ``misc/zbuffer.py``).

Same ring arithmetic as :class:`bufcore.DictBuffer` (it shares :class:`RingStorage`), allocated
eagerly because the shape is known up front. Unlike the reference, sampling uses the buffer's own
generator instead of numpy's global RNG, inputs are validated, and it saves and loads in the
dict-family checkpoint format.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from bufcore.buffers.base import Buffer
from bufcore.checks import (
    MAX_COUNT,
    check_device,
    check_dtype,
    check_int,
    check_seed,
    check_usable_device,
)
from bufcore.distributed import check_rank
from bufcore.fields import Field
from bufcore.rng import make_generator
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.samplers import UniformRows
from bufcore.storage.batches import Batch
from bufcore.storage.ring import STORABLE, RingStorage
from bufcore.tree import LeafSpec, dtype_from_name, dtype_name

_Z = ("z",)


class ZBuffer(Buffer):
    """Ring of ``[dim]`` vectors.

    Args:
        capacity: Vectors kept.
        dim: Length of each vector.
        device: Where vectors live.
        dtype: Stored dtype.
        seed: Seed of the buffer's own generator; ``None`` for a nondeterministic one.
        rank: Whose sample stream of ``seed`` (:func:`bufcore.rng.stream_seed`): ranks sharing
            a seed draw different batches, rank 0 the seed's own stream. ``None`` for this
            process's rank in the default process group (0 without one).

    Raises:
        ValueError: ``capacity`` or ``dim`` below 1, a dtype that cannot be stored (complex,
            float8), a device that is unknown or not usable in this process, a seed outside
            ``[-2**63, 2**64)``, a negative ``rank``.
        TypeError: ``dtype`` is not a torch dtype; non-int sizes, seed or rank.
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
        rank: int | None = None,
    ) -> None:
        self.capacity = check_int(capacity, "capacity", minimum=1)
        self.dim = check_int(dim, "dim", minimum=1)
        self.dtype = check_dtype(dtype, "dtype", STORABLE)
        self.device = check_device(device)
        self.seed = check_seed(seed)
        self.rank = check_rank(rank)
        self._generator = make_generator(self.device, self.seed, rank=self.rank)
        self._storage = RingStorage(self.capacity, device=self.device)
        self._storage.allocate({_Z: LeafSpec((self.dim,), dtype)}, None)
        self._sampler: UniformRows = UniformRows()

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
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` (nothing changes).
        """
        tensor = self._storage.check_leaf(z, _Z, where="z")
        with torch.no_grad():
            self._storage.write(Batch({_Z: tensor}, int(tensor.shape[0]), None))

    def sample(
        self,
        num: int,
        device: str | torch.device | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """``num`` vectors drawn uniformly with replacement: a fresh ``[num, dim]`` tensor.

        Args:
            num: Vectors to draw.
            device: Where to put them; ``None`` for the buffer's device.
            generator: Draw from this generator (on the buffer's device) instead of the
                buffer's own, whose stream then stays where it was; ``None`` for its own.

        Raises:
            ValueError: the buffer is empty, ``num < 0``, a device that is unknown or not
                usable in this process, or a generator on another device than the buffer's
                (all checked before anything is drawn).
            TypeError: ``num`` is not an int, ``device`` not a str or ``torch.device``, or
                ``generator`` not a ``torch.Generator``.
            MemoryError: the output cannot be allocated (the generator is left as it was).
            LeafNotLoadedError: a leaf it gathers was left out by ``load(..., leaves=)``.
        """
        num, target = self._checked_request(num, device)
        with self._drawing(generator, argument="num") as drawn_from:
            index = self._sampler.draw(self._ring(), num, drawn_from)
            z = self._storage.gather(index.rows)[_Z]
            return z if target is None else z.to(target)

    def sample_index(
        self,
        num: int,
        device: str | torch.device | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> SampleIndex:
        """Where :meth:`sample` with these arguments would read, drawn as it draws.

        The generator advances exactly as :meth:`sample` advances it; the index tensors are
        put on ``device`` as the vectors would be.

        Raises:
            ValueError: as :meth:`sample`.
            TypeError: as :meth:`sample`.
        """
        num, target = self._checked_request(num, device)
        with self._drawing(generator, argument="num") as drawn_from:
            index = self._sampler.draw(self._ring(), num, drawn_from)
            return index if target is None else index.to(target)

    def _checked_request(
        self, num: int, device: str | torch.device | None
    ) -> tuple[int, torch.device | None]:
        """``num`` and the output device, checked, in a buffer that holds vectors.

        Raises:
            ValueError: the buffer is empty, ``num < 0`` or an unusable device.
            TypeError: ``num`` is not an int or ``device`` not a device.
        """
        num = check_int(num, "num", minimum=0, maximum=MAX_COUNT)
        target = None if device is None else check_usable_device(check_device(device))
        if self.empty():
            raise ValueError("cannot sample: the z buffer is empty (add to it first)")
        return num, target

    def clear(self) -> None:
        """Remove every vector (``len`` becomes 0); the memory stays allocated."""
        self._storage.clear()

    # ------------------------------------------------------------ state idiom
    def state_dict(self) -> dict[str, Any]:
        config = {
            "capacity": self.capacity,
            "dim": self.dim,
            "device": str(self.device),
            "dtype": dtype_name(self.dtype),
        }
        return self._state_dict(config, {})

    @classmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        return {
            "capacity": config.key("capacity").integer(),
            "dim": config.key("dim").integer(),
            "device": config.key("device").text(),
            "dtype": config.key("dtype").parse(dtype_from_name),
        }

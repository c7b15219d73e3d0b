"""``DictBuffer``: BFM-Zero's FIFO transition buffer over nested dicts, without its bugs.

The public surface follows ``humanoidverse.agents.buffers.transition.DictBuffer`` (constructor
fields, ``extend``/``sample``/``get_full_buffer``/``save``/``load``, config.json layout) so code
ports with few changes. Differences (DESIGN §2): the whole batch is validated before anything is
written, ``load(device=...)`` is honoured, custom separators apply at every depth, an empty
buffer saves and loads, ``get_full_buffer`` returns a chronological copy, and sampling uses the
buffer's own generator on the storage device.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch

from bufcore import checkpoint
from bufcore.errors import CorruptCheckpointError
from bufcore.rng import generator_state, make_generator, restore_generator
from bufcore.storage import Batch, RingStorage
from bufcore.tree import format_key_path, unflatten

B = TypeVar("B", bound="DictBuffer")


def resolve_device(device: str | torch.device, *, argument: str = "device") -> torch.device:
    """``torch.device(device)`` with a clear error.

    Raises:
        ValueError: not a device string torch understands.
    """
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"{argument}: expected a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from err


def check_count(value: Any, argument: str, *, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``.

    Raises:
        TypeError: not an int (bools are refused too).
        ValueError: smaller than ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument}: expected an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{argument}: expected an int >= {minimum}, got {value}")
    return value


@checkpoint.register_target(
    "bufcore.DictBuffer",
    "humanoidverse.agents.buffers.transition.DictBuffer",
    "metamotivo.buffers.buffers.DictBuffer",
)
class DictBuffer(checkpoint.Loadable):
    """FIFO ring of transitions stored as a nested dict of tensors.

    The first non-empty :meth:`extend` fixes the spec (key path -> trailing shape, dtype) and
    allocates ``capacity`` rows once. Later batches must match it; a dtype is cast only when the
    cast is safe (float64 -> float32 yes, float -> int no).

    Args:
        capacity: Rows kept; older rows are overwritten first.
        device: Where the rows live and where samples (and their indices) are created.
        nested_key_separator: Joins nested keys into dataset names in ``buffer.hdf5``.
        seed: Seed of the buffer's own generator; ``None`` for a nondeterministic one.

    Raises:
        ValueError: ``capacity < 1``, an unknown device, or an empty separator or one with '/'.
        TypeError: ``capacity`` or ``seed`` is not an int.
    """

    _batch_dims = 1
    _checkpoint_target: str

    def __init__(
        self,
        *,
        capacity: int,
        device: str | torch.device = "cpu",
        nested_key_separator: str = "-",
        seed: int | None = None,
    ) -> None:
        check_count(capacity, "capacity")
        if not isinstance(nested_key_separator, str) or not nested_key_separator:
            raise ValueError(
                f"nested_key_separator: expected a non-empty str, got {nested_key_separator!r}"
            )
        if "/" in nested_key_separator:
            raise ValueError("nested_key_separator: '/' is HDF5's group separator; choose another")
        self.capacity = capacity
        self.device = resolve_device(device)
        self.nested_key_separator = nested_key_separator
        self.seed = seed
        self._generator = make_generator(self.device, seed)
        self._storage = RingStorage(capacity, device=self.device, batch_dims=self._batch_dims)

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        return len(self._storage)

    def size(self) -> int:
        """Rows held (``len(self)``)."""
        return len(self)

    def empty(self) -> bool:
        return len(self) == 0

    @property
    def cursor(self) -> int:
        """Row the next write starts at (config.json's ``_idx``)."""
        return self._storage.cursor

    @property
    def is_full(self) -> bool:
        """Whether a write has reached the last row (config.json's ``_is_full``)."""
        return self._storage.is_full

    @property
    def storage(self) -> dict[str, Any] | None:
        """Live nested views ``[capacity, ...]`` of the rows, BFM-Zero's ``storage`` (read only).

        ``None`` before the first extend.
        """
        return unflatten(self._storage.views) if self._storage.allocated else None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(capacity={self.capacity}, len={len(self)}, "
            f"cursor={self.cursor}, device={str(self.device)!r})"
        )

    # ---------------------------------------------------------------- writing
    def extend(self, data: Mapping[str, Any]) -> None:
        """Append a batch: a nested dict whose leaves share a leading batch axis.

        A batch larger than ``capacity`` keeps its last ``capacity`` rows in order; an empty
        batch is a no-op. Nothing is written unless the whole batch is valid.

        Raises:
            TypeError: not a mapping, a non-str key, a non-numeric leaf, or an unsafe dtype cast.
            ValueError: missing or extra keys, a missing batch axis, a wrong trailing shape, or
                unequal batch sizes.
        """
        batch = self._storage.validate(data)
        if batch.size == 0:
            return
        newly_allocated = not self._storage.allocated
        with torch.no_grad():
            self._write(batch)
        if newly_allocated:
            self._warn_unsaveable_keys()

    def _write(self, batch: Batch) -> None:
        """Write a validated, non-empty batch (subclasses extend this to track more state)."""
        self._storage.write(batch)

    def _warn_unsaveable_keys(self) -> None:
        sep = self.nested_key_separator
        clashing = [p for p in self._storage.views if any(sep in part for part in p)]
        if clashing:
            warnings.warn(
                f"keys {', '.join(map(format_key_path, clashing))} contain the nested key "
                f"separator {sep!r}: this buffer cannot be saved until they are renamed",
                stacklevel=3,
            )

    # ---------------------------------------------------------------- reading
    def sample(self, batch_size: int) -> dict[str, Any]:
        """Draw ``batch_size`` rows uniformly, with replacement, from the filled rows.

        Returns:
            The nested structure of the stored data; every leaf a contiguous tensor
            ``[batch_size, ...]`` on the buffer's device.

        Raises:
            ValueError: the buffer is empty or ``batch_size < 1``.
        """
        check_count(batch_size, "batch_size")
        if self.empty():
            raise ValueError("cannot sample: the buffer is empty (extend it first)")
        index = torch.randint(
            len(self), (batch_size,), generator=self._generator, device=self.device
        )
        return unflatten(self._storage.gather(index))

    def get_full_buffer(self) -> dict[str, Any]:
        """A copy of the filled rows in chronological order (oldest first); ``{}`` when empty."""
        if self.empty():
            return {}
        time_index = self._storage.chronological_time_index()
        return unflatten(self._storage.gather(self._storage.flat_index(time_index)))

    # ------------------------------------------------------------ persistence
    def _config(self) -> dict[str, Any]:
        """config.json fields besides ``_idx``, ``_is_full`` and ``__target__``."""
        return {
            "capacity": self.capacity,
            "device": str(self.device),
            "nested_key_separator": self.nested_key_separator,
        }

    def _state(self) -> dict[str, Any]:
        """state.json content: what BFM-Zero's format has no place for."""
        return {"seed": self.seed, "generator": generator_state(self._generator)}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Publish a checkpoint directory at ``path`` atomically (see :mod:`bufcore.checkpoint`).

        Raises:
            ValueError: a key contains the nested key separator.
            FileExistsError: ``path`` exists and is not a checkpoint directory.
        """
        storage = self._storage
        payload = checkpoint.Payload(
            target=self._checkpoint_target,
            config={**self._config(), "_idx": storage.cursor, "_is_full": storage.is_full},
            separator=self.nested_key_separator,
            batch_dims=storage.batch_dims,
            spec=storage.spec or {},
            arrays=checkpoint.storage_arrays(storage),
            state=self._state(),
        )
        checkpoint.save_payload(path, payload)

    @classmethod
    def _init_kwargs(cls, config: dict[str, Any], where: Path) -> dict[str, Any]:
        """Constructor arguments from config.json (``_idx``, ``_is_full``, target removed)."""
        return {
            "capacity": checkpoint.config_value(config, "capacity", int, where=where),
            "device": checkpoint.config_value(config, "device", str, where=where),
            "nested_key_separator": config.get("nested_key_separator", "-"),
        }

    @classmethod
    def _from_checkpoint(
        cls: type[B], reader: checkpoint.CheckpointReader, device: str | torch.device | None
    ) -> B:
        where = reader.path / checkpoint.CONFIG
        config = {
            k: v for k, v in reader.config.items() if k not in ("_idx", "_is_full", "__target__")
        }
        kwargs = cls._init_kwargs(config, where)
        if device is not None:
            kwargs["device"] = device
        try:
            buffer = cls(**kwargs)
        except (TypeError, ValueError) as err:
            raise CorruptCheckpointError(where, str(err)) from err
        checkpoint.restore_storage(
            reader,
            buffer._storage,
            separator=buffer.nested_key_separator,
            cursor=reader.config.get("_idx"),
            is_full=reader.config.get("_is_full"),
        )
        generator = reader.state.get("generator")
        if generator is not None:
            try:
                restore_generator(buffer._generator, generator)
            except ValueError as err:
                raise CorruptCheckpointError(reader.path / checkpoint.STATE, str(err)) from err
        buffer.seed = reader.state.get("seed")
        buffer._after_load(reader)
        return buffer

    def _after_load(self, reader: checkpoint.CheckpointReader) -> None:
        """Hook for subclasses: rebuild derived state once rows and cursor are restored."""

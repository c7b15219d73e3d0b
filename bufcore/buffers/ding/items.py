"""Where a DI-engine buffer keeps its items: a Python list of dicts, or bufcore's packed ring.

A user chooses with the buffer's ``storage=`` option:

- ``"list"`` (:class:`ListItems`, the default, DI-engine's case): each slot holds one Python
  dict, any values at all (tensors, arrays, numbers, strs, nested dicts, objects). With
  ``deepcopy=False`` a slot holds a shallow copy of the pushed dict (its values are the caller's
  objects); with ``deepcopy=True`` a deep copy. Saving needs every item's leaves to be savable
  without pickle (:mod:`bufcore.buffers.ding.columns`).
- ``"packed"`` (:class:`PackedItems`, the fast path): every item is a (nested) dict of tensors,
  arrays or numbers with one shape and dtype per key, stored row by row in a
  :class:`~bufcore.storage.ring.RingStorage` (one packed byte matrix, one gather per leaf per
  sample, saved leaf by leaf as any bufcore buffer). A sample gathers the rows once; each
  returned item's tensors are rows (views) of that gathered batch, never the stored memory.

Both write at the ring's tail (``(tail + n) % capacity``), a batch longer than the capacity
keeping its last ``capacity`` items, exactly like the ring storage's cursor.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from bufcore.buffers.ding.columns import column_items, item_columns
from bufcore.storage.batches import Batch, RowSource
from bufcore.storage.ring import RingStorage
from bufcore.tree import KeyPath, flatten, format_key_path, unflatten

STORAGES = ("list", "packed")


class ListItems:
    """Items as Python dicts, one per slot (see the module docstring).

    Args:
        capacity: Slots.
        deepcopy: Store (and hand out) deep copies instead of shallow ones.
    """

    mode = "list"

    def __init__(self, capacity: int, *, deepcopy: bool) -> None:
        self.capacity = capacity
        self.deepcopy = deepcopy
        self._data: list[Any] = [None] * capacity

    def prepare(self, items: Sequence[Any]) -> list[Any]:
        """What :meth:`write` stores for ``items`` (already checked by the buffer)."""
        return [copy.deepcopy(item) if self.deepcopy else item for item in items]

    def write(self, start: int, prepared: list[Any]) -> None:
        """Store ``prepared`` from slot ``start`` on (the last ``capacity`` of them)."""
        kept = prepared[-self.capacity :]
        first = (start + len(prepared) - len(kept)) % self.capacity
        head = min(len(kept), self.capacity - first)
        self._data[first : first + head] = kept[:head]
        self._data[: len(kept) - head] = kept[head:]

    def item(self, slot: int) -> Any:
        """The item held at ``slot`` (None for an empty slot)."""
        return self._data[slot]

    def release(self, slots: Sequence[int]) -> None:
        """Forget the items at ``slots`` (their memory can go)."""
        for slot in slots:
            self._data[slot] = None

    def clear(self) -> None:
        self._data = [None] * self.capacity

    def read(self, slots: Sequence[int]) -> list[Any]:
        """The items at ``slots``, as the buffer hands them out: deep copies with ``deepcopy``,
        else the stored objects themselves (the buffer copies what it adds keys to)."""
        if self.deepcopy:
            return [copy.deepcopy(self._data[slot]) for slot in slots]
        return [self._data[slot] for slot in slots]

    # ---------------------------------------------------------------- saving
    def columns(
        self, filled: int, live: np.ndarray
    ) -> tuple[dict[KeyPath, torch.Tensor], dict[KeyPath, str]]:
        """Columns of the live items of slots ``[0, filled)`` (zeros elsewhere) and their kinds.

        Raises:
            TypeError: an item holds what cannot be saved without pickle.
            ValueError: items disagree on keys, shapes or dtypes.
        """
        held = [self._data[slot] if live[slot] else None for slot in range(filled)]
        return item_columns(held)

    def restore(
        self,
        columns: Mapping[KeyPath, torch.Tensor],
        kinds: Mapping[KeyPath, str],
        live: np.ndarray,
    ) -> None:
        """Hold the items the columns give at their live slots (nothing elsewhere)."""
        slots = np.flatnonzero(live).tolist()
        self._data = [None] * self.capacity
        present = {path: kind for path, kind in kinds.items() if path in columns}
        for slot, item in zip(slots, column_items(columns, present, slots), strict=True):
            self._data[slot] = item


class PackedItems:
    """Items as rows of a :class:`~bufcore.storage.ring.RingStorage` (see the module docstring).

    Args:
        capacity: Slots (rows).
        device: Where the rows live.
    """

    mode = "packed"
    deepcopy = False  # a sample's rows are copies already

    def __init__(self, capacity: int, *, device: torch.device) -> None:
        self.capacity = capacity
        self.storage = RingStorage(capacity, device=device)

    def prepare(self, items: Sequence[Mapping[str, Any]]) -> Batch:
        """The items stacked into one batch and checked against the spec (or fixing it).

        Raises:
            TypeError: a leaf that is not numeric, or a dtype that does not cast safely.
            ValueError: items with other keys than the first, or leaves of other shapes.
        """
        flats = [flatten(item, argument=f"data[{i}]") for i, item in enumerate(items)]
        if not flats:
            return self.storage.validate({})
        paths = list(flats[0])
        for i, flat in enumerate(flats):
            if flat.keys() != flats[0].keys():
                listing = ", ".join(format_key_path(path) for path in paths)
                raise ValueError(
                    f"data[{i}]: keys differ from data[0]'s ({listing}); packed items all have "
                    "the same keys"
                )
        stacked = {path: _stacked([flat[path] for flat in flats], path) for path in paths}
        return self.storage.validate(unflatten(stacked))

    def write(self, start: int, prepared: Batch) -> None:
        """Write the batch at the storage's cursor (which is ``start``)."""
        with torch.no_grad():
            self.storage.write(prepared)

    def item(self, slot: int) -> None:
        """Packed items hold no objects a remover could name."""
        return None

    def release(self, slots: Sequence[int]) -> None:
        """Nothing to free: the rows stay until overwritten."""

    def clear(self) -> None:
        self.storage.clear()

    def gather(self, slots: np.ndarray) -> dict[KeyPath, torch.Tensor]:
        """The rows at ``slots``, one contiguous tensor ``[len(slots), ...]`` per leaf."""
        index = torch.from_numpy(np.ascontiguousarray(slots, dtype=np.int64))
        return self.storage.gather(index.to(self.storage.device))

    def read(self, slots: Sequence[int]) -> list[dict[str, Any]]:
        """One dict per slot whose tensors are rows of one gathered batch."""
        gathered = self.gather(np.asarray(slots, dtype=np.int64))
        rows = {path: tensor.unbind(0) for path, tensor in gathered.items()}
        return [
            unflatten({path: leaf[position] for path, leaf in rows.items()})
            for position in range(len(slots))
        ]

    # ---------------------------------------------------------------- saving
    def rows(self) -> dict[KeyPath, torch.Tensor]:
        """The filled rows of every leaf (live views, physical order)."""
        return self.storage.rows()

    def restore(self, source: RowSource, *, cursor: int, is_full: bool) -> None:
        """Fill the storage with ``source``'s rows.

        Raises:
            ValueError: as :meth:`RingStorage.restore`.
        """
        self.storage.restore(source, cursor=cursor, is_full=is_full)


def _stacked(values: list[Any], path: KeyPath) -> Any:
    """One leaf of every item as a batch: tensors and arrays stacked, numbers as a list."""
    where = f"data[...]{format_key_path(path)}"
    try:
        if all(isinstance(value, torch.Tensor) for value in values):
            return torch.stack([value.detach() for value in values])
        if all(isinstance(value, np.ndarray) for value in values):
            return np.stack(values)
    except (RuntimeError, ValueError) as err:
        raise ValueError(f"{where}: items hold leaves of different shapes ({err})") from err
    return values

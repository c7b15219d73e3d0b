"""RLinf's ``TrajectoryCache``: flattened trajectories in a FIFO ring of slots (REFERENCE §9.3).

Every leaf has one preallocated tensor of ``slots * slot_length`` rows; trajectory ``id`` in
slot ``s`` occupies rows ``[s * slot_length, s * slot_length + count)`` of each, so a sample
gathers hits from every cached trajectory with one ``index_select`` per leaf at
``slot * slot_length + local``. The slot length is the largest row count seen; a longer
trajectory reallocates and copies the cached ones over. A new id takes the slot after the last
one taken (wrapping), evicting its owner: FIFO by insertion. Putting a cached id again
overwrites it in place. Example (REFERENCE §9.3): two slots, put 1, 2, 3 with 4, 3, 2 rows ->
cached {2: slot 1, 3: slot 0}, slot length 4.

``max_size=None`` keeps every trajectory (the slot count doubles as needed): how a memory-only
disk buffer holds its whole window when the window is unbounded.

Unlike RLinf's, a cache holds one spec (the buffer checks every trajectory against its spec
first), so no leaf of an older trajectory is dropped when the slots grow (REFERENCE §9.7 bug 8).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from bufcore.checks import check_int
from bufcore.tree import KeyPath


class TrajectoryCache:
    """FIFO cache of flattened trajectories; see the module docstring.

    Args:
        max_size: Slots (trajectories held); None: unbounded.

    Raises:
        TypeError: ``max_size`` is not an int or None.
        ValueError: ``max_size < 1``.
    """

    def __init__(self, max_size: int | None = 5) -> None:
        self.max_size = None if max_size is None else check_int(max_size, "max_size", minimum=1)
        self.cache: dict[int, int] = {}  # trajectory id -> slot (RLinf's name)
        self.buffers: dict[KeyPath, torch.Tensor] = {}
        self.slot_length = 0
        self._slots = 0 if max_size is None else self.max_size or 0
        self._owners: list[int | None] = [None] * self._slots
        self._counts: dict[int, int] = {}
        self._last_slot = 0

    def __len__(self) -> int:
        return len(self.cache)

    def __contains__(self, trajectory_id: object) -> bool:
        return trajectory_id in self.cache

    def put(
        self, trajectory_id: int, rows: Mapping[KeyPath, torch.Tensor], count: int
    ) -> int | None:
        """Cache ``count`` rows of ``trajectory_id`` (every leaf ``[count, ...]``).

        Returns:
            The id evicted to make room, or None.

        Raises:
            MemoryError: the slots cannot grow (the cache is unchanged).
        """
        if trajectory_id in self.cache:
            slot, evicted = self.cache[trajectory_id], None
            self._ensure(count, self._slots, rows)
        else:
            grow = self.max_size is None and len(self.cache) == self._slots
            self._ensure(count, max(1, 2 * self._slots) if grow else self._slots, rows)
            slot = self._last_slot
            if self.max_size is None:  # unbounded: never evict, take a free slot
                while self._owners[slot] is not None:
                    slot = (slot + 1) % self._slots
            evicted = self._owners[slot]
            if evicted is not None:
                del self.cache[evicted], self._counts[evicted]
            self._owners[slot] = trajectory_id
            self.cache[trajectory_id] = slot
            self._last_slot = (slot + 1) % self._slots
        start = slot * self.slot_length
        for path, tensor in rows.items():
            self.buffers[path][start : start + count].copy_(tensor)
        self._counts[trajectory_id] = count
        return evicted

    def reserve(self, count: int, new: int, rows: Mapping[KeyPath, torch.Tensor]) -> None:
        """Make room now for ``new`` more trajectories of up to ``count`` rows like ``rows``, so
        that putting them cannot fail for memory halfway.

        Raises:
            MemoryError: the slots cannot grow (the cache is unchanged).
        """
        slots = self._slots
        if self.max_size is None:
            while slots < len(self.cache) + new:
                slots = max(1, 2 * slots)
        self._ensure(count, slots, rows)

    def get(self, trajectory_id: int) -> dict[KeyPath, torch.Tensor] | None:
        """Views of the cached rows of ``trajectory_id``, or None when it is not cached."""
        slot = self.cache.get(trajectory_id)
        if slot is None:
            return None
        start = slot * self.slot_length
        end = start + self._counts[trajectory_id]
        return {path: buffer[start:end] for path, buffer in self.buffers.items()}

    def discard(self, trajectory_id: int) -> None:
        """Forget ``trajectory_id`` (its slot is reused in turn); nothing if it is not cached."""
        slot = self.cache.pop(trajectory_id, None)
        if slot is not None:
            self._owners[slot] = None
            del self._counts[trajectory_id]

    def clear(self) -> None:
        """Forget everything and free the slots."""
        self.cache.clear()
        self._counts.clear()
        self.buffers = {}
        self.slot_length = 0
        self._slots = 0 if self.max_size is None else self.max_size
        self._owners = [None] * self._slots
        self._last_slot = 0

    @property
    def nbytes(self) -> int:
        """Bytes the slots take."""
        return sum(buffer.nbytes for buffer in self.buffers.values())

    def _ensure(self, count: int, slots: int, rows: Mapping[KeyPath, torch.Tensor]) -> None:
        """Make room for ``slots`` slots of at least ``count`` rows, keeping what is cached."""
        length = max(self.slot_length, count)
        if length == self.slot_length and slots == self._slots and self.buffers:
            return
        try:
            buffers = {
                path: torch.empty((slots * length, *t.shape[1:]), dtype=t.dtype)
                for path, t in rows.items()
            }
        except RuntimeError as err:
            raise MemoryError(
                f"the trajectory cache cannot grow to {slots} slots of {length} rows ({err})"
            ) from err
        for trajectory_id, slot in self.cache.items():
            kept = self._counts[trajectory_id]
            old, new = slot * self.slot_length, slot * length
            for path, buffer in buffers.items():
                buffer[new : new + kept].copy_(self.buffers[path][old : old + kept])
        if slots > self._slots:
            self._owners.extend([None] * (slots - self._slots))
            self._last_slot = self._slots  # the first new slot: the old ones are all taken
        self.buffers, self.slot_length, self._slots = buffers, length, slots

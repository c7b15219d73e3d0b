"""Expert episodes laid end to end, as rows to fill the expert buffer's storage.

:class:`EpisodeRows` validates a list of episodes (nested dicts with a leading time axis) and
presents them as a :class:`~bufcore.storage.ring.RowSource`: episode ``i`` occupies the rows after
episode ``i - 1``, every leaf is copied once, straight into the storage (no concatenated copy in
between), and the end column is True on each episode's last row, so episodes never join.

Spec: the first episode fixes every leaf's trailing shape and dtype, as a buffer's first write
does. Later episodes must have the same trailing shapes, and dtypes that cast to the first's
without changing values (:func:`bufcore.tree.check_cast`: float64 rows of a float32 leaf are
stored as float32 when they fit; a motion id 1.5 is never stored in an int column). The end
column's spec comes from the first episode that has one (bool ``[1]`` if none does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bufcore.buffers.windowed import check_end_leaf
from bufcore.storage.leaves import leaf_tensor
from bufcore.tree import KeyPath, LeafSpec, Spec, check_cast, flatten, format_key_path


class EpisodeRows:
    """Episodes as one block of rows (a :class:`~bufcore.storage.ring.RowSource`).

    Args:
        episodes: Nested dicts of leaves with a leading time axis, the same keys in each.
        end_path: Key path of the end flags (``[T]`` or ``[T, 1]``). An episode without them gets
            flags True on its last row only, in the first given end column's shape and dtype
            (bool ``[T, 1]`` when no episode has one).
        motion_path: Key path every episode must hold.
        names: How error messages name each episode (default ``episodes[i]``), e.g. the file
            and group it was read from.

    Raises:
        TypeError: ``episodes`` is not a sequence of mappings, a leaf cannot be stored, or its
            dtype does not cast safely to the first episode's (naming the episode and key).
        ValueError: no episodes, an empty episode, leaves of one episode with different
            lengths, a missing motion id, a malformed end column, episodes whose keys or
            trailing shapes differ, or values that do not fit the first episode's dtype
            (naming the episode and key).
    """

    env_count = None
    absent: frozenset[KeyPath] = frozenset()  # episodes give every leaf

    def __init__(
        self,
        episodes: Sequence[Mapping[str, Any]],
        *,
        end_path: KeyPath,
        motion_path: KeyPath,
        names: Sequence[str] | None = None,
    ) -> None:
        if isinstance(episodes, Mapping | str) or not isinstance(episodes, Sequence):
            raise TypeError(
                f"episodes: expected a list of episode dicts, got {type(episodes).__name__}"
            )
        if not episodes:
            raise ValueError("episodes: expected a non-empty list of episode dicts")
        self._names = [f"episodes[{i}]" for i in range(len(episodes))] if names is None else names
        self._end_path = end_path
        self._episodes: list[dict[KeyPath, torch.Tensor]] = []
        self._lengths: list[int] = []
        for name, episode in zip(self._names, episodes, strict=True):
            leaves, length = self._episode(name, episode, motion_path)
            self._episodes.append(leaves)
            self._lengths.append(length)
        self.spec = self._common_spec()
        self.count = sum(self._lengths)

    @property
    def lengths(self) -> list[int]:
        """Rows of each episode, in order."""
        return list(self._lengths)

    def _episode(
        self, name: str, episode: Mapping[str, Any], motion_path: KeyPath
    ) -> tuple[dict[KeyPath, torch.Tensor], int]:
        flat = flatten(episode, argument=name)
        leaves = {
            path: leaf_tensor(value, 1, where=f"{name}{format_key_path(path)}")
            for path, value in flat.items()
        }
        lengths = {int(t.shape[0]) for t in leaves.values()}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError(
                f"{name}: every leaf needs the same non-zero number of rows (axis 0), "
                f"got {sorted(lengths)}"
            )
        if motion_path not in leaves:
            raise ValueError(f"{name}: motion_id_key {format_key_path(motion_path)} is missing")
        motion = leaves[motion_path].reshape(-1)
        if motion.is_floating_point():
            fractional = motion[~torch.isfinite(motion) | (motion != motion.trunc())]
            if len(fractional):
                raise ValueError(
                    f"{name}{format_key_path(motion_path)}: motion ids must be whole numbers, "
                    f"got {float(fractional[0]):g}"
                )
        end = leaves.get(self._end_path)
        if end is not None:
            check_end_leaf(end.shape, 1, f"{name}{format_key_path(self._end_path)}")
        return leaves, lengths.pop()

    def _common_spec(self) -> Spec:
        """The first episode's spec; every other episode is checked against it.

        Raises:
            ValueError: keys or trailing shapes differ, or values do not fit the dtype.
            TypeError: a dtype that does not cast safely to the first episode's.
        """
        end = self._end_path
        with_end = [i for i, leaves in enumerate(self._episodes) if end in leaves]
        end_spec = (
            _leaf_spec(self._episodes[with_end[0]][end]) if with_end else LeafSpec((1,), torch.bool)
        )
        first_name, first = self._names[0], self._episodes[0]
        spec = {path: _leaf_spec(t) for path, t in first.items() if path != end}
        for name, leaves in zip(self._names, self._episodes, strict=True):
            lacking = [format_key_path(p) for p in spec if p not in leaves]
            extra = [format_key_path(p) for p in leaves if p not in spec and p != end]
            if lacking or extra:
                parts = [f"lacks {', '.join(lacking)}"] if lacking else []
                parts += [f"has extra {', '.join(extra)}"] if extra else []
                raise ValueError(
                    f"{name}: keys differ from {first_name}'s ({' and '.join(parts)}); "
                    "every episode must have the same keys"
                )
            for path, tensor in leaves.items():
                leaf = end_spec if path == end else spec[path]
                where = f"{name}{format_key_path(path)}"
                if tuple(tensor.shape[1:]) != leaf.shape:
                    origin = self._names[with_end[0]] if path == end else first_name
                    raise ValueError(
                        f"{where}: expected trailing shape {list(leaf.shape)} as in {origin}, "
                        f"got {list(tensor.shape[1:])}"
                    )
                check_cast(tensor, leaf.dtype, where=where)
        return {**spec, end: end_spec}

    def read_into(self, dests: dict[KeyPath, torch.Tensor], *, start: int = 0) -> None:
        """Copy each episode's part of rows ``[start, start + len(dest))`` into ``dests``; an
        episode's last row ends a trajectory."""
        end = start + (len(next(iter(dests.values()))) if dests else 0)
        first = 0
        for leaves, length in zip(self._episodes, self._lengths, strict=True):
            low, high = max(first, start), min(first + length, end)
            if low < high:
                for path, dest in dests.items():
                    if path in leaves:
                        part = leaves[path][low - first : high - first]
                        dest[low - start : high - start].copy_(part.detach())
                    else:  # an episode without end flags: none before its last row
                        dest[low - start : high - start] = False
                if high == first + length:
                    dests[self._end_path][high - 1 - start] = True
            first += length


def _leaf_spec(tensor: torch.Tensor) -> LeafSpec:
    return LeafSpec(tuple(tensor.shape[1:]), tensor.dtype)

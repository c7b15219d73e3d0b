"""Expert episodes laid end to end, as rows to fill the expert buffer's storage.

:class:`EpisodeRows` validates a list of episodes (nested dicts with a leading time axis) and
presents them as a :class:`~bufcore.storage.ring.RowSource`: episode ``i`` occupies the rows after
episode ``i - 1``, every leaf is copied once, straight into the storage (no concatenated copy in
between), and the end column is True on each episode's last row, so episodes never join.

Spec: the trailing shape of a leaf must be the same in every episode; its dtype is the one all
episodes' dtypes promote to (``torch.promote_types``), as concatenating them would give.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from bufcore.buffers.windowed import check_end_leaf
from bufcore.storage.ring import leaf_tensor
from bufcore.tree import KeyPath, LeafSpec, Spec, flatten, format_key_path


class EpisodeRows:
    """Episodes as one block of rows (a :class:`~bufcore.storage.ring.RowSource`).

    Args:
        episodes: Nested dicts of leaves with a leading time axis, the same keys in each.
        end_path: Key path of the end flags (``[T]`` or ``[T, 1]``); an episode without it gets
            a bool ``[T, 1]`` column.
        motion_path: Key path every episode must hold.
        names: How error messages name each episode (default ``episodes[i]``), e.g. the file
            and group it was read from.

    Raises:
        TypeError: ``episodes`` is not a sequence of mappings, or a leaf cannot be stored.
        ValueError: no episodes, an empty episode, leaves of one episode with different
            lengths, a missing motion id, a malformed end column, episodes whose keys or
            trailing shapes differ (naming the episode and key).
    """

    env_count = None

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
        length = lengths.pop()
        if motion_path not in leaves:
            raise ValueError(f"{name}: motion_id_key {format_key_path(motion_path)} is missing")
        end = leaves.get(self._end_path)
        if end is None:
            leaves[self._end_path] = torch.zeros((length, 1), dtype=torch.bool)
        else:
            check_end_leaf(end.shape, 1, f"{name}{format_key_path(self._end_path)}")
        return leaves, length

    def _common_spec(self) -> Spec:
        first = self._episodes[0]
        spec = {path: LeafSpec(tuple(t.shape[1:]), t.dtype) for path, t in first.items()}
        for name, leaves in zip(self._names[1:], self._episodes[1:], strict=True):
            lacking = [format_key_path(p) for p in spec if p not in leaves]
            extra = [format_key_path(p) for p in leaves if p not in spec]
            if lacking or extra:
                parts = [f"lacks {', '.join(lacking)}"] if lacking else []
                parts += [f"has extra {', '.join(extra)}"] if extra else []
                raise ValueError(
                    f"{name}: keys differ from {self._names[0]}'s ({' and '.join(parts)}); "
                    "every episode must have the same keys"
                )
            for path, tensor in leaves.items():
                leaf = spec[path]
                if tuple(tensor.shape[1:]) != leaf.shape:
                    raise ValueError(
                        f"{name}{format_key_path(path)}: expected trailing shape "
                        f"{list(leaf.shape)} as in {self._names[0]}, got {list(tensor.shape[1:])}"
                    )
                spec[path] = LeafSpec(leaf.shape, torch.promote_types(leaf.dtype, tensor.dtype))
        return spec

    def read_into(self, dests: dict[KeyPath, torch.Tensor]) -> None:
        """Copy each episode into its rows of ``dests``; its last row ends a trajectory."""
        start = 0
        for leaves, length in zip(self._episodes, self._lengths, strict=True):
            stop = start + length
            for path, dest in dests.items():
                dest[start:stop].copy_(leaves[path].detach())
            dests[self._end_path][stop - 1] = True
            start = stop

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

from bufcore.storage.ring import RingStorage
from bufcore.tree import KeyPath, LeafSpec, Spec, flatten, format_key_path


class EpisodeRows:
    """Episodes as one block of rows (a :class:`~bufcore.storage.ring.RowSource`).

    Args:
        episodes: Nested dicts of leaves with a leading time axis, the same keys in each.
        end_path: Key path of the end flags (``[T]`` or ``[T, 1]``); an episode without it gets
            a bool ``[T, 1]`` column.
        motion_path: Key path every episode must hold.
        checker: Checks each leaf as the storage would (numeric, storable, has a time axis).

    Raises:
        ValueError: no episodes, an empty episode, leaves of one episode with different
            lengths, a missing motion id, a malformed end column, episodes whose keys or
            trailing shapes differ (naming the episode and key).
        TypeError: a leaf that cannot be stored.
    """

    env_count = None

    def __init__(
        self,
        episodes: Sequence[Mapping[str, Any]],
        *,
        end_path: KeyPath,
        motion_path: KeyPath,
        checker: RingStorage,
    ) -> None:
        if isinstance(episodes, Mapping) or not isinstance(episodes, Sequence) or not episodes:
            raise ValueError("episodes: expected a non-empty list of episode dicts")
        self._episodes: list[dict[KeyPath, torch.Tensor]] = []
        self._lengths: list[int] = []
        for i, episode in enumerate(episodes):
            leaves, length = self._episode(i, episode, end_path, motion_path, checker)
            self._episodes.append(leaves)
            self._lengths.append(length)
        self._end_path = end_path
        self.spec = self._common_spec()
        self.count = sum(self._lengths)

    @staticmethod
    def _episode(
        i: int,
        episode: Mapping[str, Any],
        end_path: KeyPath,
        motion_path: KeyPath,
        checker: RingStorage,
    ) -> tuple[dict[KeyPath, torch.Tensor], int]:
        argument = f"episodes[{i}]"
        flat = flatten(episode, argument=argument)
        leaves = {
            path: checker.check_leaf(value, path, where=f"{argument}{format_key_path(path)}")
            for path, value in flat.items()
        }
        lengths = {int(t.shape[0]) for t in leaves.values()}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError(
                f"{argument}: every leaf needs the same non-zero number of rows (axis 0), "
                f"got {sorted(lengths)}"
            )
        length = lengths.pop()
        if motion_path not in leaves:
            raise ValueError(f"{argument}: motion_id_key {format_key_path(motion_path)} is missing")
        end = leaves.get(end_path)
        if end is None:
            leaves[end_path] = torch.zeros((length, 1), dtype=torch.bool)
        elif tuple(end.shape[1:]) not in ((), (1,)):
            raise ValueError(
                f"{argument}{format_key_path(end_path)}: expected end flags [n] or [n, 1], "
                f"got shape {list(end.shape)}"
            )
        return leaves, length

    def _common_spec(self) -> Spec:
        first = self._episodes[0]
        spec = {path: LeafSpec(tuple(t.shape[1:]), t.dtype) for path, t in first.items()}
        for i, leaves in enumerate(self._episodes[1:], start=1):
            if set(leaves) != set(spec):
                raise ValueError(
                    f"episodes[{i}]: keys {sorted(map(format_key_path, leaves))} differ from "
                    f"episodes[0]'s {sorted(map(format_key_path, spec))}"
                )
            for path, tensor in leaves.items():
                leaf = spec[path]
                if tuple(tensor.shape[1:]) != leaf.shape:
                    raise ValueError(
                        f"episodes[{i}]{format_key_path(path)}: expected trailing shape "
                        f"{list(leaf.shape)} as in episodes[0], got {list(tensor.shape[1:])}"
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

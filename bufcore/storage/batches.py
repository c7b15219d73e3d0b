"""What enters a ring: a whole nested batch, checked and converted before a write touches it, and
the :class:`RowSource` a restore copies saved rows from (:class:`TensorRows` for rows in memory).

:func:`validate_batch` checks every leaf of a nested batch (keys, batch axes, trailing shape,
dtype and the values of narrowing casts) against a ring's spec, or infers the spec from a first
batch, and returns a :class:`Batch` of converted tensors; nothing is written until all of it
passed, so a bad batch never leaves a ring half-written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from bufcore.storage.leaves import leaf_tensor
from bufcore.tree import (
    KeyPath,
    LeafSpec,
    Spec,
    check_cast,
    flatten,
    format_key_path,
    leaf_holding_another,
)


@dataclass(frozen=True)
class Batch:
    """A validated batch: converted leaves (same order as the spec) and its time length."""

    leaves: dict[KeyPath, torch.Tensor]
    size: int
    env_count: int | None



def _describe_paths(paths: Iterable[KeyPath]) -> str:
    return ", ".join(format_key_path(p) for p in paths)


def validate_batch(
    data: Mapping[str, Any],
    spec: Spec | None,
    batch_dims: int,
    env_count: int | None,
    *,
    argument: str = "data",
) -> Batch:
    """Check a nested batch against ``spec`` (None: not fixed yet) and convert its leaves.

    ``batch_dims`` leading axes are batch axes (``[n]`` or ``[n, env]``); ``env_count`` is the
    fixed env count of ``[time, env]`` rows (None: not fixed yet, or ``[time]`` rows).

    Raises:
        TypeError: ``data`` is not a mapping, a key is not a string, a leaf is not numeric
            or has no dense data, or a leaf's dtype cannot be cast safely to the stored dtype.
        ValueError: missing or extra keys, a missing batch axis, a wrong trailing shape,
            unequal batch sizes or env counts, or values outside the stored dtype's range.
    """
    flat = flatten(data, argument=argument)
    if not flat:
        return Batch({}, 0, env_count)
    if spec is not None:
        missing = [p for p in spec if p not in flat]
        extra = [p for p in flat if p not in spec]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing keys {_describe_paths(missing)}")
            if extra:
                parts.append(f"unexpected keys {_describe_paths(extra)}")
            raise ValueError(
                f"{argument}: keys differ from the stored ones ({'; '.join(parts)}); "
                f"expected exactly {_describe_paths(spec)}"
            )
        flat = {p: flat[p] for p in spec}
    leaves = {
        path: check_leaf(
            value,
            None if spec is None else spec[path],
            batch_dims,
            where=f"{argument}{format_key_path(path)}",
        )
        for path, value in flat.items()
    }
    size = _common_axis(leaves, 0, "batch size", argument)
    envs = _common_axis(leaves, 1, "env count", argument) if batch_dims == 2 else None
    if env_count is not None and envs != env_count:
        raise ValueError(f"{argument}: expected {env_count} envs (axis 1), got {envs}")
    return Batch(leaves, size, envs)


def check_leaf(
    value: Any, leaf: LeafSpec | None, batch_dims: int, *, where: str
) -> torch.Tensor:
    """One leaf of a batch as a tensor, checked against its stored spec ``leaf`` (if fixed).

    Args:
        value: The leaf (array, tensor, number or list).
        leaf: Its stored shape and dtype; None before the spec is fixed.
        batch_dims: Leading batch axes.
        where: How error messages name it (``"data['obs']"``).

    Raises:
        TypeError: not numeric, no dense data, a dtype that cannot be stored, or an unsafe
            cast.
        ValueError: fewer axes than the batch axes, a wrong trailing shape, or values
            outside the stored dtype's range.
    """
    floats = leaf.dtype if leaf is not None and leaf.dtype.is_floating_point else None
    tensor = leaf_tensor(value, batch_dims, where=where, python_floats=floats)
    if leaf is None:
        return tensor
    trailing = tuple(tensor.shape[batch_dims :])
    if trailing != leaf.shape:
        hint = ""
        if tuple(tensor.shape) == leaf.shape:
            hint = "; did you forget the batch dimension?"
        lead = ["batch"] if batch_dims == 1 else ["time", "env"]
        expected = ", ".join([*lead, *map(str, leaf.shape)])
        raise ValueError(
            f"{where}: expected shape [{expected}], got {list(tensor.shape)}{hint}"
        )
    check_cast(tensor, leaf.dtype, where=where)
    return tensor

def _common_axis(leaves: dict[KeyPath, torch.Tensor], axis: int, what: str, argument: str) -> int:
    sizes = {path: int(t.shape[axis]) for path, t in leaves.items()}
    distinct = set(sizes.values())
    if len(distinct) != 1:
        listing = ", ".join(f"{format_key_path(p)}: {n}" for p, n in sizes.items())
        raise ValueError(f"{argument}: every leaf needs the same {what}, got {listing}")
    return distinct.pop()


@runtime_checkable
class RowSource(Protocol):
    """Rows to restore into a fresh storage: what they are, and a way to copy them in.

    Attributes:
        spec: Key path -> trailing shape and dtype of every leaf.
        env_count: Envs per time row (axis 1) for ``[time, env]`` rows, else None.
        count: Time rows held.
        absent: Leaves of ``spec`` the source leaves out: the storage keeps their spec but
            gives them no memory, and refuses to read or write them.
    """

    @property
    def spec(self) -> Spec: ...

    @property
    def env_count(self) -> int | None: ...

    @property
    def count(self) -> int: ...

    @property
    def absent(self) -> frozenset[KeyPath]: ...

    def read_into(self, dests: dict[KeyPath, torch.Tensor], *, start: int = 0) -> None:
        """Copy rows ``[start, start + len(dest))`` of every leaf in ``dests`` (all but the
        absent ones) into it (typed views; may be strided): all ``count`` rows by default, a
        block of them when a file-backed ring restores block by block."""
        ...


class TensorRows:
    """Rows held in memory as tensors (a buffer's ``state_dict()["rows"]``), as a
    :class:`RowSource`.

    Args:
        arrays: Key path -> rows ``[count, (env,) *shape]`` (any device, may be strided).
        batch_dims: Leading batch axes of every leaf (1 or 2).
        absent: Leaves of ``arrays`` to leave out.

    Raises:
        TypeError: a leaf is not a dense tensor of a storable dtype (as a batch's leaves).
        ValueError: a leaf lacks the batch axes, a key path is also the group of another, or
            the leaves disagree on the row count or the env count.
    """

    def __init__(
        self,
        arrays: Mapping[KeyPath, torch.Tensor],
        batch_dims: int,
        absent: frozenset[KeyPath] = frozenset(),
    ) -> None:
        for path, tensor in arrays.items():
            leaf_tensor(tensor, batch_dims, where=f"rows{format_key_path(path)}")
        if nested := leaf_holding_another(arrays):
            raise ValueError(
                f"rows: leaf {format_key_path(nested[0])} is also a group holding "
                f"{format_key_path(nested[1])}; key paths cannot nest into a leaf"
            )
        self._arrays = dict(arrays)
        self._batch_dims = batch_dims
        self.spec: Spec = {
            p: LeafSpec(tuple(t.shape[batch_dims:]), t.dtype) for p, t in self._arrays.items()
        }
        leaves = self._arrays
        self.count = _common_axis(leaves, 0, "row count", "rows") if leaves else 0
        self.env_count = (
            _common_axis(leaves, 1, "env count", "rows") if leaves and batch_dims == 2 else None
        )
        self.absent = absent

    def only(self, paths: frozenset[KeyPath]) -> TensorRows:
        """These rows with every leaf not in ``paths`` left out."""
        return TensorRows(self._arrays, self._batch_dims, frozenset(self.spec) - paths)

    def read_into(self, dests: dict[KeyPath, torch.Tensor], *, start: int = 0) -> None:
        for path, dest in dests.items():
            dest.copy_(self._arrays[path][start : start + len(dest)])


class RowsWithout:
    """A :class:`RowSource` with some of its leaves taken out of it (a buffer's sampler state,
    saved beside the rows and read apart); what remains reads as before.

    Args:
        source: The rows.
        paths: Leaves of ``source`` to take out.
    """

    def __init__(self, source: RowSource, paths: Iterable[KeyPath]) -> None:
        dropped = frozenset(paths)
        self._source = source
        self.spec: Spec = {p: leaf for p, leaf in source.spec.items() if p not in dropped}
        self.env_count = source.env_count
        self.count = source.count
        self.absent = source.absent - dropped

    def read_into(self, dests: dict[KeyPath, torch.Tensor], *, start: int = 0) -> None:
        self._source.read_into(dests, start=start)

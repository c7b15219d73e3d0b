"""Nested data: key paths, flattening, leaf conversion and the spec.

Buffers take nested dicts (``{"observation": {"state": x}, "action": a}``) whose leaves are
numpy arrays, torch tensors, or Python numbers/lists, each with leading batch axes. Internally
everything is flat: a key path is a tuple of strings (``("observation", "state")``) and a batch
is a ``dict[KeyPath, torch.Tensor]``. The *spec* records, per key path, the trailing shape (the
shape after the batch axes) and the dtype; the first non-empty write fixes it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

KeyPath = tuple[str, ...]
Key = str | tuple[str, ...]
T = TypeVar("T")


def as_key_path(key: Any, *, argument: str = "key") -> KeyPath:
    """Normalise a key (a string or a tuple of strings) to a tuple key path.

    Raises:
        TypeError: ``key`` is neither a non-empty string nor a non-empty tuple of strings.
    """
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple) and key and all(isinstance(part, str) for part in key):
        return key
    raise TypeError(f"{argument}: expected a str or a non-empty tuple of str, got {key!r}")


def as_key(value: Any, argument: str) -> Key:
    """A key from a str, tuple or (JSON) list: a str for one part, else a tuple key path.

    Raises:
        TypeError: not a non-empty str or sequence of str.
    """
    path = as_key_path(tuple(value) if isinstance(value, list) else value, argument=argument)
    return path[0] if len(path) == 1 else path


def key_list(value: Any, argument: str) -> list[Key]:
    """A list of keys (see :func:`as_key`).

    Raises:
        TypeError: not a list or tuple of keys.
    """
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{argument}: expected a list of keys (str or tuple), got {value!r}")
    return [as_key(item, argument) for item in value]


def key_json(key: Key) -> str | list[str]:
    """A key as JSON stores it (tuples as lists)."""
    return key if isinstance(key, str) else list(key)


def format_key_path(path: KeyPath) -> str:
    """Show a key path in error messages the way users index their dicts."""
    return "".join(f"[{part!r}]" for part in path)


def flatten(data: Mapping[str, Any], *, argument: str = "data") -> dict[KeyPath, Any]:
    """Flatten a nested mapping into ``{key path: leaf}`` in insertion order.

    Raises:
        TypeError: ``data`` is not a mapping, or a key is not a string.
        ValueError: a nested mapping is empty (it would hold no leaf).
    """
    if not isinstance(data, Mapping):
        raise TypeError(
            f"{argument}: expected a mapping of key -> array, got {type(data).__name__}"
        )
    flat: dict[KeyPath, Any] = {}
    _flatten_into(data, (), flat, argument)
    return flat


def _flatten_into(
    data: Mapping[Any, Any], prefix: KeyPath, out: dict[KeyPath, Any], argument: str
) -> None:
    for key, value in data.items():
        if not isinstance(key, str):
            where = format_key_path(prefix) if prefix else "the top level"
            raise TypeError(f"{argument}: keys must be str, got {key!r} at {where}")
        path = (*prefix, key)
        if isinstance(value, Mapping):
            if not value:
                raise ValueError(f"{argument}{format_key_path(path)}: empty mapping holds no data")
            _flatten_into(value, path, out, argument)
        else:
            out[path] = value


def unflatten(flat: Mapping[KeyPath, T]) -> dict[str, Any]:
    """Rebuild the nested dict from ``{key path: leaf}``."""
    nested: dict[str, Any] = {}
    for path, value in flat.items():
        node = nested
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return nested


def join_key_path(path: KeyPath, separator: str) -> str:
    """Join a key path into one flat name, refusing parts that contain ``separator``.

    Raises:
        ValueError: a part of the path contains the separator, so the name could not be split back.
    """
    for part in path:
        if separator in part:
            raise ValueError(
                f"key {part!r} of {format_key_path(path)} contains the nested key separator "
                f"{separator!r}; rename the key or choose another nested_key_separator"
            )
    return separator.join(path)


def split_key_name(name: str, separator: str) -> KeyPath:
    """Inverse of :func:`join_key_path`."""
    return tuple(name.split(separator))


@dataclass(frozen=True)
class LeafSpec:
    """Trailing shape (after the batch axes) and dtype of one leaf."""

    shape: tuple[int, ...]
    dtype: torch.dtype

    @property
    def numel(self) -> int:
        """Elements per row."""
        return math.prod(self.shape)  # Python ints: a hand-edited shape cannot overflow

    @property
    def nbytes(self) -> int:
        """Bytes per row."""
        return self.numel * self.dtype.itemsize


Spec = dict[KeyPath, LeafSpec]


def describe_spec(spec: Spec) -> str:
    """``['obs']['state'] [67] float32, ['action'] [29] float32``: a spec for error messages."""
    return ", ".join(
        f"{format_key_path(path)} {list(leaf.shape)} {dtype_name(leaf.dtype)}"
        for path, leaf in spec.items()
    )


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``"float32"``."""
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    """``"float32"`` (or ``"torch.float32"``) -> ``torch.float32``.

    Raises:
        TypeError: ``name`` is not a str (a hand-edited config may hold anything).
        ValueError: the name is not a torch dtype.
    """
    if not isinstance(name, str):
        raise TypeError(f"dtype: expected the name of a torch dtype, got {name!r:.80}")
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype: expected the name of a torch dtype, got {name!r}")
    return dtype


def to_tensor(value: Any, where: str) -> torch.Tensor:
    """Convert one leaf to a tensor without copying where possible.

    numpy arrays share memory (``torch.from_numpy``), tensors are returned as they are, Python
    numbers and (nested) lists go through ``torch.as_tensor``. The caller copies into storage.

    Args:
        value: The leaf.
        where: How error messages name it: an argument and key path (``"data['obs']"``).

    Raises:
        TypeError: the leaf is not numeric (strings, objects, ragged lists, ...).
    """
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{where}: expected a numeric array, got numpy dtype {value.dtype}")
        try:
            return torch.from_numpy(np.ascontiguousarray(value))
        except TypeError as err:
            raise TypeError(f"{where}: numpy dtype {value.dtype} has no torch equivalent") from err
    if isinstance(value, numbers.Number | list | tuple) and not isinstance(value, str):
        try:
            tensor = torch.as_tensor(value)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"{where}: expected numbers or a rectangular list of numbers, got {value!r:.80}"
            ) from err
        return tensor
    raise TypeError(
        f"{where}: expected a numpy array, torch tensor, number or list, got {type(value).__name__}"
    )


def check_cast(source: torch.dtype, stored: torch.dtype, *, where: str) -> None:
    """Refuse a cast from ``source`` to the ``stored`` dtype that is not safe.

    Safe is ``torch.can_cast``: float64 -> float32 is, float -> int and int -> bool are not.

    Raises:
        TypeError: the cast is not safe; the message starts with ``where``.
    """
    if not torch.can_cast(source, stored):
        raise TypeError(
            f"{where}: dtype {dtype_name(source)} cannot be cast safely to the stored "
            f"dtype {dtype_name(stored)}"
        )

"""Python dict items as tensor columns and back: how a list-mode DI-engine buffer is saved
without pickle.

A list-mode buffer holds arbitrary Python dicts. To save it, every held item must have the same
keys (nested dicts allowed) and each leaf one *kind* across the items:

- ``"tensor"``: a torch tensor (one shape and dtype for all items); comes back as a tensor;
- ``"numpy"``: a numeric numpy array (one shape and dtype); comes back as a numpy array;
- ``"int"``, ``"float"``, ``"bool"``: a Python (or numpy scalar) number; comes back as the
  Python number (ints as int64, floats as float64);
- ``"str"``: a str (a ``data_id`` file path, a tag); stored as zero-padded UTF-8 bytes, so it
  must not end with ``"\\0"``; comes back as the str.

Anything else (None, lists, tuples, objects, empty dicts) is refused with a ``TypeError`` that
names the item's slot and key path: it could only be saved with pickle, which bufcore never
does. A column has one row per slot; empty slots are zero rows. The kinds are saved beside the
rows (state.json) so a load gives back what was pushed.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from bufcore.tree import KeyPath, flatten, format_key_path, unflatten

KINDS = ("tensor", "numpy", "int", "float", "bool", "str")
_SCALAR_DTYPES = {"int": torch.int64, "float": torch.float64, "bool": torch.bool}


def leaf_kind(value: Any, where: str) -> str:
    """The kind of one leaf (see the module docstring).

    Raises:
        TypeError: a value no kind holds.
    """
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{where}: expected a numeric numpy array, got dtype {value.dtype}")
        return "numpy"
    if isinstance(value, bool | np.bool_):
        return "bool"
    if isinstance(value, numbers.Integral):
        return "int"
    if isinstance(value, numbers.Real):
        return "float"
    if isinstance(value, str):
        return "str"
    raise TypeError(
        f"{where}: a {type(value).__name__} cannot be saved without pickle (bufcore saves "
        "tensors, numeric arrays, numbers, bools and strs); leave it out of the items or keep "
        "it in a file named by data_id"
    )


def item_columns(
    items: Sequence[Mapping[str, Any] | None], *, argument: str = "item"
) -> tuple[dict[KeyPath, torch.Tensor], dict[KeyPath, str]]:
    """One column per leaf (a row per item, zeros where the item is None) and each leaf's kind.

    No items, or only None: ``({}, {})``.

    Raises:
        TypeError: a leaf of a kind that cannot be saved, or another kind than in the first
            item (names the slot and key path).
        ValueError: an item with other keys than the first, a tensor or array of another shape
            or dtype, a str ending with ``"\\0"``, or an empty nested dict.
    """
    flat_items: list[dict[KeyPath, Any] | None] = []
    first: dict[KeyPath, Any] | None = None
    for slot, item in enumerate(items):
        flat = None if item is None else flatten(item, argument=f"{argument} {slot}")
        flat_items.append(flat)
        if first is None and flat is not None:
            first = flat
    if first is None:
        return {}, {}
    first_slot = next(slot for slot, flat in enumerate(flat_items) if flat is not None)
    kinds = {
        path: leaf_kind(value, f"{argument} {first_slot}{format_key_path(path)}")
        for path, value in first.items()
    }
    for slot, flat in enumerate(flat_items):
        if flat is not None and flat.keys() != first.keys():
            raise ValueError(
                f"{argument} {slot}: has keys {_paths(flat)}, but {argument} {first_slot} has "
                f"{_paths(first)}; every item must have the same keys to be saved"
            )
    columns = {
        path: _column(path, kind, first[path], flat_items, first_slot, argument)
        for path, kind in kinds.items()
    }
    return columns, kinds


def _paths(flat: Mapping[KeyPath, Any]) -> str:
    return ", ".join(format_key_path(path) for path in flat)


def _column(
    path: KeyPath,
    kind: str,
    reference: Any,
    flat_items: list[dict[KeyPath, Any] | None],
    first_slot: int,
    argument: str,
) -> torch.Tensor:
    """The column of one leaf (checked item by item); ``reference`` is its first value."""
    values: list[Any] = []
    for slot, flat in enumerate(flat_items):
        if flat is None:
            values.append(None)
            continue
        where = f"{argument} {slot}{format_key_path(path)}"
        value = flat[path]
        found = leaf_kind(value, where)
        if found != kind:
            raise TypeError(
                f"{where}: expected a {kind} as in {argument} {first_slot}, got a {found}"
            )
        values.append(value)
    if kind in ("tensor", "numpy"):
        tensors = [None if v is None else torch.as_tensor(v).detach() for v in values]
        like = torch.as_tensor(reference).detach()
        for slot, tensor in enumerate(tensors):
            if tensor is not None and (tensor.shape != like.shape or tensor.dtype != like.dtype):
                raise ValueError(
                    f"{argument} {slot}{format_key_path(path)}: expected shape {list(like.shape)} "
                    f"and dtype {like.dtype} as in {argument} {first_slot}, got shape "
                    f"{list(tensor.shape)} and dtype {tensor.dtype}"
                )
        zero = torch.zeros_like(like)
        try:
            return torch.stack([zero if t is None else t.to(like.device) for t in tensors])
        except RuntimeError as err:
            raise ValueError(f"{argument}{format_key_path(path)}: {err}") from err
    if kind == "str":
        encoded = [b"" if v is None else v.encode("utf-8") for v in values]
        for slot, (value, data) in enumerate(zip(values, encoded, strict=True)):
            if value is not None and data.endswith(b"\0"):
                raise ValueError(
                    f"{argument} {slot}{format_key_path(path)}: a str ending with '\\0' cannot "
                    "be saved (strs are stored zero-padded)"
                )
        width = max(1, *(len(data) for data in encoded))
        column = np.zeros((len(values), width), dtype=np.uint8)
        for slot, data in enumerate(encoded):
            column[slot, : len(data)] = np.frombuffer(data, dtype=np.uint8)
        return torch.from_numpy(column)
    dtype = _SCALAR_DTYPES[kind]
    try:
        return torch.tensor([0 if v is None else v for v in values], dtype=dtype)
    except (OverflowError, RuntimeError) as err:
        raise ValueError(f"{argument}{format_key_path(path)}: {err}") from err


def column_items(
    columns: Mapping[KeyPath, torch.Tensor], kinds: Mapping[KeyPath, str], slots: Sequence[int]
) -> list[dict[str, Any]]:
    """The items of ``slots`` rebuilt from their columns (tensors as views of the column)."""
    rebuilt: dict[KeyPath, list[Any]] = {}
    for path, kind in kinds.items():
        column = columns[path]
        if kind == "tensor":
            rebuilt[path] = [column[slot] for slot in slots]
        elif kind == "numpy":
            array = column.cpu().numpy()
            rebuilt[path] = [array[slot] for slot in slots]
        elif kind == "str":
            array = column.cpu().numpy()
            rebuilt[path] = [bytes(array[slot]).rstrip(b"\0").decode("utf-8") for slot in slots]
        else:
            values = column.cpu().tolist()
            rebuilt[path] = [values[slot] for slot in slots]
    return [
        unflatten({path: values[position] for path, values in rebuilt.items()})
        for position in range(len(slots))
    ]

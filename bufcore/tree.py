"""Nested data: key paths, flattening, leaf conversion and the spec.

Buffers take nested dicts (``{"observation": {"state": x}, "action": a}``) whose leaves are
numpy arrays, torch tensors, or Python numbers/lists, each with leading batch axes. Internally
everything is flat: a key path is a tuple of strings (``("observation", "state")``) and a batch
is a ``dict[KeyPath, torch.Tensor]``. The *spec* records, per key path, the trailing shape (the
shape after the batch axes) and the dtype; the first non-empty write fixes it.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch

# Defined in checks (which may not import tree) and named here beside dtype_from_name.
from bufcore.checks import dtype_name as dtype_name
from bufcore.errors import KeyPathError

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


def select_paths(spec: Collection[KeyPath], keys: list[Key], argument: str) -> list[KeyPath]:
    """The stored leaves (key paths of ``spec``) under each key, in order; a key that is a
    prefix (a nested dict key) selects every leaf under it.

    Raises:
        KeyPathError: a key matches no stored leaf (the message lists the stored ones).
    """
    selected: list[KeyPath] = []
    for key in keys:
        prefix = as_key_path(key)
        found = [p for p in spec if p[: len(prefix)] == prefix]
        if not found:
            stored = ", ".join(format_key_path(p) for p in spec) or "none"
            raise KeyPathError(
                f"{argument}: key {format_key_path(prefix)} matches no stored leaf; "
                f"stored: {stored}"
            )
        selected.extend(p for p in found if p not in selected)
    return selected


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


def leaf_holding_another(paths: Collection[KeyPath]) -> tuple[KeyPath, KeyPath] | None:
    """The first ``(leaf, deeper path)`` where a leaf is also the group of another path, or None.

    Key paths cannot nest into a leaf (``("obs",)`` and ``("obs", "state")`` at once): a
    nested dict has one or the other. Sorted, a prefix comes right before its extensions.
    """
    for shorter, longer in itertools.pairwise(sorted(paths)):
        if longer[: len(shorter)] == shorter:
            return shorter, longer
    return None


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


def to_tensor(value: Any, where: str, *, python_floats: torch.dtype | None = None) -> torch.Tensor:
    """Convert one leaf to a dense tensor without copying where possible.

    numpy arrays share memory (``torch.from_numpy``) unless they must be copied to become
    contiguous or native-endian (big-endian arrays from HDF5 or ``np.dtype('>f4')``); tensors are
    returned as they are; Python numbers and (nested) lists go through ``torch.as_tensor``. The
    caller copies into storage.

    Args:
        value: The leaf.
        where: How error messages name it: an argument and key path (``"data['obs']"``).
        python_floats: The dtype Python floats become; None: torch's default (float32 unless
            changed), as for any buffer input.

    Raises:
        TypeError: the leaf is not numeric (strings, objects, ragged lists, ...), or it is a
            tensor without dense data: sparse, nested, mkldnn or on the ``meta`` device.
        ValueError: finite Python floats beyond the float dtype's range (they would become inf).
    """
    if isinstance(value, torch.Tensor):
        return _dense(value, where)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{where}: expected a numeric array, got numpy dtype {value.dtype}")
        if not value.dtype.isnative:
            # torch reads native byte order only; one copy converts (its values are unchanged).
            value = value.astype(value.dtype.newbyteorder("="))
        try:
            # ascontiguousarray makes 0-d arrays 1-d; the reshape keeps a scalar a scalar.
            return torch.from_numpy(np.ascontiguousarray(value).reshape(value.shape))
        except TypeError as err:
            raise TypeError(f"{where}: numpy dtype {value.dtype} has no torch equivalent") from err
    if isinstance(value, numbers.Number | list | tuple) and not isinstance(value, str):
        try:
            tensor = torch.as_tensor(value)
            if tensor.is_floating_point() and python_floats is not None:
                tensor = torch.as_tensor(value, dtype=python_floats)
        except (TypeError, ValueError, RuntimeError) as err:
            if "overflow" in str(err).lower():  # an int beyond int64
                if python_floats is not None:
                    try:
                        floats = _as_floats(value)
                    except OverflowError:
                        raise ValueError(
                            f"{where}: numbers beyond float64's range, got {value!r:.80}"
                        ) from err
                    return to_tensor(floats, where, python_floats=python_floats)
                raise ValueError(
                    f"{where}: integers beyond the int64 range cannot be stored, got "
                    f"{value!r:.80}"
                ) from err
            raise TypeError(
                f"{where}: expected numbers or a rectangular list of numbers, got {value!r:.80}"
            ) from err
        if tensor.is_floating_point() and bool(torch.isinf(tensor).any()):
            # Finite Python floats that overflowed the float dtype are refused, not stored as inf.
            check_cast(torch.as_tensor(value, dtype=torch.float64), tensor.dtype, where=where)
        return tensor
    raise TypeError(
        f"{where}: expected a numpy array, torch tensor, number or list, got {type(value).__name__}"
    )


def real_values(value: Any, where: str) -> torch.Tensor:
    """``value`` as a float64 tensor (a tensor stays on its device), at full precision.

    Python floats become float64 directly (float32, torch's default, would turn a finite 1e300
    into inf and 1e-300 into 0 before any check could see them). numpy arrays are read in any
    byte order (``astype`` makes a native copy).

    Raises:
        TypeError: not numeric, or bool or complex values (a complex value would lose its
            imaginary part silently).
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iuf":
            raise TypeError(f"{where}: expected real numbers, got numpy dtype {value.dtype}")
        return torch.from_numpy(value.astype(np.float64))
    tensor = to_tensor(value, where, python_floats=torch.float64)
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise TypeError(f"{where}: expected real numbers, got dtype {dtype_name(tensor.dtype)}")
    return tensor.to(torch.float64)


def _as_floats(value: Any) -> Any:
    """A number or (nested) list of numbers with every int made a float (for huge ints)."""
    if isinstance(value, list | tuple):
        return [_as_floats(item) for item in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _dense(tensor: torch.Tensor, where: str) -> torch.Tensor:
    """``tensor`` if it holds dense, strided data that can be read and copied.

    Checked here, before any write, because such tensors fail only inside ``copy_`` (or with an
    internal error on ``.shape``), possibly after other leaves were written.

    Raises:
        TypeError: a nested, sparse or mkldnn tensor, or one on the ``meta`` device.
    """
    if tensor.is_nested:
        raise TypeError(
            f"{where}: expected a dense tensor, got a nested tensor; pad it or split it into "
            "equal-length leaves"
        )
    if tensor.layout != torch.strided:
        raise TypeError(
            f"{where}: expected a dense (strided) tensor, got layout {tensor.layout}; "
            "call .to_dense() first"
        )
    if tensor.is_meta:
        raise TypeError(f"{where}: expected a tensor with data, got one on the meta device")
    return tensor


def check_cast(tensor: torch.Tensor, stored: torch.dtype, *, where: str) -> None:
    """Refuse to store ``tensor`` as ``stored`` when the cast would change its values' meaning.

    Two checks, the second only when the dtypes alone cannot tell:

    - The kind: ``torch.can_cast`` (float -> int, int -> bool and the like are refused;
      bool -> int, int -> float and narrowing within a kind pass).
    - The values, when the stored dtype's range does not cover the source dtype's (int64 ->
      int8, uint8 -> int8, int32 -> float16, float64 -> float32): every integer must lie within
      ``torch.iinfo(stored)``, and every *finite* float within ``finfo(stored).max`` in
      magnitude (so nothing overflows to inf). NaN and +-inf stay allowed: they are
      representable. This costs one ``aminmax`` per leaf, only for such narrowing casts.

    Rounding is accepted, as in float64 -> float32: a float rounds to the nearest stored value,
    tiny values may flush to zero, and integers beyond 2**24 (float32) or 2**53 (float64) round
    to a nearby representable integer.

    Raises:
        TypeError: the kinds do not cast safely; the message starts with ``where``.
        ValueError: some values lie outside the stored dtype's range (the message gives their
            range and the stored one).
    """
    source = tensor.dtype
    if source == stored:
        return
    if not torch.can_cast(source, stored):
        raise TypeError(
            f"{where}: dtype {dtype_name(source)} cannot be cast safely to the stored "
            f"dtype {dtype_name(stored)}"
        )
    if tensor.numel() == 0 or source == torch.bool or _covers(stored, source):
        return
    low, high = _dtype_range(stored)
    found = _value_range(tensor)
    if found is not None and not (low <= found[0] and found[1] <= high):
        kind = "finite range" if stored.is_floating_point else "range"
        raise ValueError(
            f"{where}: values in [{_number(found[0])}, {_number(found[1])}] do not fit the "
            f"stored dtype {dtype_name(stored)} ({kind} [{_number(low)}, {_number(high)}])"
        )


def _dtype_range(dtype: torch.dtype) -> tuple[float, float]:
    """Smallest and largest finite value of a numeric dtype (bool is [0, 1])."""
    if dtype == torch.bool:
        return 0, 1
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return info.min, info.max


@functools.cache
def _covers(stored: torch.dtype, source: torch.dtype) -> bool:
    """Whether every finite value of ``source`` lies within ``stored``'s range."""
    low, high = _dtype_range(stored)
    source_low, source_high = _dtype_range(source)
    return low <= source_low and source_high <= high


# Unsigned dtypes wider than uint8 have no min/max kernels; read them as a wider signed type.
_WIDER = {torch.uint16: torch.int32, torch.uint32: torch.int64}


def _value_range(tensor: torch.Tensor) -> tuple[float, float] | None:
    """Smallest and largest finite value of a non-empty tensor; None if none is finite."""
    data = tensor.detach()
    if data.dtype == torch.uint64:
        return _uint64_range(data)
    if data.dtype in _WIDER:
        data = data.to(_WIDER[data.dtype])
    low, high = torch.aminmax(data)
    if not data.is_floating_point():
        return int(low), int(high)
    bottom, top = float(low), float(high)
    if math.isfinite(bottom) and math.isfinite(top):
        return bottom, top
    # NaN or inf in the data: they fit; the range is over the finite values only.
    finite = data[torch.isfinite(data)]
    if finite.numel() == 0:
        return None
    low, high = torch.aminmax(finite)
    return float(low), float(high)


def _uint64_range(data: torch.Tensor) -> tuple[int, int]:
    """Smallest and largest value of a non-empty uint64 tensor, read through int64."""
    signed = data.view(torch.int64)
    wrapped = signed < 0  # values >= 2**63: the largest ones
    if not bool(wrapped.any()):
        return int(signed.min()), int(signed.max())
    top = int(signed[wrapped].max()) + 2**64
    bottom = int(signed.min()) + 2**64 if bool(wrapped.all()) else int(signed[~wrapped].min())
    return bottom, top


def _number(value: float) -> str:
    """An int as it is, a float in short form (``65504``, ``3.40282e+38``)."""
    return str(value) if isinstance(value, int) else f"{value:g}"

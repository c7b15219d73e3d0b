"""The metrics record: what one line of ``metrics.jsonl`` holds, and how values get there and back.

A record is a JSON object ``{"step": int, "time": float, "kind": str, **metrics}``, metrics in
the order given, nested objects and lists allowed. JSON has no NaN or infinity (strict readers
refuse the ``NaN`` tokens Python writes by default), so a non-finite float is written as ``null``
and named in a top-level ``"nonfinite"`` object: ``{"/loss": "nan", "/emd/3": "-inf"}``. Its keys
are JSON Pointers (RFC 6901): each key or list index is preceded by ``/``, and within keys ``~``
is written ``~0`` and ``/`` is written ``~1`` (``{"a/b": {"~c": [0, nan]}}`` gives
``"/a~1b/~0c/1"``), so every path reads back to one place. The record is parsed back with those
floats put in place and ``"nonfinite"`` removed.

Ints are written in ``[-2**63, 2**64)``, what int64 and uint64 hold. An int outside that range in a
line (valid JSON, but not written by :func:`encode_record`) reads back as the nearest float, so
every value a record holds converts to numpy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from bufcore.checks import check_int, check_real
from bufcore.tree import to_tensor

RESERVED = ("step", "time", "kind", "nonfinite")
# Steps and ints stay in the int64/uint64 range that every reader converts exactly.
MAX_STEP = 2**63 - 1
_INT_RANGE = (-(2**63), 2**64 - 1)
# Nesting deeper than this is refused (a mapping that contains itself would never end).
MAX_DEPTH = 32
# Arrays and tensors are for small vectors (per-motion EMDs, a histogram), not for data.
MAX_VECTOR = 4096
_KIND = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def check_kind(value: Any, argument: str = "kind") -> str:
    """A record kind: a non-empty ASCII identifier (``train``, ``eval``, ``buffer_stats``).

    Raises:
        TypeError: not a str.
        ValueError: empty, or not of letters, digits and ``_`` starting with a non-digit.
    """
    if not isinstance(value, str):
        raise TypeError(f"{argument}: expected a str, got {type(value).__name__}")
    if not _KIND.fullmatch(value):
        raise ValueError(
            f"{argument}: expected an identifier of ASCII letters, digits and '_' (not starting "
            f"with a digit), got {value[:80]!r}"
        )
    return value


def encode_record(kind: Any, step: Any, time: Any, metrics: Any) -> dict[str, Any]:
    """The JSON-ready record for ``metrics``: every value converted, non-finite floats named.

    Args:
        kind: See :func:`check_kind`.
        step: An int in ``[0, 2**63)``.
        time: A finite number (seconds since the epoch, from the logger's clock).
        metrics: A mapping of str keys (none of :data:`RESERVED`) to values: None, bool, int,
            float, str, nested mappings, lists or tuples of values, numpy scalars, and numpy
            arrays or torch tensors of at most one dimension and :data:`MAX_VECTOR` numbers.

    Raises:
        TypeError: a value or key of an unsupported kind; the message names its key path
            (``metrics['td']['ema']``) and type.
        ValueError: ``kind``, ``step`` or ``time`` out of range, a reserved or too-large value
            (ints beyond 64 bits, arrays of more than one dimension or :data:`MAX_VECTOR`
            elements, nesting deeper than :data:`MAX_DEPTH`); the message names the key path.
    """
    record: dict[str, Any] = {
        "step": check_int(step, "step", minimum=0, maximum=MAX_STEP),
        "time": check_real(time, "time"),
        "kind": check_kind(kind),
    }
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics: expected a mapping, got {type(metrics).__name__}")
    for key in metrics:
        if isinstance(key, str) and key in RESERVED:
            raise ValueError(
                f"metrics[{key!r}]: the record's own field; use another name ({list(RESERVED)} "
                "are reserved)"
            )
    nonfinite: dict[str, str] = {}
    record.update(_encode_mapping(metrics, "metrics", "", nonfinite, 1))
    if nonfinite:
        record["nonfinite"] = nonfinite
    return record


def _encode_mapping(
    mapping: Mapping[Any, Any], where: str, pointer: str, nonfinite: dict[str, str], depth: int
) -> dict[str, Any]:
    _check_depth(depth, where)
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: keys must be str, got {key!r:.80} ({type(key).__name__})")
        escaped = key.replace("~", "~0").replace("/", "~1")
        out[key] = _encode(value, f"{where}[{key!r}]", f"{pointer}/{escaped}", nonfinite, depth)
    return out


def _encode(value: Any, where: str, pointer: str, nonfinite: dict[str, str], depth: int) -> Any:
    """``value`` as JSON-ready Python data (non-finite floats become None, noted in
    ``nonfinite`` under ``pointer``)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return check_int(value, where, minimum=_INT_RANGE[0], maximum=_INT_RANGE[1])
    if isinstance(value, float):
        number = float(value)
        if math.isfinite(number):
            return number
        nonfinite[pointer] = "nan" if math.isnan(number) else "inf" if number > 0 else "-inf"
        return None
    if isinstance(value, Mapping):
        return _encode_mapping(value, where, pointer, nonfinite, depth + 1)
    if isinstance(value, list | tuple):
        _check_depth(depth + 1, where)
        return [
            _encode(item, f"{where}[{index}]", f"{pointer}/{index}", nonfinite, depth + 1)
            for index, item in enumerate(value)
        ]
    if isinstance(value, torch.Tensor | np.ndarray | np.generic):
        return _encode(_array_items(value, where), where, pointer, nonfinite, depth)
    raise TypeError(
        f"{where}: expected None, bool, int, float, str, a mapping, a list or a small array, "
        f"got {type(value).__name__}"
    )


def _array_items(value: torch.Tensor | np.ndarray[Any, Any] | np.generic, where: str) -> Any:
    """A numpy scalar, 0-d or small 1-d array or tensor as a Python number or list of them.

    Raises:
        TypeError: not numbers (complex, strings, objects, ...) or a tensor without dense data.
        ValueError: more than one dimension or more than :data:`MAX_VECTOR` elements.
    """
    if isinstance(value, torch.Tensor):
        tensor = to_tensor(value, where)  # refuses sparse, nested and meta tensors
        if tensor.is_complex() or tensor.is_quantized:
            raise TypeError(f"{where}: expected real numbers, got a tensor of {tensor.dtype}")
        _check_vector(tuple(tensor.shape), where)
        data = tensor.detach().cpu()
        # float64 holds every float dtype's values (float8 has no tolist of its own).
        return (data.double() if data.is_floating_point() else data).tolist()
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{where}: expected numbers, got numpy dtype {array.dtype}")
    _check_vector(array.shape, where)
    if array.dtype.kind == "f" and array.dtype.itemsize > 8:
        # tolist() keeps a longdouble a numpy scalar (no Python type holds it); JSON numbers
        # are read as doubles anyway. Beyond float64's range a value becomes inf, logged as
        # non-finite like any inf: numpy's overflow warning would only repeat it.
        with np.errstate(over="ignore"):
            array = array.astype(np.float64)
    return array.tolist()


def _check_vector(shape: tuple[int, ...], where: str) -> None:
    if len(shape) > 1 or math.prod(shape) > MAX_VECTOR:
        raise ValueError(
            f"{where}: expected a number or a 1-d array of at most {MAX_VECTOR} elements, got "
            f"shape {list(shape)}; log a summary of it instead"
        )


def _check_depth(depth: int, where: str) -> None:
    """Refuse a container nested ``depth`` levels deep, beyond :data:`MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: nested more than {MAX_DEPTH} levels (does it contain itself?)")


def decode_record(data: bytes) -> dict[str, Any]:
    """The record on one line (without its newline), non-finite floats restored and ints
    outside ``[-2**63, 2**64)`` read as floats.

    Raises:
        ValueError: not UTF-8, not strict JSON (``NaN``/``Infinity`` tokens included), not an
            object, missing or malformed ``step``/``time``/``kind``, or a malformed
            ``nonfinite`` entry.
    """
    try:
        record = json.loads(
            data.decode("utf-8"), parse_constant=_refuse_constant, parse_int=_parse_int
        )
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as err:
        # UnicodeDecodeError, JSONDecodeError, NaN tokens, ints longer than Python converts.
        raise ValueError(f"not valid JSON ({err})") from None
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    missing = [name for name in ("step", "time", "kind") if name not in record]
    if missing:
        raise ValueError(f"missing {', '.join(map(repr, missing))}")
    try:
        # The writer's own validators: JSON gives only ints, floats, strs, bools and None.
        check_int(record["step"], "step", minimum=0, maximum=MAX_STEP)
        check_real(record["time"], "time")  # 1e999 is valid JSON and parses to inf
        check_kind(record["kind"])
    except TypeError as err:
        raise ValueError(str(err)) from None
    flags = record.pop("nonfinite", {})
    if not isinstance(flags, dict):
        raise ValueError(f"nonfinite: expected an object, got {flags!r:.80}")
    for pointer, name in flags.items():
        if name not in _NONFINITE:
            raise ValueError(f"nonfinite[{pointer!r}]: expected one of {list(_NONFINITE)}")
        _restore(record, pointer, _NONFINITE[name])
    return record


def _parse_int(text: str) -> int | float:
    """A JSON integer: an int in the range the writer takes, else the nearest float.

    An int beyond 64 bits is valid JSON but no numpy type holds it; as a float (``inf`` past
    its range, as ``1e999`` reads) every reader can use it, and step numbers stay refused.
    """
    # A 64-bit int has at most 20 digits: longer text is never converted to an int (Python
    # refuses ints over 4300 digits, and converting one takes quadratic time).
    if len(text.lstrip("-")) <= 20:
        number = int(text)
        if _INT_RANGE[0] <= number <= _INT_RANGE[1]:
            return number
    return float(text)


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON (a non-finite number must be written as null)")


def _restore(record: dict[str, Any], pointer: str, value: float) -> None:
    """Put ``value`` at ``pointer`` (a JSON Pointer), where the record must hold null.

    Raises:
        ValueError: the pointer is malformed or leads nowhere, or not to a null.
    """
    if not pointer.startswith("/"):
        raise ValueError(f"nonfinite: {pointer!r:.80} is not a JSON Pointer")
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]
    node: Any = record
    for position, token in enumerate(tokens):
        last = position == len(tokens) - 1
        key: str | int
        if isinstance(node, dict) and token in node:
            key = token
        elif isinstance(node, list) and re.fullmatch(r"0|[1-9][0-9]*", token):
            key = int(token)
            if key >= len(node):
                break
        else:
            break
        if last:
            if node[key] is not None:
                break  # step, time and kind are never null: they cannot be overwritten
            node[key] = value
            return
        node = node[key]
    raise ValueError(f"nonfinite: {pointer!r:.80} does not lead to a null in the record")

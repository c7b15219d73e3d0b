"""RLDS episodes read from a TFDS directory of TFRecord files, without TensorFlow.

TFDS writes an RLDS dataset as ``<name>-<split>.tfrecord-00000-of-00004`` files (one
``tf.train.Example`` per episode) beside ``features.json``, which declares every feature's
shape and dtype. A step feature is stored flattened over all the episode's steps under a
``steps/`` key (``steps/observation/state`` holds ``T * 17`` floats); episode metadata sits
under its own keys (``episode_metadata/file_path``). Ints and bools are stored as int64 lists,
floats as float32 lists, strings and encoded images as byte strings. A ``SequenceExample``
holds the steps as feature lists (one entry per step) and the episode features as context.

:func:`read_rlds_episodes` turns each record into the episode dict the conversion takes
(:mod:`bufcore.buffers.rlds`): ``{"steps": {"observation": {"state": [T, 17]}, "is_first":
[T], ...}, "episode_metadata": {...}}``, keys split at ``/`` into nested dicts, numpy leaves.
Shapes and dtypes come from ``features.json`` when the directory has one (one unknown ``-1``
dimension is inferred); without it a step feature is ``[T]`` when it holds one value per step
and ``[T, k]`` otherwise, floats are float32, ints int64 and the three RLDS flags bool. Byte
features (encoded images, text) come back as numpy object arrays of ``bytes`` (one ``bytes`` for
a single episode value), which the conversion refuses where it needs numbers: drop or decode
them first.

Records are read by :mod:`bufcore.persist.tfrecord` (every checksum verified) and decoded by
:mod:`bufcore.persist.example_proto`; any damage raises :class:`~bufcore.errors.CorruptFileError`
naming the file and the record's offset.

Needed by: ``tests/rlds/test_rlds_files.py`` (TFDS-laid-out files read back into episodes and
through conversion and push; ``features.json`` shapes and dtypes; damaged files and declarations
refused).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bufcore.checks import check_path
from bufcore.errors import CorruptCheckpointError, CorruptFileError
from bufcore.persist.checkpoint.format import parse_json
from bufcore.persist.example_proto import FeatureValue, ParsedExample, ProtoError, parse_example
from bufcore.persist.tfrecord import read_records
from bufcore.tree import leaf_holding_another, unflatten

FEATURES_JSON = "features.json"
STEPS = "steps"
_FLAGS = ("is_first", "is_last", "is_terminal")
_SHARD = re.compile(r"\.tfrecord(-\d+-of-\d+)?$")
# features.json is a few KB even for large datasets; a bigger one is not read.
_MAX_FEATURES_JSON = 16 * 2**20
_NUMERIC_KINDS = "biuf"

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Declared:
    """A feature as ``features.json`` declares it.

    Attributes:
        shape: Per-step (or per-episode) shape, ``-1`` for an unknown dimension; None when it
            is not known (nested sequences, encoded images and text).
        dtype: numpy dtype; None for byte features (strings, encoded images).
    """

    shape: tuple[int, ...] | None
    dtype: np.dtype[Any] | None


def read_rlds_episodes(
    path: str | os.PathLike[str], *, split: str | None = None
) -> Iterator[dict[str, Any]]:
    """The RLDS episodes of a TFDS dataset directory (or of one TFRecord file), one per record.

    The files are found and ``features.json`` is read now; the records are read as the
    iterator is advanced, file by file in name order (the shard order).

    Args:
        path: A TFDS dataset directory (``~/tensorflow_datasets/<name>/<config>/<version>``;
            ``~`` is expanded) or one TFRecord file (its directory's ``features.json``, if
            any, applies).
        split: Read only ``<name>-<split>.tfrecord*`` files (``"train"``); None for every
            TFRecord file of the directory.

    Returns:
        An iterator of episode dicts (see the module docstring).

    Raises:
        FileNotFoundError: ``path`` does not exist, or the directory holds no TFRecord file
            (of ``split``).
        TypeError: ``path`` is not a path, or ``split`` not a str.
        CorruptFileError: ``features.json`` is malformed; while iterating, a damaged record,
            or values that do not fit their declared shape or dtype.
    """
    root = check_path(path).expanduser()
    if split is not None and not isinstance(split, str):
        raise TypeError(f"split: expected a str or None, got {type(split).__name__}")
    if root.is_dir():
        files = sorted(
            entry
            for entry in root.iterdir()
            if _SHARD.search(entry.name)
            and (split is None or f"-{split}.tfrecord" in entry.name)
        )
        folder = root
        if not files:
            which = "" if split is None else f" of split {split!r}"
            raise FileNotFoundError(f"{root}: no TFRecord files{which} (*.tfrecord*)")
    elif root.exists():
        files, folder = [root], root.parent
    else:
        raise FileNotFoundError(f"{root}: no such TFRecord file or directory")
    declared = read_features_json(folder / FEATURES_JSON)
    return _episodes(files, declared)


def _episodes(files: list[Path], declared: dict[str, Declared]) -> Iterator[dict[str, Any]]:
    for file in files:
        for offset, data in read_records(file):
            try:
                yield _episode(parse_example(data), declared)
            except (ProtoError, _Malformed) as err:
                raise CorruptFileError(file, f"record at byte {offset}: {err}") from None


class _Malformed(ValueError):
    """A decoded record that does not hold what its declarations say (reported as corrupt)."""


def read_features_json(path: Path) -> dict[str, Declared]:
    """Feature name (``steps/observation/state``) -> its declaration; ``{}`` without the file.

    Raises:
        CorruptFileError: not a regular file, larger than 16 MiB, not JSON, or a declaration
            that is malformed (a shape that is not a list of ints, an unknown dtype).
    """
    if not path.exists():
        return {}
    if not path.is_file():
        raise CorruptFileError(path, "not a regular file")
    if path.stat().st_size > _MAX_FEATURES_JSON:
        raise CorruptFileError(path, f"larger than {_MAX_FEATURES_JSON} bytes")
    with open(path, "rb") as handle:
        data = handle.read(_MAX_FEATURES_JSON + 1)
    try:
        root = parse_json(data, path)
    except CorruptCheckpointError as err:
        raise CorruptFileError(path, err.problem) from None
    declared: dict[str, Declared] = {}
    try:
        _walk(root, [], 0, declared)
    except (TypeError, ValueError, KeyError) as err:
        raise CorruptFileError(path, f"a malformed declaration: {err}") from None
    return declared


def _walk(node: Any, prefix: list[str], sequences: int, out: dict[str, Declared]) -> None:
    """Collect the declarations under ``node`` (a FeatureConnector's JSON) into ``out``.

    ``sequences`` counts the sequences (``Dataset``, ``Sequence``) around it: the steps'
    own adds one; any other sequence makes its features' shapes unknown (inferred).

    Raises:
        TypeError, ValueError, KeyError: a malformed declaration.
    """
    if not isinstance(node, Mapping):
        raise TypeError(f"{'/'.join(prefix) or 'the root'}: expected an object")
    name = "/".join(prefix)
    if "featuresDict" in node:
        features = node["featuresDict"].get("features", {})
        if not isinstance(features, Mapping):
            raise TypeError(f"{name or 'the root'}: 'features' is not an object")
        for key, child in features.items():
            if not key or "/" in key:
                raise ValueError(f"{name}: feature name {key!r}")
            _walk(child, [*prefix, key], sequences, out)
    elif "sequence" in node:
        _walk(node["sequence"]["feature"], prefix, sequences + 1, out)
    elif "tensor" in node:
        tensor = node["tensor"]
        dims = tensor.get("shape", {}).get("dimensions", [])
        if not isinstance(dims, list):
            raise TypeError(f"{name}: dimensions must be a list")
        shape = tuple(int(d) for d in dims)
        if any(d < -1 for d in shape):
            raise ValueError(f"{name}: negative dimension in {list(shape)}")
        dtype_name = tensor.get("dtype")
        if dtype_name == "string" or tensor.get("encoding", "none") != "none":
            out[name] = Declared(None, None)
            return
        if not isinstance(dtype_name, str):
            raise TypeError(f"{name}: dtype must be a str")
        dtype = np.dtype(dtype_name)
        if dtype.kind not in _NUMERIC_KINDS:
            raise ValueError(f"{name}: dtype {dtype_name!r} is not numeric")
        # A shape holds per step under steps/ (inside its one sequence), per episode elsewhere.
        around = 1 if name.startswith(f"{STEPS}/") else 0
        out[name] = Declared(shape if sequences == around else None, dtype)
    else:
        out[name] = Declared(None, None)  # an encoded image, text, ...: byte strings


def _episode(parsed: ParsedExample, declared: dict[str, Declared]) -> dict[str, Any]:
    """The episode dict of one decoded record.

    Raises:
        _Malformed: features of different step counts, values that do not fit their
            declaration, or names that nest into one another.
    """
    flat: dict[tuple[str, ...], Any] = {}
    if parsed.feature_lists is not None:
        steps = {
            name.removeprefix(f"{STEPS}/"): _joined(name, values)
            for name, values in parsed.feature_lists.items()
        }
        count = _common_length(parsed.feature_lists)
        rest = parsed.features
    else:
        steps = {
            name[len(STEPS) + 1 :]: values
            for name, values in parsed.features.items()
            if name.startswith(f"{STEPS}/")
        }
        count = _step_count(steps, declared) if steps else 0
        rest = {n: v for n, v in parsed.features.items() if not n.startswith(f"{STEPS}/")}
    for name, values in steps.items():
        full = f"{STEPS}/{name}"
        flat[_key_path(full)] = _shaped(values, count, declared.get(full), full)
    for name, values in rest.items():
        flat[_key_path(name)] = _shaped(values, None, declared.get(name), name)
    if nested := leaf_holding_another(flat):
        raise _Malformed(
            f"feature {'/'.join(nested[0])} is also a group holding {'/'.join(nested[1])}"
        )
    return unflatten(flat)


def _key_path(name: str) -> tuple[str, ...]:
    parts = tuple(name.split("/"))
    if not all(parts):
        raise _Malformed(f"feature name {name!r} has an empty part")
    return parts


def _common_length(lists: Mapping[str, list[FeatureValue]]) -> int:
    """The number of steps every feature list holds.

    Raises:
        _Malformed: the lists differ in length.
    """
    lengths = {name: len(values) for name, values in lists.items()}
    if len(set(lengths.values())) > 1:
        raise _Malformed(f"feature lists of different lengths: {lengths}")
    return next(iter(lengths.values()), 0)


def _joined(name: str, values: list[FeatureValue]) -> FeatureValue:
    """A feature list's per-step values end to end (each step must hold as many).

    Raises:
        _Malformed: steps of different sizes or kinds.
    """
    if not values:
        return np.empty(0, dtype=np.float32)
    sizes = {len(v) for v in values}
    kinds = {type(v) is list for v in values}
    if len(sizes) > 1 or len(kinds) > 1:
        raise _Malformed(f"{name}: steps of different sizes or kinds ({sorted(sizes)} values)")
    if isinstance(values[0], list):
        return [item for step in values if isinstance(step, list) for item in step]
    return np.concatenate([v for v in values if not isinstance(v, list)])


def _step_count(steps: Mapping[str, FeatureValue], declared: Mapping[str, Declared]) -> int:
    """How many steps an Example's ``steps/`` features hold: ``is_first`` (one scalar per
    step) counts them, else a feature whose declared shape is fully known.

    Raises:
        _Malformed: neither is there to count by.
    """
    if "is_first" in steps:
        return len(steps["is_first"])
    for name, values in steps.items():
        found = declared.get(f"{STEPS}/{name}")
        if found is not None and found.shape is not None and -1 not in found.shape:
            per_step = math.prod(found.shape)
            if per_step:
                return len(values) // per_step
    raise _Malformed(
        "steps without steps/is_first (nor a feature of a declared shape) to count them by"
    )


def _shaped(
    values: FeatureValue, steps: int | None, declared: Declared | None, name: str
) -> Any:
    """One feature's values shaped (``[steps, ...]`` for a step feature) and typed.

    Raises:
        _Malformed: a count that does not fit the shape, or values that do not fit the
            declared dtype (a float list for an int feature, an int out of range).
    """
    if isinstance(values, list):
        if steps is None and len(values) == 1:
            return values[0]
        strings = np.empty(len(values), dtype=object)
        strings[:] = values
        return strings.reshape(_shape(len(values), steps, None, name))
    shape = None if declared is None else declared.shape
    array = values.reshape(_shape(len(values), steps, shape, name))
    target = None if declared is None else declared.dtype
    if target is None and steps is not None and name.split("/")[-1] in _FLAGS:
        target = np.dtype(bool)
    return array if target is None else _typed(array, target, name)


def _shape(
    count: int, steps: int | None, shape: tuple[int, ...] | None, name: str
) -> tuple[int, ...]:
    """The shape ``count`` values take: ``[steps, *shape]``, the unknown parts inferred.

    Raises:
        _Malformed: the count does not fit.
    """
    if shape is None:
        if steps is None:
            return () if count == 1 else (count,)
        if count == steps:
            return (steps,)
        if steps == 0 or count % steps:
            raise _Malformed(f"{name}: {count} values do not split into {steps} steps")
        return (steps, count // steps)
    lead = () if steps is None else (steps,)
    unknown = shape.count(-1)
    per_all = math.prod(lead) * math.prod(d for d in shape if d != -1)
    fits = (
        count == per_all
        if unknown == 0
        else unknown == 1 and (count % per_all == 0 if per_all else count == 0)
    )
    if not fits:
        raise _Malformed(
            f"{name}: {count} values do not fit {list(lead)} x declared shape {list(shape)}"
        )
    inferred = count // per_all if per_all else 0
    return (*lead, *(inferred if d == -1 else d for d in shape))


def _typed(array: Array, dtype: np.dtype[Any], name: str) -> Array:
    """``array`` (float32 or int64 as stored) as the declared dtype.

    Raises:
        _Malformed: a float list for an integer or bool feature (or the reverse), or integers
            outside the declared dtype's range (bools other than 0 and 1).
    """
    stored_float = array.dtype.kind == "f"
    if stored_float != (dtype.kind == "f"):
        stored = "floats" if stored_float else "int64 values"
        raise _Malformed(f"{name}: declared {dtype.name}, but stored as {stored}")
    if dtype.kind in "biu" and array.size:
        low, high = (0, 1) if dtype.kind == "b" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
        found_low, found_high = int(array.min()), int(array.max())
        if found_low < low or found_high > high:
            raise _Malformed(
                f"{name}: values in [{found_low}, {found_high}] do not fit declared "
                f"{dtype.name} [{low}, {high}]"
            )
    return array.astype(dtype)

"""A training loop's own state in a run checkpoint: plain data plus named tensors, one file a rank.

What a loop needs beyond its buffers, curriculum and TD-EMA to continue exactly where it stopped
(its generators, its environments, its optimizers' moments, its counters) is handed over as a
state in the one idiom: a mapping of plain JSON data whose leaves may also be tensors. Each
rank's lands in the run checkpoint as ``loop/rank_<r>.hdf5`` (:func:`write_loop_state`), beside
``buffers/`` and ``run.json``, and is published with them as one directory
(:func:`bufcore.persist.run_checkpoint.save_run_checkpoint`).

The file: one HDF5 dataset per tensor (named ``0``, ``1``, ... in the order met) and three
attributes: ``format`` (``"bufcore-loop-state"``), ``version`` and ``state``, the JSON text of
the mapping with each tensor replaced by ``{"__tensor__": "<dataset>"}``; plus ``sha256``, a
digest of that text and of every dataset's dtype, shape and bytes, checked on reading, so a
damaged file is refused rather than resumed from. A file of a newer version is refused
(:class:`~bufcore.errors.NewerFormatError`). Reading opens nothing but the file's own objects
(:mod:`bufcore.persist.hdf5_guard`) and never unpickles.

Needed by (DESIGN rule 5): ``tests/runs/test_resume.py`` (a demo killed after a checkpoint and
resumed writes what an uninterrupted run writes; README "Resume a run").
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from bufcore.errors import CorruptCheckpointError, NewerFormatError
from bufcore.persist.hdf5_guard import damage_reported, local_members
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.persist.syscalls import fsync_path

LOOP_DIR = "loop"
LOOP_FORMAT = "bufcore-loop-state"
LOOP_VERSION = 1
_TENSOR = "__tensor__"
# The tensor dtypes a loop state holds: those numpy (and so HDF5) stores as they are.
_DTYPES = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16",
    torch.float32: "float32", torch.float64: "float64",
}
_BY_NAME = {name: dtype for dtype, name in _DTYPES.items()}


def loop_file(rank: int) -> str:
    """``rank_<rank>.hdf5``: the name of rank ``rank``'s loop state under ``loop/``."""
    return f"rank_{rank}.hdf5"


class EncodedLoopState:
    """A loop state split into its JSON text and its tensors, checked and ready to write.

    Args:
        state: A mapping with str keys; values None, bool, int, finite float, str, lists or
            tuples (written as lists), mappings with str keys, or tensors of a plain numeric
            or bool dtype (on any device; written from the CPU).

    Raises:
        ValueError: a key is not a str or is ``"__tensor__"``, a float is not finite, or a
            tensor's dtype is not one a file holds (complex, bfloat16, ...); the message names
            the key path.
        TypeError: a value of another type (names the key path).
    """

    def __init__(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise TypeError(f"state: expected a mapping, got {type(state).__name__}")
        self.arrays: list[np.ndarray] = []
        tree = self._encode(state, "state")
        self.text = json.dumps(tree, allow_nan=False, separators=(",", ":"))

    def _encode(self, value: Any, where: str) -> Any:
        if isinstance(value, torch.Tensor):
            name = _DTYPES.get(value.dtype)
            if name is None:
                raise ValueError(f"{where}: a {value.dtype} tensor cannot be saved; use one of "
                                 f"{sorted(_BY_NAME)}")
            self.arrays.append(value.detach().cpu().contiguous().numpy().copy())
            return {_TENSOR: str(len(self.arrays) - 1)}
        if isinstance(value, Mapping):
            encoded = {}
            for key, item in value.items():
                if not isinstance(key, str) or key == _TENSOR:
                    raise ValueError(f"{where}: key {key!r} is not a usable name (a str, not "
                                     f"{_TENSOR!r})")
                encoded[key] = self._encode(item, f"{where}[{key!r}]")
            return encoded
        if isinstance(value, list | tuple):
            return [self._encode(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"{where}: {value} is not finite")
        if value is None or isinstance(value, bool | int | float | str):
            return value
        raise TypeError(f"{where}: expected plain data or a tensor, got {type(value).__name__}")

    def digest(self) -> str:
        """sha256 of the text and of each tensor's dtype, shape and bytes."""
        return _digest(self.text, self.arrays)


def _digest(text: str, arrays: list[np.ndarray]) -> str:
    hasher = hashlib.sha256(text.encode("utf-8"))
    for array in arrays:
        hasher.update(f"|{array.dtype.str}{list(array.shape)}|".encode("ascii"))
        hasher.update(np.ascontiguousarray(array).tobytes())
    return hasher.hexdigest()


def write_loop_state(path: Path, state: EncodedLoopState) -> None:
    """Write ``state`` as the loop-state file ``path`` (inside a staging directory), fsynced."""
    with h5py.File(path, "w") as file:
        file.attrs["format"] = LOOP_FORMAT
        file.attrs["version"] = LOOP_VERSION
        file.attrs["state"] = state.text
        file.attrs["sha256"] = state.digest()
        for i, array in enumerate(state.arrays):
            file.create_dataset(str(i), data=array)
    fsync_path(path)


def read_loop_state(directory: Path, name: str) -> dict[str, Any]:
    """The loop state in the file ``name`` of ``directory`` (a checkpoint's ``loop/``), tensors
    on the CPU.

    Raises:
        FileNotFoundError: ``directory`` is not a directory.
        CorruptCheckpointError: the file is missing, not a regular file, not an HDF5 file of
            this format, damaged (its digest differs), or refers to a dataset it lacks.
        NewerFormatError: its version is above the one this bufcore reads.
    """
    with CheckpointSnapshot(directory) as snapshot:
        data = snapshot.read(name)
    where = directory / name
    with damage_reported(where, CorruptCheckpointError), h5py.File(io.BytesIO(data), "r") as file:
        found, version = file.attrs.get("format"), file.attrs.get("version")
        if found != LOOP_FORMAT:
            raise CorruptCheckpointError(where, f"format: expected {LOOP_FORMAT!r}, got "
                                                f"{found!r:.80}")
        if not isinstance(version, int | np.integer) or version < 1:
            raise CorruptCheckpointError(where, f"version: expected an int >= 1, got {version!r}")
        if version > LOOP_VERSION:
            raise NewerFormatError(where, f"version {int(version)}: this bufcore reads loop "
                                          f"states up to version {LOOP_VERSION}; upgrade bufcore")
        text, digest = file.attrs.get("state"), file.attrs.get("sha256")
        if not isinstance(text, str) or not isinstance(digest, str):
            raise CorruptCheckpointError(where, "the state or sha256 attribute is missing")
        members = local_members(file, where, CorruptCheckpointError)
        arrays = {}
        for key, member in members.items():
            if not isinstance(member, h5py.Dataset) or member.dtype.name not in _BY_NAME:
                raise CorruptCheckpointError(where, f"{key}: not a dataset of a plain dtype")
            arrays[key] = np.asarray(member[()])
    ordered = [arrays[str(i)] for i in range(len(arrays))] if set(arrays) == {
        str(i) for i in range(len(arrays))} else None
    if ordered is None or _digest(text, ordered) != digest:
        raise CorruptCheckpointError(where, "sha256 differs from the content: the file is damaged")
    try:
        tree = json.loads(text)
    except ValueError as err:
        raise CorruptCheckpointError(where, f"state: not JSON ({err})") from None
    if not isinstance(tree, dict):
        raise CorruptCheckpointError(where, "state: not a JSON object")
    decoded: dict[str, Any] = _decoded(tree, arrays, where)
    return decoded


def _decoded(value: Any, arrays: dict[str, np.ndarray], where: Path) -> Any:
    if isinstance(value, dict):
        if set(value) == {_TENSOR}:
            array = arrays.get(value[_TENSOR]) if isinstance(value[_TENSOR], str) else None
            if array is None:
                raise CorruptCheckpointError(where, f"no dataset {value[_TENSOR]!r}")
            return torch.from_numpy(np.array(array))
        return {key: _decoded(item, arrays, where) for key, item in value.items()}
    if isinstance(value, list):
        return [_decoded(item, arrays, where) for item in value]
    return value

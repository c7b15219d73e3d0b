"""Episode-based HDF5 files (humenv's motion format) and the lists that name them.

Data model (DESIGN §3 "Episode files"). One file holds several episodes::

    walk.h5
    ├── attrs["num_episodes"] = 2
    ├── ep_0/                      one group per episode, numbered from 0
    │   ├── observation/           a nested dict is a nested group
    │   │   └── state   [T0, 67]   every numeric dataset has the episode's T rows
    │   ├── action      [T0, 29]
    │   └── motion_id   [T0]
    └── ep_1/ ...                  [T1, ...]; episodes may differ in length, not in keys

Expert motions are listed one file per line in a ``.txt`` file (:func:`read_motion_list`);
BFM-Zero's ``load_expert_trajectories`` reads every listed file with
:func:`load_episode_based_h5` and concatenates the episodes into its expert buffer.

Unlike humenv's reader, :func:`load_episode_based_h5` checks the file's structure and names the
file and episode at fault, instead of failing later with a bare ``KeyError`` or building a buffer
from misaligned columns. Files are read with h5py only; nothing is unpickled.

Needed by (DESIGN rule 5): BFM-Zero's expert motions (``tests/buffers/test_motions.py``); the
structure checks: ``tests/persist/test_episodes.py``; the refusals of links out, cycles and
FIFOs: ``tests/fault/test_untrusted_files.py`` (README Guarantees); the atomic write:
``tests/persist/test_episodes.py::
test_a_failure_while_writing_keeps_the_old_file_and_removes_the_temporary_one``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from bufcore.checks import check_int
from bufcore.errors import CorruptFileError, KeyPathError
from bufcore.persist.atomic import publish_file
from bufcore.persist.hdf5_guard import (
    H5_FAILURES,
    Member,
    check_hdf5_name,
    damage_reported,
    local_members,
)
from bufcore.tree import KeyPath, flatten, format_key_path, to_tensor, unflatten

NUM_EPISODES = "num_episodes"
# Deeper nesting than any episode has; bounds the reader's recursion.
_MAX_DEPTH = 32
EPISODE_PREFIX = "ep_"

Episode = dict[str, Any]


# ---------------------------------------------------------------------------- writing
def save_episodes(path: str | os.PathLike[str], episodes: Sequence[Mapping[str, Any]]) -> None:
    """Write ``episodes`` as an episode-based HDF5 file at ``path``, atomically.

    Every episode is a (nested) dict of leaves with a leading time axis: numpy arrays, torch
    tensors (any device) or rectangular lists (converted as bufcore converts buffer input, so
    Python floats become float32). All leaves of one episode share its length ``T >= 1``; all
    episodes have the same keys. Everything is validated before the file is touched; the file is
    written to a temporary name in the same directory, fsynced and renamed over ``path``, so a
    reader sees either the old file or the whole new one.

    Args:
        path: Destination file; its directory must exist.
        episodes: The episodes, written as ``ep_0``, ``ep_1``, ... in this order.

    Raises:
        TypeError: ``episodes`` is not a sequence of mappings, a key is not a str, or a leaf is
            not numeric (strings, objects, complex, bfloat16); the message names the episode
            index and key path.
        ValueError: ``path`` is empty; there is no episode, an episode or nested dict is
            empty, a leaf has no time axis or zero rows, the leaves of an episode differ in
            length, an episode's keys differ from episode 0's, or a key is unusable as an HDF5
            name (``""``, ``"."``, or containing ``"/"``).
    """
    flat_episodes = _validate_episodes(episodes)

    def write(staging: Path) -> None:
        with h5py.File(staging, "x", track_order=True) as h5:
            h5.attrs[NUM_EPISODES] = np.int64(len(flat_episodes))
            for i, flat in enumerate(flat_episodes):
                group = h5.create_group(f"{EPISODE_PREFIX}{i}", track_order=True)
                for key_path, array in flat.items():
                    node = group
                    for part in key_path[:-1]:
                        node = (
                            node[part]
                            if part in node
                            else node.create_group(part, track_order=True)
                        )
                    node.create_dataset(key_path[-1], data=array)

    publish_file(path, write)


def _validate_episodes(
    episodes: Sequence[Mapping[str, Any]],
) -> list[dict[KeyPath, np.ndarray[Any, Any]]]:
    if isinstance(episodes, Mapping | str | bytes) or not isinstance(episodes, Sequence):
        raise TypeError(
            f"episodes: expected a sequence of episode dicts, got {type(episodes).__name__}"
        )
    if not episodes:
        raise ValueError("episodes: expected at least one episode, got none")
    flat_episodes: list[dict[KeyPath, np.ndarray[Any, Any]]] = []
    for i, episode in enumerate(episodes):
        argument = f"episodes[{i}]"
        flat = flatten(episode, argument=argument)
        if not flat:
            raise ValueError(f"{argument}: an episode needs at least one key")
        arrays: dict[KeyPath, np.ndarray[Any, Any]] = {}
        first: tuple[KeyPath, int] | None = None
        for key_path, leaf in flat.items():
            where = f"{argument}{format_key_path(key_path)}"
            for part in key_path:
                check_hdf5_name(part, f"{where}: key")
            array = _leaf_to_numpy(leaf, key_path, argument)
            if array.ndim == 0:
                raise ValueError(f"{where}: expected a leading time axis, got a scalar")
            if array.shape[0] == 0:
                raise ValueError(
                    f"{where}: expected at least one time step, got shape {list(array.shape)}"
                )
            if first is None:
                first = (key_path, array.shape[0])
            elif array.shape[0] != first[1]:
                raise ValueError(
                    f"{argument}: leaves of one episode must share the time axis, but "
                    f"{argument}{format_key_path(first[0])} has {first[1]} steps and {where} "
                    f"has {array.shape[0]}"
                )
            arrays[key_path] = array
        if flat_episodes:
            _check_same_keys(flat_episodes[0].keys(), arrays.keys(), "episodes[0]", argument)
        flat_episodes.append(arrays)
    return flat_episodes


def _leaf_to_numpy(leaf: Any, key_path: KeyPath, argument: str) -> np.ndarray[Any, Any]:
    where = f"{argument}{format_key_path(key_path)}"
    tensor = to_tensor(leaf, where)
    if isinstance(leaf, np.ndarray):
        return leaf  # already validated as numeric by to_tensor; keep the caller's dtype
    if tensor.is_complex() or tensor.dtype == torch.bfloat16:
        raise TypeError(f"{where}: torch dtype {tensor.dtype} cannot be stored in HDF5")
    return tensor.detach().cpu().numpy()


def _check_same_keys(
    reference: Collection[KeyPath],
    keys: Collection[KeyPath],
    reference_name: str,
    name: str,
    *,
    prefix: str = "",
) -> None:
    lacking = [k for k in reference if k not in keys]
    if lacking:
        raise ValueError(
            f"{prefix}{name} lacks key {format_key_path(lacking[0])}, which {reference_name} has"
        )
    extra = [k for k in keys if k not in reference]
    if extra:
        raise ValueError(
            f"{prefix}{name} has key {format_key_path(extra[0])}, which {reference_name} lacks; "
            "every episode must have the same keys"
        )


# ---------------------------------------------------------------------------- reading
def load_episode_based_h5(
    path: str | os.PathLike[str], keys: Sequence[str] | None = None
) -> list[Episode]:
    """Read every episode of an episode-based HDF5 file, in ``ep_0, ep_1, ...`` order.

    ``num_episodes`` decides how many episodes there are (groups beyond it are ignored, as in
    humenv). Numeric datasets come back as numpy arrays, nested groups as nested dicts.
    String datasets (humenv files may carry e.g. a ``file_name``) come back as a Python ``str``
    (scalar) or a numpy array of ``str``; they and scalar datasets are metadata, exempt from the
    same-length check.

    Args:
        path: The HDF5 file.
        keys: Top-level keys to read (``["observation", "motion_id"]``); ``None`` reads all.

    Returns:
        One dict per episode.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        TypeError: ``keys`` is not a list of str.
        KeyError: A key in ``keys`` is not in the file's episodes.
        ValueError: ``keys`` is empty or repeats a key; the ``num_episodes`` attribute is missing
            or not an int >= 0; an ``ep_i`` group is missing; episodes have different keys; or
            the time-indexed leaves of an episode differ in length. Each message starts with the
            file name and names the episode.
    """
    file = Path(path)
    selected = _check_keys(keys)
    if not file.exists():
        raise FileNotFoundError(f"{file}: no such episode file")
    if not file.is_file():
        raise CorruptFileError(file, "not a regular file")
    try:
        h5 = h5py.File(file, "r")
    except H5_FAILURES as err:
        raise CorruptFileError(file, f"not a readable HDF5 file ({err})") from err
    with h5:
        groups = _episode_groups(h5, file)
        if not groups:
            return []
        if selected is not None:
            with damage_reported(file):
                known = list(groups[0].keys())
            for key in selected:
                if key not in known:
                    raise KeyPathError(f"{file}: unknown key {key!r}; the episodes hold {known}")
        seen: dict[Any, str] = {}
        for group in groups:
            _visit(group, seen, file)
        structures = [_structure(group, selected, file, seen) for group in groups]
        for i, structure in enumerate(structures[1:], start=1):
            _check_same_keys(
                structures[0].keys(),
                structure.keys(),
                f"{EPISODE_PREFIX}0",
                f"{EPISODE_PREFIX}{i}",
                prefix=f"{file}: ",
            )
        episodes = []
        for i, structure in enumerate(structures):
            _check_lengths(structure, file, i)
            episodes.append(unflatten({p: _read(ds, file) for p, ds in structure.items()}))
    return episodes


def _check_keys(keys: Sequence[str] | None) -> list[str] | None:
    if keys is None:
        return None
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
        raise TypeError(f"keys: expected a list of str, got {type(keys).__name__}")
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"keys: expected a list of str, got an element {key!r}")
    if not keys:
        raise ValueError("keys: expected at least one key (or None to read every key)")
    if len(set(keys)) != len(keys):
        raise ValueError(f"keys: each key may appear once, got {list(keys)}")
    return list(keys)


def _episode_groups(h5: h5py.File, file: Path) -> list[h5py.Group]:
    with damage_reported(file):
        raw = h5.attrs.get(NUM_EPISODES)
    if raw is None:
        raise ValueError(f"{file}: missing the {NUM_EPISODES!r} attribute of an episode file")
    value = raw.item() if isinstance(raw, np.ndarray) and raw.size == 1 else raw
    try:
        count = check_int(value, f"{file}: attribute {NUM_EPISODES!r}", minimum=0)
    except TypeError as err:  # a malformed file: a ValueError whatever the wrong kind
        raise ValueError(str(err)) from err
    members = local_members(h5, file)
    groups: list[h5py.Group] = []
    for i in range(count):
        name = f"{EPISODE_PREFIX}{i}"
        group = members.get(name)
        if group is None:
            raise ValueError(f"{file}: {NUM_EPISODES} is {count} but group {name} is missing")
        if not isinstance(group, h5py.Group):
            raise ValueError(f"{file}: {name} must be a group of datasets, got a dataset")
        groups.append(group)
    return groups


def _structure(
    group: h5py.Group, selected: list[str] | None, file: Path, seen: dict[Any, str]
) -> dict[KeyPath, h5py.Dataset]:
    # A selected key this episode lacks simply yields no path; the key-set comparison with
    # ep_0 then reports it.
    members = local_members(group, file)
    if selected is not None:
        members = {k: members[k] for k in selected if k in members}
    out: dict[KeyPath, h5py.Dataset] = {}
    _walk(members, (), out, file, seen)
    return out


def _walk(
    members: dict[str, Member],
    prefix: KeyPath,
    out: dict[KeyPath, h5py.Dataset],
    file: Path,
    seen: dict[Any, str],
) -> None:
    """Collect the datasets under ``members``, visiting every object of the file once.

    ``seen`` maps each object visited so far (h5py's identity: file and object address) to the
    name it was reached by.
    Hard links can give one object several names: a group linked twice into its parent, twenty
    levels deep, makes 2**20 paths out of 27 KB, and a dataset read under many names is read
    many times. Such files are refused, so a walk costs at most the objects the file holds.
    """
    if len(prefix) > _MAX_DEPTH:
        raise CorruptFileError(file, f"groups nest deeper than {_MAX_DEPTH} levels at {prefix}")
    for name, node in members.items():
        path = (*prefix, name)
        _visit(node, seen, file)
        if isinstance(node, h5py.Group):
            _walk(local_members(node, file), path, out, file, seen)
        else:
            out[path] = node


def _visit(node: Member, seen: dict[Any, str], file: Path) -> None:
    """Record ``node`` in ``seen``, refusing an object visited before under another name.

    Raises:
        CorruptFileError: ``node`` was reached before (names both of its names).
    """
    with damage_reported(file):
        where = node.name
        first = seen.get(node.id)
        if first is None:
            seen[node.id] = where
            return
    raise CorruptFileError(
        file,
        f"{where} is {first} reached a second time through another hard link; objects "
        "shared between keys or episodes are refused",
    )


def _is_string(dataset: h5py.Dataset) -> bool:
    return h5py.check_string_dtype(dataset.dtype) is not None


def _check_lengths(structure: dict[KeyPath, h5py.Dataset], file: Path, index: int) -> None:
    first: tuple[KeyPath, int] | None = None
    for key_path, dataset in structure.items():
        if _is_string(dataset) or dataset.ndim == 0:
            continue
        length = int(dataset.shape[0])
        if first is None:
            first = (key_path, length)
        elif length != first[1]:
            raise ValueError(
                f"{file}: {EPISODE_PREFIX}{index} has leaves of different lengths: "
                f"{format_key_path(first[0])} has {first[1]} rows, {format_key_path(key_path)} "
                f"has {length}"
            )


def _read(dataset: h5py.Dataset, file: Path) -> Any:
    try:
        if _is_string(dataset):
            text = dataset.asstr(errors="replace")[()]
            return text if isinstance(text, str) else np.asarray(text, dtype=str)
        array = np.asarray(dataset[()])
    except H5_FAILURES as err:  # a filter this host lacks, damaged chunks, ...
        raise CorruptFileError(file, f"dataset {dataset.name} cannot be read ({err})") from err
    # Files written on big-endian machines come back in the host's byte order, as torch needs.
    return array.astype(array.dtype.newbyteorder("="), copy=False)


# ------------------------------------------------------------------------ motion lists
def read_motion_list(
    motions: str | os.PathLike[str], motions_root: str | os.PathLike[str]
) -> list[Path]:
    """Read a ``.txt`` list of episode files, one per line, and resolve each path.

    Like BFM-Zero, each line is stripped and every space in it removed. Blank lines and lines
    starting with ``#`` are skipped (BFM-Zero would turn a blank line into the path ``""``).
    Relative paths are taken relative to ``motions_root``; absolute paths are kept.

    Args:
        motions: The list file.
        motions_root: Directory that relative entries are relative to.

    Returns:
        The listed files, in list order.

    Raises:
        FileNotFoundError: The list file does not exist, or a listed file does not; the message
            names the list file, the line number and the resolved path of the first missing
            file, and how many more are missing.
    """
    list_file = Path(motions)
    root = Path(motions_root)
    if not list_file.is_file():
        raise FileNotFoundError(f"{list_file}: no such motion list file")
    lines = list_file.read_text(encoding="utf-8-sig").splitlines()
    files: list[Path] = []
    missing: list[tuple[int, Path]] = []
    for number, line in enumerate(lines, start=1):
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        listed = Path(entry.replace(" ", ""))
        resolved = listed if listed.is_absolute() else root / listed
        if not resolved.is_file():
            missing.append((number, resolved))
        files.append(resolved)
    if missing:
        number, resolved = missing[0]
        more = f" ({len(missing) - 1} more listed files are missing)" if len(missing) > 1 else ""
        raise FileNotFoundError(
            f"{list_file}: line {number}: motion file {resolved} does not exist{more}"
        )
    return files


def write_motion_list(path: str | os.PathLike[str], entries: Sequence[str]) -> None:
    """Write a motion list (one episode file per line, as :func:`read_motion_list` reads it).

    Entries are written as given (relative ones are taken relative to the ``motions_root`` the
    reader is given). The file is published atomically.

    Raises:
        ValueError: an entry is empty, starts with ``#``, holds a space or a line break: the
            reader would skip it or read another path.
        FileNotFoundError: the file's directory does not exist.
    """
    for i, entry in enumerate(entries):
        if not entry or entry.startswith("#") or any(c in entry for c in " \r\n"):
            raise ValueError(
                f"entries[{i}]: expected a path without spaces or line breaks that does not "
                f"start with '#', got {entry!r}"
            )
    text = "".join(f"{entry}\n" for entry in entries)

    def write(staging: Path) -> None:
        staging.write_text(text, encoding="utf-8")

    publish_file(path, write)

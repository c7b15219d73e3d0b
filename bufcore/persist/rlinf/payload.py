"""One trajectory file: written through the one atomic publish, read back without pickle.

Writing: the payload dict (:func:`bufcore.storage.trajectories.payload`) goes through
``torch.save`` for the ``pt`` format, or ``pickle.dump`` for ``pkl``, into a staging file that
:func:`bufcore.persist.atomic.publish_file` fsyncs and renames into place: a trajectory file
is whole or absent, never half written.

Reading never runs code from the file unless the caller opted in (DESIGN §3):

- ``pt``: the file is opened inside its directory without following a link (a symbolic link
  is refused, as is anything but a regular file), checked to be a zip archive whose members
  are stored uncompressed and no larger than the file (so a small file cannot expand into a
  large read), then loaded with ``torch.load(weights_only=True)``. A file whose pickle asks for
  anything beyond tensors and plain containers is refused with an error saying so.
- ``pkl``: read only with ``allow_pickle=True`` (``pickle.load`` runs whatever the file holds);
  otherwise :func:`check_pickle_allowed` raises before the file is opened. This is the one
  unpickling call in bufcore, and ``tests/policy/test_no_pickle.py`` pins it to this module.

Needed by (DESIGN rule 5): the link and file-kind refusals and the archive checks,
``tests/buffers/rlinf/test_hostile_dirs.py`` (symbolic links, FIFOs, raw pickles, truncated
files, compressed members); the weights-only load, ``::test_a_pt_file_holding_a_pickle_
payload_is_refused_without_running_it``.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.atomic import publish_file
from bufcore.persist.rlinf.layout import Format
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.persist.syscalls import fsync_path


def check_pickle_allowed(trajectory_format: Format, allow_pickle: bool, where: str) -> None:
    """Refuse the ``pkl`` format unless the caller passed ``allow_pickle=True``.

    Raises:
        ValueError: ``pkl`` without ``allow_pickle``.
    """
    if trajectory_format == "pkl" and not allow_pickle:
        raise ValueError(
            f"{where}: trajectory_format 'pkl' stores trajectories with pickle, and reading a "
            "pickle file runs any code it holds; use 'pt' (read with weights_only=True), or "
            "pass allow_pickle=True only for files you trust"
        )


def write_file(path: Path, data: dict[str, Any], trajectory_format: Format) -> None:
    """Write ``data`` to a new file at ``path`` (not published: the caller fsyncs or
    publishes it)."""
    if trajectory_format == "pt":
        torch.save(data, path)
    else:
        with path.open("wb") as stream:
            pickle.dump(data, stream, protocol=pickle.HIGHEST_PROTOCOL)


def publish_trajectory(path: Path, data: dict[str, Any], trajectory_format: Format) -> None:
    """Put the trajectory file ``path`` in place atomically (staged, fsynced, renamed).

    Staging entries a killed writer leaves are not looked for here (that would scan the whole
    directory on every write); :func:`bufcore.persist.rlinf.directory.orphans` finds them.
    The directory is not fsynced here: the index publish that follows the file, and the only
    one that may name it, fsyncs it first (:func:`bufcore.persist.rlinf.directory.
    publish_index`), so the rename is durable before any index naming the file is. One
    directory fsync per index instead of one per file: 3-6 ms per file on this machine's
    disk, 10-20% of writing a [64, 64] trajectory.
    """
    publish_file(path, lambda staging: write_file(staging, data, trajectory_format),
                 remove_stale=False, sync_parent=False)


def write_fsynced(path: Path, data: dict[str, Any], trajectory_format: Format) -> None:
    """Write ``data`` to a new file at ``path`` and fsync it (inside a staging directory that
    is published as a whole)."""
    write_file(path, data, trajectory_format)
    fsync_path(path)


def read_trajectory(
    directory: Path, name: str, trajectory_format: Format, *, allow_pickle: bool
) -> Any:
    """What the trajectory file ``name`` of ``directory`` holds (not yet checked as a
    trajectory: see :func:`bufcore.storage.trajectories.from_payload`).

    Raises:
        ValueError: the ``pkl`` format without ``allow_pickle`` (nothing is opened).
        CorruptCheckpointError: the file is missing, a symbolic link or not a regular file,
            not a stored zip archive (truncated, say), or holds what a weights-only load
            refuses or cannot read.
    """
    check_pickle_allowed(trajectory_format, allow_pickle, str(directory / name))
    with CheckpointSnapshot(directory) as snapshot:
        fd = snapshot.open(name, missing="trajectory file is missing")
    where = directory / name
    with os.fdopen(fd, "rb") as stream:
        if trajectory_format == "pkl":
            return pickle.load(stream)  # opted in: allow_pickle=True
        _check_archive(stream, where)
        try:
            return torch.load(stream, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise CorruptCheckpointError(
                where,
                "holds pickled objects that a weights_only load refuses (only tensors and "
                f"plain containers are read; loading it otherwise would run its code): {first}",
            ) from err
        except Exception as err:  # torch reports damage as many types; name the file instead
            raise CorruptCheckpointError(
                where, f"cannot be read as a torch file ({type(err).__name__}: {err})"
            ) from err


def _check_archive(stream: IO[bytes], where: Path) -> None:
    """Refuse a file that is no torch zip archive, or one whose members would read more
    bytes than the file holds (compressed members)."""
    size = os.fstat(stream.fileno()).st_size
    try:
        with zipfile.ZipFile(stream) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise CorruptCheckpointError(
            where, f"is not a torch zip archive, or it is truncated ({err})"
        ) from err
    if any(m.compress_type != zipfile.ZIP_STORED for m in members):
        raise CorruptCheckpointError(where, "holds compressed members; torch.save stores them")
    if sum(m.file_size for m in members) > size:
        raise CorruptCheckpointError(where, "its members claim more bytes than the file holds")
    stream.seek(0)

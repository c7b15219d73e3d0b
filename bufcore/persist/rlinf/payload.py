"""One trajectory file: written through the one atomic publish, read back without pickle.

Writing: the payload dict (:func:`bufcore.storage.trajectories.payload`) goes through
``torch.save`` for the ``pt`` format, or ``pickle.dump`` for ``pkl``. The disk buffer's
``auto_save`` serialises it in the caller's thread (:class:`Serializer`: the bytes are the
queue's copy of the trajectory, taken before ``add_trajectories`` returns, and the writer
thread only writes them), then :func:`publish_trajectory` writes them into a staging file
and renames it into place; a large file is fsynced later, with the others written since,
before the index that names them (:class:`bufcore.persist.rlinf.store.TrajectoryStore`). A
process that dies leaves each trajectory file whole or absent; a machine that loses power may
leave a large file that no index names yet incomplete (loads never read it;
``remove_orphan_files`` removes it). Checkpoints (:func:`write_fsynced`) fsync each file.

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
import threading
import zipfile
from pathlib import Path
from typing import IO, Any, cast

import torch

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.atomic import publish_file
from bufcore.persist.rlinf.layout import Format
from bufcore.persist.snapshot import CheckpointSnapshot
from bufcore.persist.syscalls import fsync_path, start_writeback


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


class Serializer:
    """Serialises trajectory payloads into buffers it reuses once their files are written.

    A new 17 MB buffer per trajectory costs ~10 ms of page faults on the bench machine, twice
    what ``torch.save`` itself takes; so :meth:`serialize` takes an idle buffer large enough
    when there is one, and :meth:`recycle` (called by the writer thread once the bytes are on
    their way to disk) keeps up to ``keep`` idle buffers for the next ones.

    Needed by (DESIGN rule 5): the bench row ``python -m bench --only rlinf`` (``write``).

    Args:
        keep: Idle buffers kept at most (each as large as the largest trajectory it held).
    """

    def __init__(self, *, keep: int = 2) -> None:
        self.keep = keep
        self._idle: list[bytearray] = []
        self._lock = threading.Lock()

    def serialize(self, data: dict[str, Any], trajectory_format: Format) -> memoryview:
        """The bytes of the file holding ``data`` (what :func:`write_file` would write), in a
        buffer to hand to :meth:`recycle` once they are written."""
        tensors = _tensors(data)
        # The tensors, plus the pickle, the zip headers and each record's alignment.
        estimate = sum(t.nbytes for t in tensors) + (64 << 10) + 256 * len(tensors)
        with self._lock:
            fits = [b for b in self._idle if len(b) >= estimate]
            buffer = min(fits, key=len) if fits else bytearray(estimate)
            if fits:
                self._idle.remove(buffer)
        sink = _Sink(buffer)
        if trajectory_format == "pt":
            torch.save(data, cast(IO[bytes], sink))  # it calls only write and flush
        else:
            pickle.dump(data, sink, protocol=pickle.HIGHEST_PROTOCOL)
        return sink.written()

    def recycle(self, blob: memoryview) -> None:
        """Take back the buffer of ``blob`` (from :meth:`serialize`; no longer read)."""
        buffer = blob.obj
        blob.release()
        if isinstance(buffer, bytearray):
            with self._lock:
                if len(self._idle) < self.keep:
                    self._idle.append(buffer)


class _Sink:
    """A file-like object writing into a bytearray from its start, growing it if needed."""

    def __init__(self, buffer: bytearray) -> None:
        self._buffer = buffer
        self._view = memoryview(buffer)  # slice assignment through it: ~2x bytearray's speed
        self._size = 0

    def write(self, data: Any) -> int:
        source = memoryview(data).cast("B")
        end = self._size + len(source)
        if end > len(self._buffer):
            self._view.release()  # a bytearray with a view cannot grow
            self._buffer.extend(bytes(end - len(self._buffer)))
            self._view = memoryview(self._buffer)
        self._view[self._size : end] = source
        self._size = end
        return len(source)

    def flush(self) -> None:
        """Nothing to flush (``torch.save`` calls it)."""

    def written(self) -> memoryview:
        return self._view[: self._size]


def _tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in a payload (nested dicts included)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def publish_trajectory(path: Path, blob: memoryview, *, sync: bool) -> None:
    """Put the trajectory file ``path`` holding ``blob`` (:meth:`Serializer.serialize`) in place
    atomically (staged, renamed). With ``sync``, the file is fsynced before its rename; without,
    its writeback is started but not waited for, and the caller fsyncs it before any index
    names it.

    Staging entries a killed writer leaves are not looked for here (that would scan the whole
    directory on every write); :func:`bufcore.persist.rlinf.directory.orphans` finds them.
    The directory is not fsynced here: the index publish that follows the file, and the only
    one that may name it, fsyncs the directory first (:func:`bufcore.persist.rlinf.directory.
    publish_index`), so the rename is durable before any index naming the file is: one
    directory fsync per index instead of per file (3-6 ms per file on this machine's disk).
    """
    publish_file(path, lambda staging: _write_blob(staging, blob, start=not sync),
                 remove_stale=False, sync_file=sync, sync_parent=False)


def _write_blob(path: Path, blob: memoryview, *, start: bool) -> None:
    """Write ``blob`` to the new file ``path``; with ``start``, start its writeback."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        view = blob
        while view:
            view = view[os.write(fd, view) :]
        if start:
            start_writeback(fd)
    finally:
        os.close(fd)


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

"""A checkpoint directory opened once: every file of it read through one directory handle.

Why: a save publishes a new checkpoint by swapping its directory with the old one and deleting
the old one (:mod:`bufcore.persist.atomic`). A load that opened the files by path, one after
another, could read the manifest of one checkpoint and the rows of the next, and every checksum
would still hold. :class:`CheckpointSnapshot` opens the directory once and each file relative to
that handle (``openat``), so everything a load reads comes from one directory, the one it opened
first, even while a writer swaps another in. Once a file is open it stays readable after the
writer deletes it. A file that vanishes before it is opened, while the path now names another
directory, is a writer's swap, not damage: :meth:`CheckpointSnapshot.swapped` tells the caller to
start over.

Only the checkpoint's own regular files are read: names are plain file names (never a path with
``/`` or ``..``), symbolic links inside the directory are not followed, and anything but a
regular file (a FIFO, a device, a directory) is refused before a byte is read, so a hostile
checkpoint can neither make a load read another local file nor block it on a FIFO.

Needed by: ``tests/fault/test_load_save_race.py`` (one whole checkpoint under racing saves),
``tests/fault/test_untrusted_files.py`` and ``tests/persist/test_snapshot.py`` (no paths out,
links or FIFOs).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from bufcore.errors import CorruptCheckpointError, CorruptFileError
from bufcore.persist.backing import is_backing_file

_READ_BYTES = 1 << 20


def check_member_name(name: str, where: Path) -> None:
    """Refuse a file name that is not a plain name inside the checkpoint directory.

    Raises:
        CorruptCheckpointError: ``name`` is empty, ``.``/``..``, or contains a path separator
            (names ``where``, the file that listed it).
    """
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
        raise CorruptCheckpointError(
            where, f"file name {name!r} is not a plain name inside the checkpoint directory"
        )


class CheckpointSnapshot:
    """One checkpoint directory, opened once; its files are opened relative to that handle.

    Args:
        path: The directory (a symbolic link to one is followed here, once).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError) as err:
            if is_backing_file(path):
                raise FileNotFoundError(
                    f"path: {path} is the backing file of a file-backed buffer (its rows while "
                    "it runs, or scratch left by a process that died), not a checkpoint; load "
                    "the directory its buffer saved"
                ) from err
            raise FileNotFoundError(f"path: no checkpoint directory at {path}") from err
        info = os.fstat(self._fd)
        self._identity = (info.st_dev, info.st_ino)

    def __enter__(self) -> CheckpointSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the directory handle (files opened through it stay open)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def has(self, name: str) -> bool:
        """Whether the directory has an entry ``name`` (of any kind; links not followed)."""
        return self.lstat(name) is not None

    def lstat(self, name: str) -> os.stat_result | None:
        """The status of the entry ``name`` itself (a link is not followed); None if absent."""
        check_member_name(name, self.path)
        try:
            return os.stat(name, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open(
        self,
        name: str,
        *,
        missing: str = "file is missing",
        error: type[CorruptFileError] = CorruptCheckpointError,
    ) -> int:
        """A read-only descriptor of the regular file ``name`` in this directory (caller closes).

        Args:
            name: A plain file name.
            missing: The problem to report when there is no such file.
            error: The error type to raise (a run's log is no checkpoint file).

        Raises:
            CorruptCheckpointError: (or ``error``) ``name`` is not a plain name, is missing, is
                a symbolic link or anything but a regular file, or cannot be opened.
        """
        check_member_name(name, self.path)
        where = self.path / name
        # O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: no links out.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, dir_fd=self._fd)
        except FileNotFoundError:
            raise error(where, missing) from None
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise error(
                    where, "is a symbolic link; only the directory's own files are read"
                ) from None
            raise error(where, f"cannot be opened ({err.strerror})") from None
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise error(where, "is not a regular file")
        os.set_blocking(fd, True)
        return fd

    def read(self, name: str, *, missing: str = "file is missing") -> bytes:
        """The whole content of the regular file ``name``.

        Raises:
            CorruptCheckpointError: as :meth:`open`, or reading fails.
        """
        fd = self.open(name, missing=missing)
        try:
            parts = []
            while chunk := os.read(fd, _READ_BYTES):
                parts.append(chunk)
            return b"".join(parts)
        except OSError as err:
            raise CorruptCheckpointError(
                self.path / name, f"reading failed ({err.strerror})"
            ) from err
        finally:
            os.close(fd)

    def swapped(self) -> bool:
        """Whether ``path`` now names another directory than the one opened (or none)."""
        try:
            info = os.stat(self.path)
        except OSError:
            return True
        return (info.st_dev, info.st_ino) != self._identity

"""``BackingFile``: a ring's rows in a memory-mapped file, for buffers larger than memory.

One job: be the :class:`~bufcore.storage.memory.RowMemory` a file-backed ring allocates its byte
matrix in, and keep that file's life tidy. The storage never opens a file (DESIGN §1 rule 2): it
asks this object for the matrix and tells it which rows it reads and writes.

**The file.** A header of ``HEADER_BYTES`` (the line :data:`MAGIC`, then a JSON object: format,
version, the pid of the owning process, rows and bytes per row; zero padded), then the ring's
byte matrix ``[rows, row_bytes]``, row-major: the very matrix an in-memory ring holds, so
sampling, validation, ``out=`` and checkpoints work on it unchanged. It is scratch space, never
a checkpoint: ``buffer.save(path)`` writes the durable copy.

**Its life.**

- ``BackingFile(path)`` claims the path at once and holds an exclusive ``flock`` on the file
  until it is closed: it creates the file (a header only), or takes over a backing file that no
  process holds any more (one a killed process left behind; its rows are never read). Anything
  else at the path raises before anything is touched: a file without the header
  (``FileExistsError``: bufcore never overwrites a file it did not make), a backing file locked
  by a live process (``FileExistsError`` naming its pid), a directory (``IsADirectoryError``), a
  symbolic link or another kind of file (``FileExistsError``), a missing directory
  (``FileNotFoundError``).
- A ring allocating its rows (its first write, or a load) sizes it: a new file is made beside
  the path, its space reserved with ``posix_fallocate`` (a full disk is an ``OSError`` then,
  with nothing changed, never a ``SIGBUS`` in a later write through the mapping), mapped, and
  renamed over the path. Each allocation makes a new file, so a matrix handed out before stays
  valid: its file is unlinked and its pages live until the last view of them goes.
- :meth:`BackingFile.close`, the object's garbage collection or the interpreter's exit removes
  the file (views still mapped keep working on the unlinked file).

**After a crash** (SIGKILL, the OOM killer, a power cut) the file stays at its path: the header,
then whatever pages the kernel had written back, a mix of rows of different moments, possibly
torn ones, and no ring position. Nothing takes it for data: loaders open checkpoint directories
only, :func:`is_backing_file` lets ``bufcore inspect`` name it, and the next
``BackingFile(path)`` takes it over and its buffer starts empty (or from a checkpoint).

**Out of core.** When the matrix is larger than half the machine's memory (or with
``out_of_core=True``) the page cache cannot hold it, and the matrix is used differently (read
ahead, written packed, resident pages bounded): see :mod:`bufcore.persist.mapped_rows`.

Needed by (DESIGN rule 5): the claim and its lock: ``tests/persist/test_backing.py``
(``test_a_path_in_use_by_a_live_buffer_is_refused_naming_its_pid``, the take-over of a killed
process's file); ``posix_fallocate``: ``::test_a_file_that_cannot_be_reserved_raises_and_leaves_
nothing``; the new file per allocation: ``::test_a_second_allocation_leaves_the_first_matrix_
readable``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import mmap
import os
import secrets
import stat
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bufcore.checks import check_bool, check_path
from bufcore.persist.mapped_rows import MappedRows

MAGIC = b"bufcore backing file: the rows of a running buffer, not a checkpoint\n"
HEADER_BYTES = 4096
FORMAT = "bufcore.backing-file"
FORMAT_VERSION = 1
_CLAIM_ATTEMPTS = 5


@dataclass
class _Claim:
    """The file a :class:`BackingFile` holds: its descriptor (locked) and who may remove it."""

    path: Path
    fd: int
    pid: int

    def release(self) -> None:
        """Remove the file (if the path still names it) and close it; only in the process
        that claimed it (a forked child shares the descriptor but not the ownership)."""
        if self.fd < 0 or os.getpid() != self.pid:
            return
        try:
            if _same_file(os.stat(self.path, follow_symlinks=False), os.fstat(self.fd)):
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        finally:
            os.close(self.fd)
            self.fd = -1


class BackingFile:
    """A file that holds a buffer's rows (see the module docstring): pass it as ``backing=``.

    Args:
        path: Where the file goes; its directory must exist. Claimed at once.
        out_of_core: True: treat the rows as larger than memory (read ahead before gathers,
            keep resident pages bounded); False: never; None: when the rows take more than
            half the machine's memory.

    Raises:
        TypeError: ``path`` is not a path, or ``out_of_core`` not a bool or None.
        ValueError: ``path`` is empty.
        FileNotFoundError: its directory does not exist.
        NotADirectoryError: its parent is not a directory.
        IsADirectoryError: ``path`` is a directory.
        FileExistsError: something other than a backing file nobody holds is at ``path``: a
            file bufcore did not make, a symbolic link, a file of another kind, or a backing
            file a live process holds (the message names its pid).
        PermissionError: the directory or the file cannot be written.
    """

    def __init__(self, path: str | os.PathLike[str], *, out_of_core: bool | None = None) -> None:
        if out_of_core is not None:
            check_bool(out_of_core, "out_of_core")
        self.path = Path(os.path.abspath(check_path(path)))
        self._requested = out_of_core
        self._out_of_core = False
        self._claim = _Claim(self.path, _claim(self.path), os.getpid())
        self._finalizer = weakref.finalize(self, self._claim.release)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"BackingFile({str(self.path)!r}, {state})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran (the file is gone; nothing more can be allocated)."""
        return self._claim.fd < 0

    @property
    def out_of_core(self) -> bool:
        """Whether the rows allocated last are treated as larger than memory (read ahead,
        written packed with ``pwrite``, resident pages bounded)."""
        return self._out_of_core

    def close(self) -> None:
        """Remove the file and give up the path; rows still mapped stay readable until their
        views go. Closing twice does nothing."""
        self._finalizer()

    # ------------------------------------------------------------- RowMemory
    def allocate(self, n_rows: int, row_bytes: int) -> MappedRows:
        """A zeroed ``uint8`` matrix ``[n_rows, row_bytes]`` mapped from a new file that then
        replaces the one at :attr:`path` (a matrix given before stays valid, in its own file).

        Raises:
            ValueError: the file was closed.
            OSError: the disk cannot hold the rows (the message names the path and the bytes)
                or the path was taken from this object meanwhile; nothing changed.
        """
        if self.closed:
            raise ValueError(
                f"backing file {self.path}: closed; give the buffer a new BackingFile"
            )
        nbytes = n_rows * row_bytes
        fd, mapping = self._new_file(n_rows, row_bytes)
        old, self._claim.fd = self._claim.fd, fd
        os.close(old)
        requested = self._requested
        out_of_core = nbytes > _physical_memory() // 2 if requested is None else requested
        self._out_of_core = out_of_core and mapping is not None
        return MappedRows(
            self.path, os.dup(fd), mapping, HEADER_BYTES, n_rows, row_bytes, self._out_of_core
        )

    # --------------------------------------------------------------- the file
    def _new_file(self, n_rows: int, row_bytes: int) -> tuple[int, mmap.mmap | None]:
        """A new file holding the header and room for the rows, mapped, locked and renamed
        over :attr:`path`; its descriptor and mapping (None for no bytes). Nothing is left
        behind if any step fails."""
        nbytes = n_rows * row_bytes
        temp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.new")
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _write_header(fd, n_rows, row_bytes)
            if nbytes:
                try:
                    os.posix_fallocate(fd, HEADER_BYTES, nbytes)
                except OSError as err:
                    raise OSError(
                        err.errno,
                        f"backing file {self.path}: cannot reserve {nbytes:,} bytes "
                        f"({n_rows:,} rows of {row_bytes} bytes): {err.strerror}; free space "
                        "on its disk or choose a path on another one",
                    ) from err
            mapping = mmap.mmap(fd, nbytes, offset=HEADER_BYTES) if nbytes else None
            try:
                here = os.stat(self.path, follow_symlinks=False)
            except FileNotFoundError:
                here = None
            if here is None or not _same_file(here, os.fstat(self._claim.fd)):
                raise FileExistsError(
                    errno.EEXIST,
                    f"backing file {self.path}: the path no longer holds the file this "
                    "BackingFile claimed (moved or replaced by someone else); nothing was "
                    "changed there",
                )
            os.replace(temp, self.path)
        except BaseException:
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        return fd, mapping


def is_backing_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file that starts as a backing file does (a live buffer's,
    or one a crashed process left behind). Reads at most the magic line; never follows a link.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.pread(fd, len(MAGIC), 0) == MAGIC
    finally:
        os.close(fd)


def _claim(path: Path) -> int:
    """Create the file at ``path`` (a header only), or take over a stale backing file there;
    its descriptor, holding an exclusive ``flock``. See :class:`BackingFile` for the errors."""
    parent = path.parent
    if not parent.exists():
        raise FileNotFoundError(
            errno.ENOENT, f"backing file {path}: directory {parent} does not exist"
        )
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"backing file {path}: {parent} is not a directory")
    for _ in range(_CLAIM_ATTEMPTS):
        try:
            found = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            fd = _create(path)
            if fd >= 0:
                return fd
            continue  # another claimant created it meanwhile: look again
        fd = _take_over(path, found)
        if fd >= 0:
            return fd
    raise FileExistsError(
        errno.EEXIST, f"backing file {path}: the path keeps changing under other claimants"
    )


def _create(path: Path) -> int:
    """A new header-only file at ``path`` (locked), made under another name and linked into
    place only if nothing is there; -1 if something appeared meanwhile."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.new")
    fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _write_header(fd, 0, 0)
        try:
            os.link(temp, path)  # fails if anything is at the path: never replaces
        except FileExistsError:
            os.close(fd)
            return -1
    except BaseException:
        os.close(fd)
        raise
    finally:
        temp.unlink(missing_ok=True)
    return fd


def _take_over(path: Path, found: os.stat_result) -> int:
    """The stale backing file at ``path``, locked and cut back to its header; -1 if the path
    changed meanwhile.

    Raises:
        IsADirectoryError, FileExistsError: it is not a backing file nobody holds.
    """
    if stat.S_ISDIR(found.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"backing file {path}: is a directory")
    if stat.S_ISLNK(found.st_mode):
        raise FileExistsError(
            errno.EEXIST,
            f"backing file {path}: is a symbolic link; a backing file is never made through one",
        )
    if not stat.S_ISREG(found.st_mode):
        raise FileExistsError(errno.EEXIST, f"backing file {path}: is not a regular file")
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return -1
    try:
        if os.pread(fd, len(MAGIC), 0) != MAGIC:
            raise FileExistsError(
                errno.EEXIST,
                f"backing file {path}: holds a file bufcore did not make; bufcore never "
                "overwrites one: remove it or choose another path",
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _header(fd).get("pid", "unknown")
            raise FileExistsError(
                errno.EEXIST,
                f"backing file {path}: in use by a buffer of process {owner}; choose another "
                "path",
            ) from None
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        if now is None or not _same_file(now, os.fstat(fd)):
            os.close(fd)
            return -1  # replaced or removed between the look and the lock
        # A killed process's file: its rows are never read; cut it back to a header.
        os.ftruncate(fd, 0)
        _write_header(fd, 0, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_header(fd: int, rows: int, row_bytes: int) -> None:
    fields = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "pid": os.getpid(),
        "rows": rows,
        "row_bytes": row_bytes,
        "rows_offset": HEADER_BYTES,
    }
    text = MAGIC + json.dumps(fields).encode() + b"\n"
    os.pwrite(fd, text.ljust(HEADER_BYTES, b"\0"), 0)


def _header(fd: int) -> dict[str, Any]:
    """The JSON fields of a backing file's header ({} when they cannot be read)."""
    data = os.pread(fd, HEADER_BYTES, 0)[len(MAGIC) :].split(b"\n", 1)[0]
    try:
        fields = json.loads(data)
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

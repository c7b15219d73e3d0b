"""The few file-system calls that ``os`` lacks or that need care: through libc, in one place.

- :func:`exchange`: ``renameat2(RENAME_EXCHANGE)``, which swaps two paths atomically (how a new
  checkpoint directory replaces the old one without a moment in which neither exists).
- :func:`rename_new`: ``renameat2(RENAME_NOREPLACE)``, a rename that fails if anything is at the
  destination, checked by the kernel in the same step (how a save creates without replacing).
- :func:`start_writeback`: ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, a hint that starts writing
  a range to disk without waiting, so the final fsync has little left to do.
- :func:`pwrite_all` and :func:`fsync_path`: loops and descriptor handling around ``os``.

The libc functions are Linux-only; elsewhere :func:`exchange` and :func:`rename_new` report that
they cannot, and
:func:`start_writeback` does nothing.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from pathlib import Path
from typing import Any

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@functools.cache
def _function(name: str, argtypes: tuple[Any, ...]) -> Any:
    """libc's ``name`` with its argument types set, or None where libc has no such function."""
    function = getattr(_libc(), name, None)
    if function is not None:
        function.argtypes = list(argtypes)
        function.restype = ctypes.c_int
    return function


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths; False where the system cannot.

    Raises:
        OSError: the swap was possible but failed (permissions, a missing path, ...).
    """
    return _renameat2(a, b, _RENAME_EXCHANGE)


def rename_new(a: Path, b: Path) -> bool:
    """Rename ``a`` to ``b`` only if nothing is at ``b`` (atomically); False where the system
    cannot (the caller needs another way; nothing was renamed).

    Raises:
        FileExistsError: something (a file, a link, even an empty directory) is at ``b``.
        OSError: the rename was possible but failed otherwise.
    """
    return _renameat2(a, b, _RENAME_NOREPLACE)


def _renameat2(a: Path, b: Path, flags: int) -> bool:
    """``renameat2(a, b, flags)``: True when done, False where unsupported.

    Raises:
        OSError: the call was supported but failed (the errno's subclass, naming ``b``).
    """
    renameat2 = _function(
        "renameat2", (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    )
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Start writing ``[offset, offset + nbytes)`` of ``fd`` to disk without waiting (a hint).

    Without it nothing reaches the disk before the fsync (a checkpoint stays far below the
    kernel's dirty-page thresholds), so the disk would idle while rows are packed and hashed.
    """
    function = _function(
        "sync_file_range", (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    )
    if function is not None:
        function(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)  # errors: the fsync will see them


def pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (``pwrite`` may write less than asked)."""
    while data:
        written = os.pwrite(fd, data, offset)
        data = data[written:]
        offset += written


def fsync_path(path: Path, *, directory: bool = False) -> None:
    """fsync a file, or a directory (which makes the renames inside it durable)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


"""The few file-system calls that ``os`` lacks or that need care: through libc, in one place.

- :func:`exchange`: ``renameat2(RENAME_EXCHANGE)``, which swaps two paths atomically (how a new
  checkpoint directory replaces the old one without a moment in which neither exists).
- :func:`rename_new`: ``renameat2(RENAME_NOREPLACE)``, a rename that fails if anything is at the
  destination, checked by the kernel in the same step (how a save creates without replacing).
- :func:`fsync_path`: descriptor handling around ``os.fsync``.
- :func:`start_writeback`: ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which starts writing a
  file's dirty pages to disk without waiting, so that a later fsync finds them written.

Needed by: ``tests/fault/test_load_save_race.py`` and ``tests/persist/test_atomic.py`` (the swap
keeps the path a whole checkpoint at every moment), ``tests/persist/test_create_only.py`` (of
two create-only savers exactly one wins). ``renameat2`` is Linux-only; elsewhere both report
that they cannot and :mod:`bufcore.persist.atomic` falls back. ``start_writeback``: the bench
row ``python -m bench --only rlinf`` (``write``): the disk trajectory buffer's writer starts each
file's writeback as soon as it is written and fsyncs the files once, before the index that
names them; on this machine that is the difference between ~0.5x and ~1x of the raw ceiling
(an fsync right after each file leaves the disk idle while the next file is written, and one
before the index without the early start leaves the CPU idle while the disk catches up).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from pathlib import Path
from typing import Any

_SYNC_FILE_RANGE_WRITE = 2
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


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


def fsync_path(path: Path, *, directory: bool = False) -> None:
    """fsync a file, or a directory (which makes the renames inside it durable)."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)



def start_writeback(fd: int) -> None:
    """Start writing the dirty pages of the file open at ``fd`` to disk, without waiting for
    them (nothing where libc lacks ``sync_file_range``). Only a head start: durability still
    needs an fsync, which also reports any error of this writeback."""
    sync_file_range = _function(
        "sync_file_range", (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    )
    if sync_file_range is not None:
        sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)

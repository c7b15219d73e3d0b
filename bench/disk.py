"""Disk: page-cache control, the raw sequential ceilings, and bufcore's checkpoint save/load.

Every read here is *cold*: before it, every file involved is fsynced and dropped from the page
cache with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (which drops clean pages only, hence the fsync
first). The raw ceilings move the same number of bytes as the checkpoint holds:

- raw write: ``os.write`` of 64 MiB blocks from memory into a new file, then ``fsync``;
- raw read: ``os.readv`` of 64 MiB blocks into a preallocated, already touched buffer.

bufcore's save is ``DictBuffer.save(path)`` (HDF5 payload, hashing, fsync, atomic publish) into a
fresh path; its load is ``DictBuffer.load(path)`` (which allocates the buffer and verifies the
sha256 while reading). Rates are bytes on disk over wall time, in MB/s (10^6 bytes).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from bench.timing import timed

BLOCK_BYTES = 64 << 20


def drop_cache(path: Path) -> None:
    """fsync ``path`` (a file, or every file under a directory) and drop it from the page cache."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    for file in files:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def tree_bytes(path: Path) -> int:
    """Total size of the files under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def remove(path: Path) -> None:
    """Delete a file or directory if it exists."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def raw_write(path: Path, data: np.ndarray) -> float:
    """Seconds to write ``data``'s bytes sequentially into a new file and fsync it."""
    view = data.reshape(-1).view(np.uint8).data

    def write() -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for start in range(0, len(view), BLOCK_BYTES):
                chunk = view[start : start + BLOCK_BYTES]
                while chunk:
                    chunk = chunk[os.write(fd, chunk) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    seconds, _ = timed(write)
    return seconds


def raw_write_files(directory: Path, data: np.ndarray, count: int) -> float:
    """Seconds to write ``data``'s bytes as ``count`` new files of ``directory`` (equal parts,
    the last one shorter), each fsynced after it is written, then fsync the directory."""
    view = data.reshape(-1).view(np.uint8).data
    size = -(-len(view) // count)

    def write() -> None:
        for number in range(count):
            chunk = view[number * size : (number + 1) * size]
            fd = os.open(directory / f"raw-{number}.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o644)
            try:
                while chunk:
                    chunk = chunk[os.write(fd, chunk) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    seconds, _ = timed(write)
    return seconds


def raw_read(path: Path, out: np.ndarray) -> float:
    """Seconds to read ``path`` cold and sequentially into ``out`` (as large as the file)."""
    drop_cache(path)
    view = out.reshape(-1).view(np.uint8).data
    size = path.stat().st_size

    def read() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            offset = 0
            while offset < size:
                n = os.preadv(fd, [view[offset : offset + BLOCK_BYTES]], offset)
                if n == 0:
                    raise EOFError(f"{path}: ended at byte {offset} of {size}")
                offset += n
        finally:
            os.close(fd)

    seconds, _ = timed(read)
    return seconds


def bufcore_save(buffer: Any, path: Path) -> float:
    """Seconds for ``buffer.save(path)`` into a path that does not exist yet."""
    remove(path)
    seconds, _ = timed(lambda: buffer.save(path))
    return seconds


def bufcore_load(path: Path) -> float:
    """Seconds for a cold ``DictBuffer.load(path)``; the loaded buffer is freed after timing."""
    from bufcore import DictBuffer

    drop_cache(path)
    seconds, loaded = timed(lambda: DictBuffer.load(path))
    del loaded
    return seconds

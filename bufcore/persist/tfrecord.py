"""TFRecord files read record by record, every checksum verified, without TensorFlow.

A TFRecord file is a sequence of records, each framed as::

    uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes
    data (length bytes)           | uint32 masked CRC-32C of the data

(:mod:`bufcore.persist.crc32c`). :func:`read_records` checks the length's checksum before it
trusts the length, and the length against what is left of the file before it reads, so a
damaged, truncated or hostile file raises :class:`~bufcore.errors.CorruptFileError` naming the
file and the record's offset, and never makes the reader allocate more than the file holds.
Compressed TFRecord files (GZIP, ZLIB) are not read; they fail the first checksum, and a GZIP
file is named as such.

Needed by: ``tests/rlds/test_tfrecord.py`` (records read back; a flipped bit in a length, a
payload or a checksum, a truncated file and a length beyond the file all raise naming the
offset; a FIFO or directory is refused without blocking).
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

from bufcore.errors import CorruptFileError
from bufcore.persist.crc32c import masked_crc32c

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_GZIP_MAGIC = b"\x1f\x8b"
# Bytes asked of one read() call: Linux returns at most ~2 GiB per call.
_READ_CHUNK = 1 << 30


def read_records(path: Path) -> Iterator[tuple[int, bytes]]:
    """Each record of a TFRecord file with its byte offset, in file order.

    The file is opened (and checked to be a regular file) when iteration starts; its size then
    bounds every read.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        CorruptFileError: not a regular file, a checksum that does not match, or a record that
            runs past the end of the file (naming its offset).
        OSError: the file cannot be read.
    """
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked next.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ENOENT:
            raise FileNotFoundError(f"{path}: no such TFRecord file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CorruptFileError(path, "not a regular file")
        size = info.st_size
        offset = 0
        while offset < size:
            data, offset = _record(fd, path, offset, size)
            yield offset - len(data) - _HEADER.size - _FOOTER.size, data
    finally:
        os.close(fd)


def _record(fd: int, path: Path, offset: int, size: int) -> tuple[bytes, int]:
    """The record at ``offset`` and the offset after it.

    Raises:
        CorruptFileError: a checksum mismatch, or the record runs past ``size``.
    """
    header = _read(fd, path, offset, offset, _HEADER.size, size)
    length, length_crc = _HEADER.unpack(header)
    if masked_crc32c(header[:8]) != length_crc:
        hint = (
            "; a GZIP-compressed TFRecord file? Only uncompressed ones are read: gunzip it first"
            if offset == 0 and header.startswith(_GZIP_MAGIC)
            else "; not a TFRecord file, or a damaged one"
        )
        raise CorruptFileError(
            path, f"record at byte {offset}: the length's checksum does not match{hint}"
        )
    start = offset + _HEADER.size
    body = _read(fd, path, offset, start, length + _FOOTER.size, size)
    data, (data_crc,) = body[:length], _FOOTER.unpack(body[length:])
    if masked_crc32c(data) != data_crc:
        raise CorruptFileError(
            path, f"record at byte {offset}: the data's checksum does not match (damaged data)"
        )
    return data, start + length + _FOOTER.size


def _read(fd: int, path: Path, record: int, offset: int, count: int, size: int) -> bytes:
    """Exactly ``count`` bytes at ``offset`` (of the record at ``record``), checked against
    the file's ``size`` before anything is read.

    Raises:
        CorruptFileError: the file ends (or ended while reading) before them.
    """
    if offset + count > size:
        raise CorruptFileError(
            path,
            f"truncated: the record at byte {record} runs to byte {offset + count}, but the "
            f"file ends at byte {size}",
        )
    pieces = []
    done = 0
    while done < count:
        piece = os.pread(fd, min(count - done, _READ_CHUNK), offset + done)
        if not piece:
            raise CorruptFileError(
                path, f"truncated while reading: the file ended at byte {offset + done}"
            )
        pieces.append(piece)
        done += len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)

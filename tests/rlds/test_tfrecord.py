"""TFRecord framing: records read back with their offsets; every kind of damage is a clear
``CorruptFileError`` naming the record, found before any read beyond the file."""

from __future__ import annotations

import gzip
import os
import struct
import threading
from pathlib import Path

import pytest

from bufcore.errors import CorruptFileError
from bufcore.persist.tfrecord import read_records
from tests.rlds.tfds_writer import frame, masked

RECORDS = [b"first", b"", b"x" * 3000]


def write(path: Path, records: list[bytes]) -> Path:
    path.write_bytes(b"".join(frame(r) for r in records))
    return path


def test_records_come_back_in_order_with_their_byte_offsets(tmp_path: Path) -> None:
    path = write(tmp_path / "a.tfrecord", RECORDS)
    offsets = [0, 16 + 5, 16 + 5 + 16]
    assert list(read_records(path)) == list(zip(offsets, RECORDS, strict=True))


def test_an_empty_file_holds_no_record(tmp_path: Path) -> None:
    path = tmp_path / "empty.tfrecord"
    path.write_bytes(b"")
    assert list(read_records(path)) == []


@pytest.mark.parametrize(
    ("position", "problem"),
    [
        (0, "the length's checksum does not match"),  # a bit of the length
        (9, "the length's checksum does not match"),  # the length's CRC
        (12, "the data's checksum does not match"),  # the data
        (12 + 3000, "the data's checksum does not match"),  # the data's CRC
    ],
)
def test_a_flipped_bit_anywhere_in_a_record_is_reported_with_its_offset(
    tmp_path: Path, position: int, problem: str
) -> None:
    data = bytearray(b"".join(frame(r) for r in RECORDS))
    third = 16 + 5 + 16
    data[third + position] ^= 0x04
    path = tmp_path / "flipped.tfrecord"
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=f"record at byte {third}: {problem}"):
        list(read_records(path))


@pytest.mark.parametrize("cut", [1, 4, 12, 13, 3000])
def test_a_truncated_file_is_reported_as_truncated_naming_the_last_record(
    tmp_path: Path, cut: int
) -> None:
    data = b"".join(frame(r) for r in RECORDS)
    path = tmp_path / "cut.tfrecord"
    path.write_bytes(data[: len(data) - cut])
    with pytest.raises(CorruptFileError, match=r"truncated: the record at byte 37 runs to byte"):
        list(read_records(path))


def test_a_length_beyond_the_file_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    length = struct.pack("<Q", 2**62)  # a checksummed, hostile length: 4 EiB
    path = tmp_path / "huge.tfrecord"
    path.write_bytes(length + struct.pack("<I", masked(length)) + b"tiny")
    with pytest.raises(CorruptFileError, match=f"runs to byte {2**62 + 16}, but the file ends "
                       "at byte 16"):
        list(read_records(path))


def test_a_gzip_compressed_file_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "zipped.tfrecord"
    path.write_bytes(gzip.compress(b"".join(frame(r) for r in RECORDS)))
    with pytest.raises(CorruptFileError, match="GZIP-compressed TFRecord file"):
        list(read_records(path))


def test_a_text_file_is_not_a_tfrecord_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.tfrecord"
    path.write_text("these are not records, just a longer line of text\n")
    with pytest.raises(CorruptFileError, match="not a TFRecord file, or a damaged one"):
        list(read_records(path))


def test_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such TFRecord file"):
        list(read_records(tmp_path / "absent.tfrecord"))


def test_a_directory_is_not_a_tfrecord_file(tmp_path: Path) -> None:
    with pytest.raises(CorruptFileError, match="not a regular file"):
        list(read_records(tmp_path))


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.tfrecord"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            list(read_records(fifo))
        except BaseException as err:  # the outcome is asserted below
            outcome.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive()
    assert isinstance(outcome[0], CorruptFileError)

"""CRC-32C: the RFC 3720 vectors, and the lane-parallel computation against the definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bufcore.persist.crc32c import crc32c, masked_crc32c
from tests.rlds.tfds_writer import crc32c_reference, masked


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", 0x00000000),
        (b"123456789", 0xE3069283),
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_gives_the_rfc_3720_check_values(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected


@pytest.mark.parametrize(
    "size",
    # Around the byte-by-byte threshold (256), the lane minimum, several power-of-two blocks
    # in a row, and a block large enough for the most lanes (2**16 lanes x 8 words = 2 MiB).
    [1, 255, 256, 257, 511, 512, 1023, 4096 + 256 + 3, 65536 + 255, 2 * 2**20, 2 * 2**20 + 777],
)
def test_crc32c_equals_the_definition_at_every_block_and_lane_boundary(size: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert crc32c(data) == crc32c_reference(data)


@given(st.binary(max_size=5000))
def test_crc32c_equals_the_definition_for_any_bytes(data: bytes) -> None:
    assert crc32c(data) == crc32c_reference(data)


@pytest.mark.parametrize("data", [b"", b"\x00" * 8, b"a TFRecord payload"])
def test_the_masked_crc_rotates_and_adds_tfrecords_constant(data: bytes) -> None:
    assert masked_crc32c(data) == masked(data)


def test_crc32c_reads_a_memoryview_and_a_bytearray_like_bytes() -> None:
    data = b"0123456789" * 100
    assert crc32c(memoryview(data)) == crc32c(bytearray(data)) == crc32c(data)

"""A whole buffer.hdf5 hashed in the background while a load reads it: damage reported once
hashing finishes, the file closed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from bufcore.persist.checkpoint.hashing import Digests
from bufcore.persist.checkpoint.verify import PayloadStream

DATA = np.random.default_rng(1).integers(0, 256, 50_000, dtype=np.uint8).tobytes()


def digests(data: bytes, block: int | None) -> Digests:
    if block is None:
        return Digests(len(data), None, (hashlib.sha256(data).hexdigest(),))
    blocks = [hashlib.sha256(data[i : i + block]).hexdigest() for i in range(0, len(data), block)]
    return Digests(len(data), block, tuple(blocks))


def stream(path: Path, expected: Digests | None) -> tuple[PayloadStream, int]:
    fd = os.open(path, os.O_RDONLY)
    return PayloadStream(path, fd, expected), fd


@pytest.fixture
def payload(tmp_path: Path) -> Path:
    path = tmp_path / "payload"
    path.write_bytes(DATA)
    return path


@pytest.mark.parametrize("block", [None, 4096, 1 << 20])
def test_an_intact_file_finishes_without_damage_and_is_closed(
    payload: Path, block: int | None
) -> None:
    reader, fd = stream(payload, digests(DATA, block))
    assert reader.finish() is None
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_flipped_byte_is_damage_naming_its_block(payload: Path) -> None:
    expected = digests(DATA, 4096)
    damaged = bytearray(DATA)
    damaged[10_000] ^= 1
    payload.write_bytes(bytes(damaged))
    damage = stream(payload, expected)[0].finish()
    assert damage is not None and "block 2 (bytes 8192 to 12288)" in str(damage)


def test_a_truncated_file_is_damage_naming_both_sizes(payload: Path) -> None:
    expected = digests(DATA, 4096)
    payload.write_bytes(DATA[:-1])
    damage = stream(payload, expected)[0].finish()
    assert damage is not None and f"size {len(DATA) - 1} bytes, manifest says {len(DATA)}" in str(
        damage
    )


def test_without_a_manifest_nothing_is_checked_and_the_file_is_closed(payload: Path) -> None:
    reader, fd = stream(payload, None)
    assert reader.finish() is None
    with pytest.raises(OSError):
        os.fstat(fd)

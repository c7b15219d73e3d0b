"""sha256 per block on background threads, equal to hashlib's, and what a mismatch reports."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.checkpoint.hashing import (
    BlockHasher,
    Digests,
    file_digest,
    hash_fd,
    hash_range,
    mismatch,
    seal_file,
)

DATA = np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8).tobytes()


def blocks_of(data: bytes, block: int) -> list[str]:
    return [hashlib.sha256(data[i : i + block]).hexdigest() for i in range(0, len(data), block)]


def hash_file(path: Path, block: int | None, threads: int = 2) -> tuple[list[str], int]:
    with path.open("rb") as file:
        return BlockHasher(file.fileno(), block, threads).result()


@pytest.mark.parametrize("block", [1, 7, 1024, 4096, 10_000, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_block_digests_equal_hashlib_on_each_block(
    tmp_path: Path, block: int, threads: int
) -> None:
    (tmp_path / "f").write_bytes(DATA)
    assert hash_file(tmp_path / "f", block, threads) == (blocks_of(DATA, block), len(DATA))


def test_without_blocks_the_file_has_one_whole_digest(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    assert hash_file(tmp_path / "f", None) == ([hashlib.sha256(DATA).hexdigest()], len(DATA))


def test_an_empty_file_has_no_blocks_and_one_whole_digest(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    assert hash_file(tmp_path / "f", 64) == ([], 0)
    assert hash_file(tmp_path / "f", None) == ([hashlib.sha256(b"").hexdigest()], 0)


def test_a_hasher_closed_unread_closes_its_file_and_stops(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(DATA)
    with (tmp_path / "f").open("rb") as file:
        hasher = BlockHasher(file.fileno(), 7)
        hasher.close()
        hasher.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("bufcore-sha256")]


def test_file_digest_and_hash_fd_hash_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    assert file_digest(path) == (hashlib.sha256(DATA).hexdigest(), len(DATA))


@pytest.mark.parametrize(("start", "stop", "hashed"), [(100, 900, 800), (9_990, 20_000, 10)])
def test_hash_range_hashes_that_range_and_stops_at_the_end_of_the_file(
    tmp_path: Path, start: int, stop: int, hashed: int
) -> None:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    with path.open("rb") as file:
        got = hash_range(file.fileno(), start, stop)
    assert got == (hashlib.sha256(DATA[start:stop]).hexdigest(), hashed)


def test_seal_file_returns_the_whole_file_entry(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    assert seal_file(path) == {"sha256": hashlib.sha256(DATA).hexdigest(), "size": len(DATA)}
    with path.open("rb") as file:
        assert hash_fd(file.fileno())[1] == len(DATA)


def test_seal_file_takes_a_given_entry_instead_of_hashing(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    assert seal_file(path, lambda: {"size": 1, "mine": True}) == {"size": 1, "mine": True}


# ------------------------------------------------------------------------------ mismatch
EXPECTED = Digests(len(DATA), 4096, tuple(blocks_of(DATA, 4096)))


def test_identical_digests_are_no_mismatch() -> None:
    assert mismatch(Path("f"), EXPECTED, blocks_of(DATA, 4096), len(DATA)) is None


def test_a_wrong_block_is_named_with_its_byte_range() -> None:
    damaged = DATA[:5000] + b"\0" + DATA[5001:]
    error = mismatch(Path("f"), EXPECTED, blocks_of(damaged, 4096), len(DATA))
    assert isinstance(error, CorruptCheckpointError)
    assert "block 1 (bytes 4096 to 8192)" in str(error)


def test_a_wrong_size_is_reported_before_the_digests() -> None:
    error = mismatch(Path("f"), EXPECTED, blocks_of(DATA, 4096), len(DATA) - 1)
    assert error is not None and "manifest says 10000" in str(error)


def test_a_whole_file_digest_mismatch_says_so() -> None:
    expected = Digests(3, None, (hashlib.sha256(b"abc").hexdigest(),))
    error = mismatch(Path("f"), expected, [hashlib.sha256(b"abd").hexdigest()], 3)
    assert error is not None and "sha256 does not match" in str(error)


def test_seal_file_raises_when_the_fsync_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("bufcore.persist.checkpoint.hashing.os.fsync", failing)
    with pytest.raises(OSError, match="Input/output error"):
        seal_file(path)

"""sha256 per block on background threads, equal to hashlib's, and what a mismatch reports."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.hashing import (
    Digests,
    StreamHasher,
    file_digest,
    hash_fd,
    hash_file_range,
    mismatch,
    seal_file,
)

DATA = np.random.default_rng(0).integers(0, 256, 10_000, dtype=np.uint8).tobytes()


def blocks_of(data: bytes, block: int) -> list[str]:
    return [hashlib.sha256(data[i : i + block]).hexdigest() for i in range(0, len(data), block)]


def feed_in_pieces(hasher: StreamHasher, data: bytes, pieces: list[int]) -> None:
    position = 0
    for size in [*pieces, len(data)]:
        hasher.feed(memoryview(data[position : position + size]))
        position += size
        if position >= len(data):
            return


@pytest.mark.parametrize("block", [1, 7, 1024, 4096, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_block_digests_equal_hashlib_on_each_block_whatever_the_pieces(
    block: int, threads: int
) -> None:
    hasher = StreamHasher(block, threads)
    feed_in_pieces(hasher, DATA, [1, 1023, 4097, 0, 2])
    digests, size = hasher.result()
    assert (digests, size) == (blocks_of(DATA, block), len(DATA))


def test_without_blocks_the_stream_has_one_whole_digest() -> None:
    hasher = StreamHasher()
    feed_in_pieces(hasher, DATA, [3, 5000])
    assert hasher.result() == ([hashlib.sha256(DATA).hexdigest()], len(DATA))


def test_an_empty_stream_has_no_blocks() -> None:
    assert StreamHasher(64, 2).result() == ([], 0)


def test_each_fed_buffer_is_released_exactly_once_after_it_was_hashed() -> None:
    released: list[int] = []
    lock = threading.Lock()

    def release(i: int) -> None:
        with lock:
            released.append(i)

    hasher = StreamHasher(100, 2)
    for i in range(20):
        hasher.feed(memoryview(DATA[i * 250 : (i + 1) * 250]), lambda i=i: release(i))
    hasher.result()
    assert sorted(released) == list(range(20))


@pytest.mark.parametrize(("block", "threads"), [(0, 1), (8, 0), (-1, 2)])
def test_a_non_positive_block_size_or_thread_count_is_refused(block: int, threads: int) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        StreamHasher(block, threads)


def test_file_digest_and_hash_fd_hash_the_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    assert file_digest(path) == (hashlib.sha256(DATA).hexdigest(), len(DATA))


def test_hash_file_range_feeds_exactly_that_range(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(DATA)
    hasher = StreamHasher()
    with path.open("rb") as file:
        hash_file_range(file.fileno(), 100, 900, hasher)
    assert hasher.result() == ([hashlib.sha256(DATA[100:900]).hexdigest()], 800)


def test_hash_file_range_past_the_end_raises(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    hasher = StreamHasher()
    with path.open("rb") as file, pytest.raises(RuntimeError, match="ended at byte 3"):
        hash_file_range(file.fileno(), 0, 10, hasher)
    hasher.close()


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

    monkeypatch.setattr("bufcore.persist.hashing.os.fsync", failing)
    with pytest.raises(OSError, match="Input/output error"):
        seal_file(path)

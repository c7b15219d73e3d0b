"""Byte streams: slots handed between threads, a file read once while hashed, rows filled."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from bufcore.persist.hashing import Digests
from bufcore.persist.stream import PayloadStream, SlotRing, byte_rows, copy_regions, copy_tensor

DATA = np.random.default_rng(1).integers(0, 256, 50_000, dtype=np.uint8).tobytes()


def digests(data: bytes, block: int) -> Digests:
    blocks = [hashlib.sha256(data[i : i + block]).hexdigest() for i in range(0, len(data), block)]
    return Digests(len(data), block, tuple(blocks))


def stream(path: Path, expected: Digests | None, slot_bytes: int = 4096) -> PayloadStream:
    fd = os.open(path, os.O_RDONLY)
    return PayloadStream(
        path, fd, expected, slots=3, slot_bytes=slot_bytes, first_read=100, threads=2
    )


@pytest.fixture
def payload(tmp_path: Path) -> Path:
    path = tmp_path / "payload"
    path.write_bytes(DATA)
    return path


def test_a_slot_ring_hands_out_each_slot_until_it_is_given_back() -> None:
    ring = SlotRing(2, 16)
    first, second = ring.take(), ring.take()
    assert {first, second} == {0, 1}
    ring.give(first)
    assert ring.take() == first
    assert ring.tensors[0].numel() == ring.views[0].nbytes == 16


@pytest.mark.parametrize("slot_bytes", [100, 4096, 1 << 20])
def test_the_chunks_of_a_stream_are_the_file_in_order(payload: Path, slot_bytes: int) -> None:
    reader = stream(payload, digests(DATA, 8192), slot_bytes)
    got = bytearray()
    for offset, chunk in reader.chunks():
        assert offset == len(got)
        got += chunk.numpy().tobytes()
    assert bytes(got) == DATA
    assert reader.finish() is None


def test_a_detached_stream_still_hashes_the_whole_file(payload: Path) -> None:
    damaged = payload.read_bytes()[:-1] + b"\0"
    payload.write_bytes(damaged)
    reader = stream(payload, digests(DATA, 8192))
    reader.wait_started()
    reader.detach()
    error = reader.finish()
    assert error is not None and "block 6" in str(error)


def test_a_file_of_another_size_than_expected_fails_at_once(payload: Path) -> None:
    reader = stream(payload, Digests(len(DATA) + 1, 8192, ()))
    with pytest.raises(Exception, match="manifest says 50001"):
        list(reader.chunks())
    assert reader.finish() is not None


def test_a_stream_without_digests_reads_and_reports_nothing(payload: Path) -> None:
    reader = stream(payload, None)
    assert sum(chunk.numel() for _, chunk in reader.chunks()) == len(DATA)
    assert reader.finish() is None


def test_byte_rows_views_a_strided_leaf_as_bytes_per_row() -> None:
    packed = torch.zeros(4, 12, dtype=torch.uint8)
    leaf = packed[:, 4:12].view(torch.float32)  # [4, 2] float32, stride 3
    rows = byte_rows(leaf, 1)
    assert rows is not None and rows.shape == (4, 8)
    rows[1] = 255
    assert packed[1, 4:12].tolist() == [255] * 8 and packed[1, :4].tolist() == [0] * 4


def test_copy_regions_fills_each_region_from_chunks_that_cut_across_rows(payload: Path) -> None:
    first = torch.zeros(10, 7, dtype=torch.uint8)
    second = torch.zeros(3, 5, dtype=torch.uint8)
    regions = [(13, 70, first), (20_000, 15, second)]
    copy_regions(stream(payload, None, slot_bytes=31).chunks(), regions, payload)
    assert first.numpy().tobytes() == DATA[13:83]
    assert second.numpy().tobytes() == DATA[20_000:20_015]


def test_copy_regions_past_the_end_of_the_file_raises(payload: Path) -> None:
    rows = torch.zeros(2, 8, dtype=torch.uint8)
    with pytest.raises(Exception, match="ended inside a dataset"):
        copy_regions(stream(payload, None).chunks(), [(len(DATA) - 8, 16, rows)], payload)


def test_copy_tensor_copies_bfloat16_through_its_bits() -> None:
    source = torch.tensor([1.5, -2.25], dtype=torch.bfloat16)
    dest = torch.zeros(2, dtype=torch.bfloat16)
    copy_tensor(dest, source)
    assert dest.tolist() == [1.5, -2.25]

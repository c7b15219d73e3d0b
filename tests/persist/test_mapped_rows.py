"""MappedRows: a backing file's matrix written packed, read ahead, scanned for a save, and its
resident pages dropped, all without changing a row."""

from __future__ import annotations

import itertools
import mmap
from pathlib import Path

import numpy as np
import pytest
import torch

import bufcore
from bufcore import BackingFile, DictBuffer
from bufcore.persist import mapped_rows
from bufcore.persist.backing import HEADER_BYTES


@pytest.mark.parametrize("capacity", [1, 2, 7, 100])
def test_out_of_core_rows_survive_dropping_the_mapping_at_every_access(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capacity: int
) -> None:
    monkeypatch.setattr(mapped_rows, "RESIDENT_LIMIT", -1)  # drop after every access
    backing = BackingFile(tmp_path / "ring.bin", out_of_core=True)
    buffer = DictBuffer(capacity=capacity, seed=3, backing=backing)
    ram = DictBuffer(capacity=capacity, seed=3)
    for step in range(5):
        batch = {"obs": torch.randn(3, 1100), "step": torch.full((3,), step)}
        buffer.extend(batch)
        ram.extend(batch)
        got, expected = buffer.sample(4), ram.sample(4)
        assert torch.equal(got["obs"], expected["obs"])
        assert torch.equal(got["step"], expected["step"])
    assert backing.out_of_core
    full, ram_full = buffer.get_full_buffer(), ram.get_full_buffer()
    assert torch.equal(full["obs"], ram_full["obs"])


def test_a_packed_write_lands_in_the_file_and_the_mapping(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path, out_of_core=True)
    rows = backing.allocate(4, 16)
    assert rows.packed_writes
    data = np.arange(32, dtype=np.uint8).reshape(2, 16)
    rows.write(1, data)
    assert rows.matrix[1:3].flatten().tolist() == list(range(32))
    assert path.read_bytes()[HEADER_BYTES + 16 : HEADER_BYTES + 48] == bytes(range(32))
    backing.close()


def test_an_earlier_matrix_keeps_writing_to_its_own_file_after_a_new_allocation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path, out_of_core=True)
    old = backing.allocate(4, 16)
    new = backing.allocate(4, 16)
    old.write(0, np.full((1, 16), 5, dtype=np.uint8))
    assert old.matrix[0].tolist() == [5] * 16
    assert new.matrix[0].tolist() == [0] * 16
    assert path.read_bytes()[HEADER_BYTES : HEADER_BYTES + 16] == bytes(16)
    backing.close()


def test_in_core_rows_are_written_through_the_mapping(tmp_path: Path) -> None:
    backing = BackingFile(tmp_path / "ring.bin", out_of_core=False)
    assert not backing.allocate(4, 16).packed_writes
    backing.close()


@pytest.mark.parametrize("rows", [[0], [5], [0, 1, 2], [9, 3, 3, 700], list(range(0, 900, 7))])
def test_reading_ahead_asks_for_every_page_of_the_rows_in_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[int]
) -> None:
    backing = BackingFile(tmp_path / "ring.bin", out_of_core=True)
    allocated = backing.allocate(1000, 1500)
    asked: list[tuple[int, int]] = []

    class Recorder:
        def madvise(self, option: int, start: int, length: int) -> None:
            asked.append((start, start + length))

    monkeypatch.setattr(allocated, "_mapping", Recorder())
    allocated.will_read(torch.tensor(rows))
    pages = {p for a, b in asked for p in range(a // 4096, b // 4096)}
    wanted = {p for r in rows for p in range(r * 1500 // 4096, (r * 1500 + 1499) // 4096 + 1)}
    assert pages == wanted
    assert all(b < c for (_, b), (c, _) in itertools.pairwise(asked))  # disjoint runs
    backing.close()


def test_a_save_reads_an_out_of_core_ring_sequentially_then_gathers_go_back_to_random(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backing = BackingFile(tmp_path / "ring.bin", out_of_core=True)
    buffer = DictBuffer(capacity=50, seed=0, backing=backing)
    buffer.extend({"obs": torch.randn(50, 100)})
    allocated = buffer._storage._allocated
    advice: list[int] = []
    mapping = allocated._mapping  # type: ignore[union-attr]

    class Recorder:
        def madvise(self, option: int, *span: int) -> None:
            advice.append(option)
            mapping.madvise(option, *span)

    monkeypatch.setattr(allocated, "_mapping", Recorder())
    buffer.save(tmp_path / "ckpt")
    buffer.save(tmp_path / "ckpt")
    assert advice == [mmap.MADV_SEQUENTIAL]
    buffer.sample(4)
    assert advice[:2] == [mmap.MADV_SEQUENTIAL, mmap.MADV_RANDOM]
    assert bufcore.load_buffer(tmp_path / "ckpt").get_full_buffer()["obs"].shape == (50, 100)
    backing.close()

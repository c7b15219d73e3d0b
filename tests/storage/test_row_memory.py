"""A ring whose rows live in a given RowMemory (a mapped file, in bufcore): where they are
allocated, what the allocation is told about reads and accesses, packed writes, and restores
block by block."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from bufcore.storage import packed, ring
from bufcore.storage.batches import TensorRows
from bufcore.storage.memory import RowMemory
from bufcore.storage.ring import RingStorage
from bufcore.tree import KeyPath, LeafSpec

CPU = torch.device("cpu")


@dataclass
class RecordingRows:
    """An allocation in the process's memory that records what the ring tells it."""

    matrix: torch.Tensor
    packed_writes: bool
    events: list[tuple[object, ...]]

    def write(self, first: int, rows: np.ndarray) -> None:
        assert rows.flags.c_contiguous and rows.dtype == np.uint8
        self.events.append(("write", first, len(rows)))
        self.matrix[first : first + len(rows)] = torch.from_numpy(rows.copy())

    def will_read(self, rows: torch.Tensor) -> None:
        self.events.append(("read", rows.tolist()))

    def will_scan(self) -> None:
        self.events.append(("scan",))

    def accessed(self) -> None:
        self.events.append(("accessed",))


@dataclass
class RecordingMemory:
    """A RowMemory whose allocations record what the ring tells them."""

    packed: bool = False
    allocations: list[RecordingRows] = field(default_factory=list)
    events: list[tuple[object, ...]] = field(default_factory=list)

    def allocate(self, n_rows: int, row_bytes: int) -> RecordingRows:
        self.events.append(("allocate", n_rows, row_bytes))
        matrix = torch.zeros((n_rows, row_bytes), dtype=torch.uint8)
        self.allocations.append(RecordingRows(matrix, self.packed, self.events))
        return self.allocations[-1]


@dataclass
class BlockSource:
    """A RowSource over ``[count, ...]`` tensors that records each block it is asked for."""

    leaves: dict[KeyPath, torch.Tensor]
    starts: list[tuple[int, int]] = field(default_factory=list)
    env_count: int | None = None
    absent: frozenset[KeyPath] = frozenset()

    @property
    def spec(self) -> dict[KeyPath, LeafSpec]:
        return {p: LeafSpec(tuple(t.shape[1:]), t.dtype) for p, t in self.leaves.items()}

    @property
    def count(self) -> int:
        return int(next(iter(self.leaves.values())).shape[0])

    def read_into(self, dests: dict[KeyPath, torch.Tensor], *, start: int = 0) -> None:
        length = len(next(iter(dests.values())))
        self.starts.append((start, length))
        for path, dest in dests.items():
            dest.copy_(self.leaves[path][start : start + length])


def rows(first: int, n: int, envs: int | None = None) -> dict[str, object]:
    """Rows numbered ``first ..``: an int64 id and a float32 [3] leaf (32-byte packed rows)."""
    ids = torch.arange(first, first + n)
    if envs is not None:
        ids = ids[:, None].expand(n, envs)
    return {"x": ids.float()[..., None].expand(*ids.shape, 3), "id": ids.clone()}


def assert_same_rows(storage: RingStorage, model: RingStorage) -> None:
    for path, view in model.views.items():
        assert torch.equal(storage.views[path], view), path


def test_the_recording_memory_is_a_row_memory() -> None:
    assert isinstance(RecordingMemory(), RowMemory)


def test_a_ring_given_memory_allocates_its_rows_there() -> None:
    memory = RecordingMemory()
    storage = RingStorage(4, device=CPU, memory=memory)
    storage.write(storage.validate(rows(0, 2)))
    assert memory.events[0] == ("allocate", 4, 32)  # 12 + 8 bytes, padded to 16
    matrix = memory.allocations[0].matrix
    assert storage.views[("id",)].untyped_storage().data_ptr() == matrix.data_ptr()
    assert matrix.view(torch.int64)[:2, 0].tolist() == [0, 1]


def test_a_ring_with_memory_off_the_cpu_is_refused() -> None:
    with pytest.raises(ValueError, match="memory: holds rows on the CPU"):
        RingStorage(4, device=torch.device("meta"), memory=RecordingMemory())


def test_a_gather_names_its_rows_to_the_memory_before_reading_and_reports_after() -> None:
    memory = RecordingMemory()
    storage = RingStorage(4, device=CPU, memory=memory)
    storage.write(storage.validate(rows(0, 4)))
    memory.events.clear()
    got = storage.gather(torch.tensor([[3, 1], [1, 0]]))
    assert memory.events == [("read", [3, 1, 1, 0]), ("accessed",)]
    assert got[("id",)].tolist() == [[3, 1], [1, 0]]


def test_the_rows_to_save_tell_the_memory_a_scan_is_coming() -> None:
    memory = RecordingMemory()
    storage = RingStorage(4, device=CPU, memory=memory)
    storage.write(storage.validate(rows(0, 3)))
    memory.events.clear()
    saved = storage.rows()
    assert memory.events == [("scan",)] and saved[("id",)].tolist() == [0, 1, 2]


def test_an_unpacked_write_goes_through_the_matrix_and_reports_the_access() -> None:
    memory = RecordingMemory()
    storage = RingStorage(4, device=CPU, memory=memory)
    storage.write(storage.validate(rows(0, 3)))
    assert memory.events == [("allocate", 4, 32), ("accessed",)]
    assert memory.allocations[0].matrix.view(torch.int64)[:3, 0].tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    ("capacity", "before", "n", "parts"),
    [
        (1, 0, 1, [(0, 1)]),
        (2, 1, 1, [(1, 1)]),
        (5, 3, 4, [(3, 2), (0, 2)]),
        (5, 3, 12, [(0, 5)]),  # over capacity: the last 5 rows, from row 0
        (7, 6, 3, [(6, 1), (0, 2)]),
    ],
)
def test_a_packed_write_hands_whole_rows_to_the_memory_in_both_parts_of_a_wrap(
    capacity: int, before: int, n: int, parts: list[tuple[int, int]]
) -> None:
    memory = RecordingMemory(packed=True)
    storage = RingStorage(capacity, device=CPU, memory=memory)
    model = RingStorage(capacity, device=CPU)
    for each in (storage, model):
        if before:
            each.write(each.validate(rows(0, before)))
    memory.events.clear()
    for each in (storage, model):
        each.write(each.validate(rows(before, n)))
    assert [e for e in memory.events if e[0] == "write"] == [("write", *p) for p in parts]
    assert memory.events[-1] == ("accessed",)
    assert_same_rows(storage, model)


def test_a_packed_write_of_time_env_rows_names_flat_rows() -> None:
    memory = RecordingMemory(packed=True)
    storage = RingStorage(3, device=CPU, batch_dims=2, memory=memory)
    storage.write(storage.validate(rows(0, 2, envs=4)))
    memory.events.clear()
    storage.write(storage.validate(rows(2, 2, envs=4)))
    assert [e for e in memory.events if e[0] == "write"] == [("write", 8, 4), ("write", 0, 4)]
    assert storage.views[("id",)].tolist() == [[3] * 4, [1] * 4, [2] * 4]


@pytest.mark.parametrize("block_bytes", [32, 64, 96, 1 << 20])
def test_a_packed_write_larger_than_a_block_goes_block_by_block(
    monkeypatch: pytest.MonkeyPatch, block_bytes: int
) -> None:
    monkeypatch.setattr(packed, "PACK_BYTES", block_bytes)
    memory = RecordingMemory(packed=True)
    storage = RingStorage(10, device=CPU, memory=memory)
    storage.write(storage.validate(rows(0, 7)))
    step = min(7, max(1, block_bytes // 32))
    expected = [("write", a, min(step, 7 - a)) for a in range(0, 7, step)]
    assert [e for e in memory.events if e[0] == "write"] == expected
    assert storage.views[("id",)][:7].tolist() == list(range(7))


def test_a_packed_write_casts_to_the_stored_dtype() -> None:
    memory = RecordingMemory(packed=True)
    storage = RingStorage(4, device=CPU, memory=memory)
    storage.write(storage.validate({"x": torch.ones(2, 3)}))
    storage.write(storage.validate({"x": torch.full((1, 3), 0.5, dtype=torch.float64)}))
    assert storage.views[("x",)][:3, 0].tolist() == [1.0, 1.0, 0.5]


@pytest.mark.parametrize("packed_writes", [False, True])
@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 10])
@pytest.mark.parametrize("block_bytes", [1, 40, 100, 1 << 20])
def test_a_restore_into_memory_reads_each_block_once_in_order(
    monkeypatch: pytest.MonkeyPatch, capacity: int, block_bytes: int, packed_writes: bool
) -> None:
    monkeypatch.setattr(ring, "RESTORE_BYTES", block_bytes)
    monkeypatch.setattr(packed, "PACK_BYTES", block_bytes)
    source = BlockSource({("id",): torch.arange(capacity) * 10, ("x",): torch.randn(capacity, 3)})
    memory = RecordingMemory(packed=packed_writes)
    storage = RingStorage(capacity, device=CPU, memory=memory)
    storage.restore(source, cursor=0, is_full=True)
    step = min(capacity, max(1, block_bytes // 32))
    expected = [(start, min(step, capacity - start)) for start in range(0, capacity, step)]
    assert source.starts == expected
    writes = [e[1:] for e in memory.events if e[0] == "write"]
    assert writes == (expected if packed_writes else [])
    assert storage.views[("id",)].tolist() == (torch.arange(capacity) * 10).tolist()
    assert torch.equal(storage.views[("x",)], source.leaves[("x",)])


def test_a_restore_in_process_memory_reads_every_row_at_once() -> None:
    source = BlockSource({("id",): torch.arange(5)})
    storage = RingStorage(5, device=CPU)
    storage.restore(source, cursor=0, is_full=True)
    assert source.starts == [(0, 5)]


@pytest.mark.parametrize("block", [1, 2, 3, 5])
def test_tensor_rows_read_in_blocks_equal_a_whole_read(block: int) -> None:
    arrays = {("a",): torch.randn(7, 2), ("b",): torch.arange(7)}
    source = TensorRows(arrays, 1)
    dests = {path: torch.empty_like(t) for path, t in arrays.items()}
    for start in range(0, 7, block):
        source.read_into({p: d[start : start + block] for p, d in dests.items()}, start=start)
    for path, tensor in arrays.items():
        assert torch.equal(dests[path], tensor)

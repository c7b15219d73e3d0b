"""RingStorage: the packed ring of rows, its cursor arithmetic, validation, gathers and restore."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from bufcore.storage.ring import STORABLE, RingStorage, RowSource
from bufcore.tree import KeyPath, LeafSpec, Spec

CPU = torch.device("cpu")


def batch(first: int, n: int) -> dict[str, object]:
    """Rows numbered ``first .. first + n - 1`` in every leaf (two dtypes, a nested key)."""
    ids = np.arange(first, first + n)
    return {
        "obs": {"x": np.stack([ids, -ids], 1).astype(np.float32)},
        "step": ids.astype(np.int64),
        "done": (ids % 2 == 0)[:, None],
    }


def written(storage: RingStorage, first: int, n: int) -> RingStorage:
    storage.write(storage.validate(batch(first, n)))
    return storage


def step_column(storage: RingStorage) -> list[int]:
    return storage.views[("step",)].tolist()


@dataclass
class Rows:
    """A RowSource over given leaves (``[count, ...]`` tensors)."""

    leaves: dict[KeyPath, torch.Tensor]
    env_count: int | None = None
    reads: list[dict[KeyPath, torch.Tensor]] = field(default_factory=list)
    absent: frozenset[KeyPath] = frozenset()

    @property
    def spec(self) -> Spec:
        return {p: LeafSpec(tuple(t.shape[1:]), t.dtype) for p, t in self.leaves.items()}

    @property
    def count(self) -> int:
        return int(next(iter(self.leaves.values())).shape[0]) if self.leaves else 0

    def read_into(self, dests: dict[KeyPath, torch.Tensor]) -> None:
        self.reads.append(dests)
        for path, dest in dests.items():
            dest.copy_(self.leaves[path])


# ------------------------------------------------------------------------ cursor arithmetic
@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_the_cursor_advances_by_each_batch_modulo_the_capacity(capacity: int) -> None:
    storage = RingStorage(capacity, device=CPU)
    total = 0
    for n in (1, 2, 3, 5):
        written(storage, total, n)
        total += n
        assert storage.cursor == total % capacity
        assert storage.is_full == (total >= capacity)
        assert len(storage) == min(total, capacity)


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_a_batch_larger_than_the_capacity_keeps_its_last_rows_at_their_ring_positions(
    capacity: int,
) -> None:
    storage = written(RingStorage(capacity, device=CPU), 0, 3 * capacity + 1)
    expected = {t % capacity: t for t in range(2 * capacity + 1, 3 * capacity + 1)}
    assert step_column(storage) == [expected[r] for r in range(capacity)]


def test_a_write_that_wraps_splits_across_the_end_of_the_ring() -> None:
    storage = written(written(RingStorage(5, device=CPU), 0, 4), 4, 3)
    assert step_column(storage) == [5, 6, 2, 3, 4]
    assert storage.chronological_time_index().tolist() == [2, 3, 4, 0, 1]


def test_an_empty_batch_changes_nothing() -> None:
    storage = written(RingStorage(4, device=CPU), 0, 2)
    storage.write(storage.validate({"obs": {"x": np.zeros((0, 2), np.float32)},
                                    "step": np.zeros(0, np.int64),
                                    "done": np.zeros((0, 1), bool)}))
    assert (storage.cursor, len(storage), step_column(storage)[:2]) == (2, 2, [0, 1])


# ------------------------------------------------------------------------------- layout
def test_every_leaf_is_a_typed_view_of_one_packed_byte_matrix() -> None:
    storage = written(RingStorage(3, device=CPU), 7, 3)
    views = storage.views
    bases = {view.untyped_storage().data_ptr() for view in views.values()}
    assert len(bases) == 1
    assert views[("obs", "x")].dtype == torch.float32
    assert views[("step",)].dtype == torch.int64
    assert views[("obs", "x")][:, 0].tolist() == [7.0, 8.0, 9.0]


def test_gather_returns_contiguous_copies_shaped_like_the_index() -> None:
    storage = written(RingStorage(6, device=CPU), 0, 6)
    out = storage.gather(torch.tensor([[5, 0], [2, 2]]))
    assert out[("step",)].tolist() == [[5, 0], [2, 2]]
    assert out[("obs", "x")].shape == (2, 2, 2)
    assert all(t.is_contiguous() for t in out.values())
    out[("step",)][0, 0] = -1
    assert step_column(storage)[5] == 5


def test_gather_reads_only_the_requested_leaves_in_their_order() -> None:
    storage = written(RingStorage(4, device=CPU), 0, 4)
    out = storage.gather(torch.tensor([1]), [("done",), ("step",)])
    assert list(out) == [("done",), ("step",)]


def test_gather_before_any_write_raises() -> None:
    with pytest.raises(ValueError, match="nothing was written"):
        RingStorage(2, device=CPU).gather(torch.tensor([0]))


def test_time_and_env_rows_flatten_time_major() -> None:
    storage = RingStorage(3, device=CPU, batch_dims=2)
    ids = torch.arange(12).reshape(2, 6)[:, :3]
    storage.write(storage.validate({"x": ids}))
    assert storage.envs == 3
    assert storage.flat_index(torch.tensor([1])).tolist() == [[3, 4, 5]]
    assert storage.gather(storage.flat_index(torch.tensor([1])))[("x",)].tolist() == [[6, 7, 8]]


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        ({"obs": {"x": np.zeros((2, 3), np.float32)}, "step": np.zeros(2, np.int64),
          "done": np.zeros((2, 1), bool)}, ValueError, r"data\['obs'\]\['x'\]: expected shape"),
        ({"step": np.zeros(2, np.int64), "done": np.zeros((2, 1), bool)}, ValueError,
         r"missing keys \['obs'\]\['x'\]"),
        ({**batch(0, 2), "extra": np.zeros(2)}, ValueError, r"unexpected keys \['extra'\]"),
        ({**batch(0, 2), "step": np.zeros(2, np.float64)}, TypeError, "cannot be cast safely"),
        ({**batch(0, 2), "step": np.zeros(3, np.int64)}, ValueError, "same batch size"),
    ],
)
def test_validate_refuses_a_batch_that_differs_from_the_spec_and_changes_nothing(
    data: dict[str, object], error: type[Exception], match: str
) -> None:
    storage = written(RingStorage(4, device=CPU), 0, 3)
    before = (storage.cursor, step_column(storage))
    with pytest.raises(error, match=match):
        storage.validate(data)
    assert (storage.cursor, step_column(storage)) == before


def test_a_complex_leaf_cannot_be_stored() -> None:
    with pytest.raises(TypeError, match=r"data\['z'\]: dtype complex64 cannot be stored"):
        RingStorage(2, device=CPU).validate({"z": torch.zeros(2, dtype=torch.complex64)})


def test_a_time_env_batch_with_another_env_count_is_refused() -> None:
    storage = RingStorage(3, device=CPU, batch_dims=2)
    storage.write(storage.validate({"x": torch.zeros(1, 4)}))
    with pytest.raises(ValueError, match=r"expected 4 envs \(axis 1\), got 2"):
        storage.validate({"x": torch.zeros(1, 2)})


@pytest.mark.parametrize(
    ("capacity", "batch_dims", "error"),
    [(0, 1, ValueError), (1.5, 1, TypeError), (True, 1, TypeError), (4, 3, ValueError)],
)
def test_construction_refuses_bad_sizes(capacity: object, batch_dims: int, error: type) -> None:
    with pytest.raises(error):
        RingStorage(capacity, device=CPU, batch_dims=batch_dims)  # type: ignore[arg-type]


def test_allocating_twice_is_refused() -> None:
    storage = written(RingStorage(2, device=CPU), 0, 1)
    with pytest.raises(ValueError, match="allocated already"):
        storage.allocate({("y",): LeafSpec((), torch.float32)}, None)


# ------------------------------------------------------------------------- saving, restoring
def test_rows_are_live_views_of_the_filled_rows_in_physical_order() -> None:
    storage = written(written(RingStorage(4, device=CPU), 0, 4), 4, 1)
    rows = storage.rows()
    assert rows[("step",)].tolist() == [4, 1, 2, 3]
    assert rows[("step",)].data_ptr() == storage.views[("step",)].data_ptr()


def test_restore_fills_a_fresh_storage_from_its_source_once() -> None:
    source = Rows({("a",): torch.arange(3.0)[:, None], ("b",): torch.tensor([1, 2, 3])})
    storage = RingStorage(5, device=CPU)
    storage.restore(source, cursor=3, is_full=False)
    assert isinstance(source, RowSource)
    assert len(source.reads) == 1
    assert storage.spec == source.spec
    assert storage.views[("b",)].tolist()[:3] == [1, 2, 3]
    assert (storage.cursor, len(storage)) == (3, 3)


def test_restore_into_an_allocated_storage_fills_it_in_place() -> None:
    storage = RingStorage(2, device=CPU)
    storage.allocate({("z",): LeafSpec((2,), torch.float32)}, None)
    view = storage.views[("z",)]
    storage.restore(Rows({("z",): torch.ones(2, 2)}), cursor=0, is_full=True)
    assert storage.views[("z",)] is view
    assert view.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_restore_refuses_rows_whose_spec_differs_from_the_allocated_one() -> None:
    storage = RingStorage(2, device=CPU)
    storage.allocate({("z",): LeafSpec((2,), torch.float32)}, None)
    with pytest.raises(ValueError, match=r"stored leaves \(\['z'\] \[3\] float32\) differ"):
        storage.restore(Rows({("z",): torch.ones(2, 3)}), cursor=0, is_full=True)


@pytest.mark.parametrize(("cursor", "is_full"), [(2, False), (0, False), (5, True), (1, True)])
def test_restore_refuses_a_position_that_does_not_describe_the_rows(
    cursor: int, is_full: bool
) -> None:
    storage = RingStorage(5, device=CPU)
    with pytest.raises(ValueError, match="do not describe 3 stored rows"):
        storage.restore(Rows({("a",): torch.zeros(3)}), cursor=cursor, is_full=is_full)
    assert storage.spec is None


# ---------------------------------------------------------------------- writes never fail half-way
def snapshot(storage: RingStorage) -> tuple[object, ...]:
    return (
        storage.cursor,
        storage.is_full,
        {path: view.clone() for path, view in storage.views.items()},
    )


def assert_same(storage: RingStorage, before: tuple[object, ...]) -> None:
    cursor, is_full, views = before
    assert (storage.cursor, storage.is_full) == (cursor, is_full)
    assert isinstance(views, dict)
    for path, view in storage.views.items():
        assert torch.equal(view, views[path])


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (torch.zeros(2, device="meta", dtype=torch.int64), "meta device"),
        (torch.zeros(2, dtype=torch.int64).to_sparse(), "layout torch.sparse_coo"),
    ],
    ids=["meta", "sparse"],
)
def test_a_leaf_without_dense_data_is_refused_before_any_leaf_is_written(
    bad: torch.Tensor, match: str
) -> None:
    # The bad leaf comes after leaves that a leaf-by-leaf copy would already have written.
    storage = written(RingStorage(4, device=CPU), 0, 3)
    before = snapshot(storage)
    with pytest.raises(TypeError, match=rf"data\['step'\]: expected .*{match}"):
        storage.write(storage.validate({**batch(10, 2), "step": bad}))
    assert_same(storage, before)


@pytest.mark.parametrize("capacity", [1, 2, 5])
def test_a_batch_whose_values_do_not_fit_is_refused_and_nothing_is_written(
    capacity: int,
) -> None:
    storage = RingStorage(capacity, device=CPU)
    storage.write(storage.validate({"a": np.zeros((1, 2), np.float32), "b": np.zeros(1, np.int8)}))
    before = snapshot(storage)
    with pytest.raises(ValueError, match=r"data\['b'\]: values in \[-3, 300\] do not fit"):
        storage.validate({"a": np.ones((2, 2), np.float32), "b": np.array([-3, 300])})
    assert_same(storage, before)


def test_an_allocation_too_large_for_memory_raises_memory_error_and_changes_nothing() -> None:
    # 2**44 rows of 16 bytes: 256 TiB, within the size bound but more than any process's
    # address space maps, so the allocation fails at once.
    storage = RingStorage(2**44, device=CPU)
    data = {"x": np.zeros((1, 4), np.float32)}
    message = rf"cannot allocate {2**48:,} bytes on cpu \({2**44} rows x 16 bytes per row\)"
    with pytest.raises(MemoryError, match=message):
        storage.write(storage.validate(data))
    assert (storage.spec, storage.env_count, storage.views, len(storage)) == (None, None, {}, 0)


def test_an_out_of_memory_error_from_torch_becomes_memory_error_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def out_of_memory(*args: object, **kwargs: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")

    monkeypatch.setattr(np, "zeros", out_of_memory)
    storage = RingStorage(4, device=CPU)
    with pytest.raises(MemoryError, match=r"cannot allocate 64 bytes .*CUDA out of memory"):
        storage.allocate({("x",): LeafSpec((2,), torch.float32)}, None)
    assert (storage.spec, storage.views) == (None, {})
    monkeypatch.undo()
    storage.allocate({("x",): LeafSpec((2,), torch.float32)}, None)
    assert storage.views[("x",)].shape == (4, 2)


def test_a_runtime_error_other_than_out_of_memory_is_not_disguised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("some other failure")

    monkeypatch.setattr(np, "zeros", broken)
    with pytest.raises(RuntimeError, match="some other failure"):
        RingStorage(4, device=CPU).allocate({("x",): LeafSpec((2,), torch.float32)}, None)


# ------------------------------------------------------------- sources that share the rows' memory
def ring_of(capacity: int, filled: int) -> RingStorage:
    storage = RingStorage(capacity, device=CPU)
    ids = torch.arange(filled)
    storage.write(storage.validate({"x": torch.stack([ids, -ids], 1).float(), "i": ids}))
    return storage


@pytest.mark.parametrize("capacity", [1, 2, 3, 5])
def test_writing_any_slice_of_the_storage_views_equals_writing_a_copy_of_it(
    capacity: int,
) -> None:
    for filled in range(capacity, 2 * capacity + 1):
        for begin in range(capacity):
            for stop in range(begin + 1, capacity + 1):
                storage, twin = ring_of(capacity, filled), ring_of(capacity, filled)
                views = storage.views
                storage.write(storage.validate({p[0]: v[begin:stop] for p, v in views.items()}))
                copies = {p[0]: v[begin:stop].clone() for p, v in twin.views.items()}
                twin.write(twin.validate(copies))
                for path, view in storage.views.items():
                    assert torch.equal(view, twin.views[path]), (filled, begin, stop, path)


def test_a_source_with_the_negative_bit_is_written_as_the_values_it_reads() -> None:
    # A lazily negated view (as conj().imag makes) whose memory holds the un-negated values.
    values = torch._neg_view(torch.arange(6.0).view(3, 2))
    storage = written(RingStorage(4, device=CPU), 0, 1)
    storage.write(storage.validate({**batch(1, 3), "obs": {"x": values}}))
    assert torch.equal(storage.views[("obs", "x")][1:4], -torch.arange(6.0).view(3, 2))


def values_of(dtype: torch.dtype, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Values of ``dtype`` using every byte of it (extremes included), ``shape``."""
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=generator) * 1e3).to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -(2**62)), min(info.max, 2**62)
    return torch.randint(low, high, shape, generator=generator).to(dtype)


def every_other_row(tensor: torch.Tensor) -> torch.Tensor:
    spaced = torch.zeros((2 * tensor.shape[0], *tensor.shape[1:]), dtype=tensor.dtype)
    spaced[::2] = tensor
    return spaced[::2]


def odd_size1_strides(tensor: torch.Tensor) -> torch.Tensor:
    pairs = zip(tensor.shape, tensor.stride(), strict=True)
    strides = [99 if size == 1 else stride for size, stride in pairs]
    return tensor.as_strided(tensor.shape, strides)  # still "contiguous" to torch


@pytest.mark.parametrize("dtype", sorted(STORABLE, key=str), ids=str)
@pytest.mark.parametrize("leaf_shape", [(), (3,), (2, 0), (1,)], ids=str)
@pytest.mark.parametrize("envs", [None, 1, 3], ids=lambda e: f"envs={e}")
@pytest.mark.parametrize(
    "layout", [lambda t: t, every_other_row, odd_size1_strides], ids=["dense", "spaced", "odd"]
)
def test_writes_of_every_storable_dtype_land_at_their_ring_rows_bit_for_bit(
    dtype: torch.dtype,
    leaf_shape: tuple[int, ...],
    envs: int | None,
    layout: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    capacity = 4
    lead = () if envs is None else (envs,)
    storage = RingStorage(capacity, device=CPU, batch_dims=1 if envs is None else 2)
    model = {name: torch.zeros((capacity, *lead, *leaf_shape), dtype=dtype) for name in "ab"}
    cursor = 0
    for seed, count in enumerate([3, 2, 6]):  # the second and third writes wrap around
        shape = (count, *lead, *leaf_shape)
        data = {n: values_of(dtype, shape, 2 * seed + i) for i, n in enumerate("ab")}
        storage.write(storage.validate({n: layout(v) for n, v in data.items()}))
        for name, rows in data.items():
            for offset in range(max(count - capacity, 0), count):
                model[name][(cursor + offset) % capacity] = rows[offset]
        cursor = (cursor + count) % capacity
    for name, expected in model.items():
        got = storage.views[(name,)]
        assert got.dtype == dtype and got.shape == expected.shape
        assert torch.equal(got.contiguous().view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.parametrize("envs", [None, 2], ids=lambda e: f"envs={e}")
def test_a_wider_dtype_is_cast_to_the_stored_one_on_write(envs: int | None) -> None:
    lead = () if envs is None else (envs,)
    storage = RingStorage(3, device=CPU, batch_dims=1 if envs is None else 2)
    storage.write(storage.validate({"x": torch.zeros((1, *lead, 2), dtype=torch.float32)}))
    values = torch.tensor([0.1, -2.5], dtype=torch.float64).expand(4, *lead, 2)
    storage.write(storage.validate({"x": values}))
    assert storage.views[("x",)].dtype == torch.float32
    assert torch.equal(storage.views[("x",)], values[:3].to(torch.float32))

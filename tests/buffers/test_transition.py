"""DictBuffer: ring arithmetic, validation, sampling, full-buffer reads (REFERENCE §1)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import DictBuffer
from tests.support import DEVICES

CAPACITIES = [1, 2, 3, 5, 8]


def rows(ids: list[int] | np.ndarray) -> dict[str, Any]:
    """A batch whose every leaf encodes the row id, nested, with several dtypes."""
    ids = np.asarray(ids, dtype=np.int64)
    return {
        "obs": {"state": np.stack([ids, -ids], axis=1).astype(np.float32)},
        "id": ids,
        "done": (ids % 2 == 0)[:, None],
    }


def ids_of(buffer: DictBuffer) -> list[int]:
    return buffer.get_full_buffer()["id"].tolist() if len(buffer) else []


def physical_ids(buffer: DictBuffer) -> list[int]:
    storage = buffer.storage
    assert storage is not None
    return storage["id"].tolist()


def snapshot(buffer: DictBuffer) -> tuple[Any, ...]:
    storage = buffer.storage
    copy = (
        None
        if storage is None
        else {
            "state": storage["obs"]["state"].clone(),
            "id": storage["id"].clone(),
            "done": storage["done"].clone(),
        }
    )
    return len(buffer), buffer.cursor, buffer.is_full, copy


def assert_unchanged(buffer: DictBuffer, before: tuple[Any, ...]) -> None:
    after = snapshot(buffer)
    assert after[:3] == before[:3]
    if before[3] is None:
        assert after[3] is None
    else:
        for key in before[3]:
            assert torch.equal(after[3][key], before[3][key])


# --------------------------------------------------------------- ring arithmetic
def test_four_extends_of_three_into_capacity_eight_follow_the_modulo_cursor() -> None:
    buffer = DictBuffer(capacity=8)
    seen = []
    for k in range(4):
        buffer.extend(rows([10 * k + i for i in range(3)]))
        seen.append((buffer.cursor, buffer.is_full, len(buffer)))
    assert seen == [(3, False, 3), (6, False, 6), (1, True, 8), (4, True, 8)]
    _, b, c, d = ([10 * k + i for i in range(3)] for k in range(4))
    assert physical_ids(buffer) == [c[2], d[0], d[1], d[2], b[1], b[2], c[0], c[1]]


def test_the_third_extend_of_three_wraps_to_cursor_one() -> None:
    buffer = DictBuffer(capacity=8)
    for k in range(3):
        buffer.extend(rows([10 * k + i for i in range(3)]))
    assert buffer.cursor == 1
    assert physical_ids(buffer) == [22, 1, 2, 10, 11, 12, 20, 21]


def test_a_batch_larger_than_capacity_keeps_its_last_rows_at_the_cursor() -> None:
    buffer = DictBuffer(capacity=8)
    buffer.extend(rows(range(100, 105)))
    buffer.extend(rows(range(11)))
    assert buffer.cursor == 0
    assert physical_ids(buffer) == list(range(3, 11))


@pytest.mark.parametrize("capacity", CAPACITIES)
def test_a_batch_of_many_capacities_keeps_the_newest_rows_in_order(capacity: int) -> None:
    buffer = DictBuffer(capacity=capacity)
    buffer.extend(rows([99]))
    n = 3 * capacity + 2
    buffer.extend(rows(range(n)))
    assert ids_of(buffer) == list(range(n - capacity, n))
    assert buffer.cursor == (1 + n) % capacity
    assert buffer.is_full


def test_a_batch_of_twice_capacity_into_an_empty_buffer_keeps_the_last_capacity() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend(rows(range(8)))
    assert physical_ids(buffer) == [4, 5, 6, 7]
    assert buffer.cursor == 0


@pytest.mark.parametrize("capacity", CAPACITIES)
def test_filling_exactly_to_capacity_marks_full_and_wraps_cursor_to_zero(capacity: int) -> None:
    buffer = DictBuffer(capacity=capacity)
    buffer.extend(rows(range(capacity)))
    assert (buffer.cursor, buffer.is_full, len(buffer)) == (0, True, capacity)


def test_an_empty_batch_is_a_no_op() -> None:
    buffer = DictBuffer(capacity=3)
    buffer.extend({})
    buffer.extend(rows(np.zeros(0, dtype=np.int64)))
    assert len(buffer) == 0
    assert buffer.storage is None
    buffer.extend(rows([1]))
    buffer.extend(rows(np.zeros(0, dtype=np.int64)))
    assert ids_of(buffer) == [1]


def test_size_len_and_empty_agree() -> None:
    buffer = DictBuffer(capacity=4)
    assert (len(buffer), buffer.size(), buffer.empty()) == (0, 0, True)
    buffer.extend(rows([1, 2]))
    assert (len(buffer), buffer.size(), buffer.empty()) == (2, 2, False)


def test_cursor_and_is_full_are_read_only() -> None:
    buffer = DictBuffer(capacity=4)
    with pytest.raises(AttributeError):
        buffer.cursor = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        buffer.is_full = True  # type: ignore[misc]


def test_later_batches_are_cast_safely_to_the_stored_dtype() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"x": np.zeros((1, 2), dtype=np.float32)})
    buffer.extend({"x": np.full((1, 2), 1.7, dtype=np.float64)})
    stored = buffer.get_full_buffer()["x"]
    assert stored.dtype == torch.float32
    assert stored[1, 0].item() == pytest.approx(1.7)


def test_lists_numbers_and_tensors_are_accepted_as_leaves() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"a": [1.0, 2.0], "b": torch.tensor([[1, 2], [3, 4]]), "c": [[True], [False]]})
    full = buffer.get_full_buffer()
    assert full["a"].tolist() == [1.0, 2.0]
    assert full["b"].shape == (2, 2)
    assert full["c"].dtype == torch.bool


def test_extend_copies_so_later_changes_to_the_input_do_not_leak_in() -> None:
    buffer = DictBuffer(capacity=4)
    array = np.zeros((2, 3), dtype=np.float32)
    buffer.extend({"x": array})
    array[:] = 7
    assert buffer.get_full_buffer()["x"].sum().item() == 0


# ------------------------------------------------------------------- validation
BAD_BATCHES: dict[str, tuple[dict[str, Any], type[Exception], str]] = {
    "missing key": (
        {"obs": {"state": np.zeros((2, 2), np.float32)}, "id": np.zeros(2, np.int64)},
        ValueError,
        r"missing keys \['done'\]",
    ),
    "extra key": (
        {**rows([1, 2]), "extra": np.zeros(2)},
        ValueError,
        r"unexpected keys \['extra'\]",
    ),
    "wrong trailing shape": (
        {**rows([1, 2]), "obs": {"state": np.zeros((2, 3), np.float32)}},
        ValueError,
        r"\['obs'\]\['state'\]: expected shape \[batch, 2\], got \[2, 3\]",
    ),
    "unequal batch sizes": (
        {**rows([1, 2]), "id": np.zeros(3, np.int64)},
        ValueError,
        r"same batch size.*\['id'\]: 3",
    ),
    "unsafe dtype cast": (
        {**rows([1, 2]), "id": np.zeros(2, np.float32)},
        TypeError,
        r"\['id'\]: dtype float32 cannot be cast safely to .* int64",
    ),
    "missing batch dimension": (
        {**rows([1]), "obs": {"state": np.zeros(2, np.float32)}},
        ValueError,
        r"\['obs'\]\['state'\].*forget the batch dimension",
    ),
    "non-numeric leaf": (
        {**rows([1, 2]), "id": np.array(["a", "b"])},
        TypeError,
        r"\['id'\]: expected a numeric array",
    ),
    "non-string key": ({**rows([1, 2]), 5: np.zeros(2)}, TypeError, "keys must be str"),
    "not a mapping": ([1, 2], TypeError, "expected a mapping"),  # type: ignore[dict-item]
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_a_bad_batch_raises_and_leaves_a_wrapped_buffer_exactly_as_before(case: str) -> None:
    data, error, message = BAD_BATCHES[case]
    buffer = DictBuffer(capacity=5)
    buffer.extend(rows(range(7)))
    before = snapshot(buffer)
    with pytest.raises(error, match=message):
        buffer.extend(data)
    assert_unchanged(buffer, before)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))}, ValueError),
        ({"a": np.zeros((2, 1)), "b": np.array(["x", "y"])}, TypeError),
        ({"a": 3.0}, ValueError),
        ({"a": np.zeros((2, 1)), "b": {}}, ValueError),
    ],
)
def test_a_bad_first_batch_allocates_nothing(data: dict[str, Any], error: type[Exception]) -> None:
    buffer = DictBuffer(capacity=4)
    with pytest.raises(error):
        buffer.extend(data)
    assert buffer.storage is None
    assert len(buffer) == 0
    buffer.extend({"z": np.ones((1, 3))})
    assert buffer.get_full_buffer()["z"].shape == (1, 3)


def test_a_float_batch_cannot_be_written_into_integer_storage() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"x": np.zeros((1, 1), dtype=np.int64)})
    with pytest.raises(TypeError, match="float64 cannot be cast safely"):
        buffer.extend({"x": np.full((1, 1), 1.7)})


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"capacity": 0}, ValueError, "capacity"),
        ({"capacity": 2.0}, TypeError, "capacity"),
        ({"capacity": True}, TypeError, "capacity"),
        ({"capacity": 2, "device": "gpu9"}, ValueError, "device"),
        ({"capacity": 2, "nested_key_separator": ""}, ValueError, "nested_key_separator"),
        ({"capacity": 2, "nested_key_separator": "/"}, ValueError, "nested_key_separator"),
        ({"capacity": 2, "seed": "1"}, TypeError, "seed"),
    ],
)
def test_invalid_constructor_arguments_raise_naming_the_argument(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        DictBuffer(**kwargs)


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        DictBuffer(4)  # type: ignore[misc]


def test_a_key_containing_the_separator_warns_at_the_first_extend() -> None:
    buffer = DictBuffer(capacity=2)
    with pytest.warns(UserWarning, match="'last-action'"):
        buffer.extend({"last-action": np.zeros((1, 2))})


# --------------------------------------------------------------------- sampling
@pytest.mark.parametrize("device", DEVICES)
def test_sample_keeps_the_nested_structure_with_contiguous_leaves(device: str) -> None:
    buffer = DictBuffer(capacity=5, device=device, seed=0)
    buffer.extend(rows(range(7)))
    batch = buffer.sample(16)
    assert set(batch) == {"obs", "id", "done"}
    for leaf in (batch["obs"]["state"], batch["id"], batch["done"]):
        assert leaf.shape[0] == 16
        assert leaf.is_contiguous()
        assert leaf.device.type == device
    assert batch["obs"]["state"].shape == (16, 2)
    assert batch["done"].dtype == torch.bool


@pytest.mark.parametrize("capacity", CAPACITIES)
def test_sampled_rows_are_whole_rows_from_the_filled_part(capacity: int) -> None:
    buffer = DictBuffer(capacity=capacity, seed=1)
    buffer.extend(rows(range(capacity + 2)))
    batch = buffer.sample(64)
    ids = batch["id"]
    assert set(ids.tolist()) <= set(ids_of(buffer))
    assert torch.equal(batch["obs"]["state"][:, 0], ids.float())
    assert torch.equal(batch["obs"]["state"][:, 1], -ids.float())
    assert torch.equal(batch["done"][:, 0], ids % 2 == 0)


def test_sampling_is_uniform_over_filled_rows() -> None:
    buffer = DictBuffer(capacity=10, seed=3)
    buffer.extend(rows(range(6)))
    draws = 60_000
    counts = np.bincount(buffer.sample(draws)["id"].numpy(), minlength=6)
    expected = draws / 6
    # chi-square with 5 degrees of freedom; 25 is far beyond the 0.9999 quantile (~25.7 is 0.99989)
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 30
    assert counts.min() > 0


def test_sampling_draws_with_replacement() -> None:
    buffer = DictBuffer(capacity=2, seed=0)
    buffer.extend(rows([1, 2]))
    assert len(buffer.sample(10)["id"]) == 10


def test_the_same_seed_gives_the_same_samples_whatever_the_global_rng() -> None:
    a, b = DictBuffer(capacity=5, seed=7), DictBuffer(capacity=5, seed=7)
    for buffer in (a, b):
        buffer.extend(rows(range(5)))
    torch.manual_seed(0)
    first = a.sample(20)["id"]
    torch.manual_seed(1)
    np.random.seed(1)
    assert torch.equal(first, b.sample(20)["id"])


def test_sampling_an_empty_buffer_says_it_is_empty() -> None:
    with pytest.raises(ValueError, match="empty"):
        DictBuffer(capacity=3).sample(2)


@pytest.mark.parametrize("batch_size", [0, -1])
def test_sampling_fewer_than_one_row_raises(batch_size: int) -> None:
    buffer = DictBuffer(capacity=3)
    buffer.extend(rows([1]))
    with pytest.raises(ValueError, match="batch_size"):
        buffer.sample(batch_size)


# ------------------------------------------------------------------ full buffer
@pytest.mark.parametrize("capacity", CAPACITIES)
def test_get_full_buffer_is_chronological_after_wrapping(capacity: int) -> None:
    buffer = DictBuffer(capacity=capacity)
    written = 0
    for size in (2, 1, 2, 3) * capacity:
        buffer.extend(rows(range(written, written + size)))
        written += size
    assert ids_of(buffer) == list(range(written - capacity, written))


def test_get_full_buffer_is_a_copy() -> None:
    buffer = DictBuffer(capacity=3)
    buffer.extend(rows([1, 2, 3]))
    full = buffer.get_full_buffer()
    full["id"][:] = 0
    assert ids_of(buffer) == [1, 2, 3]


def test_get_full_buffer_of_an_empty_buffer_is_empty() -> None:
    assert DictBuffer(capacity=3).get_full_buffer() == {}


# ------------------------------------------------------------- writes that must not go half-way
def test_extend_refuses_int64_300_into_int8_and_leaves_storage_unchanged() -> None:
    buffer = DictBuffer(capacity=5)
    buffer.extend({**rows(range(7)), "act": np.zeros((7, 1), np.int8)})
    before = snapshot(buffer)
    act_before = buffer.get_full_buffer()["act"]
    message = r"values in \[-3, 300\] do not fit the stored dtype int8 \(range \[-128, 127\]\)"
    with pytest.raises(ValueError, match=rf"data\['act'\]: {message}"):
        buffer.extend({**rows([8, 9]), "act": np.array([[-3], [300]])})
    assert_unchanged(buffer, before)
    assert torch.equal(buffer.get_full_buffer()["act"], act_before)


def test_extend_refuses_float64_values_that_overflow_float16() -> None:
    buffer = DictBuffer(capacity=3)
    buffer.extend({"x": np.zeros((1, 2), np.float16)})
    with pytest.raises(ValueError, match=r"data\['x'\]: values in \[0, 1e\+06\] .* float16"):
        buffer.extend({"x": np.array([[0.0, 1e6]])})
    assert len(buffer) == 1


@pytest.mark.parametrize(
    "bad",
    [
        torch.zeros((2, 1), dtype=torch.bool, device="meta"),
        torch.zeros((2, 1), dtype=torch.bool).to_sparse(),
    ],
    ids=["meta", "sparse"],
)
def test_a_last_leaf_that_cannot_be_copied_leaves_the_earlier_leaves_unwritten(
    bad: torch.Tensor,
) -> None:
    buffer = DictBuffer(capacity=5)
    buffer.extend(rows(range(7)))
    before = snapshot(buffer)
    with pytest.raises(TypeError, match=r"data\['done'\]: expected a .*tensor"):
        buffer.extend({**rows([8, 9]), "done": bad})
    assert_unchanged(buffer, before)


@pytest.mark.filterwarnings("ignore:.*nested tensors.*:UserWarning")
def test_a_nested_tensor_leaf_is_refused_naming_the_key() -> None:
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(2)])
    buffer = DictBuffer(capacity=4)
    with pytest.raises(TypeError, match=r"data\['x'\]: expected a dense tensor, got a nested"):
        buffer.extend({"x": nested})
    assert buffer.storage is None


@pytest.mark.parametrize("device", DEVICES)
def test_a_first_extend_too_large_for_memory_raises_memory_error_and_leaves_it_empty(
    device: str,
) -> None:
    buffer = DictBuffer(capacity=2**44, device=device)  # 256 TiB of 16-byte rows
    data = {"obs": np.zeros((1, 4), np.float32)}
    for _ in range(2):  # the same error again, never a KeyError
        with pytest.raises(MemoryError, match=rf"cannot allocate {2**48:,} bytes"):
            buffer.extend(data)
        assert (buffer.storage, len(buffer), buffer.cursor) == (None, 0, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("capacity", [1, 2, 5])
def test_extending_from_an_overlapping_slice_of_its_own_storage_equals_extending_from_a_copy(
    capacity: int, device: str
) -> None:
    buffer = DictBuffer(capacity=capacity, device=device)
    twin = DictBuffer(capacity=capacity, device=device)
    for b in (buffer, twin):
        b.extend(rows(range(capacity + 2)))
    # A slice that starts before the cursor, so the write overwrites rows it still has to read.
    begin = (buffer.cursor - 1) % capacity
    view = buffer.storage
    assert view is not None
    source = {
        "obs": {"state": view["obs"]["state"][begin:]},
        "id": view["id"][begin:],
        "done": view["done"][begin:],
    }
    copy = {
        "obs": {"state": source["obs"]["state"].clone()},
        "id": source["id"].clone(),
        "done": source["done"].clone(),
    }
    buffer.extend(source)
    twin.extend(copy)
    assert snapshot_equal(buffer, twin)


def snapshot_equal(a: DictBuffer, b: DictBuffer) -> bool:
    left, right = snapshot(a), snapshot(b)
    return left[:3] == right[:3] and all(torch.equal(left[3][k], right[3][k]) for k in left[3])


def test_big_endian_numpy_leaves_are_stored_with_their_values() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"x": np.arange(6, dtype=">f4").reshape(3, 2), "i": np.arange(3, dtype=">i8")})
    full = buffer.get_full_buffer()
    assert full["x"].tolist() == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert (full["x"].dtype, full["i"].tolist()) == (torch.float32, [0, 1, 2])


def test_numpy_integers_are_accepted_for_capacity_and_batch_size() -> None:
    buffer = DictBuffer(capacity=np.int64(4), seed=np.uint32(3))  # type: ignore[arg-type]
    buffer.extend(rows([1, 2]))
    assert (buffer.capacity, type(buffer.capacity)) == (4, int)
    assert buffer.sample(np.int32(3))["id"].shape == (3,)  # type: ignore[arg-type]


def test_a_requires_grad_input_leaves_no_graph_in_storage_or_samples() -> None:
    buffer = DictBuffer(capacity=4)
    x = torch.ones(3, 2, requires_grad=True)
    buffer.extend({"x": x * 2})
    storage = buffer.storage
    assert storage is not None
    assert (storage["x"].requires_grad, storage["x"].grad_fn) == (False, None)
    for out in (buffer.sample(5)["x"], buffer.get_full_buffer()["x"]):
        assert (out.requires_grad, out.grad_fn) == (False, None)


def test_a_separator_warning_raised_as_an_error_leaves_the_buffer_empty() -> None:
    buffer = DictBuffer(capacity=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="'last-action'"):
            buffer.extend({"last-action": np.zeros((1, 2))})
    assert (buffer.storage, len(buffer)) == (None, 0)


@pytest.mark.parametrize("leaf", [torch.tensor(1.0), np.array(1.0, dtype=np.float32)])
def test_a_scalar_leaf_is_refused_as_a_batch_without_its_batch_dimension(leaf: Any) -> None:
    buf = DictBuffer(capacity=4)
    with pytest.raises(ValueError, match="forget the batch dimension"):
        buf.extend({"x": leaf})
    assert len(buf) == 0

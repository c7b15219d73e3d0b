"""The limits a hostile checkpoint runs into hold for the public constructors as well.

Sizes no device can hold are refused with a ``ValueError`` naming the argument before anything is
allocated (never a ``MemoryError``/``OverflowError`` from numpy or torch), an allocation the host
cannot make is a ``MemoryError`` naming the capacity that leaves the buffer as it was, and the
readers of saved values refuse values of the wrong kind with a typed error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bufcore import DictBuffer, TrajectoryDictBuffer, TrajectoryDictBufferMultiDim, ZBuffer
from bufcore.errors import StateError
from bufcore.rng import generator_state, restore_generator
from bufcore.storage.ring import MAX_STORAGE_BYTES
from bufcore.tree import LeafSpec, dtype_from_name

MAX_CAPACITY = MAX_STORAGE_BYTES // 16  # every row takes at least 16 bytes


@pytest.mark.parametrize("cls", [DictBuffer, TrajectoryDictBufferMultiDim])
def test_a_capacity_whose_rows_no_device_holds_is_refused_at_construction(cls: Any) -> None:
    with pytest.raises(ValueError, match=rf"capacity: expected an int in \[1, {MAX_CAPACITY}\]"):
        cls(capacity=MAX_CAPACITY + 1)


def test_an_extend_whose_rows_would_exceed_any_device_is_refused_before_allocating() -> None:
    buffer = DictBuffer(capacity=MAX_CAPACITY)
    with pytest.raises(ValueError, match=r"capacity: 17592186044416 rows of 32 bytes .* need"):
        buffer.extend({"x": np.zeros((1, 8), np.float32)})
    assert buffer.storage is None and len(buffer) == 0 and buffer.cursor == 0


def test_a_z_buffer_dim_of_10_to_the_30_is_a_value_error_not_an_overflow() -> None:
    with pytest.raises(ValueError, match=r"\[1000000000000000000000000000000\] float32"):
        ZBuffer(2, 10**30)


def test_a_leaf_spec_of_a_huge_shape_counts_its_bytes_exactly() -> None:
    assert LeafSpec((10**30, 3), torch.float64).nbytes == 24 * 10**30


@pytest.mark.parametrize("capacity", [1, 3])
def test_a_failed_allocation_is_a_memory_error_naming_the_capacity_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, capacity: int
) -> None:
    buffer = DictBuffer(capacity=capacity, seed=1)
    zeros = np.zeros

    def failing_zeros(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(np, "zeros", failing_zeros)
    message = rf"cannot allocate .* bytes on cpu \({capacity} rows x 16 bytes per row\)"
    with pytest.raises(MemoryError, match=message):
        buffer.extend({"x": np.ones((2, 2), np.float32)})
    assert buffer.storage is None and len(buffer) == 0 and buffer.cursor == 0
    monkeypatch.setattr(np, "zeros", zeros)
    buffer.extend({"x": np.ones((2, 2), np.float32)})
    assert len(buffer) == min(2, capacity)


def _episodes() -> list[dict[str, Any]]:
    return [{"observation": np.zeros((4, 2), np.float32), "motion_id": np.full(4, 7)}]


def test_a_window_longer_than_2_to_the_62_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"seq_length: expected an int in \[1, "):
        TrajectoryDictBuffer(_episodes(), seq_length=2**62 + 1)


def test_a_window_longer_than_2_to_the_62_is_refused_by_sample() -> None:
    buffer = TrajectoryDictBuffer(_episodes(), seq_length=1)
    with pytest.raises(ValueError, match=r"seq_length: expected an int in \[1, "):
        buffer.sample(2**62, seq_length=2**63)


@pytest.mark.parametrize("name", [5, None, ["float32"], b"float32"])
def test_dtype_from_name_refuses_a_value_that_is_not_a_str_with_a_type_error(name: Any) -> None:
    with pytest.raises(TypeError, match="dtype: expected the name of a torch dtype"):
        dtype_from_name(name)


@pytest.mark.parametrize(
    "edit",
    [{"device_type": 5}, {"device_type": ["cpu"]}, {"device_type": "banana"}, {"state": 5}],
    ids=["device_type int", "device_type list", "device_type unknown", "state int"],
)
def test_a_saved_generator_state_of_the_wrong_kind_is_a_state_error_and_changes_nothing(
    edit: dict[str, Any],
) -> None:
    generator = torch.Generator().manual_seed(3)
    before = generator.get_state().clone()
    state = {**generator_state(torch.Generator().manual_seed(4)), **edit}
    with pytest.raises(StateError, match=r"state\['generator'\]: expected device_type"):
        restore_generator(generator, state)
    assert torch.equal(generator.get_state(), before)

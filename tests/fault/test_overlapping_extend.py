"""Extending a buffer from its own ``storage`` views never corrupts rows.

A source that shares memory with the rows (a slice of ``buffer.storage``, or a numpy view of one)
would be overwritten while it is still being read; the write must behave exactly as if the
source had been copied first. Checked against a model of which id each physical row holds, over
random fills, slices, strides and wrap-arounds, for ``[time]`` rows (packed leaves, and a single
leaf whose views are contiguous, so that numpy views share memory too) and ``[time, env]`` rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from bufcore import DictBuffer, TrajectoryDictBufferMultiDim

ENVS = 2
LAYOUTS = ["packed", "single leaf", "time-env"]


def make(layout: str, capacity: int) -> DictBuffer:
    if layout == "time-env":
        return TrajectoryDictBufferMultiDim(
            capacity=capacity, n_dim=2, output_key_t=["id"], output_key_tp1=["id"]
        )
    return DictBuffer(capacity=capacity)


def tagged(ids: list[int], layout: str) -> dict[str, Any]:
    """Rows whose every leaf encodes their id."""
    column = np.array(ids, dtype=np.int64)
    if layout == "single leaf":  # one float32 [4] leaf: 16-byte rows, contiguous views
        return {"id": np.repeat(column[:, None], 4, 1).astype(np.float32)}
    if layout == "time-env":
        column = np.repeat(column[:, None], ENVS, 1)
    return {
        "id": column,
        "obs": {"pos": np.stack([column, -column], -1).astype(np.float32)},
        "done": np.zeros(column.shape, bool),
    }


def row_ids(buffer: DictBuffer) -> list[int]:
    """The id each physical row holds, checking every leaf of the row agrees."""
    storage = buffer.storage
    assert storage is not None
    ids = storage["id"].reshape(buffer.capacity, -1).long()
    assert bool((ids == ids[:, :1]).all())
    if "obs" in storage:
        pos = storage["obs"]["pos"].reshape(buffer.capacity, -1, 2)
        assert torch.equal(pos[..., 0].long(), ids) and torch.equal(pos[..., 1].long(), -ids)
    return ids[:, 0].tolist()


def own_rows(buffer: DictBuffer, rows: slice, as_numpy: bool) -> dict[str, Any]:
    """A batch made of views of the buffer's own rows (never copies)."""
    storage = buffer.storage
    assert storage is not None

    def take(view: torch.Tensor) -> Any:
        return view[rows].numpy() if as_numpy else view[rows]

    return {
        key: {k: take(v) for k, v in value.items()} if isinstance(value, dict) else take(value)
        for key, value in storage.items()
    }


operation = st.tuples(
    st.sampled_from(["fresh", "tensor view", "numpy view"]),
    st.integers(0, 20),  # first row (modulo the capacity)
    st.integers(1, 20),  # rows
    st.integers(1, 3),  # stride
)


@given(
    capacity=st.integers(1, 7),
    layout=st.sampled_from(LAYOUTS),
    operations=st.lists(operation, min_size=1, max_size=12),
)
def test_extending_from_the_buffers_own_rows_matches_extending_from_a_copy(
    capacity: int, layout: str, operations: list[tuple[str, int, int, int]]
) -> None:
    buffer = make(layout, capacity)
    buffer.extend(tagged(list(range(capacity)), layout))
    model = list(range(capacity))  # the id each physical row holds
    next_id = capacity
    for kind, first, count, stride in operations:
        cursor = buffer.cursor
        if kind == "fresh":
            ids = list(range(next_id, next_id + count))
            next_id += count
            buffer.extend(tagged(ids, layout))
        else:
            rows = slice(first % capacity, first % capacity + count, stride)
            ids = model[rows]
            buffer.extend(own_rows(buffer, rows, as_numpy=kind == "numpy view"))
        kept = ids[-capacity:]
        start = cursor + len(ids) - len(kept)
        for offset, row_id in enumerate(kept):
            model[(start + offset) % capacity] = row_id
        assert row_ids(buffer) == model

"""Inputs every buffer's write path shares (RingStorage, to_tensor, check_cast), checked on the
buffers whose own test modules belong to their classes: ZBuffer.add and TrajectoryDictBuffer's
episodes. DictBuffer and the online buffer have the same cases in their own modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bufcore import DictBuffer, TrajectoryDictBuffer, ZBuffer


def expert_episode(length: int, motion: int, **overrides: object) -> dict[str, object]:
    return {
        "observation": np.arange(length, dtype=np.float32)[:, None] + 10 * motion,
        "motion_id": np.full(length, motion),
        **overrides,
    }


# ----------------------------------------------------------------------------------- ZBuffer
def test_z_buffer_add_stores_big_endian_vectors_with_their_values() -> None:
    buffer = ZBuffer(4, 2)
    buffer.add(np.arange(4, dtype=">f8").reshape(2, 2))
    assert buffer.sample(1).dtype == torch.float32
    assert buffer._storage.views[("z",)][:2].tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_z_buffer_add_refuses_values_that_overflow_the_stored_dtype_and_adds_nothing() -> None:
    buffer = ZBuffer(4, 2, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"^z: values in \[0, 100000\] do not fit .* float16"):
        buffer.add(np.array([[0.0, 1e5]]))
    assert (len(buffer), buffer.cursor) == (0, 0)


def test_z_buffer_too_large_for_memory_raises_memory_error_naming_the_bytes() -> None:
    with pytest.raises(MemoryError, match=rf"cannot allocate {2**48:,} bytes"):
        ZBuffer(2**44, 4)  # 256 TiB: more than any process's address space maps


@pytest.mark.parametrize("capacity", [1, 2, 5])
def test_z_buffer_add_from_its_own_overlapping_rows_equals_adding_a_copy(capacity: int) -> None:
    buffer, twin = ZBuffer(capacity, 2), ZBuffer(capacity, 2)
    for b in (buffer, twin):
        b.add(torch.arange(2.0 * (capacity + 1)).reshape(capacity + 1, 2))
    rows = buffer._storage.views[("z",)]
    begin = (buffer.cursor - 1) % capacity
    buffer.add(rows[begin:])
    twin.add(twin._storage.views[("z",)][begin:].clone())
    assert torch.equal(buffer._storage.views[("z",)], twin._storage.views[("z",)])


def test_z_buffer_accepts_numpy_integers_for_its_sizes() -> None:
    buffer = ZBuffer(np.int64(3), np.int32(2))  # type: ignore[arg-type]
    buffer.add(np.ones((2, 2), np.float32))
    assert buffer.sample(np.int16(4)).shape == (4, 2)  # type: ignore[arg-type]


def test_z_buffer_keeps_no_graph_from_a_requires_grad_input() -> None:
    buffer = ZBuffer(4, 2)
    buffer.add(torch.ones(3, 2, requires_grad=True) * 2)
    for out in (buffer._storage.views[("z",)], buffer.sample(5)):
        assert (out.requires_grad, out.grad_fn) == (False, None)


# ------------------------------------------------------------------------------ expert buffer
def test_expert_episodes_given_big_endian_are_stored_with_their_values() -> None:
    big = expert_episode(3, 2)
    big = {key: np.asarray(value).astype(np.asarray(value).dtype.newbyteorder(">"))
           for key, value in big.items()}
    buffer = TrajectoryDictBuffer([expert_episode(2, 1), big])
    assert buffer.motion_ids == [1, 2]
    assert buffer.storage["observation"][:, 0].tolist() == [10.0, 11.0, 20.0, 21.0, 22.0]


def test_expert_episodes_keep_no_graph_from_requires_grad_tensors() -> None:
    weight = torch.ones(1, requires_grad=True)
    episodes = [
        expert_episode(4, m, observation=torch.arange(4.0)[:, None] * weight) for m in (1, 2)
    ]
    buffer = TrajectoryDictBuffer(episodes, seq_length=2, seed=0)
    batch = buffer.sample(4)
    outputs = (buffer.storage["observation"], batch["observation"], batch["next"]["observation"])
    for out in outputs:
        assert (out.requires_grad, out.grad_fn) == (False, None)


def test_expert_buffer_accepts_numpy_integers_for_its_sizes() -> None:
    buffer = TrajectoryDictBuffer(
        [expert_episode(4, 1)], seq_length=np.int64(2), seed=np.uint8(1)  # type: ignore[arg-type]
    )
    out = buffer.sample(np.int32(4), seq_length=np.int64(2))  # type: ignore[arg-type]
    assert out["observation"].shape == (4, 1)


def test_an_expert_motion_id_of_another_dtype_is_refused_naming_the_episode() -> None:
    episodes = [expert_episode(2, 1), expert_episode(2, 2, motion_id=np.full(2, 2.0))]
    with pytest.raises(TypeError, match=r"^episodes\[1\]\['motion_id'\]: dtype float64"):
        TrajectoryDictBuffer(episodes)


@pytest.mark.parametrize("motion_id", [1.5, float("nan"), float("inf")])
def test_a_first_episode_whose_float_motion_id_is_not_whole_is_refused(motion_id: float) -> None:
    episodes = [{"observation": np.zeros((5, 2), np.float32), "motion_id": np.full(5, motion_id)}]
    with pytest.raises(
        ValueError, match=r"episodes\[0\]\['motion_id'\]: motion ids must be whole"
    ):
        TrajectoryDictBuffer(episodes=episodes, seq_length=2)


def test_whole_float_motion_ids_are_read_as_ints() -> None:
    episodes = [{"observation": np.zeros((5, 2), np.float32), "motion_id": np.full(5, 3.0)}]
    assert TrajectoryDictBuffer(episodes=episodes, seq_length=2).motion_ids == [3]


def test_python_floats_beyond_float32_are_refused_and_nothing_is_written() -> None:
    buffer = DictBuffer(capacity=4)
    with pytest.raises(ValueError, match=r"data\['x'\]: values in \[2, 1e\+300\] do not fit"):
        buffer.extend({"x": [1e300, 2.0]})
    assert (buffer.storage, len(buffer)) == (None, 0)


def test_python_infinities_are_stored_as_given() -> None:
    buffer = DictBuffer(capacity=4)
    buffer.extend({"x": [float("inf"), 2.0]})
    assert buffer.get_full_buffer()["x"].tolist() == [float("inf"), 2.0]

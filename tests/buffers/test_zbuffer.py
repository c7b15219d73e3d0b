"""ZBuffer (REFERENCE §6)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bufcore import ZBuffer, load_buffer
from tests.support import DEVICES


def numbered(start: int, n: int, dim: int = 3) -> torch.Tensor:
    return torch.arange(start, start + n, dtype=torch.float32)[:, None].expand(n, dim).clone()


def stored(buffer: ZBuffer) -> list[float]:
    return buffer._storage.views[("z",)][:, 0].tolist()


def test_adding_three_then_two_into_capacity_five_fills_it_with_cursor_zero() -> None:
    buffer = ZBuffer(5, 3)
    buffer.add(numbered(0, 3))
    buffer.add(numbered(3, 2))
    assert (buffer.cursor, buffer.is_full, len(buffer)) == (0, True, 5)


def test_adding_seven_to_a_full_capacity_five_keeps_the_last_five() -> None:
    buffer = ZBuffer(5, 3)
    buffer.add(numbered(100, 5))
    buffer.add(numbered(0, 7))
    assert buffer.cursor == 2
    assert stored(buffer) == [5, 6, 2, 3, 4]


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_any_batch_size_keeps_the_newest_vectors(capacity: int) -> None:
    buffer = ZBuffer(capacity, 2)
    buffer.add(numbered(0, 3 * capacity + 2, dim=2))
    assert sorted(stored(buffer)) == list(range(2 * capacity + 2, 3 * capacity + 2))


def test_a_wrong_dim_raises_and_changes_nothing() -> None:
    buffer = ZBuffer(4, 3)
    buffer.add(numbered(0, 2))
    with pytest.raises(ValueError, match=r"expected shape \[batch, 3\], got \[2, 4\]"):
        buffer.add(numbered(0, 2, dim=4))
    assert (len(buffer), buffer.cursor) == (2, 2)


def test_a_vector_without_batch_axis_raises() -> None:
    with pytest.raises(ValueError, match="batch dimension"):
        ZBuffer(4, 3).add(torch.zeros(3))


def test_sample_returns_a_copy_from_the_filled_rows() -> None:
    buffer = ZBuffer(10, 3, seed=0)
    buffer.add(numbered(1, 4))
    z = buffer.sample(50)
    assert z.shape == (50, 3)
    assert set(z[:, 0].tolist()) <= {1.0, 2.0, 3.0, 4.0}
    z[:] = -1
    assert sorted(stored(buffer)[:4]) == [1, 2, 3, 4]


def test_sample_uses_the_buffer_generator_not_numpy_global_rng() -> None:
    a, b = ZBuffer(10, 3, seed=5), ZBuffer(10, 3, seed=5)
    for buffer in (a, b):
        buffer.add(numbered(0, 10))
    np.random.seed(0)
    first = a.sample(8)
    np.random.seed(1)
    torch.manual_seed(1)
    assert torch.equal(first, b.sample(8))


def test_sample_can_move_to_another_device() -> None:
    buffer = ZBuffer(4, 3)
    buffer.add(numbered(0, 2))
    assert buffer.sample(2, device="cpu").device.type == "cpu"


def test_sampling_an_empty_z_buffer_raises() -> None:
    with pytest.raises(ValueError, match="empty"):
        ZBuffer(4, 3).sample(1)


@pytest.mark.parametrize(
    ("args", "error"),
    [((0, 3), ValueError), ((3, 0), ValueError), ((3, 2.5), TypeError)],
)
def test_invalid_sizes_raise(args: tuple[int, int], error: type[Exception]) -> None:
    with pytest.raises(error):
        ZBuffer(*args)


def test_a_non_dtype_raises() -> None:
    with pytest.raises(TypeError, match="dtype"):
        ZBuffer(3, 2, dtype="float32")  # type: ignore[arg-type]


@pytest.mark.parametrize("fill", [0, 3, 9])
def test_save_and_load_round_trip_contents_cursor_and_stream(tmp_path: Path, fill: int) -> None:
    buffer = ZBuffer(5, 3, dtype=torch.float64, seed=2)
    if fill:
        buffer.add(numbered(0, fill).double())
    buffer.save(tmp_path / "z")
    loaded = ZBuffer.load(tmp_path / "z")
    assert (loaded.capacity, loaded.dim, loaded.dtype) == (5, 3, torch.float64)
    assert (loaded.cursor, loaded.is_full, len(loaded)) == (
        buffer.cursor,
        buffer.is_full,
        len(buffer),
    )
    assert stored(loaded)[: len(buffer)] == stored(buffer)[: len(buffer)]
    if fill:
        assert torch.equal(loaded.sample(6), buffer.sample(6))
    assert isinstance(load_buffer(tmp_path / "z"), ZBuffer)


@pytest.mark.parametrize("device", DEVICES)
def test_a_z_buffer_lives_and_samples_on_its_device(device: str) -> None:
    buffer = ZBuffer(4, 3, device=device, seed=0)
    buffer.add(numbered(0, 3))
    assert buffer.sample(5).device.type == device
    assert buffer.sample(5, device="cpu").device.type == "cpu"


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float8_e4m3fn])
def test_a_dtype_that_cannot_be_stored_is_refused_at_construction(dtype: torch.dtype) -> None:
    with pytest.raises(ValueError, match="dtype: expected one of"):
        ZBuffer(4, 3, dtype=dtype)


def test_an_unknown_sample_device_is_refused_before_anything_is_drawn() -> None:
    buffer = ZBuffer(4, 1, seed=1)
    buffer.add(np.arange(4, dtype=np.float32)[:, None])
    twin = ZBuffer(4, 1, seed=1)
    twin.add(np.arange(4, dtype=np.float32)[:, None])
    with pytest.raises(ValueError, match="device"):
        buffer.sample(2, device="bogus")
    assert torch.equal(buffer.sample(4), twin.sample(4))


UNUSABLE = f"cuda:{torch.cuda.device_count() + 7}"  # parses everywhere, exists nowhere


def filled(seed: int = 1) -> ZBuffer:
    buffer = ZBuffer(4, 1, seed=seed)
    buffer.add(np.arange(4, dtype=np.float32)[:, None])
    return buffer


@pytest.mark.parametrize("device", [UNUSABLE, torch.device(UNUSABLE)])
def test_a_sample_device_that_is_not_usable_is_refused_before_anything_is_drawn(
    device: str | torch.device,
) -> None:
    buffer, twin = filled(), filled()
    before = buffer._generator.get_state()
    with pytest.raises(ValueError, match=rf"device: device '{UNUSABLE}' is not usable"):
        buffer.sample(2, device=device)
    assert torch.equal(buffer._generator.get_state(), before)
    assert torch.equal(buffer.sample(4), twin.sample(4))


@pytest.mark.parametrize(("num", "error"), [(-1, ValueError), (True, TypeError), (2.0, TypeError)])
def test_a_bad_num_is_refused_before_anything_is_drawn(num: object, error: type) -> None:
    buffer, twin = filled(), filled()
    with pytest.raises(error, match="num"):
        buffer.sample(num)  # type: ignore[arg-type]
    assert torch.equal(buffer.sample(4), twin.sample(4))


def test_an_unusable_device_is_refused_at_construction_naming_it() -> None:
    with pytest.raises(ValueError, match=rf"device: device '{UNUSABLE}' is not usable"):
        ZBuffer(4, 3, device=UNUSABLE)


def test_numpy_integers_are_accepted_for_every_integer_argument() -> None:
    buffer = ZBuffer(np.int64(4), np.int32(1), seed=np.uint64(1))
    buffer.add(np.arange(4, dtype=np.float32)[:, None])
    assert (buffer.capacity, buffer.dim, buffer.seed) == (4, 1, 1)
    assert type(buffer.capacity) is int and type(buffer.seed) is int
    assert torch.equal(buffer.sample(np.int16(4)), filled().sample(4))


@pytest.mark.parametrize("argument", ["capacity", "dim", "seed"])
def test_a_bool_is_refused_for_an_integer_argument(argument: str) -> None:
    kwargs: dict[str, object] = {"capacity": 4, "dim": 1, "seed": 0, argument: np.bool_(True)}
    with pytest.raises(TypeError, match=argument):
        ZBuffer(**kwargs)  # type: ignore[arg-type]


def test_a_seed_beyond_64_bits_is_refused_with_the_range() -> None:
    with pytest.raises(ValueError, match=r"seed: expected an int in \[-9223372036854775808, "
                       r"18446744073709551615\], got 1180591620717411303424"):
        ZBuffer(4, 1, seed=2**70)

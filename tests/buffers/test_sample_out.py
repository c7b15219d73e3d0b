"""``sample(..., out=)`` and output reuse: a sample can fill caller-given tensors, and a training
loop's samples reuse the same memory once the previous batch is dropped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import bufcore
from tests.buffers.test_sample_index import KINDS, generator_in

OUT_KINDS = [
    pytest.param(kind, capacity, id=f"{kind}-{capacity}")
    for kind in ("dict", "online-time", "online-time-env", "expert")
    for capacity in (1, 2, 7)
]


def like(sample: dict[str, Any]) -> dict[str, Any]:
    """Empty tensors shaped like a sample (what a caller would pass as ``out``)."""
    return {k: like(v) if isinstance(v, dict) else torch.empty_like(v) for k, v in sample.items()}


def leaves(sample: dict[str, Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for value in sample.values():
        found.extend(leaves(value) if isinstance(value, dict) else [value])
    return found


@pytest.mark.parametrize(("kind", "capacity"), OUT_KINDS)
def test_sample_into_out_returns_out_holding_what_the_same_draw_returns(
    kind: str, capacity: int
) -> None:
    case = KINDS[kind](capacity, "trajectory")
    state = torch.Generator().manual_seed(5).get_state()
    expected = case.buffer.sample(*case.args, generator=generator_in(state))
    out = like(expected)
    result = case.buffer.sample(*case.args, generator=generator_in(state), out=out)
    assert result is out
    for got, want in zip(leaves(out), leaves(expected), strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize(("kind", "capacity"), OUT_KINDS)
def test_sample_into_out_advances_the_buffers_stream_as_a_plain_sample(
    kind: str, capacity: int
) -> None:
    plain, into = KINDS[kind](capacity, "trajectory"), KINDS[kind](capacity, "trajectory")
    out = like(plain.buffer.sample(*plain.args))
    into.buffer.sample(*into.args, out=out)
    assert torch.equal(plain.buffer._generator.get_state(), into.buffer._generator.get_state())


def dict_buffer() -> bufcore.DictBuffer:
    buffer = bufcore.DictBuffer(capacity=5, seed=0)
    buffer.extend({"obs": {"x": torch.arange(20.0).view(5, 4)}, "step": torch.arange(5)})
    return buffer


def good_out() -> dict[str, Any]:
    return {"obs": {"x": torch.empty(3, 4)}, "step": torch.empty(3, dtype=torch.int64)}


def missing_key(buffer: Any) -> dict[str, Any]:
    return {"obs": {"x": torch.empty(3, 4)}}


def extra_key(buffer: Any) -> dict[str, Any]:
    return {**good_out(), "other": torch.empty(3)}


def wrong_shape(buffer: Any) -> dict[str, Any]:
    return {**good_out(), "step": torch.empty(4, dtype=torch.int64)}


def wrong_dtype(buffer: Any) -> dict[str, Any]:
    return {**good_out(), "step": torch.empty(3, dtype=torch.int32)}


def wrong_device(buffer: Any) -> dict[str, Any]:
    return {**good_out(), "step": torch.empty(3, dtype=torch.int64, device="meta")}


def not_contiguous(buffer: Any) -> dict[str, Any]:
    return {**good_out(), "obs": {"x": torch.empty(4, 3).t()}}


def not_a_tensor(buffer: Any) -> dict[str, Any]:
    return {**good_out(), "step": [0, 0, 0]}


def the_buffers_rows(buffer: Any) -> dict[str, Any]:
    step = buffer.storage["step"]
    return {**good_out(), "step": step.as_strided((3,), (1,))}  # contiguous, inside the rows


def shared_between_leaves(buffer: Any) -> dict[str, Any]:
    block = torch.empty(3 * 4 + 6, dtype=torch.float32)
    step = block[4:10].view(torch.int64)  # overlaps the first rows of x
    return {"obs": {"x": block[:12].view(3, 4)}, "step": step}


BAD_OUT: list[tuple[Callable[[Any], Any], type[Exception], str]] = [
    (missing_key, ValueError, r"out: keys differ .*missing \['step'\]"),
    (extra_key, ValueError, r"out: keys differ .*unexpected \['other'\]"),
    (wrong_shape, ValueError, r"out\['step'\]: expected shape \[3\], got \[4\]"),
    (wrong_dtype, TypeError, r"out\['step'\]: expected dtype int64, got int32"),
    (wrong_device, ValueError, r"out\['step'\]: expected device cpu, got meta"),
    (not_contiguous, ValueError, r"out\['obs'\]\['x'\]: expected a contiguous tensor"),
    (not_a_tensor, TypeError, r"out\['step'\]: expected a torch.Tensor, got list"),
    (the_buffers_rows, ValueError, r"out\['step'\]: shares memory with the buffer's rows"),
    (shared_between_leaves, ValueError, r"out\['step'\]: shares memory with out\['obs'\]\['x'\]"),
]


@pytest.mark.parametrize(
    ("make", "error", "message"), BAD_OUT, ids=[make.__name__ for make, _, _ in BAD_OUT]
)
def test_an_out_that_does_not_fit_is_refused_by_name_before_anything_is_drawn(
    make: Callable[[Any], Any], error: type[Exception], message: str
) -> None:
    buffer = dict_buffer()
    before = buffer._generator.get_state()
    rows = buffer.storage["obs"]["x"].clone()
    with pytest.raises(error, match=message):
        buffer.sample(3, out=make(buffer))
    assert torch.equal(buffer._generator.get_state(), before)
    assert torch.equal(buffer.storage["obs"]["x"], rows)


def test_an_out_that_is_not_a_mapping_is_refused() -> None:
    with pytest.raises(TypeError, match="out: expected a mapping"):
        dict_buffer().sample(3, out=torch.empty(3))  # type: ignore[arg-type]


def test_a_window_out_without_its_next_leaves_is_refused_naming_them() -> None:
    case = KINDS["online-time"](7, "trajectory")
    with pytest.raises(ValueError, match=r"missing \['next'\]\['obs'\]"):
        case.buffer.sample(*case.args, out={"obs": torch.empty(2, 1)})


def test_sampling_an_empty_buffer_into_out_says_it_is_empty() -> None:
    with pytest.raises(ValueError, match="empty"):
        bufcore.DictBuffer(capacity=3).sample(2, out={"x": torch.empty(2)})


@pytest.mark.parametrize(("kind", "capacity"), OUT_KINDS)
def test_a_loop_that_drops_each_batch_samples_into_the_same_memory_again(
    kind: str, capacity: int
) -> None:
    case = KINDS[kind](capacity, "trajectory")
    pointers = set()
    batch = None
    for _ in range(6):
        batch = case.buffer.sample(*case.args)  # the previous batch is alive during the call
        pointers.add(tuple(t.data_ptr() for t in leaves(batch)))
    assert batch is not None and len(pointers) <= 2


def test_a_batch_kept_by_the_caller_is_not_overwritten_by_later_samples() -> None:
    buffer = bufcore.DictBuffer(capacity=50, seed=1)
    buffer.extend({"x": torch.arange(50.0)})
    kept = [buffer.sample(20) for _ in range(10)]
    copies = [batch["x"].clone() for batch in kept]
    for _ in range(10):
        buffer.sample(20)
    for batch, copy in zip(kept, copies, strict=True):
        assert torch.equal(batch["x"], copy)


def requiring_grad() -> torch.Tensor:
    return torch.zeros(3, requires_grad=True)


def inference_tensor() -> torch.Tensor:
    with torch.inference_mode():
        return torch.zeros(3)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (requiring_grad, r"out\['z'\]: expected a tensor that does not require grad"),
        (inference_tensor, r"out\['z'\]: expected a tensor made outside torch.inference_mode"),
    ],
    ids=["requires-grad", "inference-tensor"],
)
def test_an_out_leaf_that_cannot_be_written_in_place_is_refused_before_any_leaf_is_written(
    make: Callable[[], torch.Tensor], message: str
) -> None:
    buffer = bufcore.DictBuffer(capacity=5, seed=0)
    buffer.extend({"a": torch.arange(5.0), "z": torch.arange(5.0)})
    before = buffer._generator.get_state()
    first = torch.full((3,), -1.0)
    with pytest.raises(ValueError, match=message):
        buffer.sample(3, out={"a": first, "z": make()})
    assert torch.equal(first, torch.full((3,), -1.0))
    assert torch.equal(buffer._generator.get_state(), before)


def test_an_inference_tensor_is_a_fine_out_inside_inference_mode() -> None:
    buffer = bufcore.DictBuffer(capacity=5, seed=0)
    buffer.extend({"z": torch.arange(5.0)})
    with torch.inference_mode():
        out = {"z": torch.full((3,), -1.0)}
        buffer.sample(3, out=out)
    assert bool((out["z"] >= 0).all())


def test_an_out_on_the_buffers_device_written_another_way_is_accepted() -> None:
    # "cpu:0" and "cpu" (as "cuda" and "cuda:0") are one device; tensors report the concrete one.
    buffer = bufcore.DictBuffer(capacity=5, seed=0, device="cpu:0")
    buffer.extend({"x": torch.arange(5.0)})
    out = {"x": torch.full((3,), -1.0, device="cpu:0")}
    assert buffer.sample(3, out=out) is out
    assert bool((out["x"] >= 0).all())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_an_out_on_cuda_is_accepted_by_a_buffer_on_cuda_without_an_index() -> None:
    buffer = bufcore.DictBuffer(capacity=5, seed=0, device="cuda")
    buffer.extend({"x": torch.arange(5.0)})
    out = {"x": torch.full((3,), -1.0, device="cuda")}  # reports cuda:0
    assert buffer.sample(3, out=out) is out

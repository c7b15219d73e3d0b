"""OutputPool: gathered batches reuse memory only once no caller can reach it."""

from __future__ import annotations

import copy
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import bufcore
from bufcore.storage.outputs import Layout, OutputPool
from bufcore.storage.ring import RingStorage

CPU = torch.device("cpu")
LAYOUT: Layout = (((8, 3), torch.float32), ((8,), torch.int64))


def storages(tensors: list[torch.Tensor]) -> list[int]:
    return [t.untyped_storage().data_ptr() for t in tensors]


def test_outputs_dropped_by_the_caller_are_handed_out_again() -> None:
    pool = OutputPool(CPU)
    first = storages(pool.take(LAYOUT))
    assert storages(pool.take(LAYOUT)) == first


def test_outputs_are_contiguous_have_the_layout_and_own_their_storage() -> None:
    pool = OutputPool(CPU)
    pool.take(LAYOUT)
    outputs = pool.take(LAYOUT)  # the reused slot
    for tensor, (shape, dtype) in zip(outputs, LAYOUT, strict=True):
        assert tensor.shape == shape and tensor.dtype == dtype and tensor.is_contiguous()
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
        assert tensor.storage_offset() == 0


def keep_tensor(t: torch.Tensor) -> Any:
    return t


def keep_view(t: torch.Tensor) -> Any:
    return t[1:3]


def keep_numpy(t: torch.Tensor) -> Any:
    return t.numpy()


def keep_graph(t: torch.Tensor) -> Any:
    weight = torch.ones((), requires_grad=True)
    return (t * weight).sum()  # saves t for the backward pass


def keep_dlpack(t: torch.Tensor) -> Any:
    return torch.utils.dlpack.to_dlpack(t)


@pytest.mark.parametrize(
    "keep", [keep_tensor, keep_view, keep_numpy, keep_graph, keep_dlpack], ids=lambda f: f.__name__
)
def test_memory_still_reachable_by_the_caller_is_never_handed_out_again(
    keep: Callable[[torch.Tensor], Any],
) -> None:
    pool = OutputPool(CPU)
    outputs = pool.take(LAYOUT)
    outputs[0].fill_(7.0)
    held = keep(outputs[0])
    taken = set(storages(outputs))
    del outputs
    for _ in range(6):  # more takes than slots
        again = pool.take(LAYOUT)
        assert not taken & set(storages(again))
        again[0].fill_(-1.0)
    assert held is not None


def read_through_storage_handle(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    storage = t.untyped_storage()  # the pool once kept this very Python object
    return lambda: torch.empty(0).set_(storage, 0, (8, 3), (3, 1))[0]


def read_through_legacy_storage(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated
        typed = t.storage()
    return lambda: torch.tensor(typed.tolist()[:3])


def read_through_storage_weakref(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    ref = weakref.ref(t.untyped_storage())

    def read() -> torch.Tensor:
        storage = ref()
        if storage is None:
            return torch.full((3,), 7.0)  # gone: nothing can be read through it any more
        return torch.empty(0).set_(storage, 0, (8, 3), (3, 1))[0]

    return read


def read_through_shared_memory(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    t.share_memory_()  # as multiprocessing does before sending it to another process
    fd, size = t.untyped_storage()._share_fd_cpu_()
    mapping = torch.UntypedStorage._new_shared_fd_cpu(fd, size)  # what that process maps
    return lambda: torch.empty(0).set_(mapping, 0, (8, 3), (3, 1))[0]


@pytest.mark.parametrize(
    "keep",
    [
        read_through_storage_handle,
        read_through_legacy_storage,
        read_through_storage_weakref,
        read_through_shared_memory,
    ],
    ids=lambda f: f.__name__,
)
def test_memory_a_caller_reaches_without_holding_a_tensor_is_never_written_again(
    keep: Callable[[torch.Tensor], Callable[[], torch.Tensor]],
) -> None:
    pool = OutputPool(CPU)
    outputs = pool.take(LAYOUT)
    outputs[0].fill_(7.0)
    read = keep(outputs[0])
    del outputs
    for _ in range(6):  # more takes than slots
        pool.take(LAYOUT)[0].fill_(-1.0)
    assert torch.equal(read(), torch.full((3,), 7.0))


def test_a_caller_keeping_every_batch_gets_fresh_memory_each_time() -> None:
    pool = OutputPool(CPU, slots=2)
    kept = [pool.take(LAYOUT) for _ in range(5)]
    pointers = [p for outputs in kept for p in storages(outputs)]
    assert len(set(pointers)) == len(pointers)


def test_a_free_slot_of_another_layout_is_replaced_once_every_slot_is_used() -> None:
    pool = OutputPool(CPU, slots=1)
    pool.take(LAYOUT)
    other: Layout = (((4, 2), torch.float64),)
    first = storages(pool.take(other))
    assert storages(pool.take(other)) == first


def test_layouts_larger_than_the_pooled_bytes_are_never_kept() -> None:
    pool = OutputPool(CPU, pooled_bytes=64)
    big: Layout = (((100,), torch.float32),)
    assert pool.take(big)[0].shape == (100,)
    assert pool._slots == []


def test_only_cpu_outputs_are_pooled() -> None:
    assert OutputPool(CPU).pooled
    assert not OutputPool(torch.device("meta")).pooled
    assert OutputPool(torch.device("meta")).take(LAYOUT)[0].device.type == "meta"


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_a_held_sample_keeps_its_values_while_later_gathers_run(capacity: int) -> None:
    storage = RingStorage(capacity, device=CPU)
    storage.write(storage.validate({"x": torch.arange(capacity * 2.0).view(capacity, 2)}))
    index = torch.tensor([capacity - 1, 0])
    held = storage.gather(index)[("x",)]
    expected = held.clone()
    for _ in range(8):
        storage.gather(torch.zeros(2, dtype=torch.int64))
    assert torch.equal(held, expected)


def test_threads_gathering_at_once_never_share_an_output() -> None:
    storage = RingStorage(64, device=CPU)
    values = torch.arange(64 * 4.0).view(64, 4)
    storage.write(storage.validate({"x": values}))
    failures: list[str] = []

    def work(seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        for _ in range(600):
            index = torch.randint(64, (16,), generator=generator)
            out = storage.gather(index)[("x",)]
            for _ in range(20):  # give the other thread time to take the same slot
                if not torch.equal(out, values[index]):
                    failures.append(f"thread {seed}: an output was overwritten")
                    return

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(3)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, inside take() too
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []


def test_gathers_reuse_memory_as_numpy_sees_it() -> None:
    storage = RingStorage(4, device=CPU)
    storage.write(storage.validate({"x": np.ones((4, 3), dtype=np.float32)}))
    first = storage.gather(torch.tensor([0, 1]))[("x",)].numpy()
    first_pointer = first.ctypes.data
    del first
    assert storage.gather(torch.tensor([2, 3]))[("x",)].data_ptr() == first_pointer


def test_a_deep_copy_has_its_own_empty_pool_with_the_same_limits() -> None:
    pool = OutputPool(CPU, slots=3, pooled_bytes=1 << 20)
    taken = pool.take(LAYOUT)
    copied = copy.deepcopy(pool)
    assert copied._slots == [] and copied._max_slots == 3 and copied._pooled_bytes == 1 << 20
    assert not set(storages(copied.take(LAYOUT))) & set(storages(taken))


def test_a_deep_copied_buffer_samples_like_the_original() -> None:
    buffer = bufcore.DictBuffer(capacity=6, seed=2)
    buffer.extend({"x": torch.arange(6.0)})
    buffer.sample(3)
    twin = copy.deepcopy(buffer)
    assert torch.equal(twin.sample(4)["x"], buffer.sample(4)["x"])

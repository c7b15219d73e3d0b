"""Memory for gathered batches: reused once no caller still holds it, so sampling stays in place.

Why: a batch of 1024 BFM-Zero rows is ~4.8 MB. Freshly allocated each call, glibc may hand those
pages back to the kernel on free (it does in a fresh process, whose malloc thresholds are still
at their defaults) and every call then faults its whole output in again: >1,000 page faults per
call, 3-5x slower, depending on the process's allocation history. A library must not retune the
process's allocator, so the ring keeps the outputs' memory itself.

Data model: an :class:`OutputPool` keeps a few *slots*; a slot is one ``UntypedStorage`` per
output tensor of one layout (shapes and dtypes of the leaves a gather returns). A gather takes a
slot whose storages nobody else references (each storage's use count is 1: only the pool's own
handle) and returns fresh tensors over them, so each output owns its storage exactly as a newly
allocated tensor would (``torch.save`` of one leaf writes that leaf only). While the caller keeps
any of those tensors, or a view, a numpy array or an autograd graph over them, the slot is busy
and the next gather uses another slot or allocates. No caller can observe the reuse: memory is
reused only when nothing outside the pool can reach it.

Only CPU outputs are pooled (a CUDA caching allocator already reuses blocks without faults, and
it knows the streams a block was used on; this pool would not), and only layouts up to
:data:`POOLED_BYTES` (a huge draw keeps nothing alive after its caller drops it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from threading import Lock
from typing import Any

import torch

from bufcore.storage.memory import overlaps
from bufcore.tree import KeyPath, dtype_name, format_key_path

SLOTS = 4
"""Layouts kept at once: a training loop holds the previous batch while drawing the next one
(``batch = buffer.sample(n)`` rebinds only after the call), and may draw a few batches per step."""
POOLED_BYTES = 64 << 20
"""Larger layouts are allocated per call and kept by no one but the caller."""

Layout = tuple[tuple[tuple[int, ...], torch.dtype], ...]
"""Shape and dtype of every output tensor, in output order."""


def _use_count(storage: torch.UntypedStorage) -> int:
    """References to ``storage``'s memory: tensors, views, storage handles (torch's count)."""
    return int(torch._C._storage_Use_Count(storage._cdata))


class OutputPool:
    """Slots of reusable output storages for one device (see the module docstring).

    Args:
        device: Where outputs live; only ``cpu`` is pooled, elsewhere :meth:`take` allocates.
        slots: Layouts kept at once.
        pooled_bytes: Largest layout (all its tensors together) that is kept.
    """

    def __init__(
        self, device: torch.device, *, slots: int = SLOTS, pooled_bytes: int = POOLED_BYTES
    ) -> None:
        self.device = device
        self.pooled = device.type == "cpu" and slots > 0
        self._slots: list[tuple[Layout, list[torch.UntypedStorage]]] = []
        self._max_slots = slots
        self._pooled_bytes = pooled_bytes
        self._lock = Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        """A copy (``copy.deepcopy`` of a buffer, pickling) starts with no slots of its own."""
        return (
            type(self),
            (self.device,),
            {"_max_slots": self._max_slots, "_pooled_bytes": self._pooled_bytes},
        )

    def take(self, layout: Layout) -> list[torch.Tensor]:
        """Empty tensors of ``layout``, over pooled memory that no one else references.

        The returned tensors are contiguous and each owns its storage. Their memory is the pool's
        again once the caller drops every reference to it.
        """
        nbytes = sum(_nbytes(shape, dtype) for shape, dtype in layout)
        if not self.pooled or nbytes > self._pooled_bytes:
            return self._fresh(layout)
        with self._lock:  # a slot is marked busy (tensors over it exist) before the lock is let go
            storages = self._free_slot(layout)
            if storages is None:
                return self._fresh(layout)
            pairs = zip(storages, layout, strict=True)
            return [_over(storage, shape, dtype) for storage, (shape, dtype) in pairs]

    def _free_slot(self, layout: Layout) -> list[torch.UntypedStorage] | None:
        """A free slot of ``layout``: reused, added, or replacing a free one of another layout;
        None when every slot is busy and none may be added."""
        replaceable = None
        for i, (kept, storages) in enumerate(self._slots):
            if not all(_use_count(s) == 1 for s in storages):
                continue
            if kept == layout:
                return storages
            replaceable = i if replaceable is None else replaceable
        if len(self._slots) < self._max_slots:
            index = len(self._slots)
            self._slots.append((layout, []))
        elif replaceable is not None:
            index = replaceable
        else:
            return None
        storages = [t.untyped_storage() for t in self._fresh(layout)]
        self._slots[index] = (layout, storages)
        return storages

    def _fresh(self, layout: Layout) -> list[torch.Tensor]:
        return [torch.empty(shape, dtype=dtype, device=self.device) for shape, dtype in layout]

    def clear(self) -> None:
        """Drop every slot (outputs still held by callers stay valid: they own their memory)."""
        with self._lock:
            self._slots.clear()


def layout_of(shapes: Sequence[tuple[int, ...]], dtypes: Sequence[torch.dtype]) -> Layout:
    """The layout of tensors with these shapes and dtypes."""
    return tuple(zip((tuple(s) for s in shapes), dtypes, strict=True))


def _nbytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    count = 1
    for size in shape:
        count *= size
    return count * dtype.itemsize


def _over(
    storage: torch.UntypedStorage, shape: tuple[int, ...], dtype: torch.dtype
) -> torch.Tensor:
    """A contiguous tensor of ``shape`` and ``dtype`` over the start of ``storage``."""
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * max(shape[axis + 1], 1)
    return torch.empty(0, dtype=dtype, device=storage.device).set_(storage, 0, shape, strides)


def check_out(
    out: Mapping[KeyPath, Any],
    expected: Mapping[KeyPath, tuple[tuple[int, ...], torch.dtype]],
    *,
    device: torch.device,
    rows: torch.Tensor | None,
    argument: str = "out",
) -> list[torch.Tensor]:
    """Check caller-given output tensors against what a gather writes; in ``expected``'s order.

    Args:
        out: Key path -> tensor, flattened from the caller's nested ``out``.
        expected: Key path -> shape and dtype of every output.
        device: Where the outputs must live.
        rows: The storage's memory, which no output may share (None: nothing stored yet).
        argument: How messages name ``out``.

    Raises:
        ValueError: missing or extra keys, a wrong shape or device, a tensor that is not
            contiguous, or one that shares memory with the stored rows or with another output.
        TypeError: a leaf is not a tensor, or has another dtype.
    """
    missing = [p for p in expected if p not in out]
    extra = [p for p in out if p not in expected]
    if missing or extra:
        keys = ", ".join(format_key_path(p) for p in expected)
        raise ValueError(
            f"{argument}: keys differ from the sample's (missing "
            f"{', '.join(map(format_key_path, missing)) or 'none'}; unexpected "
            f"{', '.join(map(format_key_path, extra)) or 'none'}); expected exactly {keys}"
        )
    checked: list[torch.Tensor] = []
    spans: list[tuple[int, int, KeyPath]] = []
    for path, (shape, dtype) in expected.items():
        where = f"{argument}{format_key_path(path)}"
        tensor = out[path]
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{where}: expected a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype != dtype:
            raise TypeError(
                f"{where}: expected dtype {dtype_name(dtype)}, got {dtype_name(tensor.dtype)}"
            )
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{where}: expected shape {list(shape)}, got {list(tensor.shape)}")
        if tensor.device != device:
            raise ValueError(f"{where}: expected device {device}, got {tensor.device}")
        if not tensor.is_contiguous():
            raise ValueError(f"{where}: expected a contiguous tensor")
        if rows is not None and overlaps(tensor, rows):
            raise ValueError(f"{where}: shares memory with the buffer's rows")
        start = tensor.data_ptr()
        end = start + tensor.numel() * tensor.element_size()
        for other_start, other_end, other in spans:
            if start < other_end and other_start < end:
                raise ValueError(f"{where}: shares memory with {argument}{format_key_path(other)}")
        if end > start:
            spans.append((start, end, path))
        checked.append(tensor)
    return checked

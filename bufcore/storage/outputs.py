"""Memory for gathered batches: reused once no caller still holds it, so sampling stays in place.

Why: a batch of 1024 BFM-Zero rows is ~4.8 MB. Freshly allocated each call, glibc may hand those
pages back to the kernel on free (it does in a fresh process, whose malloc thresholds are still
at their defaults) and every call then faults its whole output in again: >1,000 page faults per
call, 3-5x slower, depending on the process's allocation history. A library must not retune the
process's allocator, so the ring keeps the outputs' memory itself.

Data model: an :class:`OutputPool` keeps a few *slots*; a slot is one block of memory per
output tensor of one layout (shapes and dtypes of the leaves a gather returns), held by a
``uint8`` tensor that never leaves the pool. A take wraps each block in a *new* storage (through
``torch.from_numpy`` of a fresh numpy view of it, the view being the take's *lease*) and
returns a tensor over that storage, so each output owns its storage exactly as a newly
allocated tensor would (``torch.save`` of one leaf writes that leaf only). The lease lives as
long as that storage does: while the caller keeps any of the tensors, a view, a numpy array, an
autograd graph, a DLPack capsule, a storage handle (``untyped_storage()``, ``storage()``, or a
weak reference to one), the slot is busy and the next gather uses another slot or allocates.
A slot is free again once every lease of its last take is gone (its weak reference is dead),
so no caller can observe the reuse: memory is reused only when nothing outside the pool can
reach it. (A storage moved to shared memory, ``share_memory_()`` or multiprocessing, lets go
of the block at once: it holds a copy from then on.) Torch's own storage use count would not
do: a storage's Python object is kept alive by torch beside its memory and handed to whoever
asks for ``untyped_storage()``, so a handle the caller keeps or weakly refers to is not counted.

The outputs' storages are not resizable (``resize_`` to a larger size raises), as for any
tensor over numpy memory.

Only CPU outputs are pooled (a CUDA caching allocator already reuses blocks without faults, and
it knows the streams a block was used on; this pool would not), and only layouts up to
:data:`POOLED_BYTES` (a huge draw keeps nothing alive after its caller drops it).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from threading import Lock
from typing import Any

import numpy as np
import torch

from bufcore.checks import concrete_device
from bufcore.storage.memory import overlaps
from bufcore.tree import KeyPath, LeafSpec, dtype_name, format_key_path

SLOTS = 4
"""Layouts kept at once: a training loop holds the previous batch while drawing the next one
(``batch = buffer.sample(n)`` rebinds only after the call), and may draw a few batches per step."""
POOLED_BYTES = 64 << 20
"""Larger layouts are allocated per call and kept by no one but the caller."""

Layout = tuple[tuple[tuple[int, ...], torch.dtype], ...]
"""Shape and dtype of every output tensor, in output order."""


class _Slot:
    """Memory for one layout: a pool-private block per output, and the leases of its last take."""

    __slots__ = ("blocks", "layout", "leases")

    def __init__(self, layout: Layout, device: torch.device) -> None:
        self.layout = layout
        self.blocks = [
            torch.empty(LeafSpec(shape, dtype).nbytes, dtype=torch.uint8, device=device).numpy()
            for shape, dtype in layout
        ]
        self.leases: list[weakref.ref[np.ndarray]] = []

    def free(self) -> bool:
        """Whether nothing outside the pool can reach this slot's memory any more."""
        return all(lease() is None for lease in self.leases)

    def lend(self) -> list[torch.Tensor]:
        """Tensors of the layout, each over a new storage of one block (see the module)."""
        outputs = []
        self.leases = []
        for block, (shape, dtype) in zip(self.blocks, self.layout, strict=True):
            lease = block[:]  # a new array, held by the new storage until it is freed
            self.leases.append(weakref.ref(lease))
            outputs.append(_over(torch.from_numpy(lease).untyped_storage(), shape, dtype))
        return outputs


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
        self._slots: list[_Slot] = []
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
        nbytes = sum(LeafSpec(shape, dtype).nbytes for shape, dtype in layout)
        if not self.pooled or nbytes > self._pooled_bytes:
            return self._fresh(layout)
        with self._lock:  # a slot's leases are taken before the lock is let go
            slot = self._free_slot(layout)
            return self._fresh(layout) if slot is None else slot.lend()

    def _free_slot(self, layout: Layout) -> _Slot | None:
        """A free slot of ``layout``: reused, added, or replacing a free one of another layout;
        None when every slot is busy and none may be added."""
        replaceable = None
        for i, slot in enumerate(self._slots):
            if not slot.free():
                continue
            if slot.layout == layout:
                return slot
            replaceable = i if replaceable is None else replaceable
        if len(self._slots) < self._max_slots:
            self._slots.append(_Slot(layout, self.device))
            return self._slots[-1]
        if replaceable is not None:
            self._slots[replaceable] = _Slot(layout, self.device)
            return self._slots[replaceable]
        return None

    def _fresh(self, layout: Layout) -> list[torch.Tensor]:
        return [torch.empty(shape, dtype=dtype, device=self.device) for shape, dtype in layout]


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
            contiguous, requires grad, is an inference tensor outside inference mode, or
            shares memory with the stored rows or with another output.
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
    expected_device = concrete_device(device)
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
        if concrete_device(tensor.device) != expected_device:
            raise ValueError(f"{where}: expected device {expected_device}, got {tensor.device}")
        if not tensor.is_contiguous():
            raise ValueError(f"{where}: expected a contiguous tensor")
        if tensor.requires_grad:  # out= writes cannot be differentiated: torch would raise
            raise ValueError(f"{where}: expected a tensor that does not require grad")
        if tensor.is_inference() and not torch.is_inference_mode_enabled():
            raise ValueError(
                f"{where}: expected a tensor made outside torch.inference_mode (it cannot be "
                "written in place outside it)"
            )
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

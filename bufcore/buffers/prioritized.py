"""What a buffer with a prioritized sampler adds (README "Prioritized replay"): write counts on
its indices, importance weights in its batches, priority updates that skip overwritten rows,
and the sampler's state beside the rows of its checkpoint.

Batches: ``sample`` returns the stored keys plus two reserved top-level leaves, ``"_weight"``
(float32 ``[batch]``: ``SampleIndex.weights``, the importance weights) and ``"_index"`` (int64
``[batch, 2]``: each row's flat storage row and its write count), so ``sample`` stays
``sample_index`` plus a gather and ``update_priority(batch["_index"], priority)`` works from
a batch alone; an ``out=`` holds them too.

State: ``state["sampler"]`` (in state.json) holds the sampler's kind, options and scalar state,
and its per-row tensors go with the rows under the reserved top-level key ``"_sampler"``
(float64 ``[rows]`` or ``[rows, env]``; the dataset ``_sampler-priority`` of buffer.hdf5), so a
million priorities are written, read lazily and verified as rows are, and partial loads and
``bufcore inspect`` see them. A state without ``"sampler"`` (every checkpoint written before
prioritized replay) loads with the buffer's default sampler, unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from bufcore.errors import StateError
from bufcore.fields import Field
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import RingPosition
from bufcore.sampling.segment_tree import check_weights
from bufcore.storage.batches import RowSource
from bufcore.storage.ring import RingStorage
from bufcore.tree import KeyPath, format_key_path

SAMPLER_KEY = "_sampler"
WEIGHT_KEY = "_weight"
INDEX_KEY = "_index"
RESERVED_KEYS = (SAMPLER_KEY, WEIGHT_KEY, INDEX_KEY)
# The saved samplers by kind (state["sampler"]["kind"]).
SAMPLER_KINDS: dict[str, type[PrioritizedSampler]] = {PrioritizedSampler.kind: PrioritizedSampler}


def check_reserved_keys(paths: Iterable[KeyPath]) -> None:
    """Refuse data whose top-level keys a prioritized buffer uses itself.

    Raises:
        ValueError: a key path starts with ``"_sampler"``, ``"_weight"`` or ``"_index"``.
    """
    for path in paths:
        if path[0] in RESERVED_KEYS:
            raise ValueError(
                f"data: key {format_key_path(path)} is reserved in a buffer with a prioritized "
                f"sampler (its batches and checkpoints use {', '.join(RESERVED_KEYS)}); rename it"
            )


def stamped(index: SampleIndex, storage: RingStorage) -> SampleIndex:
    """``index`` with the write count of each of its rows (on the rows' device)."""
    writes = _write_counts(index, storage)
    return SampleIndex(index.rows, index.env_count, index.trajectory, index.weights, writes)


def _write_counts(index: SampleIndex, storage: RingStorage) -> torch.Tensor:
    on_cpu = index.rows.device.type == "cpu"
    rows = index.rows.numpy() if on_cpu else index.rows.cpu().numpy()
    time = rows if index.env_count == 1 else rows // index.env_count
    writes = torch.from_numpy(storage.writes.numpy()[time])
    return writes if on_cpu else writes.to(index.rows.device)


def weighted_layout(rows: int) -> dict[KeyPath, tuple[tuple[int, ...], torch.dtype]]:
    """The reserved leaves of a batch of ``rows`` rows, as ``output_layout`` lists leaves."""
    return {(WEIGHT_KEY,): ((rows,), torch.float32), (INDEX_KEY,): ((rows, 2), torch.int64)}


def add_weighted(
    result: dict[str, Any],
    index: SampleIndex,
    storage: RingStorage,
    targets: list[torch.Tensor] | None,
) -> None:
    """Put the index's weights, rows and write counts into ``result`` (into ``targets``, the
    checked ``_weight`` and ``_index`` tensors of an ``out``, when given). An index without
    weights (every draw weighs the same) gets weights 1."""
    writes = index.writes if index.writes is not None else _write_counts(index, storage)
    weights = (
        index.weights
        if index.weights is not None
        else torch.ones(index.rows.shape, dtype=torch.float32, device=index.rows.device)
    )
    packed = torch.stack([index.rows, writes], 1)
    if targets is None:
        result[WEIGHT_KEY], result[INDEX_KEY] = weights, packed
        return
    weight_out, rows_out = targets
    weight_out.copy_(weights)
    rows_out.copy_(packed)
    result[WEIGHT_KEY], result[INDEX_KEY] = weight_out, rows_out


def update_priority(
    storage: RingStorage, sampler: PrioritizedSampler, index: Any, priority: Any
) -> int:
    """Set the priorities of the rows ``index`` drew, skipping the rows written again since
    (their write count moved on) or no longer held; see the buffers' ``update_priority``.

    Raises:
        TypeError: ``index`` is neither a ``SampleIndex`` nor an integer ``[n, 2]`` tensor, or
            the priorities are not real numbers.
        ValueError: ``index`` has no write counts or another env count, the buffer holds no
            rows, not one priority per row, a priority NaN, infinite or negative, or every held
            row would weigh 0.
        IndexError: a row outside the storage.
    """
    rows, writes = _unpacked(index, storage.envs)
    if not storage.allocated:
        raise ValueError("index: the buffer holds no rows yet, so nothing was drawn from it")
    cells = storage.capacity * storage.envs
    # One reduction checks both ends: a negative row is huge as uint64.
    if len(rows) and int(rows.view(np.uint64).max()) >= cells:
        position = int(np.flatnonzero((rows < 0) | (rows >= cells))[0])
        raise IndexError(
            f"index: expected rows in [0, {cells}), got {rows[position]} at position {position}"
        )
    values = check_weights(priority, len(rows), "priority")
    time = rows if storage.envs == 1 else rows // storage.envs
    keep = storage.writes.numpy()[time] == writes
    held = len(storage) * storage.envs
    if held < cells:
        keep &= rows < held
    return sampler._update_checked(rows, values, keep)


def _unpacked(index: Any, env_count: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and write counts of ``index`` (a ``SampleIndex`` or a batch's ``_index``)."""
    if isinstance(index, SampleIndex):
        if index.writes is None:
            raise ValueError(
                "index: it carries no write counts (pass what sample_index or sample of this "
                "buffer returned)"
            )
        if index.env_count != env_count:
            raise ValueError(
                f"index: expected env_count {env_count} (this buffer's), got {index.env_count}"
            )
        rows, writes = index.rows, index.writes
    elif isinstance(index, torch.Tensor):
        if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
            raise TypeError(f"index: expected integer rows, got dtype {index.dtype}")
        if index.ndim != 2 or index.shape[1] != 2:
            raise ValueError(
                f"index: expected a batch's {INDEX_KEY} ([n, 2] rows and write counts), got "
                f"shape {list(index.shape)}"
            )
        rows, writes = index[:, 0], index[:, 1]
    else:
        raise TypeError(
            f"index: expected a SampleIndex or a batch's {INDEX_KEY} tensor, got "
            f"{type(index).__name__}"
        )
    return _int64(rows), _int64(writes)


def _int64(tensor: torch.Tensor) -> np.ndarray:
    """A 1-D int64 numpy array of an integer tensor's values (no copy for CPU int64)."""
    if tensor.dtype == torch.int64 and tensor.ndim == 1 and tensor.device.type == "cpu":
        return tensor.numpy()  # what a draw gives (int64 never requires grad)
    flat = tensor.detach().reshape(-1)
    if flat.device.type != "cpu" or flat.dtype != torch.int64:
        flat = flat.to(device="cpu", dtype=torch.int64)
    return flat.numpy()


# ---------------------------------------------------------------- state idiom
def sampler_paths(sampler: PrioritizedSampler) -> list[KeyPath]:
    """The key paths of the sampler's per-row tensors among the saved rows."""
    return [(SAMPLER_KEY, name) for name in sampler.row_tensors]


def sampler_state(
    sampler: PrioritizedSampler, storage: RingStorage
) -> tuple[dict[str, Any], dict[KeyPath, torch.Tensor]]:
    """The ``state["sampler"]`` entry and the rows (row-shaped tensors) it saves."""
    saved = sampler.state_dict()
    entry = {"kind": sampler.kind, "config": saved["config"], "state": saved["state"]}
    if not storage.allocated:
        return entry, {}
    lead = (len(storage),) if storage.batch_dims == 1 else (len(storage), storage.envs)
    rows: dict[KeyPath, torch.Tensor] = {
        (SAMPLER_KEY, name): tensor.reshape(lead)
        for name, tensor in saved["tensors"].items()
    }
    return entry, rows


def saved_sampler(state: Field) -> PrioritizedSampler | None:
    """The sampler a saved state names (options and scalar state; rows come later with
    :func:`load_sampler_rows`), or None when it names none.

    Raises:
        StateError: an unknown kind or a malformed field.
    """
    entry = state.optional("sampler", None)
    if entry.value is None:
        return None
    kind = entry.key("kind").choice(tuple(SAMPLER_KINDS))
    return SAMPLER_KINDS[kind].from_state_dict(entry.mapping())


def load_sampler_rows(
    sampler: PrioritizedSampler, source: RowSource, storage: RingStorage, ring: RingPosition
) -> None:
    """Read the sampler's per-row tensors from ``source`` into a sampler bound to ``storage``.

    Raises:
        StateError: a tensor is missing or has another shape or dtype than the rows need, or
            malformed values (part ``rows``: buffer.hdf5 for a checkpoint).
    """
    if not storage.allocated:
        return
    sampler.bind(storage.capacity, storage.envs)
    lead = (source.count,) if storage.batch_dims == 1 else (source.count, storage.envs)
    tensors = {}
    for path in sampler_paths(sampler):
        leaf = source.spec.get(path)
        if leaf is None or leaf.shape != () or leaf.dtype != torch.float64:
            got = "no dataset" if leaf is None else f"shape {list(leaf.shape)}, {leaf.dtype}"
            raise StateError(
                "rows", f"{format_key_path(path)}: expected float64 {list(lead)}, got {got}"
            )
        tensor = torch.empty(lead, dtype=torch.float64)
        source.read_into({path: tensor})
        tensors[path[1]] = tensor.reshape(-1)
    try:
        sampler.load_rows(ring, tensors)
    except (TypeError, ValueError) as err:
        raise StateError("rows", f"{format_key_path(sampler_paths(sampler)[0])}: {err}") from err

"""What a leaf must be to enter the storage: a dense tensor of a storable dtype with its batch axes.

:func:`leaf_tensor` converts one leaf (array, tensor, number or list) and checks what every write
path needs before anything is written; :class:`~bufcore.storage.ring.RingStorage` then checks it
against the spec, and :class:`~bufcore.buffers.episode_rows.EpisodeRows` across episodes.
"""

from __future__ import annotations

from typing import Any

import torch

from bufcore.tree import dtype_name, to_tensor

# The dtypes a leaf may have: numeric ones numpy (and so HDF5) can hold, plus bfloat16 (as bits).
STORABLE: frozenset[torch.dtype] = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint16,
        torch.uint32,
        torch.uint64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    }
)


def leaf_tensor(
    value: Any, batch_dims: int, *, where: str, python_floats: torch.dtype | None = None
) -> torch.Tensor:
    """One leaf as a dense tensor with at least ``batch_dims`` leading axes and a storable dtype.

    ``python_floats`` is the dtype Python floats become (the stored one, once the spec is
    fixed, so that 0.1 reaches float64 storage unrounded); None: torch's default.

    Raises:
        TypeError: not numeric, without dense data (sparse, nested, meta; see
            :func:`bufcore.tree.to_tensor`), or a dtype that cannot be stored (complex, float8).
        ValueError: fewer axes than the batch axes.
    """
    tensor = to_tensor(value, where, python_floats=python_floats)
    if tensor.ndim < batch_dims:
        axes = "[batch, ...]" if batch_dims == 1 else "[time, env, ...]"
        raise ValueError(
            f"{where}: expected {batch_dims} leading batch axes {axes}, got shape "
            f"{list(tensor.shape)}; did you forget the batch dimension?"
        )
    if tensor.dtype not in STORABLE:
        raise TypeError(f"{where}: dtype {dtype_name(tensor.dtype)} cannot be stored")
    return tensor



"""One stored leaf of a buffer checkpoint, read without reading the others.

:func:`read_leaf` opens the checkpoint the way a load does (through
:func:`bufcore.persist.checkpoint.load_checkpoint`: the small files verified against the
manifest, buffer.hdf5's datasets checked against it, links and external storage refused; the
config parsed by the buffer class's own parser and the ring position checked, as
:func:`bufcore.runs.summary.summarize_opened` does) and then reads the rows asked for from
that leaf's dataset alone. BFM-Zero's own directories (no manifest) are read too. Nothing is
unpickled.

The rows read are verified before they are returned: the manifest blocks of buffer.hdf5 that
their bytes (and the HDF5 metadata that locates them) lie in are hashed and compared with the
manifest (:mod:`bufcore.persist.checkpoint.verify`), so reading the end flags of a million-row
buffer hashes a block or two, not the file. Damage in a block holding the rows or the metadata is a
:class:`~bufcore.errors.CorruptCheckpointError` naming buffer.hdf5 and the leaf; damage in blocks
the read does not touch is not looked for (a load, or ``bufcore inspect --verify``, hashes all).
BFM-Zero's directories have no manifest: their rows are read as they are.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from bufcore.checks import check_int
from bufcore.errors import KeyPathError
from bufcore.persist.checkpoint import OpenedCheckpoint, load_checkpoint
from bufcore.runs.summary import summarize_opened
from bufcore.tree import KeyPath, as_key_path, format_key_path, to_tensor

Rows = slice | np.ndarray[Any, Any]


def read_leaf(
    path: str | os.PathLike[str], key_path: str | KeyPath, *, rows: Any = None
) -> np.ndarray[Any, Any]:
    """Rows of one stored leaf of the buffer checkpoint at ``path``, in physical row order.

    Args:
        path: The checkpoint directory (bufcore's or BFM-Zero's).
        key_path: The leaf: a key path tuple (``("observation", "state")``) or a top-level key.
        rows: Which time rows: None for all ``[0, len)``, a slice of them, or a 1-D integer
            array, tensor or list of row indices (any order, repeats allowed).

    Returns:
        A fresh array ``[n, (env,) *shape]`` in native byte order, row ``i`` being stored row
        ``rows[i]``; a bfloat16 leaf comes back as float32 (exactly; numpy has no bfloat16).

    Raises:
        TypeError: ``key_path`` is not a str or tuple of str; ``rows`` is not None, a slice or
            integer indices.
        ValueError: ``rows`` is not 1-D, or config.json names an unknown ``__target__``.
        KeyPathError: (a ``KeyError``) no stored leaf has that key path (the message lists the
            stored ones).
        IndexError: a row index outside ``[0, len)`` (the message names ``rows``, the bound
            and the value).
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file is missing, malformed or inconsistent, buffer.hdf5's
            metadata is damaged, or a block of buffer.hdf5 the rows or their metadata lie in
            differs from the manifest (names the file, and the leaf for a block).
    """
    wanted = as_key_path(key_path, argument="key_path")
    selection = _check_rows(rows)
    return load_checkpoint(
        path, lambda opened: _read(opened, wanted, selection), hash_payload=False
    )


def _check_rows(rows: Any) -> Rows | None:
    """``rows`` as None, a slice or a 1-D int64 array (range checked once the length is known).

    Raises:
        TypeError: another kind, slice bounds or indices that are not integers.
        ValueError: indices that are not 1-D, or a slice step of 0.
    """
    if rows is None:
        return None
    if isinstance(rows, slice):
        for bound in (rows.start, rows.stop, rows.step):
            if bound is not None:
                check_int(bound, "rows: slice bound")
        if rows.step == 0:
            raise ValueError("rows: expected a slice step other than 0, got 0")
        return rows
    if not isinstance(rows, np.ndarray | torch.Tensor | list | tuple):
        raise TypeError(
            f"rows: expected None, a slice or a 1-D array of row indices, got "
            f"{type(rows).__name__}"
        )
    if isinstance(rows, list | tuple) and not rows:
        return np.empty(0, dtype=np.int64)  # `[]` has no dtype to check
    tensor = to_tensor(rows, "rows")
    if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
        raise TypeError(f"rows: expected integer row indices, got dtype {tensor.dtype}")
    if tensor.ndim != 1:
        raise ValueError(
            f"rows: expected a 1-D array of row indices, got shape {list(tensor.shape)}"
        )
    values = tensor.detach().cpu().numpy()
    if values.dtype == np.uint64 and len(values) and int(values.max()) >= 2**63:
        # Beyond int64, and so beyond any row count: reported as given, before the cast wraps it.
        position = int(values.argmax())
        raise IndexError(
            f"{_out_of_range_message(int(values[position]), None)} at position {position}"
        )
    return values.astype(np.int64)


def _out_of_range_message(value: int, length: int | None) -> str:
    bound = "[0, 2**63)" if length is None else f"[0, {length})"
    return f"rows: expected row indices in {bound}, got {value}"


def _read(
    opened: OpenedCheckpoint, wanted: KeyPath, selection: Rows | None
) -> np.ndarray[Any, Any]:
    summary = summarize_opened(opened)  # every check a load makes before reading rows
    source = opened.row_source(summary.separator, summary.batch_dims)
    if wanted not in source.spec:
        stored = ", ".join(format_key_path(p) for p in source.spec) or "none"
        raise KeyPathError(
            f"key_path: {format_key_path(wanted)} is not a stored leaf of {opened.path}; "
            f"stored: {stored}"
        )
    length = summary.length
    if selection is None:
        selection = slice(0, length)
    if isinstance(selection, slice):
        start, stop, step = selection.indices(length)
        selection = slice(start, max(start, stop)) if step == 1 else np.arange(start, stop, step)
    elif len(selection):
        bad = (selection < 0) | (selection >= length)
        if bool(bad.any()):
            position = int(np.flatnonzero(bad)[0])
            raise IndexError(
                f"{_out_of_range_message(int(selection[position]), length)} at position "
                f"{position}"
            )
    values = source.read_rows(wanted, selection)
    if source.spec[wanted].dtype == torch.bfloat16:
        return torch.from_numpy(values).view(torch.bfloat16).float().numpy()
    return values

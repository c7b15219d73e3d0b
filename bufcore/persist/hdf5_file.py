"""A lone HDF5 file of row datasets, read whole: what ``DictBuffer.load_hdf5`` extends with.

BFM-Zero's ``load_hdf5`` reads one ``buffer.hdf5`` without its directory (no config.json, no
manifest): one top-level dataset per leaf, named by its key path joined with the nested key
separator, rows on the leading axes. :func:`read_row_datasets` reads such a file into a nested
dict of CPU tensors with the checkpoint reader
(:class:`~bufcore.persist.checkpoint.read_payload.PayloadReader`, as for a BFM-Zero
directory), so it refuses what a checkpoint load refuses: groups, links and external storage
(:mod:`bufcore.persist.hdf5_guard`), non-numeric dtypes, datasets whose leading axes differ, and
a leaf that is also the prefix of another. Nothing is unpickled.

Needed by: BFM-Zero's ``DictBuffer.load_hdf5`` (``tests/buffers/test_bfm_names.py``,
``tests/persist/test_hdf5_file.py``); it adds no mechanism of its own.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import torch

from bufcore.errors import CorruptCheckpointError, CorruptFileError
from bufcore.persist.checkpoint.format import storage_dtype
from bufcore.persist.checkpoint.read_payload import PayloadReader
from bufcore.tree import Spec, unflatten


def read_row_datasets(
    path: str | os.PathLike[str], separator: str, *, batch_dims: int, like: Spec | None = None
) -> dict[str, Any]:
    """Every dataset of the HDF5 file at ``path`` as a nested dict of CPU tensors.

    Args:
        path: The file (a symbolic link to one is followed).
        separator: Splits dataset names into key paths (``observation-state`` ->
            ``{"observation": {"state": ...}}``).
        batch_dims: Leading row axes every dataset has (1: ``[rows, ...]``, 2: ``[rows, env,
            ...]``).
        like: The spec of the buffer the rows are for, or None. A leaf it holds as bfloat16
            that the file stores as int16 (how bufcore saves bfloat16) comes back as bfloat16,
            bit for bit, not as integers.

    Returns:
        ``{key: tensor [rows, ...] or nested dict}`` in the file's dataset order; ``{}`` for a
        file without datasets.

    Raises:
        FileNotFoundError: nothing is at ``path``.
        CorruptFileError: ``path`` is not a regular file or not HDF5; it holds groups, links,
            external or virtual data, or non-numeric datasets; its datasets disagree on their
            leading axes, have fewer than ``batch_dims`` axes, or a name is both a leaf and the
            prefix of another (naming the file).
        MemoryError: the rows do not fit in memory.
    """
    file = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer.
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileNotFoundError(f"{file}: no such HDF5 file") from None
    except OSError as err:
        raise CorruptFileError(file, f"cannot be opened ({err.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CorruptFileError(file, "is not a regular file")
    os.set_blocking(fd, True)
    reader = PayloadReader(file, fd, None, None)  # owns fd from here on
    try:
        spec, env_count, count = reader.leaves(None, separator, batch_dims)
        lead = (count,) if env_count is None else (count, env_count)
        rows = {
            key: torch.empty((*lead, *leaf.shape), dtype=leaf.dtype) for key, leaf in spec.items()
        }
        reader.read_leaves(rows)
    except CorruptCheckpointError as err:
        # The reader is the checkpoint's; this file is no checkpoint, so say what it is.
        raise CorruptFileError(err.path, err.problem) from err
    finally:
        reader.close()
    bits = storage_dtype(torch.bfloat16)
    for key, tensor in rows.items():
        wanted = None if like is None else like.get(key)
        if wanted is not None and wanted.dtype == torch.bfloat16 and tensor.dtype == bits:
            rows[key] = tensor.view(torch.bfloat16)
    return unflatten(rows)

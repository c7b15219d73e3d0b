"""Dict-family checkpoints: a buffer's saved state as a directory, and the way back.

A checkpoint is a directory (DESIGN §3):

- ``config.json``: the BFM-Zero fields (constructor fields, ``_idx``, ``_is_full``,
  ``__target__``), so BFM-Zero's own loader can read what bufcore writes and vice versa.
- ``buffer.hdf5``: the rows, one dataset per leaf.
- ``state.json``: bufcore-only state (generator state, priorities, ...), which BFM-Zero ignores.
- ``manifest.json``: what the others must be.

One module per mechanism:

- :mod:`~bufcore.persist.checkpoint.format`: what the directory holds, the layout of
  ``buffer.hdf5`` and what the manifest must say;
- :mod:`~bufcore.persist.checkpoint.write`: a ``state_dict()`` written and published as one;
- :mod:`~bufcore.persist.checkpoint.read`: one opened as a saved state whose rows load lazily;
- :mod:`~bufcore.persist.checkpoint.read_payload`: the rows of ``buffer.hdf5`` read through h5py;
- :mod:`~bufcore.persist.checkpoint.hashing`: sha256 of files, whole or per block on threads;
- :mod:`~bufcore.persist.checkpoint.verify`: what a load reads checked against the manifest.

Buffers and runs use the names below; the modules are for persist itself and its tests.
"""

from __future__ import annotations

from bufcore.persist.checkpoint.format import CONFIG, MANIFEST, PAYLOAD, STATE
from bufcore.persist.checkpoint.read import (
    CheckpointRows,
    OpenedCheckpoint,
    holds_buffer_config,
    load_checkpoint,
    open_checkpoint,
    saved_ring_position,
)
from bufcore.persist.checkpoint.write import BufferCheckpoint, save_checkpoint

__all__ = [
    "CONFIG",
    "MANIFEST",
    "PAYLOAD",
    "STATE",
    "BufferCheckpoint",
    "CheckpointRows",
    "OpenedCheckpoint",
    "holds_buffer_config",
    "load_checkpoint",
    "open_checkpoint",
    "save_checkpoint",
    "saved_ring_position",
]

"""Verifying the whole of ``buffer.hdf5`` while a load reads it.

A full load hashes every block of the file against the manifest. :class:`PayloadStream` starts
a :class:`~bufcore.persist.hashing.BlockHasher` on the file as the load opens it, so the blocks
are hashed on background threads while the loader reads the rows through HDF5
(:mod:`bufcore.persist.hdf5_read`); whichever comes first reads a block from the disk, the other
from the page cache. :meth:`PayloadStream.finish` reports damage, and the load raises it before
returning anything (``tests/fault/test_corruption.py``).

Measured against bufcore's earlier engine (a reader thread streaming the file through a ring
of slots into the rows while hashing threads hashed the same slots): that engine did not load
faster than this (bench row ``persist-engine``), so it went.
"""

from __future__ import annotations

import os
from pathlib import Path

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.hashing import BlockHasher, Digests, mismatch


class PayloadStream:
    """buffer.hdf5 being hashed, block by block, against its manifest entry.

    Args:
        path: The file (for messages).
        fd: The file, open for reading; the stream owns it and closes it in :meth:`finish`.
        expected: Its size and block digests, or None: nothing to check (the file is only
            closed).
    """

    def __init__(self, path: Path, fd: int, expected: Digests | None) -> None:
        self.path = path
        self._fd = fd
        self._expected = expected
        self._hasher = None if expected is None else BlockHasher(fd, expected.block_bytes)

    def finish(self) -> CorruptCheckpointError | None:
        """Wait for the hashing and close the file; the damage found, if any (idempotent)."""
        damage = None
        if self._hasher is not None and self._expected is not None:
            try:
                digests, size = self._hasher.result()
                damage = mismatch(self.path, self._expected, digests, size)
            except OSError as err:
                damage = CorruptCheckpointError(self.path, f"reading failed ({err})")
            self._hasher = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        return damage

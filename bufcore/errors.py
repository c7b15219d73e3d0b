"""Exceptions that bufcore raises on purpose."""

from __future__ import annotations

from pathlib import Path


class CorruptCheckpointError(ValueError):
    """A checkpoint file is damaged: wrong checksum or size, unreadable, or malformed.

    Attributes:
        path: The damaged file.
    """

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"corrupt checkpoint file {self.path}: {problem}")

"""Read-only views of an RLinf buffer directory for the dashboard: its index as arrays, draws
with the disk buffer's own window sampler, and one trajectory file's leaves and end flags.

Nothing here writes into the directory or builds a buffer over it:

- :func:`read_rlinf_index` parses the two JSON files (:func:`bufcore.persist.rlinf.directory.
  open_directory`: bounded reads, no links followed) into an :class:`RLinfIndex`.
- :func:`draw_rlinf_chunks` draws rows as a :class:`bufcore.TrajectoryReplayBuffer` that loaded
  the directory draws them with a generator of the same seed (``sample(n, generator=g)``): the
  window is the newest ``window_size`` trajectories whose files are there (a load leaves the
  others out), and the draw is :class:`bufcore.sampling.chunk_window.SlidingWindowSampler`'s,
  the one implementation of RLinf's window and bucketize mapping (REFERENCE §9.4).
- :func:`read_rlinf_trajectory` reads one ``.pt`` file with ``weights_only=True`` (never a
  ``pkl`` one: that would unpickle), checks it against its index entry as a load does, and
  returns its leaves and its episode-end flags, trimmed of the epoch rows as the flattening
  trims them (REFERENCE §9.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bufcore.buffers.disk import checked_rows
from bufcore.persist.rlinf.directory import open_directory
from bufcore.persist.rlinf.layout import Format, IndexEntry
from bufcore.persist.rlinf.payload import read_trajectory
from bufcore.sampling.chunk_window import ChunkIndex, ChunkWindow, SlidingWindowSampler, newest
from bufcore.tree import KeyPath

# The end flags an episode boundary is read from, in order of preference: ``dones`` when the
# trajectory has it, else ``terminations`` or ``truncations`` (either ends an episode).
END_FIELDS = ("dones", "terminations", "truncations")


@dataclass(frozen=True)
class RLinfIndex:
    """An RLinf buffer directory's index.

    Attributes:
        path: The directory.
        trajectory_format: ``"pt"`` or ``"pkl"``.
        seed: The seed metadata.json records (a loading buffer's own stream starts there).
        entries: Every index entry, in id-list order (oldest first).
        absent: Ids whose file is not in the directory (a load leaves them out).
    """

    path: Path
    trajectory_format: Format
    seed: int | None
    entries: tuple[IndexEntry, ...]
    absent: frozenset[int]

    @property
    def ids(self) -> np.ndarray:
        """int64 ``[n]``: trajectory ids in id-list order."""
        return np.array([e.trajectory_id for e in self.entries], dtype=np.int64)

    @property
    def samples(self) -> np.ndarray:
        """int64 ``[n]``: rows (``T * B``) per trajectory."""
        return np.array([e.num_samples for e in self.entries], dtype=np.int64)

    @property
    def steps(self) -> np.ndarray:
        """int64 ``[n]``: ``T`` per trajectory."""
        return np.array([e.shape[0] for e in self.entries], dtype=np.int64)

    @property
    def envs(self) -> np.ndarray:
        """int64 ``[n]``: ``B`` per trajectory."""
        return np.array([e.shape[1] for e in self.entries], dtype=np.int64)

    @property
    def present(self) -> np.ndarray:
        """bool ``[n]``: whether each trajectory's file is there."""
        return np.array([e.trajectory_id not in self.absent for e in self.entries], dtype=bool)

    def positions(self, window_size: int) -> np.ndarray:
        """int64: the id-list positions of the trajectories a buffer loading the directory with
        ``sample_window_size = window_size`` (0: all) samples from, or caches with
        ``cache_size = window_size``: the newest that many whose files are there."""
        held = np.flatnonzero(self.present).tolist()
        return np.array(newest(held, window_size), dtype=np.int64)

    def entry(self, trajectory_id: int) -> IndexEntry:
        """The entry of ``trajectory_id``.

        Raises:
            KeyError: the index has no such id.
        """
        for entry in self.entries:
            if entry.trajectory_id == trajectory_id:
                return entry
        raise KeyError(f"trajectory_id: {trajectory_id} is not in {self.path}'s index")


def read_rlinf_index(path: str | Path) -> RLinfIndex:
    """The index of the RLinf buffer directory ``path`` (no trajectory file is read).

    Raises:
        FileNotFoundError: either JSON file is missing.
        CorruptCheckpointError: either is malformed, a link or too large, or an indexed file
            is a link or not a regular file.
    """
    saved = open_directory(Path(path))
    return RLinfIndex(
        saved.path, saved.metadata.trajectory_format, saved.metadata.seed,
        tuple(saved.entries), saved.absent,
    )


def draw_rlinf_chunks(
    index: RLinfIndex, *, window_size: int, count: int, generator: torch.Generator
) -> ChunkIndex:
    """``count`` rows drawn from the directory as a :class:`bufcore.TrajectoryReplayBuffer`
    with ``sample_window_size=window_size`` that loaded it draws them from ``generator``
    (see the module docstring).

    Raises:
        TypeError: ``window_size`` or ``count`` is not an int.
        ValueError: ``window_size < 0``, ``count < 1``, or no trajectory file is there.
    """
    sampler = SlidingWindowSampler(window_size)
    held = [(e.trajectory_id, e.num_samples) for e in index.entries
            if e.trajectory_id not in index.absent]
    window = ChunkWindow.of(newest(held, sampler.window_size))
    return ChunkIndex.of(window, sampler.draw(window, count, generator))


@dataclass(frozen=True)
class LeafRow:
    """One leaf of a trajectory's rows: key path, trailing shape of one row, dtype."""

    key_path: KeyPath
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class RLinfTrajectory:
    """What one trajectory file holds, as the buffer reads it.

    Attributes:
        trajectory_id: Its id.
        steps: ``T``.
        envs: ``B``.
        leaves: Its row leaves (``[T*B, ...]`` after flattening), in sample order.
        end_field: The flag episode ends are read from (:data:`END_FIELDS`: ``"dones"``, or
            ``"terminations|truncations"``), or None when it has none.
        ends: bool ``[T, B]``: step ``t`` of env ``b`` ends an episode (after the epoch rows
            are dropped); None without end flags.
    """

    trajectory_id: int
    steps: int
    envs: int
    leaves: tuple[LeafRow, ...]
    end_field: str | None
    ends: np.ndarray | None


def read_rlinf_trajectory(index: RLinfIndex, trajectory_id: int) -> RLinfTrajectory:
    """Read the file of ``trajectory_id`` (``weights_only=True``) and check it against the
    index as a load does.

    Raises:
        KeyError: no such id in the index.
        ValueError: the directory's format is ``pkl`` (nothing is opened: reading it would
            unpickle).
        CorruptCheckpointError: the file is missing, a link, truncated, holds a pickle payload,
            or disagrees with its index entry.
    """
    entry = index.entry(trajectory_id)
    fmt = index.trajectory_format
    name = entry.file_name(fmt)
    data = read_trajectory(index.path, name, fmt, allow_pickle=False)
    rows = checked_rows(entry, data, index.path / name, None)
    leaves = tuple(
        LeafRow(path, tuple(tensor.shape[1:]), str(tensor.dtype).removeprefix("torch."))
        for path, tensor in rows.rows.items()
    )
    fields = [END_FIELDS[0]] if (END_FIELDS[0],) in rows.rows else [
        field for field in END_FIELDS[1:] if (field,) in rows.rows
    ]
    ends = None
    if fields:
        combined = torch.zeros(rows.steps, rows.envs, dtype=torch.bool)
        for field in fields:
            combined |= rows.rows[(field,)].reshape(rows.steps, rows.envs, -1).ne(0).any(dim=2)
        ends = combined.numpy()
    end_field = "|".join(fields) or None
    return RLinfTrajectory(trajectory_id, rows.steps, rows.envs, leaves, end_field, ends)

"""A summary of an RLinf buffer directory (``metadata.json`` + ``trajectory_index.json``),
read from its two JSON files and directory entries only: no trajectory file is opened, so a
``pkl`` directory is summarized without unpickling anything.

What the directory holds (trajectories, rows, format, seed, shapes, weights ids, bytes, files
the index names that are absent, trajectory files it does not name), and what a buffer loading
it with RLinf's defaults would sample from (the newest ``sample_window_size`` = 100) and cache
(the newest ``cache_size`` = 5): the window and the cache are options of the buffer that loads
a directory, not saved in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bufcore.buffers.disk import DEFAULT_CACHE_SIZE, DEFAULT_WINDOW
from bufcore.persist.rlinf.directory import open_directory, orphans
from bufcore.persist.rlinf.layout import INDEX, METADATA, IndexEntry

_SHOWN_WEIGHTS = 8


@dataclass(frozen=True)
class IdSpan:
    """Trajectories ``first`` to ``last`` of the id list (``count`` of them, ``rows`` rows)."""

    first: int
    last: int
    count: int
    rows: int


@dataclass(frozen=True)
class RLinfSummary:
    """An RLinf buffer directory at a glance.

    Attributes:
        path: The directory.
        trajectory_format: ``"pt"`` or ``"pkl"``.
        trajectories: Trajectories the index names.
        samples: Their rows (``T * B`` each).
        seed: The seed metadata.json records.
        trajectory_counter: The next id, as metadata.json says.
        metadata_counts: ``(size, total_samples)`` as metadata.json says (a crash can leave
            them apart from the index, which loads trust).
        steps: ``(min, max)`` of ``T`` over the trajectories (None when there are none).
        envs: ``(min, max)`` of ``B``.
        weights_ids: The distinct ``model_weights_id`` values, in order of first use (the
            first eight).
        weights_count: How many distinct ones there are.
        absent: Indexed trajectories whose file is not there (loads leave them out).
        orphans: Trajectory files (and dead writers' staging files) the index does not name.
        file_bytes: Bytes of the indexed files that are there.
        window: The trajectories a buffer with RLinf's default window samples from.
        cache: The trajectories such a buffer caches after loading.
        window_size: That default window (100).
        cache_size: That default cache (5).
    """

    path: Path
    trajectory_format: str
    trajectories: int
    samples: int
    seed: int | None
    trajectory_counter: int
    metadata_counts: tuple[int, int]
    steps: tuple[int, int] | None
    envs: tuple[int, int] | None
    weights_ids: tuple[str, ...]
    weights_count: int
    absent: int
    orphans: int
    file_bytes: int
    window: IdSpan | None
    cache: IdSpan | None
    window_size: int = DEFAULT_WINDOW
    cache_size: int = DEFAULT_CACHE_SIZE


def is_rlinf_directory(path: Path) -> bool:
    """Whether ``path`` holds ``metadata.json`` and ``trajectory_index.json``."""
    return all((path / name).is_symlink() or (path / name).exists() for name in (METADATA, INDEX))


def summarize_rlinf_directory(path: Path) -> RLinfSummary:
    """Summarize the RLinf buffer directory ``path`` (see the module docstring).

    Raises:
        FileNotFoundError: either JSON file is missing.
        CorruptCheckpointError: either JSON file is malformed, a link or too large, or an
            indexed file is a link or not a regular file.
    """
    saved = open_directory(path)
    entries = [e for e in saved.entries if e.trajectory_id not in saved.absent]
    weights = list(dict.fromkeys(e.model_weights_id for e in saved.entries))
    fmt = saved.metadata.trajectory_format
    steps = [e.shape[0] for e in saved.entries]
    envs = [e.shape[1] for e in saved.entries]
    return RLinfSummary(
        path=path,
        trajectory_format=fmt,
        trajectories=len(saved.entries),
        samples=sum(e.num_samples for e in saved.entries),
        seed=saved.metadata.seed,
        trajectory_counter=saved.metadata.trajectory_counter,
        metadata_counts=(saved.metadata.size, saved.metadata.total_samples),
        steps=(min(steps), max(steps)) if steps else None,
        envs=(min(envs), max(envs)) if envs else None,
        weights_ids=tuple(weights[:_SHOWN_WEIGHTS]),
        weights_count=len(weights),
        absent=len(saved.absent),
        orphans=len(orphans(path, [e.file_name(fmt) for e in saved.entries])),
        file_bytes=saved.file_bytes,
        window=_span(entries[-DEFAULT_WINDOW:]),
        cache=_span(entries[-DEFAULT_CACHE_SIZE:]),
    )


def _span(entries: list[IndexEntry]) -> IdSpan | None:
    if not entries:
        return None
    return IdSpan(
        entries[0].trajectory_id, entries[-1].trajectory_id, len(entries),
        sum(e.num_samples for e in entries),
    )

"""``TrajectoryReplayBuffer``: RLinf's disk-backed trajectory buffer (REFERENCE §9), without its
bugs (DESIGN §2 decision 8).

Composition (DESIGN §1): a :class:`~bufcore.persist.rlinf.store.TrajectoryStore` (the
directory, written by one FIFO thread, with ``auto_save=True``), a
:class:`~bufcore.storage.trajectory_cache.TrajectoryCache` (flattened trajectories in memory)
and a :class:`~bufcore.sampling.chunk_window.SlidingWindowSampler` (which rows a sample
reads). In memory only the index lives, one small :class:`IndexEntry` per trajectory, plus the
cache: memory is O(index + cache) whatever the number of trajectories on disk.

Two modes, as RLinf's:

- ``auto_save=True``: every trajectory is written to ``auto_save_path``; the cache holds the
  newest ``cache_size`` (``enable_cache=False`` or ``cache_size=0``: none), and rows of other
  trajectories are read from disk when a sample needs them.
- ``auto_save=False``: nothing is written until :meth:`save_checkpoint`; the buffer holds the
  newest ``sample_window_size`` trajectories in memory (all of them for 0) and forgets older
  ones entirely, so its index, its counts and its checkpoints always describe the same
  trajectories (RLinf keeps counting and indexing the dropped ones, whose files its
  checkpoints then lack). ``enable_cache`` and ``cache_size`` do not apply.

Fixed RLinf bugs (REFERENCE §9.5-9.7): ``enable_cache=False``, ``sample_window_size=0``,
``seed=None`` and ``clear_cache()`` followed by more adds all work; ``sample(n)`` returns
exactly ``n`` rows; a checkpoint holds every trajectory; files are written before the index
that names them, by one FIFO thread; a read of a trajectory whose write is queued waits for
it; a failed background write is raised by the next ``flush()``, ``add_trajectories()``,
``close()`` or read that needs it; ids stay unique across ranks after a sharded load and
after ``clear()``; the ``pkl`` format needs ``allow_pickle=True``; the global numpy seed is
never touched.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import torch

from bufcore.checks import check_bool, check_generator, check_int, check_path, check_seed
from bufcore.errors import CorruptCheckpointError
from bufcore.persist.rlinf.directory import (
    SavedDirectory,
    holds_buffer,
    link_or_copy,
    open_directory,
    same_directory,
    save_directory,
)
from bufcore.persist.rlinf.layout import (
    METADATA,
    Format,
    IndexEntry,
    Metadata,
    check_format,
    trajectory_file_name,
)
from bufcore.persist.rlinf.payload import check_pickle_allowed, read_trajectory, write_fsynced
from bufcore.persist.rlinf.store import TrajectoryStore
from bufcore.rng import make_generator, undone_on_error
from bufcore.sampling.chunk_window import (
    ChunkDraw,
    ChunkIndex,
    ChunkWindow,
    SlidingWindowSampler,
    newest,
)
from bufcore.storage.trajectories import (
    Trajectory,
    TrajectoryRows,
    check_spec,
    compact,
    from_payload,
    from_rows,
    payload,
    trajectory_rows,
)
from bufcore.storage.trajectory_cache import TrajectoryCache
from bufcore.tree import KeyPath, LeafSpec, Spec, unflatten

# RLinf's defaults, also what ``bufcore inspect`` assumes for a directory's buffer.
DEFAULT_CACHE_SIZE = 5
DEFAULT_WINDOW = 100
_CPU = torch.device("cpu")


class TrajectoryReplayBuffer:
    """RLinf's trajectory replay buffer: ``[T, B, ...]`` trajectories in, single rows out.

    Positional arguments, their order and defaults are RLinf's.

    Args:
        seed: Seed of the buffer's own generator; None draws one, which :attr:`seed` and the
            saved metadata record.
        enable_cache: Keep the newest trajectories' rows in memory (``auto_save=True`` only).
        cache_size: How many (``auto_save=True`` only; 0 means no cache).
        sample_window_size: Sample from the newest this many trajectories; 0: all.
        auto_save: Write every trajectory to ``auto_save_path`` as it is added.
        auto_save_path: The directory (created if missing); required with ``auto_save``.
        trajectory_format: ``"pt"`` (``torch.save``, read back with ``weights_only=True``)
            or ``"pkl"`` (pickle; needs ``allow_pickle``).
        allow_pickle: Allow the ``pkl`` format, written or loaded. Reading a pickle file runs
            any code it holds: pass True only for files you trust.

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: a count below 0, an unknown format, ``pkl`` without ``allow_pickle``,
            or ``auto_save`` without a path.
    """

    def __init__(
        self,
        seed: int | None = 1234,
        enable_cache: bool = True,
        cache_size: int = DEFAULT_CACHE_SIZE,
        sample_window_size: int = DEFAULT_WINDOW,
        auto_save: bool = False,
        auto_save_path: str | os.PathLike[str] = "",
        trajectory_format: str = "pt",
        *,
        allow_pickle: bool = False,
    ) -> None:
        seed = check_seed(seed)
        self._enable_cache = check_bool(enable_cache, "enable_cache")
        self._cache_size = check_int(cache_size, "cache_size", minimum=0)
        self._sampler = SlidingWindowSampler(sample_window_size)
        self._auto_save = check_bool(auto_save, "auto_save")
        self._allow_pickle = check_bool(allow_pickle, "allow_pickle")
        fmt = check_format(trajectory_format)
        check_pickle_allowed(fmt, self._allow_pickle, "trajectory_format")
        self._format: Format = fmt
        self._store: TrajectoryStore | None = None
        self._foreign = False
        if self._auto_save:
            if isinstance(auto_save_path, str) and not auto_save_path:
                raise ValueError("auto_save_path: required when auto_save is enabled")
            directory = check_path(auto_save_path, "auto_save_path")
            self._foreign = holds_buffer(directory)
            self._store = TrajectoryStore(directory, fmt, allow_pickle=self._allow_pickle)
        self._cache = self._new_cache()
        self._generator = make_generator(torch.device("cpu"), seed)
        self.seed: int = self._generator.initial_seed() if seed is None else seed
        # The index: every entry by id, and in id-list order (oldest first). The list is only
        # appended to; any other change makes a new list, so that an index queued for writing
        # is the list as it was plus a length (O(1) per add, not a copy of the index).
        self._entries: dict[int, IndexEntry] = {}
        self._order: list[IndexEntry] = []
        self._total_samples = 0
        self._next_id = 0
        self._id_stride = 1
        self._version = 0  # bumped by every change of the index or the cache
        self._spec: Spec | None = None
        self._slots: tuple[int, torch.Tensor] | None = None

    # ------------------------------------------------------------------ RLinf's surface
    def __len__(self) -> int:
        """Trajectories held."""
        return len(self._entries)

    @property
    def size(self) -> int:
        """Trajectories held (RLinf's attribute)."""
        return len(self._entries)

    @property
    def total_samples(self) -> int:
        """Rows over every trajectory held."""
        return self._total_samples

    def is_ready(self, min_size: int) -> bool:
        """Whether at least ``min_size`` trajectories (not rows) are held."""
        return len(self) >= check_int(min_size, "min_size")

    async def is_ready_async(self, min_size: int) -> bool:
        """:meth:`is_ready` for asynchronous code."""
        return self.is_ready(min_size)

    def get_stats(self) -> dict[str, int]:
        """``num_trajectories``, ``total_samples`` and ``cache_size`` (trajectories cached)."""
        return {
            "num_trajectories": len(self),
            "total_samples": self._total_samples,
            "cache_size": 0 if self._cache is None else len(self._cache),
        }

    @property
    def trajectory_format(self) -> Format:
        """The format trajectory files are written in (a load takes the directory's)."""
        return self._format

    @property
    def enable_cache(self) -> bool:
        """Whether a cache was asked for (it exists with ``auto_save`` and ``cache_size > 0``)."""
        return self._enable_cache

    @property
    def cache_size(self) -> int:
        """Trajectories the cache holds at most, with ``auto_save``."""
        return self._cache_size

    @property
    def sample_window_size(self) -> int:
        """Samples come from the newest this many trajectories (0: all)."""
        return self._sampler.window_size

    @property
    def auto_save(self) -> bool:
        """Whether every trajectory is written to :attr:`auto_save_path` as it is added."""
        return self._auto_save

    @property
    def auto_save_path(self) -> Path | None:
        """The directory trajectories are written to (None without ``auto_save``)."""
        return None if self._store is None else self._store.directory

    @property
    def spec(self) -> Mapping[KeyPath, LeafSpec] | None:
        """The rows' leaves: key path (``("actions",)``, ``("curr_obs", "rgb")``) -> trailing
        shape and dtype of one row (a read-only mapping, in sample order), fixed by the first
        trajectory added or loaded; None before. Every later trajectory must match it."""
        return None if self._spec is None else MappingProxyType(self._spec)

    def __repr__(self) -> str:
        where = f"auto_save_path={str(self.auto_save_path)!r}" if self._store else "in memory"
        return (
            f"TrajectoryReplayBuffer(trajectories={len(self)}, samples={self._total_samples}, "
            f"window={self.sample_window_size}, cached={self.get_stats()['cache_size']}, {where})"
        )

    # ------------------------------------------------------------------ adding
    def add_trajectories(self, trajectories: Sequence[Trajectory]) -> None:
        """Add trajectories (each ``[T, B, ...]``) in order; each gets the next id.

        A trajectory with neither ``prev_logprobs`` nor ``rewards`` is skipped (RLinf's rule).
        All are checked before any is added (see
        :func:`bufcore.storage.trajectories.trajectory_rows`); every one must have the
        buffer's :attr:`spec`. With ``auto_save`` the files are written in the background;
        this waits only while the queued writes hold more than 256 MiB.

        Raises:
            TypeError: not a list of :class:`Trajectory`, or a field of the wrong kind.
            ValueError: bad shapes, leaves that differ from :attr:`spec`, or a
                ``model_weights_id`` that makes no file name.
            FileExistsError: ``auto_save_path`` held a buffer directory this buffer did not
                load (it is never written over).
            OSError: (or any error) a background write failed since the last call; the
                trajectories it did not write left the buffer (the error's note names them).
        """
        self._raise_failure()
        if isinstance(trajectories, Trajectory | str | bytes) or not isinstance(
            trajectories, Sequence
        ):
            raise TypeError(
                f"trajectories: expected a list of Trajectory, got {type(trajectories).__name__}"
            )
        checked: list[tuple[Trajectory, TrajectoryRows]] = []
        spec = self._spec
        for number, trajectory in enumerate(trajectories):
            where = f"trajectories[{number}]"
            rows = trajectory_rows(trajectory, where)
            if rows is None:
                continue
            trajectory_file_name(2**63, trajectory.model_weights_id, self._format)  # longest id
            if spec is None:
                spec = rows.spec
            else:
                check_spec(rows, spec, where)
            checked.append((trajectory, rows))
        if not checked:
            return
        self._check_owned()
        if self._cache is not None:
            self._cache.reserve(max(rows.count for _, rows in checked), len(checked),
                                checked[0][1].rows)
        self._spec = spec
        store = self._store
        for trajectory, rows in checked:
            entry = IndexEntry(
                trajectory_id=self._next_id,
                num_samples=rows.count,
                max_episode_length=int(trajectory.max_episode_length),
                shape=rows.shape,
                model_weights_id=trajectory.model_weights_id,
            )
            if store is not None:
                # Serialised by put before this returns: later changes by the caller miss it.
                store.put(entry, payload(compact(trajectory)))
            self._remember(entry, rows.rows)
            self._next_id += self._id_stride
        if store is not None:
            self._publish(store)

    def _remember(self, entry: IndexEntry, rows: Mapping[KeyPath, torch.Tensor]) -> None:
        """Index ``entry`` and cache its rows; in memory-only mode the trajectory the cache
        evicts leaves the buffer."""
        self._entries[entry.trajectory_id] = entry
        self._order.append(entry)
        self._total_samples += entry.num_samples
        self._version += 1
        if self._cache is not None:
            evicted = self._cache.put(entry.trajectory_id, rows, entry.num_samples)
            if evicted is not None and self._store is None:
                self._forget({evicted})

    def _forget(self, ids: set[int]) -> None:
        """Drop ``ids`` from the index (and the cache)."""
        for trajectory_id in ids:
            entry = self._entries.pop(trajectory_id, None)
            if entry is not None:
                self._total_samples -= entry.num_samples
            if self._cache is not None:
                self._cache.discard(trajectory_id)
        self._order = [e for e in self._order if e.trajectory_id not in ids]
        self._version += 1

    def _publish(self, store: TrajectoryStore) -> None:
        """Queue the index as it is now, and the metadata, after the files queued so far."""
        store.publish(self._order, len(self._order), self._metadata())

    # ------------------------------------------------------------------ sampling
    def sample(
        self, num_chunks: int, *, generator: torch.Generator | None = None
    ) -> dict[str, Any]:
        """``num_chunks`` rows drawn uniformly, with replacement, from the rows of the newest
        ``sample_window_size`` trajectories: a nested dict of ``[num_chunks, ...]`` tensors
        keyed as :attr:`spec` (on the CPU): the rows :meth:`sample_index` names.

        Args:
            num_chunks: Rows to draw.
            generator: Draw from this CPU generator instead of the buffer's own, whose stream
                then stays where it was (the dashboard's Sampling lab reproduces a draw so).

        Raises:
            RuntimeError: the buffer is empty (RLinf's message).
            TypeError: ``num_chunks`` is not an int, or ``generator`` no ``torch.Generator``.
            ValueError: ``num_chunks < 1``, or ``generator`` not on the CPU.
            CorruptCheckpointError: a trajectory file read for it is missing or damaged.
            MemoryError: the output cannot be allocated (the generator is set back).
        """
        count, chosen, window = self._draw_setup(num_chunks, generator)
        spec = cast(Spec, self._spec)  # rows held, so a spec is known
        with undone_on_error(chosen, argument="num_chunks"):
            draw = self._sampler.draw(window, count, chosen)
            return unflatten(self._gather(window, draw, spec))

    def sample_index(
        self, num_chunks: int, *, generator: torch.Generator | None = None
    ) -> ChunkIndex:
        """Which trajectory and row each of :meth:`sample`'s rows comes from, drawn as it
        draws (the generator advances as :meth:`sample` advances it); no file is read.

        Raises:
            RuntimeError, TypeError, ValueError: as :meth:`sample`.
        """
        count, chosen, window = self._draw_setup(num_chunks, generator)
        return ChunkIndex.of(window, self._sampler.draw(window, count, chosen))

    def _draw_setup(
        self, num_chunks: int, generator: torch.Generator | None
    ) -> tuple[int, torch.Generator, ChunkWindow]:
        """The checked count, the generator a draw uses and the window it draws from.

        Raises:
            RuntimeError, TypeError, ValueError: as :meth:`sample`.
        """
        if self._total_samples == 0 or self._spec is None:
            raise RuntimeError("Cannot sample from an empty buffer.")
        count = check_int(num_chunks, "num_chunks", minimum=1)
        chosen = self._generator if generator is None else check_generator(generator, _CPU)
        return count, chosen, self._sampler.window(self._version, self._newest)

    def sample_chunks(self, num_chunks: int) -> dict[str, Any]:
        """:meth:`sample` (RLinf's name for it)."""
        return self.sample(num_chunks)

    def _newest(self, count: int) -> list[tuple[int, int]]:
        """The newest ``count`` trajectories (all for 0) as ``(id, rows)``, oldest first."""
        return [(e.trajectory_id, e.num_samples) for e in newest(self._order, count)]

    def _window_slots(self, window: ChunkWindow) -> torch.Tensor:
        """The cache slot of each trajectory of ``window`` (-1: not cached)."""
        if self._slots is None or self._slots[0] != self._version:
            cached = {} if self._cache is None else self._cache.cache
            slots = torch.tensor([cached.get(i, -1) for i in window.ids], dtype=torch.int64)
            self._slots = (self._version, slots)
        return self._slots[1]

    def _gather(
        self, window: ChunkWindow, draw: ChunkDraw, spec: Spec
    ) -> dict[KeyPath, torch.Tensor]:
        """The drawn rows, from the cache where it holds them and from disk otherwise: each
        trajectory read once per call, its rows taken and the rest dropped before the next is
        read (RLinf reads every missing trajectory and concatenates them all first, so one
        sample could hold the whole window in memory)."""
        slot = self._window_slots(window)[draw.position]
        hit = slot >= 0
        cache = self._cache
        if cache is not None and bool(hit.all()):
            rows = slot * cache.slot_length + draw.local
            return {path: cache.buffers[path].index_select(0, rows) for path in spec}
        count = draw.position.numel()
        out = {p: torch.empty((count, *leaf.shape), dtype=leaf.dtype) for p, leaf in spec.items()}
        if cache is not None and bool(hit.any()):
            where = hit.nonzero().squeeze(1)
            rows = slot[where] * cache.slot_length + draw.local[where]
            for path, leaf in out.items():
                leaf.index_copy_(0, where, cache.buffers[path].index_select(0, rows))
        missing = (~hit).nonzero().squeeze(1)
        order = torch.argsort(draw.position[missing], stable=True)
        missing = missing[order]  # output rows grouped by trajectory
        positions, counts = torch.unique_consecutive(draw.position[missing], return_counts=True)
        groups = torch.split(missing, counts.tolist())
        for position, where in zip(positions.tolist(), groups, strict=True):
            read = self._rows_of(self._entries[window.ids[position]])
            local = draw.local[where]
            for path, leaf in out.items():
                leaf.index_copy_(0, where, read[path].index_select(0, local))
        return out

    # ------------------------------------------------------------------ reading files
    def _rows_of(self, entry: IndexEntry) -> dict[KeyPath, torch.Tensor]:
        """The rows of a trajectory held: cached, or read from ``auto_save_path`` (after its
        queued write, if any)."""
        cached = None if self._cache is None else self._cache.get(entry.trajectory_id)
        if cached is not None:
            return cached
        # Without auto_save every trajectory held is cached, so there is a store here.
        store = cast(TrajectoryStore, self._store)
        store.wait(entry)
        self._raise_failure()  # its write may have failed
        data = store.read(entry)
        where = store.directory / entry.file_name(self._format)
        return checked_rows(entry, data, where, self._spec).rows

    # ------------------------------------------------------------------ writing and failures
    def flush(self) -> None:
        """Wait until every queued write has reached the disk.

        Raises:
            OSError: (or any error) a background write failed; see :meth:`add_trajectories`.
        """
        if self._store is not None:
            self._store.flush()
        self._raise_failure()

    def close(self, wait: bool = True) -> None:
        """Let the writer finish what is queued and stop its thread (a later write starts it
        again); with ``wait``, block until then and raise a background failure.

        Raises:
            OSError: (or any error) with ``wait``, a background write failed.
        """
        wait = check_bool(wait, "wait")
        if self._store is not None:
            self._store.close(wait=wait)
        if wait:
            self._raise_failure()

    def _raise_failure(self) -> None:
        """Raise the first background failure since the last call, after the trajectories
        whose files it left unwritten have left the buffer (and a corrected index is queued)."""
        store = self._store
        failure = None if store is None else store.take_failure()
        if store is None or failure is None:
            return
        error, lost = failure
        self._forget(set(lost))
        self._publish(store)
        add_note = getattr(error, "add_note", None)  # Python 3.11+
        if lost and add_note is not None:
            add_note(f"bufcore: trajectories {sorted(lost)} were not written and left the buffer")
        raise error

    def _check_owned(self) -> None:
        """Raises:
        FileExistsError: ``auto_save_path`` held another buffer's directory.
        """
        if self._foreign:
            path = self.auto_save_path
            raise FileExistsError(
                f"auto_save_path: {path} already holds a buffer directory that this buffer did "
                f"not load; load it with load_checkpoint({str(path)!r}) to continue it, or "
                "choose another directory (it is never written over)"
            )

    def _metadata(self) -> Metadata:
        return Metadata(
            trajectory_format=self._format,
            size=len(self._entries),
            total_samples=self._total_samples,
            trajectory_counter=self._next_id,
            seed=self.seed,
        )

    # ------------------------------------------------------------------ clearing
    def clear(self) -> None:
        """Forget every trajectory; with ``auto_save`` the directory's index becomes empty and
        the files go. Ids keep counting (no file name is reused); the spec stays.

        Raises:
            FileExistsError: ``auto_save_path`` held another buffer's directory.
            OSError: (or any error) a background write failed before.
        """
        self._raise_failure()
        self._check_owned()
        names = [entry.file_name(self._format) for entry in self._order]
        self._entries, self._order = {}, []
        self._total_samples = 0
        self._version += 1
        if self._cache is not None:
            self._cache.clear()
        if self._store is not None:
            self._publish(self._store)
            self._store.remove(names)

    def clear_cache(self) -> None:
        """Empty the cache; later samples read those trajectories from disk and later adds
        fill it again. Without ``auto_save`` the cache is where the trajectories live, so this
        is :meth:`clear`."""
        if self._store is None:
            self.clear()
            return
        if self._cache is not None:
            self._cache.clear()
        self._version += 1

    def remove_orphan_files(self) -> list[Path]:
        """Delete what a crash left in ``auto_save_path``: trajectory files no index entry
        names (a file written just before the index that would have named it) and staging
        files of writers that are gone. Loads ignore them; this reclaims their space.

        Returns:
            The paths removed.

        Raises:
            ValueError: the buffer has no ``auto_save_path``.
            OSError: (or any error) a background write failed before.
        """
        if self._store is None:
            raise ValueError("remove_orphan_files: the buffer has no auto_save_path")
        self.flush()
        found = self._store.orphans([e.file_name(self._format) for e in self._order])
        self._store.remove([path.name for path in found])
        self._store.flush()
        self._raise_failure()
        return found

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, save_path: str | os.PathLike[str]) -> None:
        """Save every trajectory held, the index and the metadata to ``save_path``, in RLinf's
        layout, published atomically (a crash leaves the previous directory there or the new
        one). Files of ``auto_save_path`` are hard-linked (copied across file systems); in
        memory-only mode each trajectory is written from memory. Saving to ``auto_save_path``
        itself only waits for its writes.

        Raises:
            TypeError: ``save_path`` is not a path.
            FileExistsError: ``save_path`` exists and holds anything but a buffer directory.
            OSError: (or any error) a background write failed before.
        """
        path = check_path(save_path, "save_path")
        self.flush()
        entries = tuple(self._order)
        metadata = self._metadata()
        store, fmt = self._store, self._format
        if store is not None:
            if same_directory(path, store.directory):
                self._check_owned()
                self._publish(store)
                self.flush()
                return
            source = store.directory
            save_directory(
                path, entries, metadata,
                lambda entry, target: link_or_copy(source / entry.file_name(fmt), target),
            )
            return

        def write(entry: IndexEntry, target: Path) -> None:
            trajectory = from_rows(
                self._rows_of(entry), entry.shape[0], entry.shape[1],
                max_episode_length=entry.max_episode_length,
                model_weights_id=entry.model_weights_id,
            )
            write_fsynced(target, payload(trajectory), fmt)

        save_directory(path, entries, metadata, write)

    def load_checkpoint(
        self,
        load_path: str | os.PathLike[str],
        is_distributed: bool = False,
        local_rank: int = 0,
        world_size: int = 1,
    ) -> None:
        """Replace this buffer's trajectories by those of the directory ``load_path`` (RLinf's
        or bufcore's layout), or by this rank's contiguous share of them.

        The index is trusted over metadata.json's counts; trajectories it names whose files
        are absent (RLinf's checkpoints hold only the cached or last sampled ones) are left
        out with a ``RuntimeWarning``. The seed and format come from the
        metadata (the sample stream restarts from that seed, as RLinf's does). The cache (or,
        without ``auto_save``, the buffer's memory) is filled with the newest trajectories;
        with ``auto_save`` into another directory, every loaded file is linked (or copied)
        into ``auto_save_path`` in the background, so that directory stays whole.

        Sharded (``is_distributed``): rank ``r`` of ``W`` takes ids ``[start, end)`` of the
        id list with ``q, m = divmod(N, W)``, ``start = r*q + min(r, m)``, ``end = start + q
        + (r < m)``. New ids start past the largest id of the whole directory, offset by the
        rank and strided by ``W`` (rank ``r`` uses ``G + r, G + r + W, ...``), so no two
        ranks ever give out the same id.

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``world_size < 1`` or ``local_rank`` outside ``[0, world_size)``;
                a sharded load into the buffer's own ``auto_save_path``; a ``pkl`` directory
                without ``allow_pickle``.
            FileNotFoundError: no such directory, or it lacks either JSON file.
            CorruptCheckpointError: a file is malformed, missing, a link, truncated, holds
                a pickle payload, or disagrees with the index. Nothing changed then.
            OSError: (or any error) a background write failed before.
        """
        path = check_path(load_path, "load_path")
        sharded = check_bool(is_distributed, "is_distributed")
        rank = check_int(local_rank, "local_rank")
        ranks = check_int(world_size, "world_size", minimum=1)
        if not 0 <= rank < ranks:
            raise ValueError(f"local_rank ({rank}) must be in range [0, {ranks})")
        store = self._store
        in_place = store is not None and same_directory(path, store.directory)
        if sharded and in_place:
            raise ValueError(
                f"load_path: a sharded load from auto_save_path itself ({path}) would drop the "
                "other ranks' trajectories from it; give each rank its own auto_save_path"
            )
        self.flush()
        saved = open_directory(path)
        check_pickle_allowed(
            saved.metadata.trajectory_format, self._allow_pickle, str(path / METADATA)
        )
        entries = saved.entries
        next_id = max([saved.metadata.trajectory_counter] + [e.trajectory_id + 1 for e in entries])
        if sharded:
            share, extra = divmod(len(entries), ranks)
            start = rank * share + min(rank, extra)
            entries = entries[start : start + share + (rank < extra)]
            next_id += rank
        if saved.absent:
            kept = [e for e in entries if e.trajectory_id not in saved.absent]
            if len(kept) < len(entries):
                warnings.warn(
                    f"{path}: the index names {len(entries) - len(kept)} trajectories whose files "
                    "are not there (RLinf's checkpoints hold files only for cached or last "
                    "sampled trajectories); they are left out",
                    RuntimeWarning,
                    stacklevel=2,
                )
            entries = kept
        if store is None:
            window = self.sample_window_size
            entries = entries[-window:] if window else entries
        cache, spec = self._loaded_cache(saved, entries)
        # Everything is read and checked: only now does the buffer change.
        self._format = saved.metadata.trajectory_format
        self._entries = {e.trajectory_id: e for e in entries}
        self._order = list(entries)
        self._total_samples = sum(e.num_samples for e in entries)
        self._next_id, self._id_stride = next_id, ranks if sharded else 1
        self._cache, self._spec = cache, spec
        self._version += 1
        self._foreign = False
        seed = saved.metadata.seed
        self._generator = make_generator(torch.device("cpu"), seed)
        self.seed = self._generator.initial_seed() if seed is None else seed
        if store is not None:
            store.trajectory_format = self._format
            if not in_place:  # in place, the directory already says all this
                for entry in entries:
                    store.adopt(path, entry)
                self._publish(store)

    def _loaded_cache(
        self, saved: SavedDirectory, entries: Sequence[IndexEntry]
    ) -> tuple[TrajectoryCache | None, Spec | None]:
        """A new cache holding the newest of ``entries`` (read from ``saved``), and their spec
        (the newest is read even without a cache, so that the spec is known)."""
        cache = self._new_cache()
        held = 0 if cache is None else cache.max_size or len(entries)
        chosen = list(entries[-max(held, 1):]) if entries else []
        fmt = saved.metadata.trajectory_format
        spec: Spec | None = None
        for entry in chosen:
            name = entry.file_name(fmt)
            data = read_trajectory(saved.path, name, fmt, allow_pickle=self._allow_pickle)
            rows = checked_rows(entry, data, saved.path / name, spec)
            spec = spec or rows.spec
            if cache is not None:
                cache.put(entry.trajectory_id, rows.rows, rows.count)
        return cache, spec

    def _new_cache(self) -> TrajectoryCache | None:
        if self._store is None:
            window = self.sample_window_size
            return TrajectoryCache(window or None)
        if self._enable_cache and self._cache_size > 0:
            return TrajectoryCache(self._cache_size)
        return None


def checked_rows(
    entry: IndexEntry, data: Any, where: Path, spec: Spec | None
) -> TrajectoryRows:
    """The rows of the trajectory a file (``where``) holds, checked against its index entry
    and ``spec`` (the loads' check, and :func:`bufcore.runs.rlinf_view.read_rlinf_trajectory`'s).

    Raises:
        CorruptCheckpointError: the content is no trajectory, or it disagrees with the index
            entry (shape, row count) or with ``spec``.
    """
    try:
        rows = trajectory_rows(from_payload(data, entry.max_episode_length), "file")
        if rows is None:
            raise ValueError("holds neither prev_logprobs nor rewards")
        if rows.shape != entry.shape:
            raise ValueError(
                f"holds a trajectory of shape {list(rows.shape)}; the index says "
                f"{list(entry.shape)}"
            )
        if spec is not None:
            check_spec(rows, spec, "file")
    except (TypeError, ValueError) as err:
        raise CorruptCheckpointError(where, str(err)) from err
    return rows

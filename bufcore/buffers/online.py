"""``TrajectoryDictBufferMultiDim``: BFM-Zero's online buffer, sampled as windows of one env.

A composition: a FIFO ring of ``[time]`` or ``[time, env]`` rows written as
:class:`~bufcore.buffers.transition.DictBuffer` writes them, and an
:class:`~bufcore.sampling.samplers.OnlineWindows` sampler that follows the episode boundaries as
rows are written, so a one-step ``extend`` never rescans ``[capacity, env]`` (REFERENCE §4).
Windows and their ``next`` rows are described in :mod:`bufcore.buffers.windowed`.

BFM-Zero's online layout (REFERENCE §4.2): row ``t`` holds ``obs_t``, the action taken there, the
reward returned by that step, and the ``terminated``/``truncated`` flags produced by the
*previous* step. So the row with ``truncated=True`` is the final observation of its episode, and
with ``end_key="truncated"`` its trajectory ends there: ``(t-1 -> final)`` is sampled and
``(final -> reset)`` never is.

Deliberate differences from the reference (DESIGN §2): every valid window can be drawn
(``L - seq_length - offset + 1`` starts for a trajectory of length ``L``; the reference never
draws the last one); ``weighting="window"`` draws every valid window equally likely; end keys
may be tuples at any depth; a single env (``E = 1``) keeps ``[batch, ...]`` outputs;
``get_full_buffer`` is :class:`DictBuffer`'s (chronological rows), not the reference's
per-trajectory tensordict.

Counting: ``len(buffer)`` is time rows (like ``capacity``); ``size()`` is transitions, time rows
times envs.

Prioritized windows: built with ``sampler=PrioritizedSampler(...)``, the buffer keeps following
the boundaries with its :class:`~bufcore.sampling.samplers.OnlineWindows` and draws through
the prioritized sampler instead: every valid window weighted by its rows' priorities (see
:mod:`bufcore.sampling.prioritized`), with importance weights in the batch and
:meth:`TrajectoryDictBufferMultiDim.update_priority` for new per-row priorities.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch

from bufcore.buffers.loading import SavedState, check_backing
from bufcore.buffers.prioritized import check_reserved_keys, update_priority
from bufcore.buffers.transition import (
    chronological_rows,
    hdf5_rows,
    nested_views,
    warn_unsaveable_keys,
)
from bufcore.buffers.windowed import (
    DEFAULT_END_KEY,
    DEFAULT_KEYS,
    WindowedBuffer,
    WindowOptions,
    check_end_leaf,
    end_matrix,
)
from bufcore.checks import check_device, check_int, check_seed, check_separator
from bufcore.distributed import check_rank
from bufcore.errors import KeyPathError, StateError
from bufcore.fields import Field
from bufcore.persist.backing import BackingFile
from bufcore.rng import make_generator
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import OnlineWindows
from bufcore.sampling.windows import TrajectoryTable, Weighting, check_weighting
from bufcore.storage.batches import RowSource
from bufcore.storage.ring import RingStorage
from bufcore.tree import Key, format_key_path


class TrajectoryDictBufferMultiDim(WindowedBuffer):
    """Online FIFO buffer sampled as windows of consecutive rows of one env.

    Rows are ``[time]`` (``n_dim=1``) or ``[time, env]`` (``n_dim=2``, BFM-Zero's online layout:
    every leaf of an ``extend`` is ``[n, E, ...]``, usually ``n = 1``). ``capacity`` counts time
    rows. The end flags of a row are the ``end_key`` leaf (``[n]``/``[n, 1]`` or
    ``[n, E]``/``[n, E, 1]``; nonzero = the row ends its trajectory). The newest row always ends a
    trajectory and, at capacity, the oldest surviving row starts one.
    The first ``extend`` fixes the keys; it raises ``KeyError`` (and writes nothing) when an
    output key matches none of them, since such a buffer could never be sampled.

    Args:
        capacity: Time rows kept.
        device: Where rows live and samples are made.
        nested_key_separator: Joins nested keys into dataset names in ``buffer.hdf5``.
        n_dim: Leading batch axes of every leaf: 1 for ``[time]`` rows, 2 for ``[time, env]``.
        seq_length: Default window length.
        output_key_t: Keys (str or tuple paths) returned for the window rows.
        output_key_tp1: Keys returned under ``"next"`` for the row after each window row; empty
            for none (windows then need ``seq_length`` rows instead of ``seq_length + 1``).
        end_key: The end-flag leaf (str or tuple path).
        weighting: ``"trajectory"`` (the reference's) or ``"window"`` (see
            :mod:`bufcore.sampling.windows`).
        seed: Seed of the buffer's generator; ``None`` for a nondeterministic one.
        rank: Whose sample stream of ``seed`` (:func:`bufcore.rng.stream_seed`): ranks sharing
            a seed draw different batches, rank 0 the seed's own stream. ``None`` for this
            process's rank in the default process group (0 without one).
        sampler: ``None`` for the uniform window sampler (with ``weighting``), or a
            :class:`~bufcore.sampling.prioritized.PrioritizedSampler` drawing every valid
            window by its rows' priorities (its state is saved with the buffer's).
        backing: A :class:`~bufcore.persist.backing.BackingFile` the rows live in (BFM-Zero's
            5.12 M-transition online buffer on a machine with less memory), or ``None`` for
            memory; see :class:`bufcore.DictBuffer`.

    Raises:
        ValueError: ``n_dim`` not 1 or 2, ``seq_length`` or ``capacity`` below 1, an unknown
            weighting or device, a negative ``rank``, or ``backing`` with a device other than
            the CPU, or closed.
        TypeError: malformed keys, non-int sizes, seed or rank, a ``sampler`` that is not a
            ``PrioritizedSampler``, or ``backing`` not a ``BackingFile``.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = (
        "bufcore.TrajectoryDictBufferMultiDim",
        "humanoidverse.agents.buffers.trajectory.TrajectoryDictBufferMultiDim",
    )
    takes_backing: ClassVar[bool] = True
    _windows: OnlineWindows
    _sampler: OnlineWindows | PrioritizedSampler

    def __init__(
        self,
        *,
        capacity: int,
        device: str | torch.device = "cpu",
        nested_key_separator: str = "-",
        n_dim: int = 1,
        seq_length: int = 1,
        output_key_t: Sequence[Key] = DEFAULT_KEYS,
        output_key_tp1: Sequence[Key] = DEFAULT_KEYS,
        end_key: Key = DEFAULT_END_KEY,
        weighting: Weighting = "trajectory",
        seed: int | None = None,
        rank: int | None = None,
        sampler: PrioritizedSampler | None = None,
        backing: BackingFile | None = None,
    ) -> None:
        if sampler is not None and not isinstance(sampler, PrioritizedSampler):
            raise TypeError(
                f"sampler: expected None or a PrioritizedSampler, got {type(sampler).__name__}"
            )
        self._n_dim = check_int(n_dim, "n_dim", minimum=1, maximum=2)
        self._window = WindowOptions(seq_length, output_key_t, output_key_tp1, end_key)
        weighting = check_weighting(weighting)
        self.capacity = check_int(capacity, "capacity", minimum=1)
        self.device = check_device(device)
        self.nested_key_separator = check_separator(nested_key_separator)
        self.seed = check_seed(seed)
        self.rank = check_rank(rank)
        memory = check_backing(backing, self.device)
        self._generator = make_generator(self.device, self.seed, rank=self.rank)
        self._storage = RingStorage(
            self.capacity, device=self.device, batch_dims=self._n_dim, memory=memory
        )
        self._windows = OnlineWindows(self.capacity, device=self.device, weighting=weighting)
        self._sampler = self._windows if sampler is None else sampler

    @property
    def n_dim(self) -> int:
        """Leading batch axes of every leaf (BFM-Zero's name for the storage's batch axes)."""
        return self._n_dim

    def size(self) -> int:
        """Transitions held: time rows (``len``) times envs."""
        return len(self) * self._storage.envs

    @property
    def storage(self) -> dict[str, Any] | None:
        """Live nested views ``[capacity, (env,) ...]`` of the rows (read only); ``None``
        before the first extend.

        Raises:
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out.
        """
        return nested_views(self._storage)

    # ---------------------------------------------------------------- writing
    def extend(self, data: Mapping[str, Any]) -> None:
        """Append a batch: a nested dict whose leaves share the leading batch axes.

        A batch larger than ``capacity`` keeps its last ``capacity`` rows in order; an empty
        batch is a no-op. Nothing is written unless the whole batch is valid (its end flags
        included), and a batch that raises leaves the buffer exactly as it was.

        Raises:
            TypeError: not a mapping, a non-str key, a non-numeric leaf, or a dtype that does
                not cast safely (float -> int).
            ValueError: missing or extra keys, missing batch axes, a wrong trailing shape,
                unequal batch sizes, values outside the stored dtype's range, a missing or
                malformed end flag leaf, or no env.
            KeyError: on the first extend, an output key matches none of the batch's leaves.
            MemoryError: the first batch's ``capacity`` rows cannot be allocated.
            OSError: the first batch's rows do not fit the backing file's disk (nothing
                changes).
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` (nothing changes).
        """
        batch = self._storage.validate(data)
        if batch.size == 0:
            return
        end_path = self._window.end_path
        end = batch.leaves.get(end_path)
        if end is None:
            raise ValueError(
                f"data: the end_key {format_key_path(end_path)} is missing; it marks the "
                "rows that end a trajectory"
            )
        check_end_leaf(end.shape, self.n_dim, f"data{format_key_path(end_path)}")
        if self.n_dim == 2 and end.shape[1] == 0:
            raise ValueError("data: expected at least one env (axis 1), got 0")
        first = not self._storage.allocated
        prioritized = self._sampler if isinstance(self._sampler, PrioritizedSampler) else None
        if first:
            # The first batch fixes the keys: a buffer that could never be sampled is refused.
            self._window.output_paths(batch.leaves)
            if prioritized is not None:
                check_reserved_keys(batch.leaves)
            # Before the write: a warning turned into an error must not follow a stored batch.
            warn_unsaveable_keys(batch, self.nested_key_separator)
            if prioritized is not None:
                prioritized.bind(self.capacity, batch.env_count or 1)
        flags = end_matrix(end, self.n_dim)
        start = self._storage.cursor
        with torch.no_grad():
            if not first:
                self._storage.write(batch)
                self._windows.extend(flags)
            else:
                try:
                    self._storage.write(batch)
                    self._windows.extend(flags)
                except BaseException:
                    # The first write allocates the rows, then the boundaries: if either fails
                    # (out of memory), the buffer goes back to new rather than keep rows it
                    # cannot index.
                    self._storage = RingStorage(
                        self.capacity,
                        device=self.device,
                        batch_dims=self.n_dim,
                        memory=self._storage.memory,
                    )
                    self._windows.reset()
                    if prioritized is not None:
                        prioritized.adopt(None)
                    raise
        if prioritized is not None:
            prioritized.written(self._ring(), start, batch.size)

    def load_hdf5(
        self, h5_file: str | os.PathLike[str], nested_key_separator: str | None = None
    ) -> None:
        """Extend the buffer with the rows of an HDF5 file of datasets, as
        :meth:`bufcore.DictBuffer.load_hdf5` does (``[rows, env, ...]`` datasets with
        ``n_dim=2``); the trajectories follow the file's end flags.

        Raises:
            FileNotFoundError: ``h5_file`` does not exist.
            CorruptFileError: ``h5_file`` is not an HDF5 file of row datasets.
            TypeError: as :meth:`extend`, or ``nested_key_separator`` is not a str.
            ValueError: as :meth:`extend`, or a malformed ``nested_key_separator``; nothing
                changes then.
        """
        self.extend(hdf5_rows(self, h5_file, nested_key_separator))

    def clear(self) -> None:
        """Remove every row and trajectory (``len`` becomes 0; the next write starts at row 0).

        The spec fixed by the first extend stays, and so does the memory of the rows; the
        generator's stream goes on where it was. A prioritized sampler forgets the rows'
        priorities.
        """
        self._storage.clear()
        self._windows.reset()
        if isinstance(self._sampler, PrioritizedSampler):
            self._sampler.reset()

    def get_full_buffer(self) -> dict[str, Any]:
        """A copy of the filled rows in chronological order (oldest first); ``{}`` when empty.

        Raises:
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out.
        """
        return chronological_rows(self._storage)

    def trajectories(self) -> TrajectoryTable:
        """The live trajectories: env column, first and last *absolute* time (inclusive).

        Absolute time ``tau`` lives at physical row ``tau % capacity``.
        """
        return self._windows.trajectories()

    def update_priority(self, index: SampleIndex | torch.Tensor, priority: Any) -> int:
        """Give the rows a sample drew new priorities (a prioritized sampler's buffer), one
        per row (a window's rows each get their own; a window's priority is their max or
        mean). As :meth:`bufcore.DictBuffer.update_priority`: rows written again since they
        were drawn are skipped, and for a row given twice (overlapping windows) the last
        value wins.

        Returns:
            How many rows were updated.

        Raises:
            TypeError: as :meth:`bufcore.DictBuffer.update_priority`.
            ValueError: as :meth:`bufcore.DictBuffer.update_priority`.
            IndexError: a row outside the buffer.
        """
        return update_priority(self._storage, self._prioritized(), index, priority)

    # ------------------------------------------------------------ state idiom
    def state_dict(self) -> dict[str, Any]:
        config = {
            "capacity": self.capacity,
            "device": str(self.device),
            "nested_key_separator": self.nested_key_separator,
            "n_dim": self.n_dim,
            **self._window.to_config(),
        }
        return self._state_dict(config, self._windows.state_dict())

    def load_state_dict(self, state: Mapping[str, Any] | SavedState) -> None:
        """As :meth:`Buffer.load_state_dict`. A state that saved a prioritized sampler brings
        it (with its priorities); otherwise a prioritized sampler given to this buffer stays,
        holding every loaded row at its largest priority."""
        previous = self._sampler
        super().load_state_dict(state)
        if self._sampler is self._windows:
            self._keep_prioritized(previous)

    @classmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        return {
            "capacity": config.key("capacity").integer(),
            "device": config.key("device").text(),
            "nested_key_separator": config.optional("nested_key_separator", "-").text(),
            "n_dim": config.key("n_dim").integer(),
            **WindowOptions.saved_kwargs(config, state),
        }

    @classmethod
    def saved_layout(cls, config: Field) -> tuple[str, int]:
        separator, _ = super().saved_layout(config)
        return separator, config.key("n_dim").integer(minimum=1, maximum=2)

    @classmethod
    def _restored(
        cls, options: dict[str, Any], rows: RowSource, config: Field, state: Field
    ) -> TrajectoryDictBufferMultiDim:
        """The ring as the default restores it, and the trajectories of its end flags.

        Raises:
            StateError: the rows have no env column, the end flags are missing or malformed,
                or the output keys match no stored leaf.
        """
        if rows.env_count == 0:
            # As extend refuses it: a ring without env columns holds no trajectory.
            raise StateError("rows", "expected at least one env (axis 1), got 0")
        buffer = super()._restored(options, rows, config, state)
        storage = buffer._storage
        if storage.spec is None:
            return buffer
        end_path = buffer._window.end_path
        if end_path not in storage.spec:
            raise StateError("rows", f"the end_key {format_key_path(end_path)} has no dataset")
        end = storage.view(end_path)
        try:
            # As a first extend does: output keys that match no leaf could never be sampled.
            buffer._window.output_paths(storage.spec)
        except KeyPathError as err:
            raise StateError("config", str(err)) from err
        try:
            check_end_leaf(end.shape, buffer.n_dim, f"dataset {format_key_path(end_path)}")
        except ValueError as err:
            raise StateError("rows", str(err)) from err
        buffer._windows.rebuild(
            end_matrix(end[: len(buffer)], buffer.n_dim),
            cursor=storage.cursor,
            is_full=storage.is_full,
        )
        return buffer

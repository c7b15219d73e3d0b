"""``TrajectoryDictBufferMultiDim``: BFM-Zero's online buffer, sampled as windows of one env.

A :class:`~bufcore.buffers.transition.DictBuffer` over ``[time]`` or ``[time, env]`` rows whose
episode boundaries are maintained incrementally
(:class:`~bufcore.sampling.boundaries.OnlineBoundaries`), so a one-step ``extend`` never rescans
``[capacity, env]`` (REFERENCE §4). Windows and their ``next`` rows are described in
:mod:`bufcore.buffers.windowed`.

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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from bufcore.buffers.transition import DictBuffer
from bufcore.buffers.windowed import (
    DEFAULT_END_KEY,
    DEFAULT_KEYS,
    WindowedBuffer,
    WindowOptions,
    check_end_leaf,
    end_matrix,
)
from bufcore.checks import check_int
from bufcore.errors import KeyPathError, StateError
from bufcore.fields import Field
from bufcore.persist.checkpoint import OpenedCheckpoint
from bufcore.sampling.boundaries import OnlineBoundaries
from bufcore.sampling.windows import TrajectoryTable, Weighting, sample_window_starts
from bufcore.storage.batches import Batch
from bufcore.storage.ring import RingStorage
from bufcore.tree import Key, format_key_path


class TrajectoryDictBufferMultiDim(WindowedBuffer, DictBuffer):
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

    Raises:
        ValueError: ``n_dim`` not 1 or 2, ``seq_length`` or ``capacity`` below 1, an unknown
            weighting or device.
        TypeError: malformed keys or non-int sizes.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = (
        "bufcore.TrajectoryDictBufferMultiDim",
        "humanoidverse.agents.buffers.trajectory.TrajectoryDictBufferMultiDim",
    )

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
    ) -> None:
        self._n_dim = check_int(n_dim, "n_dim", minimum=1, maximum=2)
        self._window = WindowOptions(seq_length, output_key_t, output_key_tp1, end_key, weighting)
        super().__init__(
            capacity=capacity, device=device, nested_key_separator=nested_key_separator, seed=seed
        )
        self._boundaries = OnlineBoundaries(self.capacity, device=self.device)

    def _batch_dims(self) -> int:
        return self._n_dim

    @property
    def n_dim(self) -> int:
        """Leading batch axes of every leaf (BFM-Zero's name for the storage's batch axes)."""
        return self._n_dim

    def size(self) -> int:
        """Transitions held: time rows (``len``) times envs."""
        return len(self) * self._storage.envs

    # ---------------------------------------------------------------- writing
    def _write(self, batch: Batch) -> None:
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
        if not self._storage.allocated:
            # The first batch fixes the keys: a buffer that could never be sampled is refused.
            self._window.output_paths(batch.leaves)
        flags = end_matrix(end, self.n_dim)
        if self._storage.allocated:
            super()._write(batch)
            self._boundaries.extend(flags)
            return
        try:
            super()._write(batch)
            self._boundaries.extend(flags)
        except BaseException:
            # The first write allocates the rows, then the boundaries: if either fails (out of
            # memory), the buffer goes back to new rather than keeping rows it cannot index.
            self._storage = RingStorage(self.capacity, device=self.device, batch_dims=self.n_dim)
            self._boundaries = OnlineBoundaries(self.capacity, device=self.device)
            raise

    # ---------------------------------------------------------------- reading
    def _draw_starts(
        self, count: int, need: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return sample_window_starts(
            self._boundaries, count=count, need=need, weighting=self.weighting, generator=generator
        )

    def trajectories(self) -> TrajectoryTable:
        """The live trajectories: env column, first and last *absolute* time (inclusive).

        Absolute time ``tau`` lives at physical row ``tau % capacity``.
        """
        return self._boundaries.table()

    # ------------------------------------------------------------ persistence
    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "n_dim": self.n_dim, **self._window.to_config()}

    @classmethod
    def saved_layout(cls, config: Field) -> tuple[str, int]:
        separator, _ = super().saved_layout(config)
        return separator, config.key("n_dim").integer(minimum=1, maximum=2)

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "weighting": self.weighting}

    @classmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        return {
            **super().saved_options(config, state),
            "n_dim": config.key("n_dim").integer(),
            **WindowOptions.saved_kwargs(config, state),
        }

    def _restore(self, opened: OpenedCheckpoint, config: Field, state: Field) -> None:
        super()._restore(opened, config, state)
        storage = self._storage
        if storage.spec is None:
            return
        end_path = self._window.end_path
        if end_path not in storage.spec:
            raise StateError("rows", f"the end_key {format_key_path(end_path)} has no dataset")
        end = storage.view(end_path)
        try:
            # As a first extend does: output keys that match no leaf could never be sampled.
            self._window.output_paths(storage.spec)
        except KeyPathError as err:
            raise StateError("config", str(err)) from err
        try:
            check_end_leaf(end.shape, self.n_dim, f"dataset {format_key_path(end_path)}")
        except ValueError as err:
            raise StateError("rows", str(err)) from err
        self._boundaries.rebuild(
            end_matrix(end[: len(self)], self.n_dim),
            cursor=storage.cursor,
            is_full=storage.is_full,
        )

"""BFM-Zero's trajectory buffers: windows of consecutive rows that never cross an episode.

- :class:`TrajectoryDictBuffer` (REFERENCE §2): a read-only expert buffer built from a list of
  episodes laid end to end, with per-trajectory priorities and motion ids.
- :class:`TrajectoryDictBufferMultiDim` (REFERENCE §4): an online :class:`DictBuffer` over
  ``[time]`` or ``[time, env]`` rows whose episode boundaries are maintained incrementally
  (:class:`bufcore.boundaries.OnlineBoundaries`), so a one-step ``extend`` never rescans
  ``[capacity, env]``.

Both sample ``batch_size // seq_length`` windows, slice-major (rows ``[i * L, (i + 1) * L)`` are
one window), as ``{key: [batch, ...], "next": {key: [batch, ...]}}``; ``next`` holds the row
after each one in the same env, and a window plus its ``next`` rows lie in one trajectory.

BFM-Zero's online layout (REFERENCE §4.2): row ``t`` holds ``obs_t``, the action taken there, the
reward returned by that step, and the ``terminated``/``truncated`` flags produced by the
*previous* step. So the row with ``truncated=True`` is the final observation of its episode, and
with ``end_key="truncated"`` its trajectory ends there: ``(t-1 -> final)`` is sampled and
``(final -> reset)`` never is.

Deliberate differences from the reference (DESIGN §2):

- Every valid window can be drawn: ``L - seq_length - offset + 1`` starts for a trajectory of
  length ``L`` (the reference never draws the last one), and with offset 0 no window starts
  before its trajectory.
- ``weighting="window"`` draws every valid window equally likely; the default ``"trajectory"``
  is the reference's (a trajectory uniformly or by priority, then a uniform start).
- End keys may be tuples at any depth; a single env (``E = 1``) keeps ``[batch, ...]`` outputs.
- An expert episode whose own end column is not True on its last row still ends there (the
  reference lets it wrap into the first episode); flags inside an episode split it, and
  ``motion_ids`` has one entry per trajectory (the motion id of its first row), so it always
  lines up with ``priorities``.
- Clear ``ValueError`` for empty buffers, no eligible trajectory, and NaN, infinite, negative or
  all-zero priorities; partial priority updates are allowed and zero-priority trajectories are
  never sampled. Both buffers save and load in the dict-family checkpoint format.
- ``get_full_buffer`` of the online buffer is :class:`DictBuffer`'s (chronological rows), not the
  reference's per-trajectory tensordict.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from bufcore import checkpoint
from bufcore.boundaries import OnlineBoundaries, find_start_stop_traj
from bufcore.errors import CorruptCheckpointError
from bufcore.rng import generator_state, make_generator, restore_generator
from bufcore.sampling import (
    TrajectoryTable,
    Weighting,
    check_weighting,
    draw_from_table,
    sample_window_starts,
    window_index,
)
from bufcore.storage import Batch, RingStorage
from bufcore.transition import DictBuffer, check_count, resolve_device
from bufcore.tree import (
    Key,
    KeyPath,
    as_key_path,
    flatten,
    format_key_path,
    to_tensor,
    unflatten,
)

_DEFAULT_KEYS = ("observation",)


# ---------------------------------------------------------------------- shared helpers
def _key_list(value: Any, argument: str) -> list[Key]:
    """A list of output keys (str or tuple key paths; JSON lists are read as tuples).

    Raises:
        TypeError: not a list or tuple of keys.
    """
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{argument}: expected a list of keys (str or tuple), got {value!r}")
    keys: list[Key] = []
    for item in value:
        key = tuple(item) if isinstance(item, list) else item
        path = as_key_path(key, argument=argument)
        keys.append(path[0] if len(path) == 1 else path)
    return keys


def _end_key(value: Any, argument: str) -> Key:
    key = tuple(value) if isinstance(value, list) else value
    path = as_key_path(key, argument=argument)
    return path[0] if len(path) == 1 else path


def _json_key(key: Key) -> str | list[str]:
    return key if isinstance(key, str) else list(key)


def _select_paths(spec: Collection[KeyPath], keys: list[Key], argument: str) -> list[KeyPath]:
    """The stored leaves (key paths of ``spec``) under each output key, in order.

    Raises:
        KeyError: a key matches no stored leaf.
    """
    selected: list[KeyPath] = []
    for key in keys:
        prefix = as_key_path(key)
        found = [p for p in spec if p[: len(prefix)] == prefix]
        if not found:
            stored = ", ".join(format_key_path(p) for p in spec)
            raise KeyError(
                f"{argument}: key {format_key_path(prefix)} matches no stored leaf; "
                f"stored: {stored}"
            )
        selected.extend(p for p in found if p not in selected)
    return selected


def _check_end_leaf(tensor: torch.Tensor, batch_dims: int, where: str) -> None:
    trailing = tuple(tensor.shape[batch_dims:])
    if trailing not in ((), (1,)):
        lead = "n" if batch_dims == 1 else "n, env"
        raise ValueError(
            f"{where}: expected end flags [{lead}] or [{lead}, 1], got shape {list(tensor.shape)}"
        )


def _end_matrix(tensor: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """End flags ``[n, E]`` (``E = 1`` for ``[time]`` rows) from a leaf; only the trailing
    singleton is squeezed, never the env axis."""
    n = int(tensor.shape[0])
    env = 1 if batch_dims == 1 else int(tensor.shape[1])
    return (tensor != 0).reshape(n, env)


def _check_batch_size(batch_size: int, seq_length: int) -> None:
    """The reference's batch-size checks.

    Raises:
        ValueError: ``batch_size`` below or not divisible by ``seq_length``.
    """
    if batch_size < seq_length:
        raise ValueError(
            "The batch-size must be bigger than the sequence length, got "
            f"batch_size={batch_size} and seq_length={seq_length}."
        )
    if batch_size % seq_length != 0:
        raise ValueError(
            "The batch-size must be divisible by the sequence length, got "
            f"batch_size={batch_size} and seq_length={seq_length}."
        )


def _gather_windows(
    storage: RingStorage,
    start: torch.Tensor,
    env: torch.Tensor,
    *,
    seq_length: int,
    paths: tuple[list[KeyPath], list[KeyPath]],
) -> dict[str, Any]:
    """Read the windows' rows (and the rows after them) with one gather per leaf each."""
    paths_t, paths_tp1 = paths
    shape = {"length": seq_length, "capacity": storage.capacity, "env_count": storage.slots}
    out = unflatten(storage.gather(window_index(start, env, **shape), paths_t))
    if paths_tp1:
        out["next"] = unflatten(storage.gather(window_index(start + 1, env, **shape), paths_tp1))
    return out


class _WindowOptions:
    """Options shared by both buffers, validated once."""

    seq_length: int
    output_key_t: list[Key]
    output_key_tp1: list[Key]
    end_key: Key
    weighting: Weighting

    def _set_window_options(
        self,
        seq_length: int,
        output_key_t: Sequence[Key],
        output_key_tp1: Sequence[Key],
        end_key: Key,
        weighting: str,
    ) -> None:
        check_count(seq_length, "seq_length")
        self.seq_length = seq_length
        self.output_key_t = _key_list(output_key_t, "output_key_t")
        self.output_key_tp1 = _key_list(output_key_tp1, "output_key_tp1")
        self.end_key = _end_key(end_key, "end_key")
        self.weighting = check_weighting(weighting)

    @property
    def _end_path(self) -> KeyPath:
        return as_key_path(self.end_key)

    @property
    def _offset(self) -> int:
        return 1 if self.output_key_tp1 else 0

    def _window_request(self, batch_size: int, seq_length: int | None) -> tuple[int, int]:
        """``(seq_length, num_slices)`` for a sample call.

        Raises:
            ValueError: the reference's batch-size checks.
            TypeError: non-int sizes.
        """
        check_count(batch_size, "batch_size")
        seq = self.seq_length if seq_length is None else check_count(seq_length, "seq_length")
        _check_batch_size(batch_size, seq)
        return seq, batch_size // seq

    def _output_paths(self, spec: Collection[KeyPath]) -> tuple[list[KeyPath], list[KeyPath]]:
        """The leaves of ``spec`` read for ``t`` and for ``next``.

        Raises:
            KeyError: an output key matches no leaf.
        """
        return (
            _select_paths(spec, self.output_key_t, "output_key_t"),
            _select_paths(spec, self.output_key_tp1, "output_key_tp1"),
        )

    def _window_config(self) -> dict[str, Any]:
        return {
            "seq_length": self.seq_length,
            "output_key_t": [_json_key(k) for k in self.output_key_t],
            "output_key_tp1": [_json_key(k) for k in self.output_key_tp1],
            "end_key": _json_key(self.end_key),
        }


def _window_kwargs(config: dict[str, Any], where: Path) -> dict[str, Any]:
    return {
        "seq_length": checkpoint.config_value(config, "seq_length", int, where=where),
        "output_key_t": config.get("output_key_t", list(_DEFAULT_KEYS)),
        "output_key_tp1": config.get("output_key_tp1", list(_DEFAULT_KEYS)),
        "end_key": config.get("end_key", "done"),
    }


def _restore_weighting(state: dict[str, Any], where: Path) -> Weighting:
    try:
        return check_weighting(state.get("weighting", "trajectory"))
    except ValueError as err:
        raise CorruptCheckpointError(where, str(err)) from err


# ------------------------------------------------------------------------ online buffer
@checkpoint.register_target(
    "bufcore.TrajectoryDictBufferMultiDim",
    "humanoidverse.agents.buffers.trajectory.TrajectoryDictBufferMultiDim",
)
class TrajectoryDictBufferMultiDim(_WindowOptions, DictBuffer):
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
        n_dim: 1 for ``[time]`` rows, 2 for ``[time, env]`` rows.
        seq_length: Default window length.
        output_key_t: Keys (str or tuple paths) returned for the window rows.
        output_key_tp1: Keys returned under ``"next"`` for the row after each window row; empty
            for none (windows then need ``seq_length`` rows instead of ``seq_length + 1``).
        end_key: The end-flag leaf (str or tuple path).
        weighting: ``"trajectory"`` (the reference's) or ``"window"`` (see
            :mod:`bufcore.sampling`).
        seed: Seed of the buffer's generator; ``None`` for a nondeterministic one.

    Raises:
        ValueError: ``n_dim`` not 1 or 2, ``seq_length`` or ``capacity`` below 1, an unknown
            weighting or device.
        TypeError: malformed keys or non-int sizes.
    """

    def __init__(
        self,
        *,
        capacity: int,
        device: str | torch.device = "cpu",
        nested_key_separator: str = "-",
        n_dim: int = 1,
        seq_length: int = 1,
        output_key_t: Sequence[Key] = _DEFAULT_KEYS,
        output_key_tp1: Sequence[Key] = _DEFAULT_KEYS,
        end_key: Key = "done",
        weighting: str = "trajectory",
        seed: int | None = None,
    ) -> None:
        if isinstance(n_dim, bool) or n_dim not in (1, 2):
            raise ValueError(f"n_dim: expected 1 or 2, got {n_dim!r}")
        self._set_window_options(seq_length, output_key_t, output_key_tp1, end_key, weighting)
        self.n_dim = n_dim
        self._batch_dims = n_dim
        super().__init__(
            capacity=capacity, device=device, nested_key_separator=nested_key_separator, seed=seed
        )
        self._boundaries = OnlineBoundaries(capacity, device=self.device)

    def size(self) -> int:
        """Transitions held: time rows times envs."""
        return len(self) * self._storage.slots

    # ---------------------------------------------------------------- writing
    def _write(self, batch: Batch) -> None:
        end = batch.leaves.get(self._end_path)
        if end is None:
            raise ValueError(
                f"data: the end_key {format_key_path(self._end_path)} is missing; it marks the "
                "rows that end a trajectory"
            )
        _check_end_leaf(end, self.n_dim, f"data{format_key_path(self._end_path)}")
        if self.n_dim == 2 and end.shape[1] == 0:
            raise ValueError("data: expected at least one env (axis 1), got 0")
        if not self._storage.allocated:
            # The first batch fixes the keys: a buffer that could never be sampled is refused.
            self._output_paths(batch.leaves)
        flags = _end_matrix(end, self.n_dim)
        super()._write(batch)
        self._boundaries.extend(flags)

    # ---------------------------------------------------------------- reading
    def sample(self, batch_size: int = 1, seq_length: int | None = None) -> dict[str, Any]:
        """``batch_size // seq_length`` windows of ``seq_length`` consecutive rows, slice-major.

        Returns:
            ``{key: [batch_size, ...] for key in output_key_t}`` plus ``"next"`` with the rows
            after them for ``output_key_tp1`` (if not empty).

        Raises:
            ValueError: the buffer is empty, the reference's batch-size checks, or no
                trajectory is long enough (the message gives the stored length range).
            KeyError: an output key matches no stored leaf.
        """
        seq, slices = self._window_request(batch_size, seq_length)
        if self.empty():
            raise ValueError("cannot sample: the buffer is empty (extend it first)")
        paths = self._output_paths(self._storage.spec or {})
        start, env = sample_window_starts(
            self._boundaries,
            count=slices,
            need=seq + self._offset,
            weighting=self.weighting,
            generator=self._generator,
        )
        return _gather_windows(self._storage, start, env, seq_length=seq, paths=paths)

    def trajectories(self) -> TrajectoryTable:
        """The live trajectories: env column, first and last *absolute* time (inclusive).

        Absolute time ``tau`` lives at physical row ``tau % capacity``.
        """
        return self._boundaries.table()

    # ------------------------------------------------------------ persistence
    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "n_dim": self.n_dim, **self._window_config()}

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "weighting": self.weighting}

    @classmethod
    def _init_kwargs(cls, config: dict[str, Any], where: Path) -> dict[str, Any]:
        return {
            **super()._init_kwargs(config, where),
            "n_dim": checkpoint.config_value(config, "n_dim", int, where=where),
            **_window_kwargs(config, where),
        }

    def _after_load(self, reader: checkpoint.CheckpointReader) -> None:
        self.weighting = _restore_weighting(reader.state, reader.path / checkpoint.STATE)
        storage = self._storage
        if not storage.allocated:
            return
        end = storage.views.get(self._end_path)
        where = reader.path / checkpoint.PAYLOAD
        if end is None:
            raise CorruptCheckpointError(
                where, f"the end_key {format_key_path(self._end_path)} has no dataset"
            )
        try:
            _check_end_leaf(end, self.n_dim, f"dataset {format_key_path(self._end_path)}")
        except ValueError as err:
            raise CorruptCheckpointError(where, str(err)) from err
        self._boundaries.rebuild(
            _end_matrix(end[: len(self)], self.n_dim),
            cursor=storage.cursor,
            is_full=storage.is_full,
        )


# ------------------------------------------------------------------------ expert buffer
@checkpoint.register_target("bufcore.TrajectoryDictBuffer")
class TrajectoryDictBuffer(_WindowOptions, checkpoint.Loadable):
    """Read-only buffer of expert episodes, sampled as windows with per-trajectory priorities.

    Episodes are laid end to end in list order (rows ``[0, capacity)``). Each episode ends a
    trajectory; an episode without ``end_key`` gets a column ``[T, 1]`` True on its last row, and
    a provided end column is forced True on the last row (so episodes never join). With
    well-formed columns, trajectory ``i`` is episode ``i``, and ``priorities[i]``,
    ``lengths[i]`` and ``motion_ids[i]`` line up.

    Args:
        episodes: Nested dicts of arrays with a leading time axis, the same keys in each.
        device: Where rows live and samples are made.
        seq_length: Default window length.
        output_key_t: Keys (str or tuple paths) returned for the window rows.
        output_key_tp1: Keys returned under ``"next"`` for the row after each window row.
        end_key: The end-flag leaf (str or tuple path).
        motion_id_key: The leaf holding each episode's motion id (read at a trajectory's first
            row).
        nested_key_separator: Joins nested keys into dataset names when saving.
        weighting: ``"trajectory"`` (the reference's) or ``"window"``.
        seed: Seed of the buffer's generator; ``None`` for a nondeterministic one.

    Attributes:
        motion_ids: One int per trajectory.
        start_idx: ``[n, 1]`` first row of each trajectory.
        stop_idx: ``[n, 1]`` last row of each trajectory (inclusive).
        lengths: ``[n]`` rows per trajectory.
        priorities: ``[n]`` float32 sampling weights, summing to 1.

    Raises:
        ValueError: no episodes, an empty episode, episodes with different keys or leaves of
            different lengths, a missing ``motion_id_key``, a malformed end column, or a bad
            option.
        TypeError: malformed keys, non-numeric leaves, non-int sizes.
        KeyError: an output key matches no leaf of the episodes.
    """

    _checkpoint_target: str
    motion_ids: list[int]
    start_idx: torch.Tensor
    stop_idx: torch.Tensor
    lengths: torch.Tensor
    priorities: torch.Tensor
    _is_full = True

    def __init__(
        self,
        episodes: Sequence[Mapping[str, Any]],
        *,
        device: str | torch.device = "cpu",
        seq_length: int = 1,
        output_key_t: Sequence[Key] = _DEFAULT_KEYS,
        output_key_tp1: Sequence[Key] = _DEFAULT_KEYS,
        end_key: Key = "done",
        motion_id_key: Key = "motion_id",
        nested_key_separator: str = "-",
        weighting: str = "trajectory",
        seed: int | None = None,
    ) -> None:
        self._configure(
            device,
            seq_length,
            output_key_t,
            output_key_tp1,
            end_key,
            motion_id_key,
            nested_key_separator,
            weighting,
            seed,
        )
        leaves = self._concatenate(episodes)
        rows = int(next(iter(leaves.values())).shape[0])
        storage = RingStorage(rows, device=self.device)
        batch = storage.validate(unflatten(leaves), argument="episodes")
        storage.write(batch)
        self._attach(storage)
        self._output_paths(storage.views)

    def _configure(
        self,
        device: str | torch.device,
        seq_length: int,
        output_key_t: Sequence[Key],
        output_key_tp1: Sequence[Key],
        end_key: Key,
        motion_id_key: Key,
        nested_key_separator: str,
        weighting: str,
        seed: int | None,
    ) -> None:
        self._set_window_options(seq_length, output_key_t, output_key_tp1, end_key, weighting)
        self.motion_id_key = _end_key(motion_id_key, "motion_id_key")
        if not isinstance(nested_key_separator, str) or not nested_key_separator:
            raise ValueError(
                f"nested_key_separator: expected a non-empty str, got {nested_key_separator!r}"
            )
        self.nested_key_separator = nested_key_separator
        self.device = resolve_device(device)
        self.seed = seed
        self._generator = make_generator(self.device, seed)

    def _concatenate(self, episodes: Sequence[Mapping[str, Any]]) -> dict[KeyPath, torch.Tensor]:
        """Validate the episodes and lay them end to end (end column fixed, see the class)."""
        if isinstance(episodes, Mapping) or not isinstance(episodes, Sequence) or not episodes:
            raise ValueError("episodes: expected a non-empty list of episode dicts")
        end_path = self._end_path
        motion_path = as_key_path(self.motion_id_key)
        columns: dict[KeyPath, list[torch.Tensor]] = {}
        for i, episode in enumerate(episodes):
            argument = f"episodes[{i}]"
            flat = flatten(episode, argument=argument)
            leaves = {p: to_tensor(v, path=p, argument=argument) for p, v in flat.items()}
            lengths = {int(t.shape[0]) if t.ndim else 0 for t in leaves.values()}
            if len(lengths) != 1 or 0 in lengths:
                raise ValueError(
                    f"{argument}: every leaf needs the same non-zero number of rows (axis 0), "
                    f"got {sorted(lengths)}"
                )
            if motion_path not in leaves:
                raise ValueError(
                    f"{argument}: motion_id_key {format_key_path(motion_path)} is missing"
                )
            end = leaves.get(end_path)
            if end is None:
                end = torch.zeros((lengths.pop(), 1), dtype=torch.bool)
            else:
                _check_end_leaf(end, 1, f"{argument}{format_key_path(end_path)}")
                end = end.clone()
            end[-1] = True
            leaves[end_path] = end
            if columns and set(leaves) != set(columns):
                raise ValueError(
                    f"{argument}: keys {sorted(map(format_key_path, leaves))} differ from "
                    f"episodes[0]'s {sorted(map(format_key_path, columns))}"
                )
            for path, tensor in leaves.items():
                columns.setdefault(path, []).append(tensor)
        return {path: torch.cat(parts) for path, parts in columns.items()}

    def _attach(
        self,
        storage: RingStorage,
        priorities: torch.Tensor | None = None,
        motion_ids: list[int] | None = None,
    ) -> None:
        """Index the stored rows: trajectories, motion ids and priorities."""
        self._storage = storage
        views = storage.views
        end = views[self._end_path]
        start, stop, lengths = find_start_stop_traj(end.reshape(len(end), -1)[:, 0], True)
        self.start_idx, self.stop_idx, self.lengths = start, stop, lengths
        count = len(lengths)
        self._table = TrajectoryTable(
            env=torch.zeros_like(lengths), start=start[:, 0], stop=stop[:, 0]
        )
        if motion_ids is None:
            column = views[as_key_path(self.motion_id_key)]
            motion_ids = [int(v) for v in column.reshape(len(column), -1)[start[:, 0], 0].tolist()]
        self.motion_ids = motion_ids
        if priorities is None:
            priorities = torch.full((count,), 1.0 / count, dtype=torch.float32, device=self.device)
        self.priorities = priorities

    # ------------------------------------------------------------------ state
    @property
    def capacity(self) -> int:
        """Stored rows (all episodes)."""
        return self._storage.capacity

    def __len__(self) -> int:
        return self.capacity

    def empty(self) -> bool:
        return len(self) == 0

    @property
    def storage(self) -> dict[str, Any]:
        """Live nested views ``[capacity, ...]`` of the rows (read only)."""
        return unflatten(self._storage.views)

    def __repr__(self) -> str:
        return (
            f"TrajectoryDictBuffer(rows={self.capacity}, trajectories={len(self.lengths)}, "
            f"seq_length={self.seq_length}, device={str(self.device)!r})"
        )

    # ---------------------------------------------------------------- reading
    def sample(self, batch_size: int = 1, seq_length: int | None = None) -> dict[str, Any]:
        """``batch_size // seq_length`` windows, trajectories drawn by priority, slice-major.

        Returns:
            ``{key: [batch_size, ...] for key in output_key_t}`` plus ``"next"`` for
            ``output_key_tp1`` (if not empty).

        Raises:
            ValueError: the reference's batch-size checks, no trajectory long enough (the
                message gives the length range), or zero priority on all that are.
            KeyError: an output key matches no stored leaf.
        """
        seq, slices = self._window_request(batch_size, seq_length)
        paths = self._output_paths(self._storage.spec or {})
        start, env = draw_from_table(
            self._table,
            count=slices,
            need=seq + self._offset,
            weighting=self.weighting,
            generator=self._generator,
            priorities=self.priorities,
        )
        return _gather_windows(self._storage, start, env, seq_length=seq, paths=paths)

    def trajectories(self) -> TrajectoryTable:
        """The trajectories: env column (all 0), first and last row (inclusive)."""
        return self._table

    # ------------------------------------------------------------- priorities
    def update_priorities(self, priorities: Any, idxs: Any) -> None:
        """Set the priorities of trajectories ``idxs`` and renormalise to sum 1.

        A full vector or any subset may be given; for a repeated index the last value wins.

        Raises:
            ValueError: lengths differ; a value is NaN, infinite or negative; or the update
                would leave zero total mass, or zero mass on every trajectory long enough for
                the default window. Nothing changes then.
            IndexError: an index is outside ``[0, n_trajectories)``.
            TypeError: non-numeric input.
        """
        values = to_tensor(priorities, path=(), argument="priorities")
        index = to_tensor(idxs, path=(), argument="idxs")
        values = values.reshape(-1).to(device=self.device, dtype=torch.float64)
        index = index.reshape(-1).to(device=self.device)
        count = len(self.priorities)
        if index.is_floating_point() or index.dtype == torch.bool:
            raise TypeError(f"idxs: expected integer indices, got dtype {index.dtype}")
        if len(values) != len(index):
            raise ValueError(
                f"priorities: expected one value per index, got {len(values)} values for "
                f"{len(index)} indices"
            )
        if len(index) and (int(index.min()) < 0 or int(index.max()) >= count):
            raise IndexError(
                f"idxs: expected indices in [0, {count}), got {int(index.min())}.."
                f"{int(index.max())}"
            )
        if not bool(torch.isfinite(values).all()) or bool((values < 0).any()):
            raise ValueError("priorities: expected finite values >= 0, got NaN, inf or negative")
        updated = self.priorities.to(torch.float64).clone()
        # Last write wins for repeated indices: keep each index's last position only.
        last = torch.full((count,), -1, dtype=torch.long, device=self.device)
        order = torch.arange(len(index), device=self.device)
        last.scatter_reduce_(0, index.long(), order, reduce="amax")
        keep = last[index.long()] == order
        updated[index[keep].long()] = values[keep]
        total = updated.sum()
        if float(total) <= 0:
            raise ValueError("priorities: the update would make every priority zero")
        eligible = self.lengths >= self.seq_length + self._offset
        if bool(eligible.any()) and float(updated[eligible].sum()) <= 0:
            raise ValueError(
                f"priorities: the update would give zero mass to every trajectory with length "
                f">= {self.seq_length + self._offset}, so none could be sampled"
            )
        self.priorities = (updated / total).to(torch.float32)

    # ------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Publish a checkpoint directory at ``path`` atomically (priorities included).

        Raises:
            ValueError: a key contains the nested key separator.
            FileExistsError: ``path`` exists and is not a checkpoint directory.
        """
        storage = self._storage
        payload = checkpoint.Payload(
            target=self._checkpoint_target,
            config={
                "capacity": self.capacity,
                "device": str(self.device),
                "nested_key_separator": self.nested_key_separator,
                **self._window_config(),
                "motion_id_key": _json_key(self.motion_id_key),
                "_idx": 0,
                "_is_full": True,
            },
            separator=self.nested_key_separator,
            batch_dims=1,
            spec=storage.spec or {},
            arrays=checkpoint.storage_arrays(storage),
            state={
                "seed": self.seed,
                "generator": generator_state(self._generator),
                "weighting": self.weighting,
                "priorities": self.priorities.tolist(),
                "motion_ids": list(self.motion_ids),
            },
        )
        checkpoint.save_payload(path, payload)

    @classmethod
    def _from_checkpoint(
        cls, reader: checkpoint.CheckpointReader, device: str | torch.device | None
    ) -> TrajectoryDictBuffer:
        where = reader.path / checkpoint.CONFIG
        config, state = reader.config, reader.state
        buffer = cls.__new__(cls)
        try:
            buffer._configure(
                device if device is not None else config.get("device", "cpu"),
                motion_id_key=config.get("motion_id_key", "motion_id"),
                nested_key_separator=config.get("nested_key_separator", "-"),
                weighting=_restore_weighting(state, reader.path / checkpoint.STATE),
                seed=state.get("seed"),
                **_window_kwargs(config, where),
            )
        except (TypeError, ValueError) as err:
            if isinstance(err, CorruptCheckpointError):
                raise
            raise CorruptCheckpointError(where, str(err)) from err
        capacity = checkpoint.config_value(config, "capacity", int, where=where)
        try:
            storage = RingStorage(capacity, device=buffer.device)
        except ValueError as err:
            raise CorruptCheckpointError(where, str(err)) from err
        checkpoint.restore_storage(
            reader,
            storage,
            separator=buffer.nested_key_separator,
            cursor=config.get("_idx"),
            is_full=config.get("_is_full"),
        )
        missing = [
            format_key_path(p)
            for p in (buffer._end_path, as_key_path(buffer.motion_id_key))
            if p not in storage.views
        ]
        if not storage.is_full or missing:
            raise CorruptCheckpointError(
                reader.path / checkpoint.PAYLOAD,
                f"an expert buffer needs all {capacity} rows with end and motion id columns; "
                f"missing: {missing or 'rows'}",
            )
        buffer._attach(storage)
        saved = state.get("priorities")
        if saved is not None:
            buffer._restore_priorities(saved, state.get("motion_ids"), reader.path)
        generator = state.get("generator")
        if generator is not None:
            try:
                restore_generator(buffer._generator, generator)
            except ValueError as err:
                raise CorruptCheckpointError(reader.path / checkpoint.STATE, str(err)) from err
        return buffer

    def _restore_priorities(self, saved: Any, motion_ids: Any, path: Path) -> None:
        where = path / checkpoint.STATE
        count = len(self.lengths)
        if not isinstance(saved, list) or len(saved) != count:
            raise CorruptCheckpointError(where, f"expected {count} priorities, got {saved!r:.80}")
        if not isinstance(motion_ids, list) or len(motion_ids) != count:
            raise CorruptCheckpointError(
                where, f"expected {count} motion ids, got {motion_ids!r:.80}"
            )
        try:
            values = torch.tensor(saved, dtype=torch.float32, device=self.device)
        except (TypeError, ValueError) as err:
            raise CorruptCheckpointError(where, f"priorities are not numbers ({err})") from err
        if not bool(torch.isfinite(values).all()) or bool((values < 0).any()):
            raise CorruptCheckpointError(where, "priorities must be finite and >= 0")
        self.priorities = values
        self.motion_ids = [int(m) for m in motion_ids]

"""``TrajectoryDictBuffer``: BFM-Zero's read-only expert buffer with per-trajectory priorities.

Episodes are laid end to end in list order (:mod:`bufcore.buffers.episode_rows`) and sampled as
windows (:mod:`bufcore.buffers.windowed`): a trajectory is drawn by its priority (``"trajectory"``
weighting, the reference's) or every valid window in proportion to its trajectory's priority
(``"window"``), then a start. :class:`~bufcore.curriculum.curriculum.Curriculum` sets the
priorities from tracking errors.

Deliberate differences from the reference (REFERENCE §2, DESIGN §2): every valid window can be
drawn; an episode whose own end column is not True on its last row still ends there (the
reference lets it wrap into the first episode); flags inside an episode split it, and
``motion_ids`` has one entry per trajectory (the motion id of its first row), so it always lines
up with ``priorities``; NaN, infinite, negative or all-zero priorities are refused, and so are
values float32 (the priorities' dtype) cannot hold and updates whose stored, normalised values
would turn a positive priority into 0; an empty update is a no-op, partial updates are allowed
and zero-priority trajectories are never sampled; the buffer saves and loads in the dict-family
checkpoint format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch

from bufcore.buffers.episode_rows import EpisodeRows
from bufcore.buffers.windowed import (
    DEFAULT_END_KEY,
    DEFAULT_KEYS,
    WindowedBuffer,
    WindowOptions,
    check_end_leaf,
)
from bufcore.checks import check_device, check_seed, check_separator, concrete_device
from bufcore.curriculum.history import preview
from bufcore.curriculum.priorities import FLOAT32_MAX
from bufcore.distributed import check_rank
from bufcore.fields import Field
from bufcore.rng import make_generator
from bufcore.sampling.boundaries import find_start_stop_traj
from bufcore.sampling.samplers import PriorityWindows
from bufcore.sampling.windows import TrajectoryTable, Weighting, check_weighting
from bufcore.storage.ring import RingStorage, RowSource
from bufcore.tree import (
    Key,
    KeyPath,
    as_key,
    as_key_path,
    format_key_path,
    key_json,
    real_values,
    to_tensor,
    unflatten,
)

# Saved priorities sum to 1 up to float32 rounding (relative error ~1e-7 per value).
_SUM_TOLERANCE = 1e-4


class TrajectoryDictBuffer(WindowedBuffer):
    """Read-only buffer of expert episodes, sampled as windows with per-trajectory priorities.

    Episodes are laid end to end in list order (rows ``[0, capacity)``). Each episode ends a
    trajectory; an episode without ``end_key`` gets a column ``[T, 1]`` True on its last row, and
    a provided end column is forced True on the last row (so episodes never join). With
    well-formed columns, trajectory ``i`` is episode ``i``, and ``priorities[i]``,
    ``lengths[i]`` and ``motion_ids[i]`` line up.

    Args:
        episodes: Nested dicts of arrays with a leading time axis, the same keys in each; or a
            :class:`~bufcore.storage.ring.RowSource` of rows already laid end to end (how a
            checkpoint is loaded: its rows go straight into this buffer's storage).
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
        rank: Whose sample stream of ``seed`` (:func:`bufcore.rng.stream_seed`): ranks sharing
            a seed draw different batches, rank 0 the seed's own stream. ``None`` for this
            process's rank in the default process group (0 without one).

    Attributes:
        motion_ids: One int per trajectory.
        start_idx: ``[n, 1]`` first row of each trajectory.
        stop_idx: ``[n, 1]`` last row of each trajectory (inclusive).
        lengths: ``[n]`` rows per trajectory.
        priorities: ``[n]`` float32 sampling weights, summing to 1.
        file_names: One str per trajectory, the file it was read from (see the property).

    Raises:
        ValueError: no episodes, an empty episode, episodes with different keys, trailing
            shapes or leaves of different lengths, a missing ``motion_id_key``, a malformed end
            column, or a bad option (a negative ``rank``).
        TypeError: malformed keys, non-numeric leaves, non-int sizes, seed or rank.
        KeyError: an output key matches no leaf of the episodes.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = ("bufcore.TrajectoryDictBuffer",)
    motion_ids: list[int]
    start_idx: torch.Tensor
    stop_idx: torch.Tensor
    lengths: torch.Tensor
    _sampler: PriorityWindows
    _windows: PriorityWindows
    _file_names: list[str] | None = None

    def __init__(
        self,
        episodes: Sequence[Mapping[str, Any]] | RowSource,
        *,
        device: str | torch.device = "cpu",
        seq_length: int = 1,
        output_key_t: Sequence[Key] = DEFAULT_KEYS,
        output_key_tp1: Sequence[Key] = DEFAULT_KEYS,
        end_key: Key = DEFAULT_END_KEY,
        motion_id_key: Key = "motion_id",
        nested_key_separator: str = "-",
        weighting: Weighting = "trajectory",
        seed: int | None = None,
        rank: int | None = None,
    ) -> None:
        self._window = WindowOptions(seq_length, output_key_t, output_key_tp1, end_key)
        weighting = check_weighting(weighting)
        self.motion_id_key = as_key(motion_id_key, "motion_id_key")
        self.nested_key_separator = check_separator(nested_key_separator)
        self.device = check_device(device)
        self.seed = check_seed(seed)
        self.rank = check_rank(rank)
        self._generator = make_generator(self.device, self.seed, rank=self.rank)
        end_path, motion_path = self._window.end_path, as_key_path(self.motion_id_key)
        source = (
            episodes
            if isinstance(episodes, RowSource)
            else EpisodeRows(episodes, end_path=end_path, motion_path=motion_path)
        )
        missing = [format_key_path(p) for p in (end_path, motion_path) if p not in source.spec]
        if missing:
            raise ValueError(
                f"episodes: an expert buffer needs the end and motion id leaves; the rows lack "
                f"{', '.join(missing)}"
            )
        where = f"episodes{format_key_path(end_path)}"
        check_end_leaf((source.count, *source.spec[end_path].shape), 1, where)
        self._window.output_paths(source.spec)
        self._storage = RingStorage(source.count, device=self.device)
        with torch.no_grad():
            self._storage.restore(source, cursor=0, is_full=True)
        end = self._storage.view(end_path).reshape(source.count, -1)
        end[-1] = True  # the last episode ends on the last row, whatever the source
        self._index(end[:, 0], weighting)

    def _index(self, end: torch.Tensor, weighting: Weighting) -> None:
        """Trajectories, motion ids and uniform priorities from the stored end flags."""
        start, stop, lengths = find_start_stop_traj(end, True)
        self.start_idx, self.stop_idx, self.lengths = start, stop, lengths
        table = TrajectoryTable(env=torch.zeros_like(lengths), start=start[:, 0], stop=stop[:, 0])
        column = self._storage.view(as_key_path(self.motion_id_key))
        first_rows = column.reshape(len(column), -1)[start[:, 0], 0]
        fractional = (
            ~torch.isfinite(first_rows) | (first_rows != first_rows.trunc())
            if first_rows.is_floating_point()
            else torch.zeros_like(first_rows, dtype=torch.bool)
        )
        if bool(fractional.any()):
            position = int(fractional.nonzero()[0, 0])
            raise ValueError(
                f"{self.motion_id_key!r}: motion ids must be whole numbers, got "
                f"{float(first_rows[position])} for trajectory {position}"
            )
        self.motion_ids = [int(v) for v in first_rows.tolist()]
        count = len(lengths)
        uniform = torch.full((count,), 1.0 / count, dtype=torch.float32, device=self.device)
        self._sampler = self._windows = PriorityWindows(table, uniform, weighting=weighting)

    # ------------------------------------------------------------------ state
    @property
    def capacity(self) -> int:
        """Stored rows (all episodes)."""
        return self._storage.capacity

    @property
    def storage(self) -> dict[str, Any]:
        """Live nested views ``[capacity, ...]`` of the rows (read only).

        Raises:
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out.
        """
        return unflatten(self._storage.views)

    @property
    def file_names(self) -> list[str]:
        """The file each trajectory was read from, aligned with ``motion_ids`` (BFM-Zero's
        ``file_names``): set by :func:`~bufcore.load_expert_trajectories`, or assigned.

        Raises:
            AttributeError: none were set, so ``hasattr(buffer, "file_names")`` is False, as for
                a BFM-Zero expert buffer built without them.
        """
        if self._file_names is None:
            raise AttributeError("file_names: this expert buffer was built without file names")
        return list(self._file_names)

    @file_names.setter
    def file_names(self, names: Sequence[str]) -> None:
        """Raises ``TypeError`` (not a list of str) or ``ValueError`` (not one per trajectory)."""
        self._file_names = _check_file_names(names, "file_names", len(self.lengths))

    def __repr__(self) -> str:
        return (
            f"TrajectoryDictBuffer(rows={self.capacity}, trajectories={len(self.lengths)}, "
            f"seq_length={self.seq_length}, device={str(self.device)!r})"
        )

    # ---------------------------------------------------------------- reading
    def trajectories(self) -> TrajectoryTable:
        """The trajectories: env column (all 0), first and last row (inclusive).

        Position ``i`` is trajectory ``i`` of ``priorities`` and ``motion_ids``, so a
        :meth:`sample_index` ``trajectory`` value ``i`` drew motion ``motion_ids[i]``.
        """
        return self._sampler.trajectories()

    @property
    def priorities(self) -> torch.Tensor:
        """``[n]`` float32 sampling weight of each trajectory, summing to 1: the live tensor
        the sampler draws with (clone it to keep a copy; set them with
        :meth:`update_priorities`, which checks them)."""
        return self._sampler.priorities

    @priorities.setter
    def priorities(self, values: torch.Tensor) -> None:
        """Replace the priorities as they are stored (the Curriculum's rollback sets back a
        clone of an earlier value); :meth:`update_priorities` sets and normalises new ones.

        Checked as a load checks saved priorities, so what a setter stores always saves and
        loads back and can be sampled.

        Raises:
            TypeError: not a float32 tensor.
            ValueError: on another device than the buffer, not ``[n_trajectories]``, a value
                NaN, infinite or negative, not summing to 1, or nothing left to sample.
        """
        if not isinstance(values, torch.Tensor) or values.dtype != torch.float32:
            got = values.dtype if isinstance(values, torch.Tensor) else type(values).__name__
            raise TypeError(f"priorities: expected a float32 tensor, got {got}")
        if concrete_device(values.device) != concrete_device(self.device):
            raise ValueError(
                f"priorities: expected a tensor on the buffer's device {str(self.device)!r}, "
                f"got one on {str(values.device)!r}"
            )
        count = len(self.lengths)
        if tuple(values.shape) != (count,):
            raise ValueError(
                f"priorities: expected one per trajectory (shape [{count}]), got shape "
                f"{list(values.shape)}"
            )
        values = values.detach()
        exact = values.to(torch.float64)
        _check_float32_values(exact, "priorities")
        self._check_stored(exact, values, "priorities: these would")
        total = float(exact.sum())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise ValueError(
                f"priorities: expected priorities summing to 1, got sum {total} (use "
                "update_priorities to set and normalise new ones)"
            )
        self._sampler.priorities = values

    # ------------------------------------------------------------- priorities
    def update_priorities(self, priorities: Any, idxs: Any) -> None:
        """Set the priorities of trajectories ``idxs`` and renormalise to sum 1.

        A full vector or any subset may be given; for a repeated index the last value wins; an
        empty update changes nothing. Priorities are stored as float32, so each value must fit
        float32 (at most its max; a positive value must not round to 0), and the stored,
        normalised vector is checked: a positive priority never becomes 0, and something stays
        samplable.

        Raises:
            ValueError: lengths differ; a value is NaN, infinite or negative, exceeds float32
                max or rounds to 0 in float32; or the stored update would make a positive
                priority 0, leave zero total mass, or zero mass on every trajectory long enough
                for the default window. Nothing changes then.
            IndexError: an index is outside ``[0, n_trajectories)``.
            TypeError: non-numeric input, bool or complex priorities, or non-integer indices.
        """
        values = real_values(priorities, "priorities").detach().reshape(-1).to(self.device)
        index = to_tensor(idxs, "idxs").reshape(-1).to(self.device)
        if len(values) != len(index):
            raise ValueError(
                f"priorities: expected one value per index, got {len(values)} values for "
                f"{len(index)} indices"
            )
        if len(index) == 0:
            return  # `[]` has no integer dtype to check; there is nothing to update
        index = self._check_indices(index)
        _check_float32_values(values, "priorities")
        updated = self.priorities.to(torch.float64).clone()
        # Last write wins for repeated indices: keep each index's last position only.
        count = len(updated)
        last = torch.full((count,), -1, dtype=torch.long, device=self.device)
        order = torch.arange(len(index), device=self.device)
        last.scatter_reduce_(0, index, order, reduce="amax")
        keep = last[index] == order
        updated[index[keep]] = values[keep]
        # Each value is at most float32 max, so the float64 sum cannot overflow.
        total = float(updated.sum())
        if total <= 0:
            raise ValueError("priorities: the update would make every priority zero")
        stored = (updated / total).to(torch.float32)
        self._check_stored(updated, stored, "priorities: the update would")
        self._sampler.priorities = stored

    def _check_indices(self, index: torch.Tensor) -> torch.Tensor:
        """Non-empty trajectory indices as int64, each in ``[0, n_trajectories)``.

        Raises:
            TypeError: not an integer dtype.
            IndexError: an index out of range.
        """
        if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
            raise TypeError(f"idxs: expected integer indices, got dtype {index.dtype}")
        # uint64 has no comparison ops in torch; int64 wraps values >= 2**63 to negatives,
        # which the range check below refuses (the message quotes the original value).
        wide = index.to(torch.int64)
        count = len(self.priorities)
        bad = (wide < 0) | (wide >= count)
        if bool(bad.any()):
            position = int(bad.nonzero()[0, 0])
            value = int(index[position].cpu().numpy())
            raise IndexError(
                f"idxs: expected indices in [0, {count}), got {value} at position {position}"
            )
        return wide

    def _check_stored(self, exact: torch.Tensor, stored: torch.Tensor, would: str) -> None:
        """Refuse stored float32 priorities that lose a trajectory or leave nothing to sample.

        Args:
            exact: The float64 priorities before the cast to the storage dtype.
            stored: Those priorities as they will be stored.
            would: How messages start (``"priorities: the update would"``).

        Raises:
            ValueError: a positive priority is stored as 0, all are 0, or every trajectory
                long enough for the default window has 0.
        """
        lost = ((exact > 0) & (stored == 0)).nonzero()[:, 0].tolist()
        if lost:
            raise ValueError(
                f"{would} store the priority of trajectories {preview(lost)} as 0 (below "
                "float32's smallest positive value after normalising), so they could never be "
                "sampled; narrow the range of the priorities"
            )
        if float(stored.sum()) <= 0:
            raise ValueError(f"{would} make every priority zero")
        need = self.seq_length + self._window.offset
        eligible = self.lengths >= need
        if bool(eligible.any()) and float(stored[eligible].sum()) <= 0:
            raise ValueError(
                f"{would} give zero mass to every trajectory with length >= {need}, so none "
                "could be sampled"
            )

    # ------------------------------------------------------------ state idiom
    def state_dict(self) -> dict[str, Any]:
        config = {
            "capacity": self.capacity,
            "device": str(self.device),
            "nested_key_separator": self.nested_key_separator,
            **self._window.to_config(),
            "motion_id_key": key_json(self.motion_id_key),
        }
        names = {} if self._file_names is None else {"file_names": list(self._file_names)}
        state = {**self._sampler.state_dict(), "motion_ids": list(self.motion_ids), **names}
        return self._state_dict(config, state)

    @classmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        for name, full in (("_idx", 0), ("_is_full", True)):
            field = config.optional(name, full)
            if type(field.value) is not type(full) or field.value != full:
                raise field.error(f"an expert buffer is always full: expected {full!r}")
        config.key("capacity").integer(minimum=1)
        return {
            "device": config.optional("device", "cpu").text(),
            "motion_id_key": config.optional("motion_id_key", "motion_id").validate(as_key),
            "nested_key_separator": config.optional("nested_key_separator", "-").validate(
                check_separator
            ),
            **WindowOptions.saved_kwargs(config, state),
        }


    @classmethod
    def sampled_leaves(cls, config: Field) -> list[KeyPath]:
        motion_key = config.optional("motion_id_key", "motion_id").validate(as_key)
        return [*super().sampled_leaves(config), as_key_path(motion_key)]

    @classmethod
    def _restored(
        cls, options: dict[str, Any], rows: RowSource, config: Field, state: Field
    ) -> TrajectoryDictBuffer:
        """The buffer built from the saved rows through the constructor, with the saved
        priorities (the saved motion ids must be the ones the rows hold: they derive from them).

        Raises:
            StateError: the capacity differs from the rows, or the priorities or motion ids
                are malformed or inconsistent.
        """
        capacity = config.key("capacity")
        if capacity.integer(minimum=1) != rows.count:
            raise capacity.error(f"says {capacity.value} rows, but buffer.hdf5 holds {rows.count}")
        buffer = cls(rows, **options)
        buffer._restore_priorities(state)
        return buffer

    def _restore_priorities(self, state: Field) -> None:
        """Take the saved priorities (a BFM-Zero checkpoint has none: they stay uniform).

        Raises:
            StateError: they or the motion ids are malformed or inconsistent.
        """
        names = state.optional("file_names", None)
        if names.value is not None:
            self._file_names = names.validate(_check_file_names, len(self.lengths))
        saved = state.optional("priorities", None)
        if saved.value is None:
            return
        count = len(self.lengths)
        values = [value.real(minimum=0.0) for value in saved.items()]
        if len(values) != count:
            raise saved.error(f"expected {count} priorities, one per trajectory, got {len(values)}")
        ids_field = state.optional("motion_ids", None)
        ids = [motion.integer() for motion in ids_field.items()]
        if ids != self.motion_ids:
            raise ids_field.error(
                f"expected the motion ids the rows hold ({len(self.motion_ids)} trajectories), "
                f"got {len(ids)} that differ"
            )
        exact = torch.tensor(values, dtype=torch.float64, device=self.device)
        try:
            _check_float32_values(exact, "the saved priorities")
            priorities = exact.to(torch.float32)
            self._check_stored(exact, priorities, "the saved priorities")
        except ValueError as err:
            raise saved.error(str(err)) from err
        total = float(exact.sum())
        # Saved priorities are normalised; anything else breaks the documented sum of 1.
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise saved.error(f"expected priorities summing to 1, got sum {total}")
        self._sampler.priorities = priorities


def _check_float32_values(values: torch.Tensor, where: str) -> None:
    """Refuse priorities that the float32 storage cannot hold as given.

    Raises:
        ValueError: a value is NaN, infinite or negative, exceeds float32 max, or is positive
            but rounds to 0 in float32.
    """
    bad = ~torch.isfinite(values) | (values < 0)
    if bool(bad.any()):
        position = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"{where}: expected finite values >= 0, got {float(values[position])} at "
            f"position {position}"
        )
    as_stored = values.to(torch.float32)
    for broken, what in (
        (torch.isinf(as_stored), f"exceeds float32 max ({FLOAT32_MAX})"),
        ((values > 0) & (as_stored == 0), "is positive but rounds to 0 in float32"),
    ):
        if bool(broken.any()):
            position = int(broken.nonzero()[0, 0])
            raise ValueError(
                f"{where}[{position}]: {float(values[position])} {what}, the dtype priorities "
                "are stored in"
            )


def _check_file_names(names: Any, argument: str, count: int) -> list[str]:
    """``names`` as a list of ``count`` str, one per trajectory.

    Raises:
        TypeError: not a sequence of str.
        ValueError: not ``count`` of them.
    """
    if isinstance(names, str | bytes) or not isinstance(names, Sequence):
        raise TypeError(f"{argument}: expected a list of str, got {type(names).__name__}")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(f"{argument}[{i}]: expected a str, got {type(name).__name__}")
    if len(names) != count:
        raise ValueError(
            f"{argument}: expected {count} names, one per trajectory, got {len(names)}"
        )
    return list(names)

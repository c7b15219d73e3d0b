"""What DI-engine's three buffers share: the ``IBuffer`` methods over a ring of item slots.

A DI-engine buffer (REFERENCE §11) is a ring of ``replay_buffer_size`` slots written at its
tail. :class:`DingBuffer` composes, as every bufcore buffer does (DESIGN §1):

- an item store (:mod:`bufcore.buffers.ding.items`: Python dicts in a list, or tensor dicts in
  bufcore's packed ring), chosen with ``storage=``;
- per-slot bookkeeping in numpy arrays: whether the slot holds a valid item, the item's unique
  id (its push number: ``replay_unique_id`` is ``f"{instance_name}_{n}"``), how often it was
  sampled (``use``) and the learner iteration it was collected at (``collect_iter``);
- a :class:`~bufcore.buffers.ding.monitor.ReplayMonitor` (``stats()``, ``log_stats()``);
- in meta-data mode (``enable_track_used_data``), a
  :class:`~bufcore.persist.file_remover.FileRemover` deleting the ``data_id`` file of every item
  that leaves the buffer (overwritten, removed or cleared); ``close()`` drains it.

The classes add their sampling (:mod:`~bufcore.buffers.ding.naive`,
:mod:`~bufcore.buffers.ding.advanced`, :mod:`~bufcore.buffers.ding.episode`). Saving is
:mod:`bufcore.buffers.ding.saving`'s: the same checkpoint directory as every bufcore buffer.

Items are never mutated: a push stores a copy of the dict (shallow, or deep with ``deepcopy``),
and keys a sample adds go on new dicts.
"""

from __future__ import annotations

import copy
import functools
import os
import warnings
from collections.abc import Callable, Mapping
from threading import RLock
from typing import Any, ClassVar, Concatenate, ParamSpec, TypeVar

import numpy as np
import torch

from bufcore.buffers.base import Buffer
from bufcore.buffers.ding.config import AttrDict, default_config, resolve_config
from bufcore.buffers.ding.inputs import (
    MISSING,
    ItemMeta,
    check_name,
    collect_iter,
    data_id_of,
)
from bufcore.buffers.ding.items import STORAGES, ListItems, PackedItems
from bufcore.buffers.ding.monitor import MetricsSink, ReplayMonitor
from bufcore.buffers.ding.saving import (
    META_KEY,
    META_ROWS,
    buffer_state,
    meta_path,
    parse_options,
    restore,
    slot_rows,
)
from bufcore.buffers.ding.throughput import Clock, check_clock
from bufcore.buffers.loading import SavedState
from bufcore.checks import (
    check_choice,
    check_device,
    check_int,
    check_seed,
    check_separator,
)
from bufcore.distributed import check_rank
from bufcore.fields import Field
from bufcore.persist.file_remover import FileRemover
from bufcore.rng import make_generator
from bufcore.storage.batches import RowSource
from bufcore.tree import KeyPath

D = TypeVar("D", bound="DingBuffer")
P = ParamSpec("P")
R = TypeVar("R")


def locked(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """Run a buffer method holding the buffer's lock, so that a collector thread pushing and
    a learner thread sampling (DI-engine's parallel mode) never see half a push. Needed by
    ``tests/buffers/ding/test_threads.py``."""

    @functools.wraps(method)
    def run(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return run


class DingBuffer(Buffer):
    """The shared core of the DI-engine buffers (see the module docstring).

    Args:
        cfg: A config (any mapping with some of :meth:`default_config`'s keys), or None.
        storage: ``"list"`` (any Python dicts, DI-engine's case) or ``"packed"`` (tensor dicts
            in bufcore's packed ring: the fast path); see :mod:`bufcore.buffers.ding.items`.
        device: Where packed rows live and draws are made.
        seed: Seed of the buffer's generator; None for a nondeterministic one.
        rank: Whose sample stream of ``seed`` (:func:`bufcore.rng.stream_seed`): ranks sharing
            a seed draw different batches, rank 0 the seed's own stream. ``None`` for this
            process's rank in the default process group (0 without one).
        clock: The time in seconds, for rates and the throughput controller
            (``time.monotonic`` by default).
        instance_name: Prefix of the unique ids (DI-engine's ``instance_name``).
        exp_name: DI-engine's experiment name (recorded only).
        nested_key_separator: Joins nested keys into dataset names when saving.
        **options: Top-level config keys (nested ones as mappings), applied over ``cfg``.

    Raises:
        TypeError: an option of the wrong type (names it).
        ValueError: an unknown config key or a value out of range, an unknown storage, or
            meta-data mode with packed storage.
    """

    defaults: ClassVar[dict[str, Any]]
    # Names of a class's own bookkeeping rows (under "_ding").
    extra_rows: ClassVar[tuple[str, ...]] = ()
    # Keys a push takes off an item (the buffer adds them back on the items it samples).
    stripped_keys: ClassVar[tuple[str, ...]] = ()
    _sampler: Any = None

    def __init__(
        self,
        cfg: Mapping[str, Any] | None = None,
        *,
        storage: str = "list",
        device: str | torch.device = "cpu",
        seed: int | None = None,
        rank: int | None = None,
        clock: Clock | None = None,
        instance_name: str = "buffer",
        exp_name: str = "default_experiment",
        nested_key_separator: str = "-",
        **options: Any,
    ) -> None:
        self._lock = RLock()
        self.cfg = resolve_config(self.defaults, cfg, options, type(self).__name__)
        self.storage_mode = check_choice(storage, "storage", STORAGES)
        self.device = check_device(device)
        self.seed = check_seed(seed)
        self.rank = check_rank(rank)
        self.instance_name = check_name(instance_name, "instance_name")
        self.exp_name = check_name(exp_name, "exp_name")
        self.nested_key_separator = check_separator(nested_key_separator)
        self._clock = check_clock(clock)
        capacity = self.cfg.replay_buffer_size
        if self.cfg.enable_track_used_data and self.storage_mode == "packed":
            raise ValueError(
                "storage: meta-data mode (enable_track_used_data) keeps each item's data_id "
                "path, which packed tensor rows cannot hold; use storage='list'"
            )
        self._items: ListItems | PackedItems = (
            ListItems(capacity, deepcopy=self.cfg.deepcopy)
            if self.storage_mode == "list"
            else PackedItems(capacity, device=self.device)
        )
        self._generator = make_generator(self.device, self.seed, rank=self.rank)
        self._live = np.zeros(capacity, dtype=bool)
        self._uid = np.zeros(capacity, dtype=np.int64)
        self._use = np.zeros(capacity, dtype=np.int64)
        self._collect = np.full(capacity, MISSING, dtype=np.int64)
        self._tail = 0
        self._full = False
        self._head = 0
        self._valid = 0
        self._next_uid = 0
        self._push_count = 0
        self._monitor = ReplayMonitor(
            window_seconds=self._rate_window(),
            average_range=self._average_range(),
            clock=self._clock,
        )
        self._remover = FileRemover() if self.cfg.enable_track_used_data else None

    # --------------------------------------------------------------- config
    @classmethod
    def default_config(cls) -> AttrDict:
        """The reference's config keys and defaults, with ``cfg_type`` (DI-engine's
        ``default_config()``)."""
        return default_config(cls.defaults, cls.__name__)

    def _rate_window(self) -> float:
        """Seconds over which ``stats()`` takes rates."""
        seconds: float = self.cfg.periodic_thruput_seconds
        return seconds

    def _average_range(self) -> int:
        """Sample calls whose use and staleness ``stats()`` combines."""
        return 5

    # ---------------------------------------------------------------- ring
    @property
    def replay_buffer_size(self) -> int:
        """Slots of the ring."""
        size: int = self.cfg.replay_buffer_size
        return size

    @property
    def push_count(self) -> int:
        """Items pushed (DI-engine's ``push_count``; a naive buffer's ``clear`` resets it)."""
        return self._push_count

    def count(self) -> int:
        """Valid items: held, and neither removed nor used up."""
        return self._valid

    def __len__(self) -> int:
        return self._valid

    @property
    def cursor(self) -> int:
        """Slot the next push writes first (DI-engine's ``tail``)."""
        return self._tail

    @property
    def is_full(self) -> bool:
        """Whether a push has reached the last slot since the last ``clear``."""
        return self._full

    def _filled(self) -> int:
        """Slots written since the last ``clear``: ``[0, filled)``."""
        return self.replay_buffer_size if self._full else self._tail

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(replay_buffer_size={self.replay_buffer_size}, "
            f"count={self._valid}, storage={self.storage_mode!r}, device={str(self.device)!r})"
        )

    # ---------------------------------------------------------------- pushing
    @locked
    def push(self, data: Any, cur_collector_envstep: int) -> None:
        """Push one item (a dict) or a list of them at the tail; the oldest are overwritten.

        Every item is checked before anything is stored: after an error the buffer is as
        before. A push the throughput controller refuses stores nothing (see ``stats()``).

        Args:
            data: A dict, or a list of dicts (DI-engine's ``push``).
            cur_collector_envstep: The collector's env step (recorded by the monitor only).

        Raises:
            TypeError: an item is not a dict, ``collect_iter`` is not an int (or a list of
                ints), a ``data_id`` is not a path, or (packed storage) a leaf is not numeric.
            ValueError: a priority NaN, infinite or negative, a missing ``data_id`` in
                meta-data mode, an item using the reserved key ``"_ding"``, or (packed) items
                whose keys, shapes or dtypes differ from the stored ones.
        """
        check_int(cur_collector_envstep, "cur_collector_envstep")
        items = self._checked_items(data)
        if not items:
            return
        metas = [self._item_meta(item, f"data[{i}]") for i, item in enumerate(items)]
        stored = [self._stored(item) for item in items]
        prepared = self._items.prepare(stored)
        reason = self._push_refusal(len(items))
        if reason is not None:
            self._monitor.on_refused_push(reason)
            return
        self._write(prepared, metas)

    def _checked_items(self, data: Any) -> list[Any]:
        """``data`` as a list of items.

        Raises:
            TypeError: not a dict or a list of dicts.
            ValueError: an item uses the reserved key ``"_ding"``.
        """
        items = [data] if isinstance(data, Mapping) else data
        if not isinstance(items, list):
            raise TypeError(
                f"data: expected a dict or a list of dicts, got {type(data).__name__}"
            )
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise TypeError(f"data[{i}]: expected a dict, got {type(item).__name__}")
            if META_KEY in item:
                raise ValueError(f"data[{i}]: the key {META_KEY!r} is reserved for bookkeeping")
        return items

    def _item_meta(self, item: Any, where: str) -> ItemMeta:
        """What a push reads off ``item``: its ``collect_iter``, ``data_id`` and priority.

        Raises:
            TypeError: a malformed ``collect_iter`` or ``data_id``.
            ValueError: a missing ``data_id`` in meta-data mode.
        """
        collect = collect_iter(item.get("collect_iter"), f"{where}['collect_iter']")
        data_id = None
        if self._remover is not None:
            if "data_id" not in item:
                raise ValueError(
                    f"{where}: meta-data mode (enable_track_used_data) needs a 'data_id' file "
                    "path on every item"
                )
            data_id = data_id_of(item["data_id"], f"{where}['data_id']")
        return ItemMeta(collect, data_id, None)

    def _stored(self, item: Any) -> Any:
        """What a slot keeps of ``item``: a shallow copy without :attr:`stripped_keys`."""
        return {key: value for key, value in item.items() if key not in self.stripped_keys}

    def _push_refusal(self, count: int) -> str | None:
        """Why a push of ``count`` items is refused (the throughput controller), or None."""
        return None

    def _write(self, prepared: Any, metas: list[ItemMeta]) -> None:
        """Store checked items at the tail and update the bookkeeping."""
        capacity = self.replay_buffer_size
        count = len(metas)
        start = self._tail
        kept = min(count, capacity)
        lost = count - kept  # written and overwritten within this push
        slots = (start + lost + np.arange(kept)) % capacity
        live = self._live[slots]
        # The files of the items this push overwrites, and of those it writes and overwrites
        # itself (a push longer than the ring), go once the write succeeded.
        leaving = [meta.data_id for meta in metas[:lost] if meta.data_id is not None]
        if self._remover is not None:
            held = (self._items.item(slot) for slot in slots.tolist())
            leaving += [item["data_id"] for item in held if item is not None]
        self._items.write(start, prepared)  # the one step that may fail (a first allocation)
        for data_id in leaving:
            self._queue_file(data_id)
        overwritten = int(live.sum())
        if lost:  # every slot was written twice: the oldest item is at the new tail
            self._head = (start + count) % capacity
        elif overwritten:  # DI-engine's head: past the last item overwritten
            self._head = (int(slots[np.flatnonzero(live)[-1]]) + 1) % capacity
        self._live[slots] = True
        self._uid[slots] = self._next_uid + lost + np.arange(kept)
        self._use[slots] = 0
        self._collect[slots] = [meta.collect_iter for meta in metas[lost:]]
        self._next_uid += count
        self._push_count += count
        self._valid += kept - overwritten
        self._full = self._full or start + count >= capacity
        self._tail = (start + count) % capacity
        self._monitor.on_removed(overwritten + lost)
        self._written(start, count, slots, metas[lost:])
        self._monitor.on_push(count)

    def _written(self, start: int, count: int, slots: np.ndarray, metas: list[ItemMeta]) -> None:
        """After a push of ``count`` items from ``start`` that kept ``slots`` (``metas``):
        what a class adds (priorities)."""

    def _remove_file(self, slot: int) -> None:
        """Queue the ``data_id`` file of the item held at ``slot``, if any (meta-data mode)."""
        if self._remover is None:
            return
        item = self._items.item(slot)
        if item is not None:
            self._queue_file(item["data_id"])

    def _queue_file(self, data_id: str) -> None:
        if self._remover is not None:
            self._remover.add(data_id)

    # ------------------------------------------------------------ removing
    def _remove(self, slots: np.ndarray, *, keep_objects: bool = False) -> None:
        """Take valid items out: never sampled again, no longer counted. With
        ``keep_objects`` (a used-up item in meta-data mode, which the learner may still read)
        the item and its file stay until its slot is overwritten or cleared."""
        if len(slots) == 0:
            return
        self._live[slots] = False
        self._valid -= len(slots)
        self._forget(slots)
        if not keep_objects:
            for slot in slots.tolist():
                self._remove_file(slot)
            self._items.release(slots.tolist())
        self._monitor.on_removed(len(slots))

    def _forget(self, slots: np.ndarray) -> None:
        """What a class does for removed slots (priority 0)."""

    @locked
    def clear(self) -> None:
        """Remove every item (their files go in meta-data mode); the next push writes slot 0."""
        if self._remover is not None:
            for slot in range(self._filled()):
                self._remove_file(slot)
        self._monitor.on_removed(self._valid)
        self._items.clear()
        self._live[:] = False
        self._valid = 0
        self._tail = 0
        self._full = False
        self._head = 0
        self._cleared()

    def _cleared(self) -> None:
        """What a class resets on ``clear`` besides the items."""

    # ---------------------------------------------------------------- sampling
    def _checked_sample_args(self, size: Any, cur_learner_iter: Any) -> tuple[int, int]:
        """Raises:
        TypeError: not ints.
        ValueError: ``size`` negative.
        """
        return (
            check_int(size, "size", minimum=0),
            check_int(cur_learner_iter, "cur_learner_iter"),
        )

    def _refused(self, reason: str) -> None:
        """Record a refused sample (the caller then returns None)."""
        self._monitor.on_refused_sample(reason)

    def _staleness(self, slots: np.ndarray, cur_learner_iter: int) -> np.ndarray:
        """``cur_learner_iter - collect_iter`` per slot; -1 where the item gave none."""
        collect = self._collect[slots]
        return np.where(collect == MISSING, -1, cur_learner_iter - collect)

    def _used(self, slots: np.ndarray) -> np.ndarray:
        """Count one more use of each drawn slot; each draw's use count (a slot drawn twice in
        one batch reads 1, then 2)."""
        uses = np.empty(len(slots), dtype=np.int64)
        for position, slot in enumerate(slots.tolist()):
            self._use[slot] += 1
            uses[position] = self._use[slot]
        return uses

    def _draw_uniform(
        self, candidates: np.ndarray, size: int, replace: bool, generator: torch.Generator
    ) -> np.ndarray:
        """``size`` of ``candidates`` uniformly, with or without replacement."""
        count = len(candidates)
        if replace:
            picks = torch.randint(count, (size,), generator=generator, device=generator.device)
        else:
            picks = torch.randperm(count, generator=generator, device=generator.device)[:size]
        drawn: np.ndarray = candidates[picks.cpu().numpy()]
        return drawn

    # ------------------------------------------------------------ the IBuffer rest
    @locked
    def update(self, info: Mapping[str, Any]) -> int:
        """Nothing to update in this buffer (kept for DI-engine's interface; warns).

        Returns:
            0: no item was updated.
        """
        warnings.warn(
            f"{type(self).__name__} has no priorities: update() changes nothing",
            stacklevel=2,
        )
        return 0

    def start(self) -> None:
        """Start deleting the files of items that left the buffer in the background
        (meta-data mode; nothing otherwise)."""
        if self._remover is not None:
            self._remover.start()

    @locked
    def close(self) -> None:
        """Clear the buffer (as DI-engine's ``close`` does: in meta-data mode every item's file
        goes), then delete every queued file and stop the remover.

        Not called when the buffer is garbage collected (DI-engine's ``__del__`` does, which
        deletes files behind a user's back).

        Raises:
            OSError: deleting a file failed (the first failure; the buffer is closed anyway).
        """
        self.clear()
        if self._remover is not None:
            self._remover.close()

    # ------------------------------------------------------------ monitoring
    @locked
    def stats(self) -> dict[str, Any]:
        """What the buffer reports about itself, as one flat JSON-ready dict: ``buffer`` (the
        class name), ``count``, ``capacity``, push and sample counts and rates (items per
        second), refused pushes and samples, items removed, mean and max ``use`` and
        ``staleness`` of recent samples (see :mod:`bufcore.buffers.ding.monitor`),
        ``last_refusal``; the prioritized buffer adds priority quantiles, ``beta`` and its
        throughput ratio."""
        return {
            "buffer": type(self).__name__,
            "count": self._valid,
            "capacity": self.replay_buffer_size,
            **self._monitor.stats(),
        }

    def log_stats(self, logger: MetricsSink, step: int, *, kind: str = "replay") -> Any:
        """Append :meth:`stats` to a run's metrics log: ``logger.log(kind, step, stats)``.

        Args:
            logger: A :class:`bufcore.RunLogger` (or anything with its ``log`` method).
            step: The training step of the record.
            kind: The record's kind.

        Returns:
            What ``logger.log`` returned (the record, for a ``RunLogger``).

        Raises:
            TypeError: ``logger`` has no ``log`` method.
        """
        log = getattr(logger, "log", None)
        if not callable(log):
            raise TypeError(
                f"logger: expected a RunLogger (an object with log(kind, step, metrics)), got "
                f"{type(logger).__name__}"
            )
        return log(kind, step, self.stats())

    # ------------------------------------------------------------ saving (DI-engine names)
    def save_data(self, file_name: str | os.PathLike[str]) -> None:
        """Save the buffer as a checkpoint directory at ``file_name`` (DI-engine's
        ``save_data``; bufcore's format, never pickle). Same as :meth:`save`.

        Raises:
            TypeError: a list-mode item holds what cannot be saved without pickle (names the
                slot and key).
            ValueError: list-mode items disagree on keys, shapes or dtypes; or as :meth:`save`.
        """
        self.save(file_name)

    def load_data(self, file_name: str | os.PathLike[str]) -> None:
        """Push the valid items of a DI-engine buffer checkpoint, oldest first (DI-engine's
        ``load_data``: they get new ids; a prioritized buffer's items bring their priority).

        Raises:
            ValueError: the checkpoint holds another kind of buffer; or as :meth:`push`.
            CorruptCheckpointError: as :func:`bufcore.load_buffer`.
        """
        source = DingBuffer.load(file_name)
        self.push(source.held_items(), 0)

    @locked
    def held_items(self) -> list[Any]:
        """The valid items, oldest first, as stored (no sampling keys; a prioritized buffer's
        with their current ``priority``)."""
        capacity = self.replay_buffer_size
        order = (np.arange(self._filled()) + (self._tail if self._full else 0)) % capacity
        slots = order[self._live[order]]
        return [copy.copy(item) for item in self._items.read(slots.tolist())]

    # ------------------------------------------------------------ state idiom
    @locked
    def state_dict(self) -> dict[str, Any]:
        """The buffer as plain data and row tensors (:mod:`bufcore.buffers.ding.saving`).

        Raises:
            TypeError: a list-mode item holds what cannot be saved without pickle.
            ValueError: list-mode items disagree on keys, shapes or dtypes.
        """
        rows, entries = slot_rows(self)
        if self._filled():
            rows.update({meta_path(name): t for name, t in self._extra_rows().items()})
        return buffer_state(self, rows, {**entries, **self._extra_state()})

    def _extra_rows(self) -> dict[str, torch.Tensor]:
        """A class's own bookkeeping rows (``[filled]`` each)."""
        return {}

    def _extra_state(self) -> dict[str, Any]:
        """A class's own entries of ``state['ding']``."""
        return {}

    def _load_extra(self, rows: RowSource, ding: Field) -> None:
        """Take back what :meth:`_extra_rows` and :meth:`_extra_state` saved.

        Raises:
            StateError: a field is missing or malformed.
        """

    @classmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        return parse_options(cls, config)

    @classmethod
    def sampled_leaves(cls, config: Field) -> list[KeyPath]:
        """The bookkeeping rows: a partial load always reads them."""
        return [meta_path(name) for name in (*META_ROWS, *cls.extra_rows)]

    @classmethod
    def _restored(
        cls: type[D], options: dict[str, Any], rows: RowSource, config: Field, state: Field
    ) -> D:
        buffer = restore(cls, options, rows, config, state)
        buffer._load_extra(rows, state.key("ding"))
        return buffer

    def load_state_dict(self, state: Mapping[str, Any] | SavedState) -> None:
        """As :meth:`Buffer.load_state_dict`; the buffer keeps its clock (a clock is not
        saved: a loaded buffer counts on ``time.monotonic``), and in meta-data mode its
        remover (queue and thread) carries on."""
        remover, clock = self._remover, self._clock
        super().load_state_dict(state)
        self._use_clock(clock)
        if remover is not None and self._remover is not None:
            self._remover = remover

    def _use_clock(self, clock: Clock) -> None:
        """Count time on ``clock`` from now on (counts and rates carry over)."""
        self._clock = clock
        self._monitor.rates.use_clock(clock)


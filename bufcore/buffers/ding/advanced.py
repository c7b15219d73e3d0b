"""``AdvancedReplayBuffer``: DI-engine's prioritized buffer with its data-quality monitor and
throughput controller (REFERENCE §11.3, DESIGN §2 decision 10).

Composition: the shared ring of :class:`~bufcore.buffers.ding.core.DingBuffer`, a
:class:`~bufcore.sampling.prioritized.PrioritizedSampler` over its slots (``alpha``, ``beta``
annealed over ``anneal_step`` draws, ``eps`` 1e-5; 0 ``anneal_step`` keeps ``beta``) and a
:class:`~bufcore.buffers.ding.throughput.ThruputController`.

- **Push**: an item's own ``"priority"`` is used as given (no eps, the largest priority
  unchanged, as in DI-engine), else it gets the largest priority seen (1.0 at first).
- **update(info)**: parallel lists ``replay_unique_id``, ``replay_buffer_idx``, ``priority``;
  an entry applies only if its slot still holds that item (others are skipped, as DI-engine
  skips stale ids); it stores ``priority + 1e-5``. Without ``"priority"`` nothing happens.
- **sample(size, cur_learner_iter)**: ``[]`` for 0. Otherwise (1) with a finite
  ``max_staleness``, items from the oldest on are removed while
  ``cur_learner_iter - collect_iter >= max_staleness`` (the old buffer's ``>=``), up to the
  first fresh one; (2) refused (None) if ``count() / size < sample_min_limit_ratio``, if the
  throughput controller refuses, or if every valid item has priority 0; (3) ``size`` draws by
  priority (i.i.d., see the README's differences); each returned item is a new dict: the stored
  keys plus ``replay_unique_id``, ``replay_buffer_idx``, ``priority`` (current), ``use`` (this
  draw's count), ``staleness`` and ``IS`` = ``(p_i / p_min) ** -beta``; (4) items with
  ``use >= max_use`` are removed at once from the draws and from ``count()`` (deferred removal:
  in meta-data mode the item and its file stay until the slot is overwritten, since the learner
  may still read the batch just returned).
- **clear**: every item goes, the largest priority is back to 1.0; ``push_count``, the unique
  ids and beta's annealing go on (as in DI-engine).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from bufcore.buffers.ding.config import ADVANCED_DEFAULTS
from bufcore.buffers.ding.core import DingBuffer, locked
from bufcore.buffers.ding.inputs import ItemMeta, check_priority
from bufcore.buffers.ding.saving import meta_path
from bufcore.buffers.ding.throughput import Clock, ThruputController
from bufcore.buffers.prioritized import saved_sampler
from bufcore.errors import StateError
from bufcore.fields import Field
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.priority_maths import priority_quantiles
from bufcore.sampling.samplers import RingPosition
from bufcore.sampling.segment_tree import check_leaf_index, check_weights
from bufcore.storage.batches import RowSource

# DI-engine's eps, added to every updated priority.
EPS = 1e-5
# Slots the staleness walk looks at per numpy step.
_WALK_CHUNK = 1024
# What sample() adds to each item (a push takes them off an item pushed again).
SAMPLE_KEYS = ("replay_unique_id", "replay_buffer_idx", "priority", "use", "staleness", "IS")


class AdvancedReplayBuffer(DingBuffer):
    """DI-engine's advanced buffer: prioritized replay, staleness and use limits, throughput
    control (see the module docstring).

    ``AdvancedReplayBuffer(cfg)`` or ``AdvancedReplayBuffer(replay_buffer_size=1000,
    alpha=0.6, max_use=4, ...)``; see :class:`~bufcore.buffers.ding.core.DingBuffer` for the
    options and :meth:`default_config` for the config keys.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = ("bufcore.AdvancedReplayBuffer",)
    defaults: ClassVar[dict[str, Any]] = ADVANCED_DEFAULTS
    stripped_keys: ClassVar[tuple[str, ...]] = SAMPLE_KEYS
    extra_rows: ClassVar[tuple[str, ...]] = ("priority",)

    def __init__(self, cfg: Mapping[str, Any] | None = None, **options: Any) -> None:
        super().__init__(cfg, **options)
        cfg = self.cfg
        self._sampler: PrioritizedSampler = PrioritizedSampler(
            alpha=cfg.alpha,
            beta=cfg.beta,
            anneal_steps=cfg.anneal_step or None,
            eps=EPS,
        )
        self._sampler.bind(self.replay_buffer_size, 1)
        limit = cfg.thruput_controller.push_sample_rate_limit
        self._thruput = ThruputController(
            max_rate=limit.max,
            min_rate=limit.min,
            window_seconds=cfg.thruput_controller.window_seconds,
            clock=self._clock,
        )

    def _use_clock(self, clock: Clock) -> None:
        super()._use_clock(clock)
        self._thruput.counts.use_clock(clock)

    def _rate_window(self) -> float:
        seconds: float = self.cfg.monitor.periodic_thruput.seconds
        return seconds

    def _average_range(self) -> int:
        average_range: int = self.cfg.monitor.sampled_data_attr.average_range
        return average_range

    # ------------------------------------------------------------------ options
    @property
    def beta(self) -> float:
        """The importance-weight exponent the next sample uses."""
        return self._sampler.beta

    @property
    def max_priority(self) -> float:
        """The largest priority given so far (what a pushed item without one gets)."""
        return self._sampler.max_priority

    @property
    def sampler(self) -> PrioritizedSampler:
        """The prioritized sampler over the slots."""
        return self._sampler

    def priorities(self) -> torch.Tensor:
        """The priorities of the valid items (float64, oldest slot first in physical order)."""
        filled = self._filled()
        held = self._sampler.priorities().numpy()[:filled]
        return torch.from_numpy(held[self._live[:filled]].copy())

    # ------------------------------------------------------------------ pushing
    def _item_meta(self, item: Any, where: str) -> ItemMeta:
        meta = super()._item_meta(item, where)
        meta.priority = check_priority(item.get("priority"), f"{where}['priority']")
        return meta

    def _push_refusal(self, count: int) -> str | None:
        return self._thruput.can_push(count)

    def _written(self, start: int, count: int, slots: np.ndarray, metas: list[ItemMeta]) -> None:
        ring = RingPosition(self._filled(), self.replay_buffer_size)
        self._sampler.written(ring, start, count)
        given = [(slot, meta.priority) for slot, meta in zip(slots.tolist(), metas, strict=True)
                 if meta.priority is not None]
        if given:
            rows, values = zip(*given, strict=True)
            self._sampler.assign(np.array(rows, dtype=np.int64), np.array(values))
        self._thruput.counts.add(pushed=count)

    def _forget(self, slots: np.ndarray) -> None:
        self._sampler.assign(slots.astype(np.int64), 0.0)

    def _cleared(self) -> None:
        self._sampler.reset()

    # ------------------------------------------------------------------ updating
    @locked
    def update(self, info: Mapping[str, Any]) -> int:
        """Set the priorities of sampled items (DI-engine's ``update``).

        Args:
            info: ``replay_unique_id`` (the ids the items came with: strs, or their ints),
                ``replay_buffer_idx`` and ``priority`` (non-negative numbers), parallel
                sequences. Without ``"priority"`` nothing happens.

        Returns:
            How many items were updated: entries whose slot holds another item by now (or
            none: removed, cleared) are skipped.

        Raises:
            TypeError: ``info`` is not a mapping, an id neither a str nor an int, indices not
                integers or priorities not numbers.
            KeyError: ``replay_unique_id`` or ``replay_buffer_idx`` is missing.
            ValueError: the sequences differ in length, or a priority NaN, infinite or
                negative. Nothing changes then.
            IndexError: an index outside ``[0, replay_buffer_size)``.
        """
        if not isinstance(info, Mapping):
            raise TypeError(f"info: expected a mapping, got {type(info).__name__}")
        if "priority" not in info:
            return 0
        for key in ("replay_unique_id", "replay_buffer_idx"):
            if key not in info:
                raise KeyError(f"info: missing {key!r} (needed with 'priority')")
        index = check_leaf_index(
            info["replay_buffer_idx"], self.replay_buffer_size, "info['replay_buffer_idx']"
        )
        priority = check_weights(info["priority"], len(index), "info['priority']")
        ids = self._unique_ids(info["replay_unique_id"])
        if len(ids) != len(index):
            raise ValueError(
                f"info: expected parallel sequences, got {len(ids)} ids and {len(index)} "
                "indices"
            )
        keep = self._live[index] & (self._uid[index] == ids)
        if not keep.any():
            return 0
        return self._sampler.update(index, priority, keep=keep)

    def _unique_ids(self, ids: Any) -> np.ndarray:
        """Push numbers of ``replay_unique_id`` entries; -1 for ids of another buffer.

        Raises:
            TypeError: an entry neither a str nor an int, or not a sequence.
        """
        if isinstance(ids, torch.Tensor | np.ndarray):
            ids = ids.tolist()
        if isinstance(ids, str) or not isinstance(ids, Sequence):
            raise TypeError(
                f"info['replay_unique_id']: expected a list of ids, got {type(ids).__name__}"
            )
        prefix = f"{self.instance_name}_"
        numbers = np.empty(len(ids), dtype=np.int64)
        for position, entry in enumerate(ids):
            if isinstance(entry, str):
                tail = entry[len(prefix):] if entry.startswith(prefix) else ""
                numbers[position] = int(tail) if tail.isdigit() else -1
            elif isinstance(entry, int | np.integer) and not isinstance(entry, bool | np.bool_):
                numbers[position] = int(entry)
            else:
                raise TypeError(
                    f"info['replay_unique_id'][{position}]: expected a str or an int, got "
                    f"{entry!r:.80}"
                )
        return numbers

    # ------------------------------------------------------------------ sampling
    @locked
    def sample(
        self, size: int, cur_learner_iter: int, sample_range: slice | None = None
    ) -> list[dict[str, Any]] | None:
        """``size`` items drawn by priority, or None when refused (see the module docstring).

        Args:
            size: Items to draw (0 gives ``[]``).
            cur_learner_iter: The learner's iteration (staleness is measured against it).
            sample_range: Not supported (DI-engine's rescaled range is broken for ranges
                starting at 0, REFERENCE §11.4 c); must be None.

        Returns:
            New dicts (see the module docstring), or None when refused (the reason goes to
            ``stats()['last_refusal']``).

        Raises:
            TypeError: ``size`` or ``cur_learner_iter`` not an int.
            ValueError: ``size`` negative, or a ``sample_range``.
        """
        size, cur = self._checked_sample_args(size, cur_learner_iter)
        if sample_range is not None:
            raise ValueError(
                "sample_range: the advanced buffer draws by priority over every valid item; "
                "sample_range is not supported"
            )
        if size == 0:
            return []
        self._remove_stale(cur)
        reason = self._sample_refusal(size)
        if reason is not None:
            self._refused(reason)
            return None
        try:
            with self._drawing(None, argument="size") as generator:
                index = self._sampler.draw(
                    RingPosition(self._filled(), self.replay_buffer_size), size, generator
                )
        except ValueError as err:  # every valid item has priority 0: nothing can be drawn
            self._refused(str(err))
            return None
        slots = index.rows.cpu().numpy()
        weights = index.weights.cpu().numpy() if index.weights is not None else np.ones(size)
        uses = self._used(slots)
        staleness = self._staleness(slots, cur)
        stored = self._sampler.priorities(slots).numpy()
        objects = self._items.read(slots.tolist())
        result = self._dressed(objects, slots, uses, staleness, stored, weights)
        max_use = self.cfg.max_use
        if max_use != math.inf:
            used_up = np.unique(slots[self._use[slots] >= max_use])
            self._remove(used_up, keep_objects=self._remover is not None)
        self._monitor.on_sample(uses, staleness)
        self._thruput.counts.add(sampled=size)
        return result

    def _dressed(
        self,
        objects: list[Any],
        slots: np.ndarray,
        uses: np.ndarray,
        staleness: np.ndarray,
        priority: np.ndarray,
        weights: np.ndarray,
    ) -> list[dict[str, Any]]:
        """New dicts: each item's keys plus the sampling keys. A slot drawn again in one batch
        gets deep copies of its values without ``deepcopy`` (as DI-engine copies duplicates)."""
        seen: set[int] = set()
        result = []
        for position, (item, slot) in enumerate(zip(objects, slots.tolist(), strict=True)):
            fields = dict(item)
            if slot in seen and self.storage_mode == "list" and not self.cfg.deepcopy:
                fields = copy.deepcopy(fields)
            seen.add(slot)
            fields["replay_unique_id"] = f"{self.instance_name}_{int(self._uid[slot])}"
            fields["replay_buffer_idx"] = slot
            fields["priority"] = float(priority[position])
            fields["use"] = int(uses[position])
            fields["staleness"] = int(staleness[position])
            fields["IS"] = float(weights[position])
            result.append(fields)
        return result

    def _sample_refusal(self, size: int) -> str | None:
        """Why a sample of ``size`` is refused (after the staleness removal), or None."""
        ratio = self.cfg.thruput_controller.sample_min_limit_ratio
        if self._valid / size < ratio:
            return (
                f"not enough items: valid({self._valid}) / sample({size}) < "
                f"sample_min_limit_ratio({ratio})"
            )
        return self._thruput.can_sample(size)
    def _remove_stale(self, cur_learner_iter: int) -> None:
        """From the oldest item on, remove items while ``cur - collect_iter >= max_staleness``
        (items without ``collect_iter`` are fresh), up to the first fresh one."""
        max_staleness = self.cfg.max_staleness
        if max_staleness == math.inf:
            return
        capacity = self.replay_buffer_size
        span = capacity if self._full and self._head == self._tail else (
            (self._tail - self._head) % capacity
        )
        done = 0
        while done < span:
            order = (self._head + np.arange(min(_WALK_CHUNK, span - done))) % capacity
            live = self._live[order]
            # An item without collect_iter reads staleness -1: never stale.
            stale = live & (self._staleness(order, cur_learner_iter) >= max_staleness)
            fresh = np.flatnonzero(live & ~stale)
            cut = int(fresh[0]) if len(fresh) else len(order)
            self._remove(order[:cut][stale[:cut]])
            if len(fresh):
                self._head = int(order[cut])
                return
            done += len(order)
            self._head = (self._head + len(order)) % capacity
        self._head = self._tail

    # ------------------------------------------------------------------ monitoring
    @locked
    def stats(self) -> dict[str, Any]:
        limit = self.cfg.thruput_controller.push_sample_rate_limit
        priorities = self.priorities().numpy()
        return {
            **super().stats(),
            "beta": self.beta,
            "max_priority": self.max_priority,
            **priority_quantiles(priorities),
            "thruput_ratio": self._thruput.ratio(),
            "thruput_min": limit.min,
            "thruput_max": None if limit.max == math.inf else limit.max,
        }

    # ------------------------------------------------------------------ saving
    @locked
    def held_items(self) -> list[Any]:
        capacity = self.replay_buffer_size
        order = (np.arange(self._filled()) + (self._tail if self._full else 0)) % capacity
        slots = order[self._live[order]]
        priority = self._sampler.priorities().numpy()
        items = [dict(item) for item in self._items.read(slots.tolist())]
        for item, slot in zip(items, slots.tolist(), strict=True):
            item["priority"] = float(priority[slot])
        return items

    def _extra_rows(self) -> dict[str, torch.Tensor]:
        return {"priority": self._sampler.priorities()}

    def _extra_state(self) -> dict[str, Any]:
        saved = self._sampler.state_dict()
        return {
            "sampler": {"kind": self._sampler.kind, "config": saved["config"],
                        "state": saved["state"]},
            "thruput": self._thruput.counts.state_dict(),
        }

    def _load_extra(self, rows: RowSource, ding: Field) -> None:
        sampler = saved_sampler(ding)
        if sampler is None:
            raise ding.key("sampler").error("missing")
        expected = self._sampler.config()
        if sampler.config() != expected:
            raise ding.key("sampler").error(
                f"options {sampler.config()} differ from the config's {expected}"
            )
        sampler.bind(self.replay_buffer_size, 1)
        filled = self._filled()
        if filled:
            path = meta_path("priority")
            leaf = rows.spec.get(path)
            if leaf is None or path in rows.absent or leaf.shape != () or (
                leaf.dtype != torch.float64
            ):
                raise StateError("rows", f"{path}: expected float64 [{filled}]")
            tensor = torch.empty(filled, dtype=torch.float64)
            rows.read_into({path: tensor})
            try:
                sampler.load_rows(RingPosition(filled, self.replay_buffer_size),
                                  {"priority": tensor})
            except (TypeError, ValueError) as err:
                raise StateError("rows", f"{path}: {err}") from err
            dead = np.flatnonzero(~self._live[:filled])
            if len(dead) and (tensor.numpy()[dead] != 0).any():
                raise StateError("rows", f"{path}: removed items must have priority 0")
        self._sampler = sampler
        self._thruput.counts.load_state_dict(ding.key("thruput"))


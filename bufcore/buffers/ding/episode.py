"""``EpisodeReplayBuffer``: DI-engine's naive buffer whose items are whole episodes, and
fixed-length chunks drawn from them (REFERENCE §11.2).

An episode is a non-empty list of transition dicts; ``push`` takes a list of episodes (one
episode is pushed as ``[episode]``). ``sample`` draws whole episodes exactly as
:class:`~bufcore.buffers.ding.naive.NaiveReplayBuffer` draws items. :meth:`sample_chunks`
returns ``size`` chunks of ``chunk_length`` consecutive transitions, each from one episode,
never across two: by default every valid chunk of every held episode is equally likely
(``weighting="window"``); ``"trajectory"`` picks a long enough episode uniformly, then a
start. Episodes shorter than ``chunk_length`` are never chosen; with none long enough the
call refuses (None). The chunk draw is the window draw of the trajectory buffers
(:func:`bufcore.sampling.windows.draw_from_table`).

List storage only (episodes differ in length). A checkpoint holds the transitions of the valid
episodes, slot by slot, as rows (columns of :mod:`bufcore.buffers.ding.columns`) with
``_ding-episode`` naming each one's slot; the per-slot bookkeeping (unique id, use,
collect_iter) is in state.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
import torch

from bufcore.buffers.ding.columns import column_items, item_columns
from bufcore.buffers.ding.config import EPISODE_DEFAULTS
from bufcore.buffers.ding.core import D, locked
from bufcore.buffers.ding.inputs import MISSING, ItemMeta, collect_iter
from bufcore.buffers.ding.items import ListItems
from bufcore.buffers.ding.naive import NaiveReplayBuffer
from bufcore.buffers.ding.saving import buffer_state, meta_path, parse_kinds, read_meta
from bufcore.checks import check_int
from bufcore.errors import StateError
from bufcore.fields import Field
from bufcore.sampling.windows import TrajectoryTable, Weighting, check_weighting, draw_from_table
from bufcore.storage.batches import RowSource
from bufcore.tree import KeyPath, format_key_path

EPISODE_ROW = "episode"
_SLOT_FIELDS = ("uid", "use", "collect_iter")


class EpisodeReplayBuffer(NaiveReplayBuffer):
    """DI-engine's episode buffer: whole episodes in, episodes or fixed-length chunks out (see
    the module docstring).

    Raises:
        ValueError: as :class:`NaiveReplayBuffer`, or packed storage, or meta-data mode (an
            episode is a list, with no ``data_id`` of its own).
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = ("bufcore.EpisodeReplayBuffer",)
    defaults: ClassVar[dict[str, Any]] = EPISODE_DEFAULTS

    def __init__(self, cfg: Mapping[str, Any] | None = None, **options: Any) -> None:
        if options.get("storage", "list") != "list":
            raise ValueError(
                f"storage: an episode buffer keeps episodes of any length as Python lists; "
                f"expected 'list', got {options['storage']!r:.80}"
            )
        super().__init__(cfg, **options)
        if self.cfg.enable_track_used_data:
            raise ValueError(
                "cfg['enable_track_used_data']: meta-data mode needs a data_id per item, and "
                "an episode is a list; track the files of the transitions yourself"
            )

    @property
    def episode_len(self) -> list[int]:
        """Lengths of the held episodes, in slot order (DI-engine's; empty slots left out)."""
        slots = np.flatnonzero(self._live[: self._filled()])
        return [len(episode) for episode in self._items.read(slots.tolist())]

    # ------------------------------------------------------------------ pushing
    def _checked_items(self, data: Any) -> list[Any]:
        if not isinstance(data, list):
            raise TypeError(
                f"data: expected a list of episodes (each a list of transition dicts), got "
                f"{type(data).__name__}"
            )
        for i, episode in enumerate(data):
            if not isinstance(episode, list | tuple):
                hint = "; push one episode as [episode]" if isinstance(episode, Mapping) else ""
                raise TypeError(
                    f"data[{i}]: expected an episode (a list of transition dicts), got "
                    f"{type(episode).__name__}{hint}"
                )
            if not episode:
                raise ValueError(f"data[{i}]: an episode needs at least one transition")
            for t, transition in enumerate(episode):
                if not isinstance(transition, Mapping):
                    raise TypeError(
                        f"data[{i}][{t}]: expected a transition dict, got "
                        f"{type(transition).__name__}"
                    )
        return data

    def _item_meta(self, item: Any, where: str) -> ItemMeta:
        """An episode's ``collect_iter`` is its transitions' smallest."""
        given = [
            collect_iter(transition.get("collect_iter"), f"{where}[{t}]['collect_iter']")
            for t, transition in enumerate(item)
        ]
        known = [value for value in given if value != MISSING]
        return ItemMeta(min(known) if known else MISSING, None, None)

    def _stored(self, item: Any) -> Any:
        return [dict(transition) for transition in item]

    # ------------------------------------------------------------------ chunks
    @locked
    def sample_chunks(
        self,
        size: int,
        chunk_length: int,
        cur_learner_iter: int,
        *,
        weighting: Weighting = "window",
    ) -> list[list[Any]] | None:
        """``size`` chunks of ``chunk_length`` consecutive transitions, with replacement.

        Args:
            size: Chunks to draw (0 gives ``[]``).
            chunk_length: Transitions per chunk.
            cur_learner_iter: The learner's iteration (for the monitor's staleness).
            weighting: ``"window"``: every valid chunk equally likely; ``"trajectory"``: every
                episode of at least ``chunk_length`` transitions equally likely, then a start.

        Returns:
            Lists of transition dicts (the stored dicts; deep copies with ``deepcopy``), or
            None when no held episode has ``chunk_length`` transitions (the reason goes to
            ``stats()['last_refusal']``).

        Raises:
            TypeError: an argument of the wrong type.
            ValueError: ``size`` negative, ``chunk_length`` below 1, or an unknown weighting.
        """
        size, cur = self._checked_sample_args(size, cur_learner_iter)
        length = check_int(chunk_length, "chunk_length", minimum=1)
        weighting = check_weighting(weighting)
        if size == 0:
            return []
        slots = np.flatnonzero(self._live[: self._filled()])
        episodes = self._items.read(slots.tolist())
        lengths = np.array([len(episode) for episode in episodes], dtype=np.int64)
        if not len(slots) or lengths.max() < length:
            longest = int(lengths.max()) if len(slots) else 0
            self._refused(
                f"no episode has {length} transitions (the longest has {longest})"
            )
            return None
        with self._drawing(None, argument="size") as generator:
            device = generator.device
            table = TrajectoryTable(
                env=torch.arange(len(slots), device=device),
                start=torch.zeros(len(slots), dtype=torch.int64, device=device),
                stop=torch.from_numpy(lengths - 1).to(device),
            )
            starts, which = draw_from_table(
                table, count=size, need=length, weighting=weighting, generator=generator
            )
        positions = which.cpu().numpy()
        drawn = slots[positions]
        self._monitor.on_sample(self._used(drawn), self._staleness(drawn, cur))
        return [
            list(episodes[position][start : start + length])
            for position, start in zip(positions.tolist(), starts.cpu().tolist(), strict=True)
        ]

    # ------------------------------------------------------------------ saving
    @locked
    def state_dict(self) -> dict[str, Any]:
        """As :meth:`DingBuffer.state_dict`, with the transitions as rows (see the module
        docstring).

        Raises:
            TypeError: a transition holds what cannot be saved without pickle.
            ValueError: transitions disagree on keys, shapes or dtypes.
        """
        filled = self._filled()
        slots = np.flatnonzero(self._live[:filled])
        episodes: list[Any] = self._items.read(slots.tolist())
        transitions: list[Mapping[str, Any]] = [t for episode in episodes for t in episode]
        columns, kinds = item_columns(transitions, argument="transition")
        owner = np.repeat(slots, [len(episode) for episode in episodes])
        rows: dict[KeyPath, torch.Tensor] = dict(columns)
        if transitions:
            rows[meta_path(EPISODE_ROW)] = torch.from_numpy(owner.astype(np.int64))
        arrays = {"live": self._live, "uid": self._uid, "use": self._use,
                  "collect_iter": self._collect}
        return buffer_state(self, rows, {
            "kinds": [[list(path), kind] for path, kind in kinds.items()],
            "slots": {name: array[:filled].tolist() for name, array in arrays.items()},
        })

    @classmethod
    def sampled_leaves(cls, config: Field) -> list[KeyPath]:
        return [meta_path(EPISODE_ROW)]

    @classmethod
    def saved_ring(cls, config: Field, count: int) -> tuple[int, int, bool]:
        """Capacity, tail and fullness of the episode slots (the rows are transitions, so the
        row count says nothing about them; state.json's slots are checked on load)."""
        capacity = config.key("capacity").integer(minimum=1)
        cursor = config.key("_idx").integer(minimum=0, maximum=capacity - 1)
        return capacity, cursor, config.key("_is_full").flag()

    @classmethod
    def _restored(
        cls: type[D], options: dict[str, Any], rows: RowSource, config: Field, state: Field
    ) -> D:
        buffer = cls(**options)
        if isinstance(buffer, EpisodeReplayBuffer):  # always: narrows the type for mypy
            buffer._restore_episodes(rows, config, state)
        return buffer

    def _restore_episodes(self, rows: RowSource, config: Field, state: Field) -> None:
        """Raises:
        StateError: the slots, rows and kinds disagree (names the field).
        """
        capacity, cursor, full = self.saved_ring(config, rows.count)
        if capacity != self.replay_buffer_size:
            raise config.key("capacity").error(
                f"says {capacity}, but cfg['replay_buffer_size'] is {self.replay_buffer_size}"
            )
        filled = capacity if full else cursor
        ding = state.key("ding")
        slots_field = ding.key("slots")
        arrays = {
            name: _slot_array(slots_field.key(name), filled, dtype)
            for name, dtype in (("live", bool), *((n, np.int64) for n in _SLOT_FIELDS))
        }
        live = arrays["live"]
        owner = np.zeros(0, dtype=np.int64)
        if rows.count:
            owner = read_meta(rows, {EPISODE_ROW: torch.int64})[EPISODE_ROW]
        held = np.flatnonzero(live)
        in_range = bool(((owner >= 0) & (owner < filled)).all())
        counts = np.bincount(owner, minlength=filled) if in_range else np.zeros(0, np.int64)
        if (
            not in_range
            or bool((np.diff(owner) < 0).any())
            or not np.array_equal(np.flatnonzero(counts), held)
        ):
            raise StateError(
                "rows", f"{format_key_path(meta_path(EPISODE_ROW))}: does not give each valid "
                "slot its transitions, slot by slot"
            )
        kinds = parse_kinds(ding)
        data = {p: leaf for p, leaf in rows.spec.items() if p != meta_path(EPISODE_ROW)}
        if set(kinds) != set(data):
            raise ding.key("kinds").error(
                f"names the leaves {sorted(kinds)}, but buffer.hdf5 holds {sorted(data)}"
            )
        columns = {}
        for leaf_path, leaf in data.items():
            if leaf_path in rows.absent:
                continue
            column = torch.empty((rows.count, *leaf.shape), dtype=leaf.dtype)
            rows.read_into({leaf_path: column})
            columns[leaf_path] = column
        present = {p: kind for p, kind in kinds.items() if p in columns}
        transitions = column_items(columns, present, list(range(rows.count)))
        items = self._items
        if not isinstance(items, ListItems):
            raise StateError("config", "an episode buffer keeps its episodes in a list")
        bounds = np.concatenate([[0], np.cumsum(counts[held])])
        for position, slot in enumerate(held.tolist()):
            items._data[slot] = transitions[bounds[position] : bounds[position + 1]]
        self._live[:filled] = live
        self._uid[:filled] = arrays["uid"]
        self._use[:filled] = arrays["use"]
        self._collect[:filled] = arrays["collect_iter"]
        self._valid = len(held)
        self._tail, self._full = cursor, full
        self._next_uid = ding.key("next_uid").integer(minimum=0)
        self._push_count = ding.key("push_count").integer(minimum=0)
        self._monitor.load_state_dict(ding.key("monitor"))


def _slot_array(field: Field, filled: int, dtype: type) -> np.ndarray:
    """A per-slot list of state.json as a numpy array of ``filled`` entries.

    Raises:
        StateError: not a list of ``filled`` values of the type.
    """
    values = field.items()
    if len(values) != filled:
        raise field.error(f"expected {filled} entries (one per slot), got {len(values)}")
    if dtype is bool:
        return np.array([value.flag() for value in values], dtype=bool)
    return np.array([value.integer() for value in values], dtype=np.int64)

"""A DI-engine buffer as plain data and back: its ``state_dict()``, the one parser of its saved
config, and the rebuild a load makes (DESIGN §1's state idiom; checkpoints as for every buffer).

Layout of a checkpoint (``config.json``, ``state.json``, ``buffer.hdf5``):

- config.json: ``capacity`` (``replay_buffer_size``), ``device``, ``nested_key_separator``,
  ``_idx`` (the tail), ``_is_full``, ``cfg`` (the DI-engine config, ``inf`` as ``"inf"``),
  ``storage`` (``"list"`` or ``"packed"``), ``instance_name`` and ``exp_name``.
- buffer.hdf5: one row per slot written since the last ``clear`` (``[0, filled)``): the items'
  leaves (packed rows as stored; list items as columns, :mod:`bufcore.buffers.ding.columns`,
  zero rows for empty slots), and the bookkeeping under ``_ding``: ``live`` (bool), ``uid``,
  ``use`` and ``collect_iter`` (int64), plus ``priority`` (float64) for the prioritized buffer.
- state.json: ``seed``, ``rank`` (absent for rank 0), ``generator``, and ``ding``: ``valid``
  (the count), ``head``, ``next_uid``, ``push_count``, ``monitor`` (counters and rates),
  ``kinds`` (list mode: each leaf's kind) and what a class adds (the prioritized buffer's
  sampler and throughput counts).

Items removed but kept for their file (a used-up item in meta-data mode) are not saved: a load
has them gone, and their files are not deleted by the loaded buffer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from bufcore.buffers.ding.columns import KINDS
from bufcore.buffers.ding.config import loaded_config, resolve_config, saved_config
from bufcore.buffers.ding.items import STORAGES, ListItems, PackedItems
from bufcore.buffers.ding.monitor import COUNTERS
from bufcore.errors import StateError
from bufcore.fields import Field
from bufcore.persist.checkpoint import saved_ring_position
from bufcore.rng import generator_state, rank_state
from bufcore.storage.batches import RowSource, RowsWithout
from bufcore.tree import KeyPath, format_key_path

if TYPE_CHECKING:
    from bufcore.buffers.ding.core import DingBuffer

D = TypeVar("D", bound="DingBuffer")

META_KEY = "_ding"
# The bookkeeping rows every DI-engine checkpoint has, and their dtypes.
META_ROWS: dict[str, torch.dtype] = {
    "live": torch.bool,
    "uid": torch.int64,
    "use": torch.int64,
    "collect_iter": torch.int64,
}


def meta_path(name: str) -> KeyPath:
    return (META_KEY, name)


def slot_rows(buffer: DingBuffer) -> tuple[dict[KeyPath, torch.Tensor], dict[str, Any]]:
    """The rows of slots ``[0, filled)`` (items and bookkeeping) and the ``state['ding']``
    entries describing them (``kinds``, for list storage).

    Raises:
        TypeError: a list-mode item holds what cannot be saved without pickle.
        ValueError: list-mode items disagree on keys, shapes or dtypes.
    """
    filled = buffer._filled()
    rows: dict[KeyPath, torch.Tensor] = {}
    entries: dict[str, Any] = {}
    items = buffer._items
    if isinstance(items, ListItems):
        columns, kinds = items.columns(filled, buffer._live)
        rows.update(columns)
        entries["kinds"] = [[list(path), kind] for path, kind in kinds.items()]
    elif filled:
        rows.update(items.rows())
    if filled:
        arrays = {"live": buffer._live, "uid": buffer._uid, "use": buffer._use,
                  "collect_iter": buffer._collect}
        for name, array in arrays.items():
            rows[meta_path(name)] = torch.from_numpy(array[:filled].copy())
    return rows, entries


def buffer_state(
    buffer: DingBuffer, rows: dict[KeyPath, torch.Tensor], entries: dict[str, Any]
) -> dict[str, Any]:
    """``buffer.state_dict()`` holding ``rows``, with ``entries`` added to ``state['ding']``
    (the layout of the module docstring)."""
    return {
        "target": buffer.checkpoint_targets[0],
        "config": {
            "capacity": buffer.replay_buffer_size,
            "device": str(buffer.device),
            "nested_key_separator": buffer.nested_key_separator,
            "cfg": saved_config(buffer.cfg),
            "storage": buffer.storage_mode,
            "instance_name": buffer.instance_name,
            "exp_name": buffer.exp_name,
            "_idx": buffer._tail,
            "_is_full": buffer._full,
        },
        "state": {
            "seed": buffer.seed,
            **rank_state(buffer.rank),
            "generator": generator_state(buffer._generator),
            "ding": {
                "valid": buffer._valid,
                "head": buffer._head,
                "next_uid": buffer._next_uid,
                "push_count": buffer._push_count,
                "monitor": buffer._monitor.state_dict(),
                **entries,
            },
        },
        "nested_key_separator": buffer.nested_key_separator,
        "batch_dims": 1,
        "rows": rows,
    }


def parse_options(cls: type[DingBuffer], config: Field) -> dict[str, Any]:
    """Constructor keyword arguments from config.json (the one parser of a DI-engine
    buffer's saved config).

    Raises:
        StateError: a field is missing or malformed, or ``capacity`` differs from the config's
            ``replay_buffer_size``.
    """
    cfg_field = config.key("cfg")
    cfg = cfg_field.parse(
        lambda saved: resolve_config(cls.defaults, loaded_config(saved), {}, cls.__name__)
    )
    capacity = config.key("capacity")
    if capacity.integer(minimum=1) != cfg.replay_buffer_size:
        raise capacity.error(
            f"says {capacity.value}, but cfg['replay_buffer_size'] is {cfg.replay_buffer_size}"
        )
    return {
        "cfg": cfg,
        "storage": config.key("storage").choice(STORAGES),
        "device": config.key("device").text(),
        "nested_key_separator": config.optional("nested_key_separator", "-").text(),
        "instance_name": config.optional("instance_name", "buffer").text(),
        "exp_name": config.optional("exp_name", "default_experiment").text(),
    }


def read_meta(
    rows: RowSource, names: dict[str, torch.dtype]
) -> dict[str, np.ndarray]:
    """The bookkeeping rows ``names`` of a saved buffer, as numpy arrays.

    Raises:
        StateError: one is missing, left out of a partial load, or of another shape or dtype.
    """
    arrays = {}
    for name, dtype in names.items():
        path = meta_path(name)
        leaf = rows.spec.get(path)
        if leaf is None or path in rows.absent or leaf.shape != () or leaf.dtype != dtype:
            got = "no dataset" if leaf is None else f"shape {list(leaf.shape)}, {leaf.dtype}"
            raise StateError(
                "rows", f"{format_key_path(path)}: expected {dtype} [{rows.count}], got {got}"
            )
        tensor = torch.empty(rows.count, dtype=dtype)
        rows.read_into({path: tensor})
        arrays[name] = tensor.numpy()
    return arrays


def restore(
    cls: type[D],
    options: dict[str, Any],
    rows: RowSource,
    config: Field,
    state: Field,
) -> D:
    """The buffer a saved state describes (``_restored`` of the DI-engine classes).

    Raises:
        StateError: the ring position does not fit the rows, the bookkeeping is missing or
            inconsistent, or the items do not fit their kinds (names the field).
    """
    buffer = cls(**options)
    capacity = buffer.replay_buffer_size
    cursor, full = saved_ring_position(config, rows.count, capacity)
    ding = state.key("ding")
    filled = rows.count
    meta = read_meta(rows, META_ROWS) if filled else {}
    data = RowsWithout(rows, [path for path in rows.spec if path[0] == META_KEY])
    if filled:
        live = meta["live"]
        _restore_items(buffer, data, ding, live, cursor, full)
        buffer._live[:filled] = live
        buffer._uid[:filled] = meta["uid"]
        buffer._use[:filled] = meta["use"]
        buffer._collect[:filled] = meta["collect_iter"]
    valid = ding.key("valid").integer(minimum=0)
    if valid != int(buffer._live.sum()):
        raise ding.key("valid").error(
            f"says {valid} valid items, but _ding-live marks {int(buffer._live.sum())}"
        )
    buffer._valid = valid
    buffer._tail, buffer._full = cursor, full
    buffer._head = ding.key("head").integer(minimum=0, maximum=capacity - 1)
    buffer._next_uid = ding.key("next_uid").integer(minimum=0)
    if filled and int(buffer._uid[:filled].max(initial=0)) >= max(buffer._next_uid, 1):
        raise ding.key("next_uid").error("is not above every saved unique id")
    buffer._push_count = ding.key("push_count").integer(minimum=0)
    buffer._monitor.load_state_dict(ding.key("monitor"))
    return buffer


def _restore_items(
    buffer: DingBuffer,
    data: RowSource,
    ding: Field,
    live: np.ndarray,
    cursor: int,
    full: bool,
) -> None:
    """Fill the buffer's item store from the saved rows.

    Raises:
        StateError: the rows do not fit the store (names the field).
    """
    items = buffer._items
    if isinstance(items, PackedItems):
        try:
            items.restore(data, cursor=cursor, is_full=full)
        except ValueError as err:
            raise StateError("rows", str(err)) from err
        return
    kinds = parse_kinds(ding)
    if set(kinds) != set(data.spec):
        raise ding.key("kinds").error(
            f"names the leaves {sorted(kinds)}, but buffer.hdf5 holds {sorted(data.spec)}"
        )
    columns = {}
    for path, leaf in data.spec.items():
        if path in data.absent:
            continue
        column = torch.empty((data.count, *leaf.shape), dtype=leaf.dtype)
        data.read_into({path: column})
        columns[path] = column.to(buffer.device) if kinds[path] == "tensor" else column
    items.restore(columns, kinds, live)


@dataclass(frozen=True)
class SavedStatus:
    """What ``state['ding']`` records beyond the rows (read without reading any).

    Attributes:
        valid: Valid items (episodes, for an episode buffer).
        push_count: Items pushed (DI-engine's ``push_count``).
        counters: The monitor's counters (``pushed``, ``sampled``, ``sample_calls``,
            ``refused_pushes``, ``refused_samples``, ``removed``).
    """

    valid: int
    push_count: int
    counters: dict[str, int]


def saved_status(state: Field) -> SavedStatus:
    """The one parser of ``state['ding']``'s counts, for summaries.

    Raises:
        StateError: a field is missing or malformed.
    """
    ding = state.key("ding")
    monitor = ding.key("monitor")
    return SavedStatus(
        valid=ding.key("valid").integer(minimum=0),
        push_count=ding.key("push_count").integer(minimum=0),
        counters={name: monitor.key(name).integer(minimum=0) for name in COUNTERS},
    )


def parse_kinds(ding: Field) -> dict[KeyPath, str]:
    """``state['ding']['kinds']``: each saved list-mode leaf's kind.

    Raises:
        StateError: missing or malformed.
    """
    kinds: dict[KeyPath, str] = {}
    for entry in ding.key("kinds").items():
        path_field, kind_field = _pair(entry)
        parts = path_field.items()
        if not parts:
            raise path_field.error("expected a non-empty key path")
        path = tuple(part.text() for part in parts)
        kinds[path] = kind_field.choice(KINDS)
    return kinds


def _pair(entry: Field) -> tuple[Field, Field]:
    items = entry.items()
    if len(items) != 2:
        raise entry.error("expected [key path, kind]")
    return items[0], items[1]

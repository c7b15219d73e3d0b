"""How saved state becomes a buffer: the ``__target__`` registry and the one build path.

Every load, from a ``state_dict()`` or from a checkpoint directory, comes here
(:meth:`~bufcore.buffers.base.Buffer.from_state_dict`, ``Buffer.load``, ``load_buffer``):

- :func:`buffer_class` finds the class that loads a ``__target__`` (each buffer class registers
  its ``checkpoint_targets`` with :func:`register_target` when it is defined; a process that
  imported none yet imports them all first), refusing unknown names (DESIGN §2.6).
- :class:`SavedState` is what a load reads: an in-memory state dict (:class:`InMemoryState`) or
  an opened checkpoint whose rows are read lazily, leaf by leaf.
- :func:`build_buffer` parses the saved config through the class's one parser, builds the
  buffer through its public constructor, copies the rows (only the leaves asked for; into a
  backing file when given one), rebuilds a saved sampler, and gives the buffer its rank's sample
  stream (:func:`_continue_stream`).

It holds no file code: :mod:`bufcore.persist.checkpoint` opens checkpoints.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

from bufcore.buffers.prioritized import SAMPLER_KEY, load_sampler_rows, saved_sampler
from bufcore.checks import check_device, check_seed, check_usable_device
from bufcore.distributed import MAX_RANK
from bufcore.errors import CorruptCheckpointError, StateError
from bufcore.fields import Field
from bufcore.persist.backing import BackingFile
from bufcore.rng import branch_generator, make_generator, restore_generator
from bufcore.storage.batches import RowSource, RowsWithout, TensorRows
from bufcore.tree import Key, KeyPath, as_key_path, select_paths

if TYPE_CHECKING:
    from bufcore.buffers.base import Buffer

B = TypeVar("B", bound="Buffer")

_TARGETS: dict[str, type[Buffer]] = {}
# Every module defining a buffer class with checkpoint_targets (tests/buffers/test_base.py
# checks the list is complete).
_BUFFER_MODULES = (
    "bufcore.buffers.transition",
    "bufcore.buffers.zbuffer",
    "bufcore.buffers.online",
    "bufcore.buffers.expert",
    "bufcore.buffers.ding.naive",
    "bufcore.buffers.ding.advanced",
    "bufcore.buffers.ding.episode",
)


def register_target(name: str, cls: type[Buffer]) -> None:
    """Make ``cls`` the class that loads checkpoints naming ``__target__`` ``name``.

    Raises:
        TypeError: another class already loads ``name``.
    """
    if name in _TARGETS:
        raise TypeError(f"__target__ {name!r} is registered twice")
    _TARGETS[name] = cls


class SavedRows(RowSource, Protocol):
    """Saved rows, of which a load may copy only some leaves."""

    def only(self, paths: frozenset[KeyPath]) -> SavedRows:
        """These rows with every leaf not in ``paths`` left out (never read)."""
        ...


class SavedState(Protocol):
    """A buffer's saved state as a load reads it: an in-memory ``state_dict()``, or a
    checkpoint opened by :func:`bufcore.persist.checkpoint.open_checkpoint` (whose rows are
    read only when copied)."""

    @property
    def where(self) -> str:
        """How messages name it: the checkpoint directory, or ``state_dict``."""
        ...

    @property
    def target(self) -> str: ...

    @property
    def config(self) -> dict[str, Any]: ...

    @property
    def state(self) -> dict[str, Any]: ...

    def row_source(self, separator: str, batch_dims: int) -> SavedRows: ...


class InMemoryState:
    """A ``state_dict()`` seen as a :class:`SavedState`.

    Raises:
        StateError: (from :meth:`row_source` or the attributes) a part is missing or malformed.
    """

    where = "state_dict"

    def __init__(self, data: Mapping[str, Any]) -> None:
        root = self._root = Field(data, "state_dict", part="config")
        self.target = root.key("target").text()
        self.config = dict(root.key("config").mapping())
        self.state = dict(Field(data, "state_dict", part="state").key("state").mapping())
        self._rows = Field(data, "state_dict", part="rows").key("rows")

    def row_source(self, separator: str, batch_dims: int) -> SavedRows:
        # The layout fields repeat what the config says; a state dict where they disagree was
        # edited in one place only, and which one is meant cannot be told.
        for name, expected in (("nested_key_separator", separator), ("batch_dims", batch_dims)):
            given = self._root.optional(name, expected)
            if type(given.value) is not type(expected) or given.value != expected:
                raise given.error(
                    f"expected {expected!r} (as the config says), got {given.value!r}"
                )
        rows: Mapping[Any, Any] = self._rows.mapping()
        arrays: dict[KeyPath, torch.Tensor] = {}
        for path, tensor in rows.items():
            try:
                key = as_key_path(path, argument="key")
            except TypeError as err:
                raise self._rows.error(str(err)) from err
            if key in arrays:
                raise self._rows.error(f"key {path!r} names the leaf {key!r} a second time")
            if not isinstance(tensor, torch.Tensor) or tensor.ndim < batch_dims:
                raise self._rows.error(
                    f"expected tensors with {batch_dims} batch axes, got {type(tensor).__name__}"
                    f" at {key!r}"
                )
            arrays[key] = tensor
        try:
            return TensorRows(arrays, batch_dims)
        except (TypeError, ValueError) as err:
            raise self._rows.error(str(err)) from err


def check_backing(backing: Any, device: torch.device | None) -> BackingFile | None:
    """``backing`` once checked for a buffer on ``device`` (None: not known yet).

    Raises:
        TypeError: ``backing`` is neither None nor a ``BackingFile``.
        ValueError: ``device`` is not the CPU (a mapped file is host memory), or ``backing``
            was closed.
    """
    if backing is None:
        return None
    if not isinstance(backing, BackingFile):
        raise TypeError(
            "backing: expected None (rows in memory) or a bufcore.BackingFile, got "
            f"{type(backing).__name__}"
        )
    if device is not None and device.type != "cpu":
        raise ValueError(
            f"backing: a backing file maps the rows into host memory; device must be 'cpu', "
            f"got {str(device)!r}"
        )
    if backing.closed:
        raise ValueError(f"backing: {backing.path} was closed; make a new BackingFile")
    return backing


def build_buffer(
    base: type[B],
    saved: SavedState,
    device: torch.device | None,
    leaves: list[Key] | None,
    rank: int,
    backing: BackingFile | None = None,
) -> B:
    """The buffer ``saved`` holds, which must be a ``base``, through its public constructor,
    drawing rank ``rank``'s stream; with ``leaves``, only those (and the ones sampling needs)
    are copied; with ``backing``, into that file."""
    # A checkpoint's fields are in its config.json; a state dict's are its own.
    in_memory = isinstance(saved, InMemoryState)
    config_where = saved.where if in_memory else os.path.join(saved.where, "config.json")
    cls = buffer_class(saved.target, config_where)
    if not issubclass(cls, base):
        raise ValueError(
            f"{saved.where}: holds a {cls.__name__} (__target__ {saved.target!r}), not a "
            f"{base.__name__}; use bufcore.load_buffer to load any kind"
        )
    if backing is not None and not cls.takes_backing:
        raise TypeError(
            f"backing: {saved.where} holds a {cls.__name__}, which keeps its rows in memory; "
            "backing= is for DictBuffer and TrajectoryDictBufferMultiDim"
        )
    config = Field(saved.config, "config", part="config")
    state = Field(saved.state, "state", part="state")
    options = cls.saved_options(config, state)
    sampler = saved_sampler(state)
    if sampler is not None:
        options["sampler"] = sampler
    source = saved.row_source(*cls.saved_layout(config))
    # The sampler's per-row state is saved among the rows; the storage never holds it.
    sampler_rows = [p for p in source.spec if p[0] == SAMPLER_KEY] if sampler else []
    if leaves is not None:
        data = [p for p in source.spec if p not in sampler_rows]
        chosen = select_paths(data, leaves, "leaves")
        chosen.extend(path for path in cls.sampled_leaves(config) if path in source.spec)
        source = source.only(frozenset(chosen + sampler_rows))
    rows: RowSource = RowsWithout(source, sampler_rows) if sampler else source
    options["seed"] = state.optional("seed", None).validate(check_seed)
    # A state saved before ranks existed holds rank 0's stream, the only one there was.
    saved_rank = state.optional("rank", 0).integer(minimum=0, maximum=MAX_RANK)
    if device is not None:
        options["device"] = device
    elif not _available(saved_on := config.optional("device", "cpu").validate(check_device)):
        warnings.warn(
            f"{saved.where}: saved on device {str(saved_on)!r}, which this host does not have; "
            "loading onto the CPU (pass device= to choose; the sample stream is reseeded)",
            RuntimeWarning,
            stacklevel=3,
        )
        options["device"] = torch.device("cpu")
    if backing is not None:
        # The saved device, when device= was not given, is checked here (not as corruption).
        check_backing(backing, check_device(options["device"]))
        options["backing"] = backing
    try:
        try:
            buffer = cls._restored(options, rows, config, state)
        except (TypeError, ValueError, KeyError) as err:
            # The saved options themselves are refused (a KeyError: an output key the rows lack).
            if isinstance(err, StateError | CorruptCheckpointError):
                raise
            raise StateError("config", str(err)) from err
        if sampler is not None:
            load_sampler_rows(sampler, source, buffer._storage, buffer._ring())
    except MemoryError as err:
        # A sound checkpoint may be too large for this host: not corrupt, but say which field.
        raise MemoryError(f"{config_where}: config['capacity']: {err}") from err
    _continue_stream(buffer, saved.state.get("generator"), saved_rank, rank)
    return buffer


def _continue_stream(
    buffer: Buffer, saved_generator: Any, saved_rank: int, rank: int
) -> None:
    """Give a loaded ``buffer`` rank ``rank``'s sample stream.

    The rank that saved the state continues its stream where it stopped. Any other rank takes a
    branch of it of its own (:func:`bufcore.rng.branch_generator`), so ranks that all load one
    checkpoint (an expert buffer, a single-process run resumed on N ranks) never draw alike. A
    state without a generator (BFM-Zero's) starts ``(seed, rank)``'s stream.

    Raises:
        StateError: the saved generator is malformed.
    """
    buffer.rank = rank
    if saved_generator is None:
        buffer._generator = make_generator(buffer.device, buffer.seed, rank=rank)
        return
    restore_generator(buffer._generator, saved_generator)
    if rank != saved_rank:
        branch_generator(buffer._generator, rank)


def buffer_class(target: str, where: str | os.PathLike[str]) -> type[Buffer]:
    """The buffer class that loads checkpoints whose config.json names ``target``.

    Raises:
        ValueError: no class loads ``target`` (the message names ``where`` and lists the
            known targets).
    """
    cls = _TARGETS.get(target)
    if cls is None:
        # A class registers its names when its module is imported: a load (in a process that
        # imported no buffer class yet) imports them all first.
        for module in _BUFFER_MODULES:
            importlib.import_module(module)
        cls = _TARGETS.get(target)
    if cls is None:
        known = ", ".join(sorted(_TARGETS))
        raise ValueError(f"{where}: unknown __target__ {target!r}; known targets: {known}")
    return cls


def _available(device: torch.device) -> bool:
    """Whether tensors can be made on ``device`` in this process."""
    try:
        check_usable_device(device)
    except ValueError:
        return False
    return True

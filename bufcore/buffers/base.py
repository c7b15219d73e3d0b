"""What every buffer class shares: its ring position, saving and loading, and the targets.

Every buffer class derives from :class:`CheckpointedBuffer` (and :func:`load_buffer` loads any
of them). Each lists the ``__target__`` names it
loads from (``checkpoint_targets``; the first is the one it writes). The table is exactly those
lists: BFM-Zero's own module paths are listed by name, and anything else is refused (DESIGN §2.6).

The state idiom: a buffer turns itself into plain data (``_config()`` for its constructor
fields, ``_state()`` for what else it needs, plus the ring position, generator state and rows)
and :mod:`bufcore.persist.checkpoint` turns that into files. Loading runs the other way through
the public constructor: saved fields become constructor arguments (``saved_options``, the
one parser of a class's config), the new buffer reads its rows straight from the checkpoint
into freshly allocated storage (``_restore``), and the generator continues its stream. A
malformed field raises :class:`~bufcore.errors.StateError`, which the loader reports as a
corrupt file.
"""

from __future__ import annotations

import os
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

import torch

from bufcore.checks import (
    check_device,
    check_generator,
    check_seed,
    check_separator,
    check_usable_device,
)
from bufcore.errors import CorruptCheckpointError, StateError
from bufcore.fields import Field
from bufcore.persist.checkpoint import OpenedCheckpoint, load_checkpoint, saved_ring_position
from bufcore.persist.checkpoint_write import BufferCheckpoint, save_checkpoint
from bufcore.rng import generator_state, restore_generator, undone_on_error
from bufcore.storage.ring import RingStorage
from bufcore.tree import Key, KeyPath, key_list, select_paths

B = TypeVar("B", bound="CheckpointedBuffer")

_TARGETS: dict[str, type[CheckpointedBuffer]] = {}


class CheckpointedBuffer(ABC):
    """Base of every buffer class: its ring position, ``save``, ``load`` and their hooks.

    Subclasses set ``checkpoint_targets`` and own ``_storage``, ``_generator``, ``seed``,
    ``device`` and ``nested_key_separator``; they override ``_config``, ``_init_kwargs`` and,
    for state beyond the rows and the generator, ``_state`` and ``_restore``.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = ()
    nested_key_separator: str = "-"
    seed: int | None
    device: torch.device
    _storage: RingStorage
    _generator: torch.Generator

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.__dict__.get("checkpoint_targets", ()):
            if name in _TARGETS:
                raise TypeError(f"__target__ {name!r} is registered twice")
            _TARGETS[name] = cls

    # ----------------------------------------------------------- ring position
    def __len__(self) -> int:
        """Time rows held (``capacity`` once full)."""
        return len(self._storage)

    def empty(self) -> bool:
        """Whether nothing was written yet."""
        return len(self) == 0

    @property
    def cursor(self) -> int:
        """Row the next write starts at (config.json's ``_idx``)."""
        return self._storage.cursor

    @property
    def is_full(self) -> bool:
        """Whether a write has reached the last row (config.json's ``_is_full``)."""
        return self._storage.is_full

    # --------------------------------------------------------------- sampling
    @contextmanager
    def _drawing(
        self, generator: torch.Generator | None, *, argument: str
    ) -> Iterator[torch.Generator]:
        """The generator a sample draws from, set back as it was if the block raises.

        ``None`` is the buffer's own generator; a caller's is checked first (before anything
        is drawn) and used instead, leaving the buffer's own stream where it was.

        Raises:
            TypeError: ``generator`` is not a ``torch.Generator``.
            ValueError: ``generator`` is on another device than the buffer.
            MemoryError: the block ran out of memory (names ``argument``).
        """
        chosen = (
            self._generator if generator is None else check_generator(generator, self.device)
        )
        with undone_on_error(chosen, argument=argument):
            yield chosen

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _config(self) -> dict[str, Any]:
        """config.json fields besides ``_idx``, ``_is_full`` and ``__target__``."""

    def _state(self) -> dict[str, Any]:
        """state.json fields besides ``seed`` and ``generator``."""
        return {}

    @classmethod
    @abstractmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        """The one parser of this class's saved config: constructor keyword arguments from
        config.json and state.json (``device`` included; not ``seed``, nor the rows an expert
        buffer is built from). Loading, summaries and the dashboard all call this.

        Raises:
            StateError: a field is missing or of the wrong type.
        """

    @classmethod
    def _init_kwargs(cls, opened: OpenedCheckpoint, config: Field, state: Field) -> dict[str, Any]:
        """Constructor keyword arguments for a load (``seed`` is added from state.json)."""
        return cls.saved_options(config, state)

    @classmethod
    def saved_layout(cls, config: Field) -> tuple[str, int]:
        """The nested key separator and batch axes of the saved rows, as the constructor
        takes them from config.json.

        Raises:
            StateError: a field is malformed.
        """
        return config.optional("nested_key_separator", "-").validate(check_separator), 1

    @classmethod
    def sampled_leaves(cls, config: Field) -> list[KeyPath]:
        """The leaves sampling reads (end flags, motion ids): a load with ``leaves=`` always
        loads them.

        Raises:
            StateError: a field is malformed.
        """
        return []

    def _restore(self, opened: OpenedCheckpoint, config: Field, state: Field) -> None:
        """Fill the freshly built buffer's rows and ring position from the checkpoint.

        The default reads the rows into the ring; a class that takes its rows through its
        constructor (the expert buffer) overrides this to restore what else it saved.

        Raises:
            StateError: the ring position does not fit the rows or the capacity, or the
                stored leaves differ from the ones the config describes.
        """
        storage = self._storage
        source = opened.row_source(self.nested_key_separator, storage.batch_dims)
        if not storage.allocated and source.spec:
            loaded = {p: leaf for p, leaf in source.spec.items() if p not in source.absent}
            try:
                storage.check_size(loaded, source.env_count)  # before allocating it
            except ValueError as err:
                raise config.key("capacity").error(str(err)) from err
        cursor, is_full = saved_ring_position(config, source.count, storage.capacity)
        try:
            storage.restore(source, cursor=cursor, is_full=is_full)
        except ValueError as err:
            if isinstance(err, CorruptCheckpointError):
                raise
            raise StateError("rows", str(err)) from err

    # ---------------------------------------------------------------- saving
    def save(
        self,
        path: str | os.PathLike[str],
        nested_key_separator: str | None = None,
        *,
        replace: bool = True,
    ) -> None:
        """Publish a checkpoint directory at ``path`` atomically (README "Checkpoints").

        Args:
            path: The checkpoint directory; an existing checkpoint there is replaced.
            nested_key_separator: Joins nested keys for this save instead of the buffer's own
                (BFM-Zero's override); config.json records it, so the checkpoint loads back
                with it. ``None`` for the buffer's own.
            replace: False: create a new checkpoint and never replace anything. If anything
                exists at ``path``, or appears there while the checkpoint is written (another
                saver), this raises and leaves it untouched; the check is atomic with the
                final rename, so of two savers of one new path exactly one succeeds.

        Raises:
            ValueError: a key contains the nested key separator; ``nested_key_separator`` is
                empty or holds '/', or is given to a buffer without one (a ``ZBuffer``).
            FileExistsError: ``path`` exists and is not a checkpoint directory; with
                ``replace=False``, anything exists at ``path``.
            TypeError: ``replace`` is not a bool, or ``nested_key_separator`` not a str
                (nothing is written).
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out
                (nothing is written).
        """
        config = self._config()
        separator = self.nested_key_separator
        if nested_key_separator is not None:
            separator = check_separator(nested_key_separator)
            if "nested_key_separator" not in config:
                raise ValueError(
                    f"nested_key_separator: a {type(self).__name__} has no nested keys to join"
                )
            config["nested_key_separator"] = separator
        storage = self._storage
        state = {"seed": self.seed, "generator": generator_state(self._generator)}
        checkpoint = BufferCheckpoint(
            target=self.checkpoint_targets[0],
            config={**config, "_idx": storage.cursor, "_is_full": storage.is_full},
            separator=separator,
            batch_dims=storage.batch_dims,
            spec=storage.spec or {},
            arrays=storage.rows(),
            state={**state, **self._state()},
        )
        save_checkpoint(path, checkpoint, replace=replace)

    # --------------------------------------------------------------- loading
    @classmethod
    def load(
        cls: type[B],
        path: str | os.PathLike[str],
        device: str | torch.device | None = None,
        *,
        leaves: Sequence[Key] | None = None,
    ) -> B:
        """Load a checkpoint of this class or a subclass (also one written by BFM-Zero).

        With ``leaves``, only those leaves' rows are read and given memory, plus the leaves
        sampling needs (the end flags of the trajectory buffers, the motion ids of the expert
        buffer), so ``leaves=[]`` loads what ``sample_index`` needs and nothing else. The
        others keep their spec; reading or writing them (``sample`` gathering one, ``extend``,
        ``save``, ``storage``, ``get_full_buffer``) raises
        :class:`~bufcore.errors.LeafNotLoadedError` and changes nothing. Everything else
        (``len``, ``cursor``, ``sample_index`` with its generator stream, ``trajectories``,
        priorities) is as a full load has it. What is read is verified first: the blocks of
        buffer.hdf5 it and the HDF5 metadata lie in are hashed against the manifest; damage in
        other blocks is not looked for (a full load, or ``bufcore inspect --verify``, hashes
        the whole file).

        Args:
            path: The checkpoint directory.
            device: Where to put the tensors; ``None`` keeps config.json's device.
            leaves: Keys of the leaves to load (a str for a top-level key, a tuple key path; a
                nested dict's key selects all its leaves), or None for all of them.

        Raises:
            ValueError: the checkpoint holds another kind of buffer, or an unknown one; or
                ``device`` is not a device (checked before anything is read).
            TypeError: ``device`` is neither a str nor a ``torch.device``, or ``leaves`` is
                not a list of keys (checked before anything is read).
            KeyPathError: (a ``KeyError``) a key of ``leaves`` matches no stored leaf (the
                message lists them); raised before anything is allocated.
            CorruptCheckpointError: a file is damaged or inconsistent, or a field is malformed
                or asks for more storage than any device holds (names the file and field).
            MemoryError: this host cannot allocate the rows (names config.json's capacity).
            FileNotFoundError: ``path`` is not a directory.
        """
        target = None if device is None else check_device(device)
        keys = None if leaves is None else key_list(leaves, "leaves")
        return load_checkpoint(
            path, lambda opened: _build(cls, opened, target, keys), hash_payload=keys is None
        )


def _build(
    base: type[B], opened: OpenedCheckpoint, device: torch.device | None, leaves: list[Key] | None
) -> B:
    """The buffer ``opened`` holds, which must be a ``base``, through its public constructor;
    with ``leaves``, only those (and the ones sampling needs) are loaded."""
    cls = buffer_class(opened.target, opened.path / "config.json")
    if not issubclass(cls, base):
        raise ValueError(
            f"{opened.path}: holds a {cls.__name__} (__target__ {opened.target!r}), not a "
            f"{base.__name__}; use bufcore.load_buffer to load any kind"
        )
    config = Field(opened.config, "config", part="config")
    state = Field(opened.state, "state", part="state")
    if leaves is not None:
        stored = opened.row_source(*cls.saved_layout(config)).spec
        chosen = select_paths(stored, leaves, "leaves")
        chosen.extend(path for path in cls.sampled_leaves(config) if path in stored)
        opened.load_only(frozenset(chosen))
    kwargs = cls._init_kwargs(opened, config, state)
    kwargs["seed"] = state.optional("seed", None).validate(check_seed)
    if device is not None:
        kwargs["device"] = device
    elif not _available(saved_on := config.optional("device", "cpu").validate(check_device)):
        warnings.warn(
            f"{opened.path}: saved on device {str(saved_on)!r}, which this host does not have; "
            "loading onto the CPU (pass device= to choose; the sample stream is reseeded)",
            RuntimeWarning,
            stacklevel=4,
        )
        kwargs["device"] = torch.device("cpu")
    try:
        try:
            buffer = cls(**kwargs)
        except (TypeError, ValueError, KeyError) as err:
            # The saved options themselves are refused (a KeyError: an output key the rows lack).
            if isinstance(err, StateError | CorruptCheckpointError):
                raise
            raise StateError("config", str(err)) from err
        buffer._restore(opened, config, state)
        if leaves is not None:
            # The rows read were verified block by block; with none read (no rows stored),
            # the metadata the spec and ring position came from still must be.
            opened.verify_metadata()
    except MemoryError as err:
        # A sound checkpoint may be too large for this host: not corrupt, but say which file.
        raise MemoryError(f"{opened.path / 'config.json'}: config['capacity']: {err}") from err
    saved = opened.state.get("generator")
    if saved is not None:
        restore_generator(buffer._generator, saved)
    return buffer


def buffer_class(target: str, where: str | os.PathLike[str]) -> type[CheckpointedBuffer]:
    """The buffer class that loads checkpoints whose config.json names ``target``.

    Raises:
        ValueError: no class loads ``target`` (the message names ``where`` and lists the
            known targets).
    """
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


def load_buffer(
    path: str | os.PathLike[str],
    device: str | torch.device | None = None,
    *,
    leaves: Sequence[Key] | None = None,
) -> Any:
    """Load any bufcore or BFM-Zero buffer checkpoint, dispatching on ``__target__``.

    Args:
        path: The checkpoint directory.
        device: Where to put the tensors; ``None`` keeps the device recorded in config.json.
        leaves: Load only these leaves (and the ones sampling needs); None for all. See
            :meth:`CheckpointedBuffer.load`.

    Raises:
        ValueError: unknown ``__target__`` (the message lists the known ones), or ``device``
            is not a device.
        TypeError: ``device`` is neither a str nor a ``torch.device``, or ``leaves`` is not a
            list of keys.
        KeyPathError: a key of ``leaves`` matches no stored leaf (the message lists them).
        CorruptCheckpointError: a file is damaged or differs from the manifest, or a field is
            malformed (names the file and field).
        MemoryError: this host cannot allocate the rows (names config.json's capacity).
        FileNotFoundError: ``path`` is not a directory.
    """
    return CheckpointedBuffer.load(path, device, leaves=leaves)

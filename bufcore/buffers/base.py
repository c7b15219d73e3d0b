"""What every buffer class shares: its ring position, sampling's generator, and the state idiom.

A buffer is a composition (DESIGN §1): a storage (:class:`~bufcore.storage.ring.RingStorage`,
its rows), a sampler (:mod:`bufcore.sampling.samplers`, which rows a draw reads) and its
options. :class:`Buffer` is the one shallow base: it answers for the ring position and the
generator a draw uses, and turns any buffer into plain data and back. It holds no file code.

The state idiom, as torch users know it:

- ``state_dict()`` returns plain data: ``target`` (the ``__target__`` name), ``config`` (the
  config.json fields: constructor options, ``_idx``, ``_is_full``), ``state`` (bufcore-only state:
  seed, rank (whose sample stream, :func:`bufcore.rng.stream_seed`; absent for rank 0),
  generator, the sampler's state), ``nested_key_separator`` and ``batch_dims`` (how the rows
  are laid out), and ``rows`` (key path -> the filled rows, live views in physical order). A
  sampler passed to the buffer that has state of its own (the prioritized sampler) adds
  ``state["sampler"]`` and its per-row tensors as rows under ``"_sampler"``
  (:mod:`bufcore.buffers.prioritized`); a load rebuilds that sampler.
- ``from_state_dict(state)`` builds the buffer that data describes, through the class's one
  parser of its saved config (:meth:`Buffer.saved_options`) and its public constructor; the rows
  are copied straight into freshly allocated storage (:mod:`bufcore.buffers.loading`, the one
  build path every load takes, and the ``__target__`` registry). ``load_state_dict(state)``
  does the same in place.
- ``save(path)`` and ``load(path)`` are thin wrappers: :mod:`bufcore.persist.checkpoint` writes a
  state dict as a checkpoint directory, and opens one as a state whose rows are read lazily, leaf
  by leaf, so ``load(path, leaves=[...])`` reads only the leaves asked for.
- Where the rows live is not part of the state: a buffer built with ``backing=BackingFile(path)``
  (the classes with ``takes_backing``) keeps them in that memory-mapped file
  (:mod:`bufcore.persist.backing`) and saves the same checkpoint an in-memory one saves; any
  checkpoint or state loads into a file with ``backing=`` too, and ``load_state_dict`` keeps
  the buffer's own choice.

Each class lists the ``__target__`` names it loads from (``checkpoint_targets``; the first is the
one it writes): BFM-Zero's own module paths by name, and anything else is refused (DESIGN §2.6).
A malformed field raises :class:`~bufcore.errors.StateError`, which a load reports as a corrupt
file of the checkpoint.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar

import torch

from bufcore.buffers.loading import (
    InMemoryState,
    SavedState,
    build_buffer,
    check_backing,
    register_target,
)
from bufcore.buffers.prioritized import (
    sampler_state,
)
from bufcore.checks import (
    check_device,
    check_generator,
    check_separator,
)
from bufcore.distributed import check_rank
from bufcore.errors import CorruptCheckpointError, StateError
from bufcore.fields import Field
from bufcore.persist.backing import BackingFile
from bufcore.persist.checkpoint import open_checkpoint, save_checkpoint, saved_ring_position
from bufcore.rng import (
    check_buffer_device,
    generator_state,
    rank_state,
    undone_on_error,
)
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import RingPosition
from bufcore.storage.batches import RowSource
from bufcore.storage.ring import RingStorage
from bufcore.tree import Key, KeyPath, key_list

B = TypeVar("B", bound="Buffer")

class Buffer(ABC):
    """The shallow base of every buffer class: ring position, generator, state idiom.

    Subclasses set ``checkpoint_targets``, build ``_storage``, ``_generator``, ``seed``,
    ``device`` and ``nested_key_separator`` in their constructor, and give their state
    (:meth:`state_dict`) and its one parser (:meth:`saved_options`).
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = ()
    # Whether the constructor takes ``backing=`` (rows in a memory-mapped file).
    takes_backing: ClassVar[bool] = False
    nested_key_separator: str = "-"
    seed: int | None
    # Whose sample stream (bufcore.rng.stream_seed); a subclass without the option is rank 0's.
    rank: int = 0
    device: torch.device
    _storage: RingStorage
    _generator: torch.Generator
    _sampler: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.__dict__.get("checkpoint_targets", ()):
            register_target(name, cls)

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

    @property
    def backing(self) -> BackingFile | None:
        """The file the rows live in (``backing=``), or None when they are in memory."""
        # The DI-engine buffers keep their rows elsewhere, always in memory.
        storage = getattr(self, "_storage", None)
        memory = None if storage is None else storage.memory
        return memory if isinstance(memory, BackingFile) else None

    def __repr__(self) -> str:
        backing = self.backing
        where = "" if backing is None else f", backing={str(backing.path)!r}"
        return (
            f"{type(self).__name__}(capacity={self._storage.capacity}, len={len(self)}, "
            f"cursor={self.cursor}, device={str(self.device)!r}{where})"
        )

    def _ring(self) -> RingPosition:
        """Where the ring stands, for the sampler."""
        storage = self._storage
        return RingPosition(len(storage), storage.capacity, storage.envs)

    @property
    def sampler(self) -> Any:
        """The sampler draws go through: the one passed as ``sampler=``, or the class's own."""
        return self._sampler

    def _prioritized(self) -> PrioritizedSampler:
        """The buffer's prioritized sampler.

        Raises:
            TypeError: it samples with another sampler.
        """
        sampler = getattr(self, "_sampler", None)
        if not isinstance(sampler, PrioritizedSampler):
            raise TypeError(
                f"{type(self).__name__}: samples with {type(sampler).__name__}, not a "
                "PrioritizedSampler; build it with sampler=PrioritizedSampler(...) to update "
                "priorities"
            )
        return sampler

    def _check_not_empty(self) -> None:
        """Raises:
        ValueError: nothing was written yet.
        """
        if self.empty():
            raise ValueError("cannot sample: the buffer is empty (extend it first)")

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
        sampler = getattr(self, "_sampler", None)
        steps = sampler.steps if isinstance(sampler, PrioritizedSampler) else None
        with undone_on_error(chosen, argument=argument):
            try:
                yield chosen
            except BaseException:
                if isinstance(sampler, PrioritizedSampler) and steps is not None:
                    sampler.steps = steps  # a failed sample does not anneal beta either
                raise

    # ------------------------------------------------------------ state idiom
    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """The buffer as plain data (see the module docstring); ``rows`` are live views.

        Raises:
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out.
        """

    def _state_dict(self, config: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """:meth:`state_dict` from a class's own config and state fields (plus the sampler's
        state, for a prioritized sampler)."""
        storage = self._storage
        rows = storage.rows()
        saved: dict[str, Any] = {
            "seed": self.seed,
            **rank_state(self.rank),
            "generator": generator_state(self._generator),
            **state,
        }
        sampler = getattr(self, "_sampler", None)
        if isinstance(sampler, PrioritizedSampler):
            saved["sampler"], sampler_rows = sampler_state(sampler, storage)
            rows.update(sampler_rows)
        return {
            "target": self.checkpoint_targets[0],
            "config": {**config, "_idx": storage.cursor, "_is_full": storage.is_full},
            "state": saved,
            "nested_key_separator": self.nested_key_separator,
            "batch_dims": storage.batch_dims,
            "rows": rows,
        }

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
    def saved_layout(cls, config: Field) -> tuple[str, int]:
        """The nested key separator and batch axes of the saved rows, as the constructor
        takes them from config.json.

        Raises:
            StateError: a field is malformed.
        """
        return config.optional("nested_key_separator", "-").validate(check_separator), 1

    @classmethod
    def saved_ring(cls, config: Field, count: int) -> tuple[int, int, bool]:
        """The capacity, cursor and fullness config.json records, checked against ``count``
        stored rows (a class whose rows are not its ring's slots checks its own way).

        Raises:
            StateError: a field is malformed, or they do not describe ``count`` rows.
        """
        capacity = config.key("capacity").integer(minimum=1)
        cursor, is_full = saved_ring_position(config, count, capacity)
        return capacity, cursor, is_full

    @classmethod
    def sampled_leaves(cls, config: Field) -> list[KeyPath]:
        """The leaves sampling reads (end flags, motion ids): a load with ``leaves=`` always
        loads them.

        Raises:
            StateError: a field is malformed.
        """
        return []

    @classmethod
    def _restored(
        cls: type[B], options: dict[str, Any], rows: RowSource, config: Field, state: Field
    ) -> B:
        """A buffer built from ``options`` holding ``rows`` at the saved ring position.

        The default builds an empty buffer and restores its ring; a class with more state
        extends this, and one built from its rows (the expert buffer) replaces it.

        Raises:
            StateError: the ring position does not fit the rows or the capacity, or the
                stored leaves differ from the ones the config describes.
        """
        buffer = cls(**options)
        storage = buffer._storage
        if not storage.allocated and rows.spec:
            loaded = {p: leaf for p, leaf in rows.spec.items() if p not in rows.absent}
            try:
                storage.check_size(loaded, rows.env_count)  # before allocating it
            except ValueError as err:
                raise config.key("capacity").error(str(err)) from err
        cursor, is_full = saved_ring_position(config, rows.count, storage.capacity)
        try:
            storage.restore(rows, cursor=cursor, is_full=is_full)
        except ValueError as err:
            if isinstance(err, CorruptCheckpointError):
                raise
            raise StateError("rows", str(err)) from err
        return buffer

    @classmethod
    def from_state_dict(
        cls: type[B],
        state: Mapping[str, Any] | SavedState,
        *,
        device: str | torch.device | None = None,
        leaves: Sequence[Key] | None = None,
        rank: int | None = None,
        backing: BackingFile | None = None,
    ) -> B:
        """The buffer ``state`` describes (a ``state_dict()``, or an opened checkpoint).

        Args:
            state: What :meth:`state_dict` returned (of this class or a subclass).
            device: Where to put the tensors; ``None`` keeps the saved device (the CPU, with a
                warning, when this host lacks it).
            leaves: Copy only these leaves' rows (and the ones sampling needs); see
                :meth:`load`. None for all of them.
            rank: Whose sample stream the buffer draws (see :meth:`load`); None for this
                process's rank in the default process group (0 without one).
            backing: Copy the rows into this file instead of memory (see :meth:`load`).

        Raises:
            ValueError: ``state`` holds another kind of buffer, or an unknown one; or
                ``device`` is not one a buffer can live on here (checked first, with the
                constructor's message); or ``backing`` is given with a device other than the
                CPU, or closed.
            TypeError: ``state`` is not a mapping (nor an opened checkpoint), ``device``,
                ``leaves`` or ``rank`` is malformed, ``backing`` is not a ``BackingFile``, or
                the buffer's class keeps its rows in memory only.
            OSError: ``backing``'s disk cannot hold the rows.
            KeyPathError: a key of ``leaves`` matches no stored leaf.
            StateError: a field is malformed or inconsistent (names the field).
            MemoryError: this host cannot allocate the rows (names config's capacity).
        """
        if not isinstance(state, Mapping) and not callable(getattr(state, "row_source", None)):
            raise TypeError(
                f"state: expected what state_dict() returned (a mapping), got "
                f"{type(state).__name__}"
            )
        # The constructor's own check, made before anything is read: an unusable device is
        # the caller's argument, never the checkpoint's fault.
        target = None if device is None else check_buffer_device(check_device(device))
        keys = None if leaves is None else key_list(leaves, "leaves")
        stream = check_rank(rank)
        backing = check_backing(backing, target)
        saved = state if not isinstance(state, Mapping) else InMemoryState(state)
        return build_buffer(cls, saved, target, keys, stream, backing)

    def load_state_dict(self, state: Mapping[str, Any] | SavedState) -> None:
        """Make this buffer the one ``state`` describes (on this buffer's device, drawing this
        buffer's rank's stream, in its backing file if it has one: see :meth:`load`).

        Options, rows, ring position and generator all come from ``state``; nothing changes
        unless all of it is valid. A file-backed buffer copies the rows into a new file that
        then replaces the one at its path (the disk holds both meanwhile); should that fail,
        the buffer keeps its rows, in its old file, no longer at the path.

        Raises:
            ValueError: ``state`` holds another kind of buffer.
            StateError: a field is malformed or inconsistent.
            MemoryError: the rows cannot be allocated.
            OSError: the backing file's disk cannot hold the rows.
        """
        loaded = type(self).from_state_dict(state, device=self.device, rank=self.rank,
                                            backing=self.backing)
        if type(loaded) is not type(self):
            raise ValueError(
                f"state: holds a {type(loaded).__name__}, not a {type(self).__name__}"
            )
        previous = self.__dict__.get("_storage")  # DI-engine buffers keep items, not a ring
        if isinstance(previous, RingStorage):
            loaded._storage.follow(previous)  # an index drawn before updates nothing after
        self.__dict__.clear()
        self.__dict__.update(loaded.__dict__)

    def _keep_prioritized(self, previous: Any) -> None:
        """After :meth:`load_state_dict` of a state that saved no sampler: a prioritized
        sampler given to this buffer before stays, holding every loaded row at its largest
        priority (as if they had just been written)."""
        if isinstance(previous, PrioritizedSampler):
            previous.adopt(self._ring() if self._storage.allocated else None)
            self._sampler = previous

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
            ValueError: ``path`` is empty (``""`` would mean the working directory); a key
                contains the nested key separator; ``nested_key_separator`` is empty or holds
                '/', or is given to a buffer without one (a ``ZBuffer``).
            FileExistsError: ``path`` exists and is not a checkpoint directory; with
                ``replace=False``, anything exists at ``path``.
            TypeError: ``replace`` is not a bool, or ``nested_key_separator`` not a str
                (nothing is written).
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out
                (nothing is written).
        """
        state = self.state_dict()
        if nested_key_separator is not None:
            separator = check_separator(nested_key_separator)
            if "nested_key_separator" not in state["config"]:
                raise ValueError(
                    f"nested_key_separator: a {type(self).__name__} has no nested keys to join"
                )
            state["config"]["nested_key_separator"] = separator
            state["nested_key_separator"] = separator
        save_checkpoint(path, state, replace=replace)

    # --------------------------------------------------------------- loading
    @classmethod
    def load(
        cls: type[B],
        path: str | os.PathLike[str],
        device: str | torch.device | None = None,
        *,
        leaves: Sequence[Key] | None = None,
        rank: int | None = None,
        backing: BackingFile | None = None,
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

        The sample stream: loaded by the rank that saved it (state.json's ``rank``; 0 when
        absent), the buffer continues the saved stream where it stopped. Loaded by another
        rank, it draws a branch of that stream of its own, so ranks that load one checkpoint
        (an expert buffer, a single-process run resumed on N ranks) never draw alike. A
        checkpoint without a generator (BFM-Zero's) starts ``(seed, rank)``'s stream.
        With ``backing``, the rows are copied once into that file (README "Past RAM:
        file-backed buffers"), block by block of rows, never all in memory: the buffer is then
        file-backed, as if built with ``backing=``. The checkpoint is left as it is.

        Args:
            path: The checkpoint directory.
            device: Where to put the tensors; ``None`` keeps config.json's device.
            leaves: Keys of the leaves to load (a str for a top-level key, a tuple key path; a
                nested dict's key selects all its leaves), or None for all of them.
            rank: Whose sample stream the buffer draws; None for this process's rank in the
                default process group (0 without one).
            backing: A :class:`~bufcore.persist.backing.BackingFile` to hold the rows (for
                the classes whose constructor takes ``backing=``), or None for memory.

        Raises:
            ValueError: the checkpoint holds another kind of buffer, or an unknown one; or
                ``device`` is not a device, or not one a buffer can live on here (``"meta"``,
                a CUDA device this host lacks), checked before anything is read with the
                constructor's own message; or ``backing`` is closed or given with a device
                other than the CPU.
            TypeError: ``device`` is neither a str nor a ``torch.device``, ``leaves`` is not
                a list of keys, ``rank`` not an int or None, or ``backing`` is not a
                ``BackingFile`` (checked before anything is read); or ``backing`` is given for
                a class that keeps its rows in memory.
            OSError: ``backing``'s disk cannot hold the rows.
            KeyPathError: (a ``KeyError``) a key of ``leaves`` matches no stored leaf (the
                message lists them); raised before anything is allocated.
            CorruptCheckpointError: a file is damaged or inconsistent, or a field is malformed
                or asks for more storage than any device holds (names the file and field).
            MemoryError: this host cannot allocate the rows (names config.json's capacity).
            FileNotFoundError: ``path`` is not a directory.
        """
        # The constructor's own check, made before anything is read: an unusable device is
        # the caller's argument, never the checkpoint's fault.
        target = None if device is None else check_buffer_device(check_device(device))
        keys = None if leaves is None else key_list(leaves, "leaves")
        stream = check_rank(rank)
        backing = check_backing(backing, target)
        with open_checkpoint(path, hash_payload=keys is None) as opened:
            buffer = build_buffer(cls, opened, target, keys, stream, backing)
            if keys is not None:
                # The rows read were verified block by block; with none read (no rows
                # stored), the metadata the spec and ring position came from still must be.
                opened.verify_metadata()
            return buffer


def load_buffer(
    path: str | os.PathLike[str],
    device: str | torch.device | None = None,
    *,
    leaves: Sequence[Key] | None = None,
    rank: int | None = None,
    backing: BackingFile | None = None,
) -> Any:
    """Load any bufcore or BFM-Zero buffer checkpoint, dispatching on ``__target__``.

    Args:
        path: The checkpoint directory.
        device: Where to put the tensors; ``None`` keeps the device recorded in config.json.
        leaves: Load only these leaves (and the ones sampling needs); None for all. See
            :meth:`Buffer.load`.
        rank: Whose sample stream the buffer draws (see :meth:`Buffer.load`); None for this
            process's rank in the default process group (0 without one).
        backing: Copy the rows into this file instead of memory; see :meth:`Buffer.load`.

    Raises:
        ValueError: unknown ``__target__`` (the message lists the known ones), or ``device``
            is not a device or not one a buffer can live on here (checked first, with the
            constructor's message); or ``backing`` is closed or given with a device other
            than the CPU.
        TypeError: ``device`` is neither a str nor a ``torch.device``, ``leaves`` is not a
            list of keys, ``rank`` not an int or None, or ``backing`` is not a
            ``BackingFile`` or is given for a class that keeps its rows in memory.
        KeyPathError: a key of ``leaves`` matches no stored leaf (the message lists them).
        CorruptCheckpointError: a file is damaged or differs from the manifest, or a field is
            malformed (names the file and field).
        MemoryError: this host cannot allocate the rows (names config.json's capacity).
        FileNotFoundError: ``path`` is not a directory.
        OSError: ``backing``'s disk cannot hold the rows.
    """
    return Buffer.load(path, device, leaves=leaves, rank=rank, backing=backing)

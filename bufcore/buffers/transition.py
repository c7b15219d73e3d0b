"""``DictBuffer``: BFM-Zero's FIFO transition buffer over nested dicts, without its bugs.

The public surface follows ``humanoidverse.agents.buffers.transition.DictBuffer`` (constructor
fields, ``extend``/``sample``/``get_full_buffer``/``save``/``load``, config.json layout) so code
ports with few changes. Differences (DESIGN §2): the whole batch is validated before anything is
written, ``load(device=...)`` is honoured, custom separators apply at every depth, an empty
buffer saves and loads, ``get_full_buffer`` returns a chronological copy, and sampling uses the
buffer's own generator on the storage device.

Composition: a :class:`~bufcore.storage.ring.RingStorage` of ``[time]`` rows and a sampler
(:class:`~bufcore.sampling.samplers.UniformRows` unless another is passed; with a
:class:`~bufcore.sampling.prioritized.PrioritizedSampler`, batches carry importance weights and
``update_priority`` takes new priorities, see :mod:`bufcore.buffers.prioritized`). With
``backing=BackingFile(path)`` the ring's rows live in that memory-mapped file
(:mod:`bufcore.persist.backing`) and everything else is unchanged.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

import torch

from bufcore.buffers.base import Buffer
from bufcore.buffers.loading import SavedState, check_backing
from bufcore.buffers.prioritized import (
    add_weighted,
    check_reserved_keys,
    stamped,
    update_priority,
    weighted_layout,
)
from bufcore.checks import MAX_COUNT, check_device, check_int, check_seed, check_separator
from bufcore.distributed import check_rank
from bufcore.fields import Field
from bufcore.persist.backing import BackingFile
from bufcore.persist.hdf5_file import read_row_datasets
from bufcore.rng import make_generator
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import (
    FollowsWrites,
    Sampler,
    UniformRows,
    check_sampler,
    checked_rows,
)
from bufcore.storage.batches import Batch
from bufcore.storage.ring import RingStorage
from bufcore.tree import Spec, flatten, format_key_path, unflatten


class DictBuffer(Buffer):
    """FIFO ring of transitions stored as a nested dict of tensors.

    The first non-empty :meth:`extend` fixes the spec (key path -> trailing shape, dtype) and
    allocates ``capacity`` rows once. Later batches must match it; a dtype is cast only when the
    cast keeps the values (float64 -> float32 yes while they stay finite, int64 -> int8 only
    when every value fits, float -> int never; see :func:`bufcore.tree.check_cast`).

    Args:
        capacity: Rows kept; older rows are overwritten first.
        device: Where the rows live and where samples (and their indices) are created.
        nested_key_separator: Joins nested keys into dataset names in ``buffer.hdf5``.
        seed: Seed of the buffer's own generator; ``None`` for a nondeterministic one.
        rank: Whose sample stream of ``seed`` (:func:`bufcore.rng.stream_seed`): ranks sharing
            a seed draw different batches, rank 0 the seed's own stream. ``None`` for this
            process's rank in the default process group (0 without one).
        sampler: Which rows a sample reads; ``None`` for uniform rows with replacement (the
            reference's). A :class:`~bufcore.sampling.prioritized.PrioritizedSampler` (its
            state is saved and loaded with the buffer's), or any other
            :class:`~bufcore.sampling.samplers.Sampler` of rows, whose draws are checked at
            each draw (a ``SampleIndex`` of ``batch_size`` integer rows within the filled
            ones) and which a save does not record (a load draws uniformly again).
        backing: A :class:`~bufcore.persist.backing.BackingFile` the rows live in (README
            "Past RAM: file-backed buffers"), or ``None`` for memory. Draws, checks, ``out=``
            and checkpoints are the same either way.

    Raises:
        ValueError: ``capacity < 1``, an unknown device, an empty separator or one with '/',
            or a negative ``rank``, or ``backing`` with a device other than the CPU, or
            closed.
        TypeError: ``capacity``, ``seed`` or ``rank`` is not an int, the separator not a str,
            or ``backing`` not a ``BackingFile``.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = (
        "bufcore.DictBuffer",
        "humanoidverse.agents.buffers.transition.DictBuffer",
        "metamotivo.buffers.buffers.DictBuffer",
    )
    takes_backing: ClassVar[bool] = True

    def __init__(
        self,
        *,
        capacity: int,
        device: str | torch.device = "cpu",
        nested_key_separator: str = "-",
        seed: int | None = None,
        rank: int | None = None,
        sampler: Sampler | None = None,
        backing: BackingFile | None = None,
    ) -> None:
        self.capacity = check_int(capacity, "capacity", minimum=1)
        self.device = check_device(device)
        self.nested_key_separator = check_separator(nested_key_separator)
        self.seed = check_seed(seed)
        self.rank = check_rank(rank)
        memory = check_backing(backing, self.device)
        self._generator = make_generator(self.device, self.seed, rank=self.rank)
        self._storage = RingStorage(self.capacity, device=self.device, memory=memory)
        self._sampler: Sampler = UniformRows() if sampler is None else check_sampler(sampler)

    # ------------------------------------------------------------------ state
    def size(self) -> int:
        """Rows held (``len(self)``)."""
        return len(self)

    @property
    def spec(self) -> Spec | None:
        """What one row holds: key path -> :class:`~bufcore.tree.LeafSpec` (shape after the
        batch axis, dtype), fixed by the first non-empty extend (or a load); None before.

        A copy: changing it changes nothing in the buffer.
        """
        spec = self._storage.spec
        return None if spec is None else dict(spec)

    @property
    def storage(self) -> dict[str, Any] | None:
        """Live nested views ``[capacity, ...]`` of the rows, BFM-Zero's ``storage`` (read only).

        ``None`` before the first extend.

        Raises:
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out.
        """
        return nested_views(self._storage)

    # ---------------------------------------------------------------- writing
    def extend(self, data: Mapping[str, Any]) -> None:
        """Append a batch: a nested dict whose leaves share a leading batch axis.

        A batch larger than ``capacity`` keeps its last ``capacity`` rows in order; an empty
        batch is a no-op. Nothing is written unless the whole batch is valid, and a batch that
        raises leaves the buffer exactly as it was.

        Raises:
            TypeError: not a mapping, a non-str key, a non-numeric leaf or one without dense data
                (sparse, nested, meta), or a dtype that does not cast safely (float -> int).
            ValueError: missing or extra keys, a missing batch axis, a wrong trailing shape,
                unequal batch sizes, or values outside the stored dtype's range.
            MemoryError: the first batch's ``capacity`` rows cannot be allocated.
            OSError: the first batch's rows do not fit the backing file's disk (nothing
                changes).
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` (nothing changes).
        """
        batch = self._storage.validate(data)
        if batch.size == 0:
            return
        follows = self._sampler if isinstance(self._sampler, FollowsWrites) else None
        if not self._storage.allocated:
            if isinstance(self._sampler, PrioritizedSampler):
                check_reserved_keys(batch.leaves)
            # Before the write: a warning turned into an error must not follow a stored batch.
            warn_unsaveable_keys(batch, self.nested_key_separator)
            if follows is not None:
                follows.bind(self.capacity, 1)
        start = self._storage.cursor
        with torch.no_grad():
            self._storage.write(batch)
        if follows is not None:
            follows.written(self._ring(), start, batch.size)

    def load_hdf5(
        self, h5_file: str | os.PathLike[str], nested_key_separator: str | None = None
    ) -> None:
        """Extend the buffer with the rows of an HDF5 file of datasets (BFM-Zero's ``load_hdf5``).

        The file holds one dataset per leaf named by its key path joined with the separator
        (a ``buffer.hdf5``); its rows are appended in file order, as one :meth:`extend`: the
        cursor advances past them, a file of more than ``capacity`` rows keeps its last
        ``capacity``, and the rows must match the spec like any batch. Use :meth:`load` for a
        checkpoint directory: it restores the ring position too.

        Args:
            h5_file: The HDF5 file.
            nested_key_separator: Splits dataset names into key paths; ``None`` for the
                buffer's own.

        Raises:
            FileNotFoundError: ``h5_file`` does not exist.
            CorruptFileError: ``h5_file`` is not an HDF5 file of row datasets (see
                :func:`~bufcore.persist.hdf5_file.read_row_datasets`).
            TypeError: ``nested_key_separator`` is not a str, or the rows cannot be stored
                (as :meth:`extend`).
            ValueError: ``nested_key_separator`` is empty or holds '/', or the rows do not
                match the spec (as :meth:`extend`); nothing changes then.
        """
        self.extend(hdf5_rows(self, h5_file, nested_key_separator))

    def clear(self) -> None:
        """Remove every row (``len`` becomes 0; the next write starts at row 0).
        The spec fixed by the first extend stays, and so does the memory of the rows (a
        training loop that clears and refills allocates nothing); the generator's stream goes
        on where it was. A prioritized sampler forgets the rows' priorities.
        """
        self._storage.clear()
        if isinstance(self._sampler, FollowsWrites):
            self._sampler.reset()

    # ---------------------------------------------------------------- reading
    def sample(
        self,
        batch_size: int,
        *,
        generator: torch.Generator | None = None,
        out: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Draw ``batch_size`` rows, with replacement, from the filled rows: uniformly, or as
        the buffer's sampler draws (by priority with a ``PrioritizedSampler``).

        The outputs' memory is the buffer's to reuse once nothing references it any more (no
        tensor, view, numpy array or autograd graph), so a training loop's steady state
        allocates nothing and takes no page faults; a batch that is still referenced is never
        written again.

        Args:
            batch_size: Rows to draw.
            generator: Draw from this generator instead of the buffer's own, whose stream then
                stays where it was; ``None`` for the buffer's own.
            out: Write into these tensors instead (a nested dict like the result, each leaf a
                contiguous tensor of the stored dtype and shape ``[batch_size, ...]`` on the
                buffer's device, such as a previous result or pinned memory) and return it.

        Returns:
            The nested structure of the stored data; every leaf a contiguous tensor
            ``[batch_size, ...]`` on the buffer's device: the rows at
            ``sample_index(batch_size).rows``. With a prioritized sampler, also ``"_weight"``
            (float32 ``[batch_size]``: the index's importance weights) and ``"_index"`` (int64
            ``[batch_size, 2]``: rows and write counts, for :meth:`update_priority`). With
            ``out``, ``out`` itself.

        Raises:
            ValueError: the buffer is empty, ``batch_size`` is outside ``[1, 2**62]``,
                ``generator`` is on another device, or ``out`` has other keys, a wrong shape or
                device, a leaf that is not contiguous, requires grad, is an inference tensor
                outside inference mode, or shares memory with the buffer's rows or another leaf
                (checked before anything is drawn).
            TypeError: ``generator`` is not a ``torch.Generator``, ``out`` is not a mapping,
                or one of its leaves is not a tensor of the stored dtype.
            MemoryError: the output cannot be allocated (the generator is left as it was).
            LeafNotLoadedError: a leaf it gathers was left out by ``load(..., leaves=)``.

        A custom sampler's answer that is not a ``SampleIndex`` of ``batch_size`` integer rows
        within the filled ones raises ``TypeError``/``ValueError`` before anything is gathered.
        """
        batch_size = self._checked_size(batch_size)
        weighted = isinstance(self._sampler, PrioritizedSampler)
        targets = None
        if out is not None:
            layout = self._storage.output_layout((batch_size,), self._storage.spec or {})
            if weighted:
                layout.update(weighted_layout(batch_size))
            targets = self._storage.check_out(flatten(out, argument="out"), layout)
        with self._drawing(generator, argument="batch_size") as drawn_from:
            index = self._draw(batch_size, drawn_from)
            data = None if targets is None else targets[: len(targets) - 2 * weighted]
            gathered = self._storage.gather(index.rows, out=data)
            result = unflatten(gathered)
            if weighted:
                add_weighted(result, index, self._storage, None if targets is None else
                             targets[len(targets) - 2 :])
        return result if out is None else out

    def sample_index(
        self, batch_size: int, *, generator: torch.Generator | None = None
    ) -> SampleIndex:
        """Where :meth:`sample` with these arguments would read, drawn as it draws.

        The generator advances exactly as :meth:`sample` advances it.

        Raises:
            ValueError: as :meth:`sample`.
            TypeError: as :meth:`sample`.
        """
        batch_size = self._checked_size(batch_size)
        with self._drawing(generator, argument="batch_size") as drawn_from:
            return self._draw(batch_size, drawn_from)

    def _draw(self, batch_size: int, generator: torch.Generator) -> SampleIndex:
        """The sampler's draw; a sampler other than the built-in one is checked (see
        :func:`~bufcore.sampling.samplers.checked_rows`).

        Raises:
            TypeError: the sampler returned no ``SampleIndex`` or non-integer rows.
            ValueError: it returned another row count or device, or rows outside the filled
                ones (the generator is set back by the caller).
        """
        ring = self._ring()
        index = self._sampler.draw(ring, batch_size, generator)
        if type(self._sampler) is UniformRows:
            return index
        if isinstance(self._sampler, PrioritizedSampler):
            return stamped(index, self._storage)
        return checked_rows(index, ring, batch_size, self.device)

    def update_priority(self, index: SampleIndex | torch.Tensor, priority: Any) -> int:
        """Give the rows a sample drew new priorities (a prioritized sampler's buffer).

        Rows written again since they were drawn (overwritten by newer data, or cleared) are
        skipped: their storage write count differs from the one the index carries. For a row
        drawn more than once, the last value wins.

        Args:
            index: What :meth:`sample_index` returned, or a batch's ``"_index"``.
            priority: One non-negative value per row (``|TD error|``, say); stored plus the
                sampler's ``eps``.

        Returns:
            How many rows were updated (the others were overwritten).

        Raises:
            TypeError: the buffer samples with another sampler, ``index`` is neither a
                ``SampleIndex`` nor an integer tensor, or the priorities are not real numbers.
            ValueError: ``index`` has no write counts or is malformed, not one priority per
                row, a priority NaN, infinite or negative, or every held row would weigh 0.
                Nothing changes then.
            IndexError: a row outside the buffer.
        """
        return update_priority(self._storage, self._prioritized(), index, priority)

    def _checked_size(self, batch_size: int) -> int:
        """``batch_size`` once checked, in a buffer that holds rows.

        Raises:
            ValueError: the buffer is empty or ``batch_size`` is outside ``[1, 2**62]``.
            TypeError: ``batch_size`` is not an int.
        """
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=MAX_COUNT)
        self._check_not_empty()
        return batch_size

    def get_full_buffer(self) -> dict[str, Any]:
        """A copy of the filled rows in chronological order (oldest first); ``{}`` when empty.

        Raises:
            LeafNotLoadedError: the buffer was loaded with ``leaves=`` that left a leaf out.
        """
        return chronological_rows(self._storage)

    # ------------------------------------------------------------ state idiom
    def state_dict(self) -> dict[str, Any]:
        return self._state_dict(
            {
                "capacity": self.capacity,
                "device": str(self.device),
                "nested_key_separator": self.nested_key_separator,
            },
            {},
        )

    def load_state_dict(self, state: Mapping[str, Any] | SavedState) -> None:
        """As :meth:`Buffer.load_state_dict`. A state that saved a prioritized sampler brings
        it (with its priorities); otherwise the sampler given to the constructor stays, a
        prioritized one holding every loaded row at its largest priority."""
        previous = self._sampler
        super().load_state_dict(state)
        if isinstance(self._sampler, UniformRows):
            self._sampler = previous
            self._keep_prioritized(previous)

    @classmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        return {
            "capacity": config.key("capacity").integer(),
            "device": config.key("device").text(),
            "nested_key_separator": config.optional("nested_key_separator", "-").text(),
        }


def warn_unsaveable_keys(batch: Batch, separator: str) -> None:
    """Warn when a first batch's keys hold the nested key separator: such a buffer works but
    cannot be saved (dataset names would be ambiguous) until they are renamed."""
    clashing = [p for p in batch.leaves if any(separator in part for part in p)]
    if clashing:
        warnings.warn(
            f"keys {', '.join(map(format_key_path, clashing))} contain the nested key "
            f"separator {separator!r}: save with another (save(path, nested_key_separator=...)) "
            "or rename them",
            stacklevel=3,
        )


def nested_views(storage: RingStorage) -> dict[str, Any] | None:
    """Live nested views of a ring's rows (BFM-Zero's ``storage``); None before a write.

    Raises:
        LeafNotLoadedError: a leaf was not loaded.
    """
    return unflatten(storage.views) if storage.allocated else None


def chronological_rows(storage: RingStorage) -> dict[str, Any]:
    """A nested copy of a ring's filled rows, oldest first; ``{}`` when empty.

    Raises:
        LeafNotLoadedError: a leaf was not loaded.
    """
    if len(storage) == 0:
        return {}
    return unflatten(storage.gather(storage.flat_index(storage.chronological_time_index())))


def hdf5_rows(
    buffer: Buffer, h5_file: str | os.PathLike[str], nested_key_separator: str | None
) -> dict[str, Any]:
    """The rows of an HDF5 file of row datasets, read for ``buffer`` (its separator unless
    ``nested_key_separator`` is given, its batch axes, its spec's dtypes): what ``load_hdf5``
    extends the buffer with.

    Raises:
        FileNotFoundError: ``h5_file`` does not exist.
        CorruptFileError: ``h5_file`` is not an HDF5 file of row datasets.
        TypeError: ``nested_key_separator`` is not a str.
        ValueError: ``nested_key_separator`` is empty or holds '/'.
    """
    separator = (
        buffer.nested_key_separator
        if nested_key_separator is None
        else check_separator(nested_key_separator)
    )
    storage = buffer._storage
    return read_row_datasets(h5_file, separator, batch_dims=storage.batch_dims, like=storage.spec)

"""What the two trajectory buffers share: window options, end flags and the window gather.

Both :class:`~bufcore.buffers.online.TrajectoryDictBufferMultiDim` and
:class:`~bufcore.buffers.expert.TrajectoryDictBuffer` sample ``batch_size // seq_length`` windows,
slice-major (rows ``[i * L, (i + 1) * L)`` are one window), as
``{key: [batch, ...], "next": {key: [batch, ...]}}``; ``next`` holds the row after each one in
the same env, and a window plus its ``next`` rows lie in one trajectory. :class:`WindowOptions`
holds their options, validated once; the helpers below read end flags and gather windows, and
:class:`WindowedBuffer` samples: its window sampler (:mod:`bufcore.sampling.samplers`) draws the
windows' rows (:class:`~bufcore.sampling.index.SampleIndex`, what ``sample_index`` returns), then
it gathers them. It holds no persistence code: it is the sampling half both classes share.

Keys: an output or end key is a str (top level) or a tuple key path (any depth); JSON configs
store tuples as lists, and a nested dict key selects all its leaves.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from bufcore.buffers.base import Buffer
from bufcore.buffers.prioritized import add_weighted, stamped, weighted_layout
from bufcore.checks import MAX_COUNT, check_int
from bufcore.fields import Field
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import Sampler, WindowRequest, WindowSampler
from bufcore.sampling.windows import (
    WEIGHTINGS,
    TrajectoryTable,
    Weighting,
    check_weighting,
)
from bufcore.storage.ring import RingStorage
from bufcore.tree import (
    Key,
    KeyPath,
    as_key,
    as_key_path,
    flatten,
    key_json,
    key_list,
    select_paths,
    unflatten,
)

DEFAULT_KEYS: tuple[Key, ...] = ("observation",)
DEFAULT_END_KEY = "done"
# Window lengths are compared with int64 row counts; longer than any storage can hold.
MAX_SEQ_LENGTH = MAX_COUNT


@dataclass(frozen=True)
class WindowOptions:
    """How a trajectory buffer is sampled, validated once.

    Attributes:
        seq_length: Default window length, >= 1.
        output_key_t: Keys returned for the window rows.
        output_key_tp1: Keys returned under ``"next"``; empty for none (windows then need
            ``seq_length`` rows instead of ``seq_length + 1``).
        end_key: The end-flag leaf.

    How windows are weighted is the sampler's (its ``weighting``), not an option kept here.

    Raises:
        TypeError: malformed keys or a non-int ``seq_length``.
        ValueError: ``seq_length`` outside ``[1, 2**62]``.
    """

    seq_length: int = 1
    output_key_t: Sequence[Key] = DEFAULT_KEYS
    output_key_tp1: Sequence[Key] = DEFAULT_KEYS
    end_key: Key = DEFAULT_END_KEY
    end_path: KeyPath = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        seq_length = check_int(self.seq_length, "seq_length", minimum=1, maximum=MAX_SEQ_LENGTH)
        set_(self, "seq_length", seq_length)
        set_(self, "output_key_t", key_list(self.output_key_t, "output_key_t"))
        set_(self, "output_key_tp1", key_list(self.output_key_tp1, "output_key_tp1"))
        set_(self, "end_key", as_key(self.end_key, "end_key"))
        set_(self, "end_path", as_key_path(self.end_key))

    @property
    def offset(self) -> int:
        """1 when windows also read the row after each one (``next``), else 0."""
        return 1 if self.output_key_tp1 else 0

    def request(self, batch_size: int, seq_length: int | None) -> tuple[int, int]:
        """``(seq_length, windows)`` for a sample call, with the reference's checks.

        Raises:
            TypeError: non-int sizes.
            ValueError: a size below 1, ``batch_size < seq_length``, or ``batch_size`` not a
                multiple of ``seq_length``.
        """
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=MAX_COUNT)
        seq = self.seq_length if seq_length is None else check_int(
            seq_length, "seq_length", minimum=1, maximum=MAX_SEQ_LENGTH
        )
        if batch_size < seq:
            raise ValueError(
                "The batch-size must be bigger than the sequence length, got "
                f"batch_size={batch_size} and seq_length={seq}."
            )
        if batch_size % seq != 0:
            raise ValueError(
                "The batch-size must be divisible by the sequence length, got "
                f"batch_size={batch_size} and seq_length={seq}."
            )
        return seq, batch_size // seq

    def output_paths(self, spec: Collection[KeyPath]) -> tuple[list[KeyPath], list[KeyPath]]:
        """The leaves of ``spec`` read for ``t`` and for ``next``.

        Raises:
            KeyPathError: an output key matches no leaf.
        """
        return (
            select_paths(spec, list(self.output_key_t), "output_key_t"),
            select_paths(spec, list(self.output_key_tp1), "output_key_tp1"),
        )

    def to_config(self) -> dict[str, Any]:
        """config.json fields (the sampler's weighting is bufcore-only and goes to state.json)."""
        return {
            "seq_length": self.seq_length,
            "output_key_t": [key_json(k) for k in self.output_key_t],
            "output_key_tp1": [key_json(k) for k in self.output_key_tp1],
            "end_key": key_json(self.end_key),
        }

    @staticmethod
    def saved_kwargs(config: Field, state: Field) -> dict[str, Any]:
        """Constructor keyword arguments from saved config and state (BFM-Zero's defaults),
        the sampler's ``weighting`` included.

        Raises:
            StateError: a field has the wrong type.
        """
        default_keys = [key_json(k) for k in DEFAULT_KEYS]
        return {
            "seq_length": config.key("seq_length").integer(minimum=1, maximum=MAX_SEQ_LENGTH),
            "output_key_t": config.optional("output_key_t", default_keys).validate(key_list),
            "output_key_tp1": config.optional("output_key_tp1", default_keys).validate(key_list),
            "end_key": config.optional("end_key", DEFAULT_END_KEY).validate(as_key),
            "weighting": state.optional("weighting", "trajectory").choice(WEIGHTINGS),
        }


def check_end_leaf(shape: Sequence[int], batch_dims: int, where: str) -> None:
    """End flags must be ``[n]``/``[n, 1]`` (``[n, E]``/``[n, E, 1]`` with an env axis).

    Raises:
        ValueError: another shape.
    """
    if tuple(shape[batch_dims:]) not in ((), (1,)):
        lead = "n" if batch_dims == 1 else "n, env"
        raise ValueError(
            f"{where}: expected end flags [{lead}] or [{lead}, 1], got shape {list(shape)}"
        )


def end_matrix(tensor: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """End flags ``[n, E]`` (``E = 1`` for ``[time]`` rows) from a leaf; only the trailing
    singleton is squeezed, never the env axis."""
    n = int(tensor.shape[0])
    env = 1 if batch_dims == 1 else int(tensor.shape[1])
    return (tensor != 0).reshape(n, env)


def gather_windows(
    storage: RingStorage,
    rows: torch.Tensor,
    paths: tuple[list[KeyPath], list[KeyPath]],
    *,
    out: list[torch.Tensor] | None = None,
) -> dict[str, Any]:
    """Read the window ``rows`` (and the rows one time step after them) with one gather per
    leaf each; into ``out`` (checked, ``t`` leaves first, then ``next``) when given."""
    paths_t, paths_tp1 = paths
    split = len(paths_t)
    result = unflatten(storage.gather(rows, paths_t, out=None if out is None else out[:split]))
    if paths_tp1:
        step = storage.envs
        following = torch.remainder(rows + step, storage.capacity * step)
        result["next"] = unflatten(
            storage.gather(following, paths_tp1, out=None if out is None else out[split:])
        )
    return result


W = TypeVar("W", bound="WindowedBuffer")


class WindowedBuffer(Buffer):
    """A trajectory buffer: its window options as read-only attributes (BFM-Zero's names), and
    sampling as draw-the-windows-then-gather with its window sampler.

    Subclasses build ``_window`` (the options), ``_windows`` (a
    :class:`~bufcore.sampling.samplers.WindowSampler`: the trajectories and the weighting) and
    ``_sampler`` (what draws: ``_windows`` itself, or a
    :class:`~bufcore.sampling.prioritized.PrioritizedSampler` drawing through its spans) in
    their constructor.
    """

    _window: WindowOptions
    _windows: WindowSampler
    _sampler: Sampler

    def trajectories(self) -> TrajectoryTable:
        """The trajectories windows are drawn from, sorted by env, then time."""
        return self._windows.trajectories()

    def sample(
        self,
        batch_size: int = 1,
        seq_length: int | None = None,
        *,
        generator: torch.Generator | None = None,
        out: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``batch_size // seq_length`` windows of ``seq_length`` consecutive rows, slice-major.

        Outputs' memory is reused as :meth:`bufcore.DictBuffer.sample` says.

        Args:
            batch_size: Rows in all (a multiple of the window length).
            seq_length: Window length; ``None`` for the buffer's ``seq_length``.
            generator: Draw from this generator (on the buffer's device) instead of the
                buffer's own, whose stream then stays where it was; ``None`` for its own.
            out: Write into these tensors (shaped like the result; see
                :meth:`bufcore.DictBuffer.sample`) and return it.

        Returns:
            ``{key: [batch_size, ...] for key in output_key_t}`` plus ``"next"`` with the rows
            after them for ``output_key_tp1`` (if not empty): the storage at
            ``sample_index(...).rows`` and the rows one time step later. With a prioritized
            sampler, also ``"_weight"`` and ``"_index"`` (as :meth:`bufcore.DictBuffer.sample`;
            a window's weight on each of its rows). With ``out``, ``out``.

        Raises:
            ValueError: the buffer is empty, the reference's batch-size checks, no trajectory
                long enough (the message gives the stored length range), zero priority on every
                one that is, a generator on another device, or an ``out`` that does not fit
                (checked before anything is drawn).
            TypeError: non-int sizes, ``generator`` not a ``torch.Generator``, or an ``out``
                leaf that is not a tensor of the stored dtype.
            KeyError: an output key matches no stored leaf.
            MemoryError: the output cannot be allocated (the generator is left as it was).
            LeafNotLoadedError: a leaf it gathers was left out by ``load(..., leaves=)``.
        """
        seq, windows, paths = self._checked_request(batch_size, seq_length)
        weighted = isinstance(self._sampler, PrioritizedSampler)
        targets = None if out is None else self._checked_out(out, seq * windows, paths)
        with self._drawing(generator, argument="batch_size") as drawn_from:
            index = self._draw(seq, windows, drawn_from, locate=False)
            split = None if targets is None else len(targets) - 2 * weighted
            data = None if targets is None else targets[:split]
            result = gather_windows(self._storage, index.rows, paths, out=data)
            if weighted:
                add_weighted(result, index, self._storage,
                             None if targets is None else targets[split:])
        return result if out is None else out

    def _checked_out(
        self, out: dict[str, Any], rows: int, paths: tuple[list[KeyPath], list[KeyPath]]
    ) -> list[torch.Tensor]:
        """``out``'s tensors in gather order (``t`` leaves, then ``next``), checked first.

        Raises:
            ValueError: as :meth:`sample` (the ``out`` checks).
            TypeError: as :meth:`sample`.
        """
        storage = self._storage
        paths_t, paths_tp1 = paths
        shape = (rows,)
        layout = storage.output_layout(shape, paths_t)
        following = storage.output_layout(shape, paths_tp1)
        layout.update({("next", *path): spec for path, spec in following.items()})
        if isinstance(self._sampler, PrioritizedSampler):
            layout.update(weighted_layout(rows))
        return storage.check_out(flatten(out, argument="out"), layout)

    def sample_index(
        self,
        batch_size: int = 1,
        seq_length: int | None = None,
        *,
        generator: torch.Generator | None = None,
    ) -> SampleIndex:
        """Where :meth:`sample` with these arguments would read, drawn as it draws.

        The generator advances exactly as :meth:`sample` advances it. ``trajectory`` gives,
        per window, its trajectory's position in :meth:`trajectories`.

        Raises:
            ValueError: as :meth:`sample`.
            TypeError: as :meth:`sample`.
            KeyError: as :meth:`sample`.
        """
        seq, windows, _ = self._checked_request(batch_size, seq_length)
        with self._drawing(generator, argument="batch_size") as drawn_from:
            return self._draw(seq, windows, drawn_from, locate=True)

    def _checked_request(
        self, batch_size: int, seq_length: int | None
    ) -> tuple[int, int, tuple[list[KeyPath], list[KeyPath]]]:
        """Window length, window count and the leaves read for ``t`` and ``next``, once the
        sizes are checked against a buffer that holds rows.

        Raises:
            ValueError: the buffer is empty, or the reference's batch-size checks.
            TypeError: non-int sizes.
            KeyError: an output key matches no stored leaf.
        """
        seq, windows = self._window.request(batch_size, seq_length)
        self._check_not_empty()
        return seq, windows, self._window.output_paths(self._storage.spec or {})

    def _draw(
        self, seq: int, windows: int, generator: torch.Generator, *, locate: bool
    ) -> SampleIndex:
        """The sampler's draw of ``windows`` windows of ``seq`` rows (slice-major).

        Raises:
            ValueError: no trajectory can hold such a window.
        """
        request = WindowRequest(seq, seq + self._window.offset, locate, self._windows.spans())
        index = self._sampler.draw(self._ring(), windows, generator, window=request)
        if isinstance(self._sampler, PrioritizedSampler):
            return stamped(index, self._storage)
        return index

    @classmethod
    def sampled_leaves(cls, config: Field) -> list[KeyPath]:
        end_key = config.optional("end_key", DEFAULT_END_KEY).validate(as_key)
        return [*super().sampled_leaves(config), as_key_path(end_key)]

    @property
    def seq_length(self) -> int:
        """Default window length."""
        return self._window.seq_length

    @property
    def output_key_t(self) -> list[Key]:
        """Keys returned for the window rows."""
        return list(self._window.output_key_t)

    @property
    def output_key_tp1(self) -> list[Key]:
        """Keys returned under ``"next"``."""
        return list(self._window.output_key_tp1)

    @property
    def end_key(self) -> Key:
        """The end-flag leaf."""
        return self._window.end_key

    @property
    def weighting(self) -> Weighting:
        """``"trajectory"`` or ``"window"``: how the window sampler weighs windows (a
        prioritized sampler weighs every valid window by its priority instead)."""
        return self._windows.weighting

    def with_weighting(self: W, weighting: Weighting) -> W:
        """A view of this buffer that samples windows with ``weighting``.

        The view shares the rows, trajectories and generator (a shallow copy) and has the
        priorities as they are when it is made (a later ``update_priorities`` on either side
        does not reach the other), so it is for sampling only (pass ``generator=`` to leave the
        shared stream alone); this buffer is not changed. Used to compare weightings on one
        loaded buffer.

        Raises:
            ValueError: ``weighting`` is not ``"trajectory"`` or ``"window"``.
        """
        view = copy.copy(self)
        view._windows = self._windows.with_weighting(check_weighting(weighting))
        if self._sampler is self._windows:
            view._sampler = view._windows
        return view

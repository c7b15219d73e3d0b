"""Prioritized replay (Schaul et al. 2016, REFERENCE §11.3) for the rows and windows of a ring.

Model: every stored row (flat ``time * env_count + env``) has a priority ``p``; it weighs
``w = p ** alpha``. New rows get the largest priority seen so far (1.0 at first), and
:meth:`PrioritizedSampler.update` stores ``p + eps``. A sum tree over the weights
(:mod:`bufcore.sampling.segment_tree`) gives the total and the prefix-sum search, and a
:class:`~bufcore.sampling.segment_tree.LeafMinimum` the smallest positive weight, so a draw and
an update cost O(batch * log rows) (the minimum: on average; see its docstring).

- Rows (``DictBuffer``): each draw is row ``i`` with probability ``w_i / sum(w)``, i.i.d.
- Windows (the online buffer): every valid window (``need`` rows of one trajectory, as for the
  uniform window sampler) is an item whose priority comes from its rows' priorities, ``"max"``
  (the default, as torchrl's ``PrioritizedSliceSampler`` reduces a slice) or ``"mean"``; it
  weighs ``priority ** alpha``. A draw proposes a row from the tree and a uniform position of
  it inside a window, and accepts the window with probability
  ``weight / sum(weights of its rows)`` (never above 1: ``max(p) ** alpha`` and
  ``mean(p) ** alpha`` are at most that sum), which is exact rejection sampling: a window is
  proposed in proportion to that sum, so accepted windows come in proportion to their weight.
  After a few rounds the rest come from an exact draw over every valid window.

Importance weights ``(w_i / w_min) ** -beta`` (equal to ``(N P(i) / (N P_min)) ** -beta``)
come with every draw in :attr:`SampleIndex.weights`, one per row (a window's weight repeated
over its rows). For rows, ``w_min`` is the smallest positive weight held. For windows it is the
smallest positive row weight held, as torchrl's slice sampler has it: weights are exact up to
one factor common to the whole batch, and at most 1 (a window weighs at least its lightest
row's weight, unless it averages in rows of priority 0). ``beta`` anneals with each draw: draw
``k`` (from 0) uses ``min(1, beta + k * (1 - beta) / anneal_steps)``, the value DI-engine's
repeated increment reaches without its rounding drift.

Its figures for a run's log or a checkpoint's summary (:meth:`PrioritizedSampler.stats`) and
the weight maths it shares with them are in :mod:`bufcore.sampling.priority_maths`.

The sampler keeps the priorities of the rows its buffer holds, so one sampler serves one
buffer; the buffer tells it about writes (:class:`~bufcore.sampling.samplers.FollowsWrites`)
and skips updates of rows overwritten since they were drawn (their write counts differ). Trees
and priorities live on the CPU in numpy, whatever the buffer's device.

Needed by (DESIGN rule 5): undoing a window draw's proposals when it raises:
``tests/buffers/test_prioritized.py::test_no_window_long_enough_raises_and_keeps_the_stream``;
the exact fallback after the rejection rounds: its ``exact`` chi-square test there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from bufcore.checks import check_choice, check_int, check_real
from bufcore.fields import Field
from bufcore.rng import undone_on_error
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.priority_maths import (
    importance,
    importance_quantiles,
    priority_quantiles,
    tree_weights,
)
from bufcore.sampling.samplers import RingPosition, WindowRequest
from bufcore.sampling.segment_tree import (
    LeafMinimum,
    SumTree,
    check_leaf_index,
    check_weights,
)
from bufcore.sampling.windows import (
    RowSpans,
    TrajectoryTable,
    draw_categorical,
    no_eligible_message,
    start_counts,
    table_position,
    window_index,
)

Reduction = Literal["max", "mean"]
REDUCTIONS: tuple[Reduction, ...] = ("max", "mean")
_OPTIONS = ("alpha", "beta", "anneal_steps", "eps", "reduction")
# Rejection rounds before the rest of a window draw comes from the exact draw over all windows.
_ROUNDS = 4
_UNBOUND = "sampler: no rows yet (it learns the ring's shape at its buffer's first write)"


class PrioritizedSampler:
    """Draws rows or windows in proportion to ``priority ** alpha``, with importance weights.

    See the module docstring for the model. Pass one to a buffer (``DictBuffer(...,
    sampler=PrioritizedSampler())`` or ``TrajectoryDictBufferMultiDim(..., sampler=...)``) and
    give it new priorities with the buffer's ``update_priority``.

    Args:
        alpha: How much priorities count (0: uniform over rows with a positive priority).
        beta: Importance-weight exponent of the first draw, in ``[0, 1]``.
        anneal_steps: Draws over which ``beta`` rises linearly to 1; None keeps it fixed.
        eps: Added to every updated priority (DI-engine's 1e-5 by default), so that an item
            whose TD error is 0 can still be drawn; 0 lets a priority of 0 exclude an item.
        reduction: A window's priority from its rows' ones: ``"max"`` or ``"mean"``.

    Raises:
        TypeError: an option of the wrong type.
        ValueError: ``alpha`` or ``eps`` negative or not finite, ``beta`` outside ``[0, 1]``,
            ``anneal_steps`` below 1, or an unknown reduction.
    """

    kind: ClassVar[str] = "prioritized"
    # The per-row tensors its state holds (saved as rows of the buffer's checkpoint).
    row_tensors: ClassVar[tuple[str, ...]] = ("priority",)

    def __init__(
        self,
        *,
        alpha: float = 0.6,
        beta: float = 0.4,
        anneal_steps: int | None = 100_000,
        eps: float = 1e-5,
        reduction: Reduction = "max",
    ) -> None:
        self._alpha = check_real(alpha, "alpha", minimum=0.0)
        self._beta = check_real(beta, "beta", minimum=0.0, maximum=1.0)
        self._anneal_steps = (
            None if anneal_steps is None else check_int(anneal_steps, "anneal_steps", minimum=1)
        )
        self._eps = check_real(eps, "eps", minimum=0.0)
        self._reduction: Reduction = check_choice(reduction, "reduction", REDUCTIONS)
        self._max_priority = 1.0
        self._steps = 0
        self._shape: tuple[int, int] | None = None
        self._held = 0
        self._pair: tuple[SumTree, LeafMinimum] | None = None  # made by bind
        self._priority = np.zeros(0)

    def __repr__(self) -> str:
        return (
            f"PrioritizedSampler(alpha={self._alpha}, beta={self._beta}, "
            f"anneal_steps={self._anneal_steps}, eps={self._eps}, "
            f"reduction={self._reduction!r})"
        )

    # ------------------------------------------------------------- options
    @property
    def alpha(self) -> float:
        """How much priorities count: a row weighs ``priority ** alpha``."""
        return self._alpha

    @property
    def anneal_steps(self) -> int | None:
        """Draws over which ``beta`` rises to 1 (None: it stays)."""
        return self._anneal_steps

    @property
    def eps(self) -> float:
        """What an update adds to every priority."""
        return self._eps

    @property
    def reduction(self) -> Reduction:
        """A window's priority from its rows' ones: ``"max"`` or ``"mean"``."""
        return self._reduction

    @property
    def beta(self) -> float:
        """The importance-weight exponent the next draw uses (annealed, see the module
        docstring)."""
        if self._anneal_steps is None:
            return self._beta
        return min(1.0, self._beta + self._steps * (1.0 - self._beta) / self._anneal_steps)

    @property
    def steps(self) -> int:
        """Draws so far (what anneals ``beta``); settable, e.g. to resume an annealing.

        Raises:
            TypeError: (setting) not an int.
            ValueError: (setting) negative.
        """
        return self._steps

    @steps.setter
    def steps(self, value: int) -> None:
        self._steps = check_int(value, "steps", minimum=0)

    @property
    def max_priority(self) -> float:
        """The largest priority given so far (before ``eps``): what a new row gets."""
        return self._max_priority

    def config(self) -> dict[str, Any]:
        """The constructor's options, as plain data."""
        return {
            "alpha": self._alpha,
            "beta": self._beta,
            "anneal_steps": self._anneal_steps,
            "eps": self._eps,
            "reduction": self._reduction,
        }

    # ---------------------------------------------------------- following writes
    def bind(self, capacity: int, env_count: int) -> None:
        """Allocate the trees for a ring of ``capacity`` time rows of ``env_count`` envs
        (nothing changes when they exist already for that shape).

        Raises:
            ValueError: bound to a ring of another shape (a sampler serves one buffer).
            MemoryError: the trees cannot be allocated (nothing changes).
        """
        shape = (check_int(capacity, "capacity", minimum=1), check_int(env_count, "env_count",
                                                                        minimum=1))
        if self._shape == shape:
            return
        if self._shape is not None:
            raise ValueError(
                f"sampler: holds the priorities of a ring of {self._shape[0]} time rows of "
                f"{self._shape[1]} envs, not {shape[0]} of {shape[1]} (a sampler serves one "
                "buffer)"
            )
        leaves = shape[0] * shape[1]
        sums = SumTree(leaves)
        priority = np.zeros(leaves)
        self._pair, self._priority = (sums, LeafMinimum(sums)), priority
        self._shape = shape

    def written(self, ring: RingPosition, start: int, count: int) -> None:
        """New rows get the largest priority seen so far (see
        :class:`~bufcore.sampling.samplers.FollowsWrites`)."""
        capacity, envs = self._bound_shape()
        kept = min(count, capacity)
        first = (start + count - kept) % capacity
        stored = self._max_priority
        weight = self._weights(np.array([stored]))[0]
        for low, high in ((first, min(first + kept, capacity)), (0, first + kept - capacity)):
            if high > low:
                self._priority[low * envs : high * envs] = stored
                self._set_range(low * envs, np.full((high - low) * envs, weight))
        self._held = ring.length * ring.env_count

    def reset(self) -> None:
        """Forget every row's priority, and the largest priority (back to 1.0, as DI-engine's
        ``clear``); the annealing of beta goes on."""
        if self._pair is not None:
            for part in self._pair:
                part.clear()
            self._priority[:] = 0.0
        self._held = 0
        self._max_priority = 1.0

    def adopt(self, ring: RingPosition | None) -> None:
        """Forget every row and hold ``ring``'s rows anew, each at the largest priority (the
        rows of a buffer were replaced by a state that saved no priorities); None: no rows
        yet (the next first write binds the sampler again). Options, the largest priority and
        the annealing of beta stay.

        Raises:
            MemoryError: the trees cannot be allocated (nothing changes).
        """
        if ring is None:
            self._shape, self._pair, self._held = None, None, 0
            return
        shape = self._shape
        self._shape = None
        try:
            self.bind(ring.capacity, ring.env_count)
        except BaseException:
            self._shape = shape
            raise
        self.written(ring, 0, ring.length)

    def _bound_shape(self) -> tuple[int, int]:
        """Raises:
        ValueError: not bound yet.
        """
        if self._shape is None:
            raise ValueError(_UNBOUND)
        return self._shape

    def _trees(self) -> tuple[SumTree, LeafMinimum]:
        """Raises:
        ValueError: not bound yet.
        """
        if self._pair is None:
            raise ValueError(_UNBOUND)
        return self._pair

    def _weights(self, stored: np.ndarray) -> np.ndarray:
        """Tree weights ``p ** alpha`` of stored priorities (a zero priority weighs 0, also at
        ``alpha`` 0).

        Raises:
            ValueError: a weight too large for the trees' sums to stay finite.
        """
        weights = tree_weights(stored, self._alpha)
        sums, _ = self._trees()
        if len(weights) and not weights.max() <= sums.max_leaf:
            raise ValueError(
                f"priority: expected priority ** alpha <= {sums.max_leaf:.6g} (the trees' sums "
                f"must stay finite), got {weights.max()}"
            )
        return weights

    # ------------------------------------------------------------- priorities
    def priorities(self, rows: np.ndarray | None = None) -> torch.Tensor:
        """The priorities of the held rows as stored (``p + eps``, or the max priority of a row
        never updated), float64 ``[held]`` in flat physical row order (a copy); with ``rows``
        (int64 held rows, unchecked), only theirs, in their order."""
        if rows is not None:
            return torch.from_numpy(self._priority[rows])
        return torch.from_numpy(self._priority[: self._held].copy())

    def row_weights(self, rows: np.ndarray | None = None) -> torch.Tensor:
        """The weights row draws are proportional to (``priority ** alpha`` of the stored
        priority) of the held rows, float64 ``[held]`` in flat physical row order (a copy);
        with ``rows`` (int64 held rows, unchecked), only theirs. Divided by their sum, they
        are each row's probability in one row draw.

        Raises:
            ValueError: not bound yet.
        """
        sums, _ = self._trees()
        chosen = np.arange(self._held) if rows is None else rows
        return torch.from_numpy(np.array(sums._leaves(chosen), dtype=np.float64))

    def importance_weights(self, weights: Any) -> torch.Tensor:
        """The importance weights draws of items weighing ``weights`` (from
        :meth:`row_weights` or :meth:`window_weights`) carry now: ``(w / w_min) ** -beta`` at
        the current :attr:`beta`, ``w_min`` the smallest positive held row weight, as a draw
        computes them (float64 here, rounded to float32 in a draw). An item of weight 0 is
        never drawn; its value is ``inf`` (``beta`` > 0) or 1.

        Raises:
            ValueError: not bound yet.
        """
        values = np.asarray(weights, dtype=np.float64)
        with np.errstate(divide="ignore"):  # a weight of 0 (never drawn) gives inf
            return torch.from_numpy(self._importance_of(values, np.float64))

    def update(self, rows: Any, priority: Any, *, keep: Any = None) -> int:
        """Set the priorities of flat storage ``rows``: ``p + eps`` each.

        A repeated row keeps its last value. The largest priority seen grows with the new ones
        (before ``eps``, as in DI-engine). Nothing changes unless every input is valid.

        Args:
            rows: Flat physical rows (``time * env_count + env``), as a ``SampleIndex`` gives.
            priority: One non-negative value per row (a TD error's magnitude, say).
            keep: Optional bool mask of the entries to apply (the buffer leaves out rows
                overwritten since they were drawn).

        Returns:
            How many entries were applied.

        Raises:
            TypeError: rows that are not integers, or priorities that are not real numbers.
            IndexError: a row outside the held ones.
            ValueError: not one priority per row, a priority NaN, infinite or negative, one
                whose weight would overflow the trees, or an update that would leave every
                held row with weight 0.
        """
        sums, _ = self._trees()
        flat = check_leaf_index(rows, len(sums), "index")
        values = check_weights(priority, len(flat), "priority")
        mask = None
        if keep is not None:
            mask = np.asarray(keep, dtype=bool).reshape(-1)
            if mask.shape != flat.shape:
                raise ValueError(
                    f"keep: expected one flag per row ({len(flat)}), got {mask.size}"
                )
        applied = flat if mask is None else flat[mask]
        if len(applied) and applied.max() >= self._held:
            raise IndexError(
                f"index: expected rows in [0, {self._held}) (the held ones), got "
                f"{applied.max()}"
            )
        return self._update_checked(flat, values, mask)

    def _update_checked(self, flat: np.ndarray, values: np.ndarray, mask: Any) -> int:
        """:meth:`update` of checked ``values`` for the int64 ``flat`` rows, those where
        ``mask`` is set (every one for None) being held rows; what the buffers call once they
        have checked the rows themselves.

        Raises:
            ValueError: a priority whose weight would overflow the trees, or an update that
                would leave every held row with weight 0 (nothing changes).
        """
        sums, minimum = self._trees()
        if mask is not None and not mask.all():
            flat, values = flat[mask], values[mask]
        applied = len(flat)
        if applied == 0:
            return 0
        replaced = sums._leaves(flat)
        every, before = flat, replaced
        kept = sums._last_writes(flat)  # the leaves at flat hold positions until set below
        if not kept.all():
            flat, values, replaced = flat[kept], values[kept], replaced[kept]
        stored = values + self._eps
        try:
            weights = self._weights(stored)
            if not weights.any() and not self._positive_outside(flat, sums):
                raise ValueError(
                    "priority: the update would give every held row weight 0 (nothing could "
                    "be drawn)"
                )
        except ValueError:
            sums._put_back(every, before)
            raise
        self._priority[flat] = stored
        sums._set_checked(flat, weights)
        minimum.replaced(replaced, weights)
        self._max_priority = max(self._max_priority, float(values.max()))
        return applied

    def assign(self, rows: Any, priority: Any) -> None:
        """Store ``priority`` for flat ``rows`` exactly as given: no ``eps`` added, the largest
        priority left as it is, and every held row may end at 0.

        For DI-engine's buffers (:mod:`bufcore.buffers.ding`): an item pushed with its own
        priority keeps it as given, and an item removed from the buffer gets 0, so no draw
        returns it (a draw over rows that all weigh 0 raises). A repeated row keeps its last
        value; nothing changes unless every input is valid.

        Raises:
            TypeError: rows that are not integers, or priorities that are not real numbers.
            IndexError: a row outside the held ones.
            ValueError: not one priority per row, or a priority NaN, infinite, negative or too
                large for the trees.
        """
        sums, minimum = self._trees()
        flat = check_leaf_index(rows, len(sums), "index")
        values = check_weights(priority, len(flat), "priority")
        if len(flat) and flat.max() >= self._held:
            raise IndexError(
                f"index: expected rows in [0, {self._held}) (the held ones), got {flat.max()}"
            )
        if len(flat) == 0:
            return
        replaced = sums._leaves(flat)
        every, before = flat, replaced
        kept = sums._last_writes(flat)  # the leaves at flat hold positions until set below
        if not kept.all():
            flat, values, replaced = flat[kept], values[kept], replaced[kept]
        try:
            weights = self._weights(values)
        except ValueError:
            sums._put_back(every, before)
            raise
        self._priority[flat] = values
        sums._set_checked(flat, weights)
        minimum.replaced(replaced, weights)

    def _set_range(self, start: int, weights: np.ndarray) -> None:
        """Set the weights of the consecutive rows from ``start`` (checked)."""
        sums, minimum = self._trees()
        replaced = sums._stored_leaves()[start : start + len(weights)].copy()
        sums._set_range_checked(start, weights)
        minimum.replaced(replaced, weights)

    def _positive_outside(self, rows: np.ndarray, sums: SumTree) -> bool:
        """Whether a held row outside ``rows`` has a positive weight: an update giving
        ``rows`` weight 0 leaves something to draw (O(held); only all-zero updates ask)."""
        mask = np.zeros(self._held, dtype=bool)
        mask[rows] = True
        return bool((sums._leaves(np.flatnonzero(~mask)) > 0).any())

    # ----------------------------------------------------------------- drawing
    def draw(
        self,
        ring: RingPosition,
        count: int,
        generator: torch.Generator,
        *,
        window: WindowRequest | None = None,
    ) -> SampleIndex:
        """``count`` rows, or ``count`` windows (slice-major rows), with importance weights.

        Raises:
            ValueError: no rows yet, every held row has weight 0, or (windows) no spans
                given, no trajectory long enough or every long enough window has weight 0.
        """
        sums, _ = self._trees()
        if not sums.total > 0:
            raise ValueError("cannot sample: every held row has priority zero")
        device = generator.device
        if window is None:
            targets = _uniform(count, generator)
            targets *= sums.total
            rows, weights = sums._find_checked(targets)
            index = SampleIndex(
                _on(torch.from_numpy(rows), device),
                ring.env_count,
                weights=self._importance(weights, device),
            )
        else:
            index = self._draw_windows(ring, count, generator, window)
        self._steps += 1
        return index

    def _importance(self, weights: np.ndarray, device: torch.device) -> torch.Tensor:
        """``(w / w_min) ** -beta`` as float32 on ``device``."""
        return _on(torch.from_numpy(self._importance_of(weights, np.float32)), device)

    def _importance_of(self, weights: np.ndarray, dtype: type[np.floating[Any]]) -> np.ndarray:
        """``(w / w_min) ** -beta`` computed in float64 and rounded once into ``dtype``."""
        _, minimum = self._trees()
        return importance(weights, minimum.value, self.beta, dtype=dtype)

    def _draw_windows(
        self, ring: RingPosition, count: int, generator: torch.Generator, window: WindowRequest
    ) -> SampleIndex:
        spans = window.spans
        if spans is None:
            raise ValueError("PrioritizedSampler: a window draw needs the ring's row spans")
        with undone_on_error(generator, argument="count"):
            start, env, weights = self._window_starts(ring, count, generator, window, spans)
        device = generator.device
        start_t = torch.from_numpy(start).to(device)
        env_t = torch.from_numpy(env).to(device)
        rows = window_index(
            start_t, env_t, length=window.length, capacity=ring.capacity,
            env_count=ring.env_count,
        )
        located = table_position(spans.table(), start_t, env_t) if window.locate else None
        importance = self._importance(weights, device)
        return SampleIndex(
            rows, ring.env_count, located,
            importance.repeat_interleave(window.length),
        )

    def _window_weights(
        self, start: np.ndarray, env: np.ndarray, ring: RingPosition, length: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """For windows at absolute ``start`` times of ``env``: their weight, and the sum of
        their rows' weights."""
        sums, _ = self._trees()
        envs, cells = ring.env_count, ring.capacity * ring.env_count
        first = start % ring.capacity * envs + env
        rows = first[:, None] + np.arange(0, length * envs, envs)
        # Past the ring's last row: wrap (once at most; an int64 modulo is slow).
        np.subtract(rows, cells, out=rows, where=rows >= cells)
        rows_weights = sums._leaves(rows)
        if self._reduction == "max":
            weight = _pairwise(rows_weights, np.maximum)
        else:
            weight = self._weights(self._priority[rows].mean(axis=1))
        return weight, _pairwise(rows_weights, np.add)

    def _window_starts(
        self,
        ring: RingPosition,
        count: int,
        generator: torch.Generator,
        window: WindowRequest,
        spans: RowSpans,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` window starts (absolute time, env) and weights, by rejection, then
        exactly (see the module docstring)."""
        sums, _ = self._trees()
        length, need = window.length, window.need
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        remaining = count
        proposals = count * length + 8
        for _ in range(_ROUNDS):
            rows, _ = sums._find_checked(_uniform(proposals, generator) * sums.total)
            position = np.floor(_uniform(proposals, generator) * length).astype(np.int64)
            accept = _uniform(proposals, generator)
            time, first, last = (
                part.cpu().numpy()
                for part in spans.row_spans(torch.from_numpy(rows).to(generator.device))
            )
            start = time - position
            env = rows % ring.env_count
            weight, rows_weight = self._window_weights(start, env, ring, length)
            accepted = np.flatnonzero(
                (start >= first) & (start + need - 1 <= last) & (accept * rows_weight < weight)
            )
            take = accepted[:remaining]
            found.append((start[take], env[take], weight[take]))
            remaining -= len(take)
            if remaining == 0:
                break
            rate = max(len(accepted) / proposals, 1 / (4 * length * length))
            proposals = int(remaining / rate * 1.25) + 8
        if remaining:
            found.append(self._exact_starts(remaining, generator, window, spans))
        start, env, weight = (np.concatenate(parts) for parts in zip(*found, strict=True))
        return start, env, weight

    def window_weights(
        self, table: TrajectoryTable, *, length: int, need: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every valid window of ``table`` and the weight a window draw gives it (its rows'
        priorities reduced by :attr:`reduction`, to the power ``alpha``): int64 start times
        (absolute, as the table's) and envs, float64 weights, trajectory by trajectory in table
        order. A window reads ``need`` rows of one trajectory and is weighed by its first
        ``length``, as :meth:`draw` weighs it; divided by their sum, the weights are the
        probability of each window in one draw. O(rows * length).

        Raises:
            ValueError: not bound yet.
        """
        capacity, envs = self._bound_shape()
        counts = start_counts(table.lengths, need).cpu()
        total = int(counts.sum())
        first = torch.repeat_interleave(table.start.cpu(), counts, output_size=total)
        before = torch.repeat_interleave(torch.cumsum(counts, 0) - counts, counts,
                                         output_size=total)
        start = (first + torch.arange(total) - before).numpy()
        env = torch.repeat_interleave(table.env.cpu(), counts, output_size=total).numpy()
        ring = RingPosition(self._held // envs, capacity, envs)
        weight, _ = self._window_weights(start, env, ring, length)
        return start, env, weight

    def _exact_starts(
        self,
        count: int,
        generator: torch.Generator,
        window: WindowRequest,
        spans: RowSpans,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` windows drawn exactly over every valid one (O(rows * length)).

        Raises:
            ValueError: no trajectory has ``need`` rows, or every valid window weighs 0.
        """
        table = spans.table()
        if not bool((start_counts(table.lengths, window.need) > 0).any()):
            raise ValueError(no_eligible_message(table, window.need, count))
        start, env, weight = self.window_weights(table, length=window.length, need=window.need)
        if not weight.any():
            raise ValueError(
                f"cannot sample: every window of {window.need} rows has priority zero"
            )
        chosen = draw_categorical(torch.from_numpy(weight), count, _cpu(generator)).numpy()
        return start[chosen], env[chosen], weight[chosen]

    # ------------------------------------------------------------- monitoring
    def stats(self) -> dict[str, float | None]:
        """Figures of the held rows, with the DI-engine monitor's key names (see the module
        docstring): ``beta`` (of the next draw), ``max_priority``, the quantiles of the stored
        priorities (:func:`priority_quantiles`) and of the importance weights at ``beta``
        (:func:`importance_quantiles`); the quantiles are None while no row is held."""
        held = self._priority[: self._held]
        beta = self.beta
        return {
            "beta": beta,
            "max_priority": self._max_priority,
            **priority_quantiles(held),
            **importance_quantiles(held, alpha=self._alpha, beta=beta),
        }

    # ------------------------------------------------------------ state idiom
    def state_dict(self) -> dict[str, Any]:
        """``config`` (the options), ``state`` (max priority, draws so far) and ``tensors``
        (``priority``: the held rows' stored priorities, a float64 copy in flat row order)."""
        return {
            "config": self.config(),
            "state": {"max_priority": self._max_priority, "steps": self._steps},
            "tensors": {"priority": self.priorities()},
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> PrioritizedSampler:
        """A sampler with the options and scalar state of ``state`` (what :meth:`state_dict`
        gave); the priorities come with :meth:`load_rows` once it is bound.

        Raises:
            StateError: a field is missing or malformed (names it).
        """
        field = Field(state, "state['sampler']", part="state")
        config = field.key("config")
        try:
            sampler = cls(**{name: config.key(name).value for name in _OPTIONS})
        except (TypeError, ValueError) as err:
            raise config.error(str(err)) from err
        scalars = field.key("state")
        sampler._max_priority = scalars.key("max_priority").real(minimum=0.0)
        sampler._steps = scalars.key("steps").integer(minimum=0)
        return sampler

    def load_rows(self, ring: RingPosition, tensors: Mapping[str, torch.Tensor]) -> None:
        """Take back the held rows' priorities (``tensors["priority"]``, flat, as
        :meth:`state_dict` gave them) for a bound sampler whose ring stands at ``ring``.

        Raises:
            ValueError: not one finite, non-negative priority per held row (nothing changes).
        """
        self._trees()
        held = ring.length * ring.env_count
        stored = check_weights(tensors["priority"], held, "priority")
        weights = self._weights(stored)
        self._priority[:held] = stored
        self._set_range(0, weights)
        self._held = held


def _pairwise(values: np.ndarray, combine: np.ufunc) -> np.ndarray:
    """``values`` ``[n, k]`` combined along its rows by adjacent pairs, ``[n]``: a few
    whole-array operations where numpy reduces each short row on its own (slowly); for ``k``
    8 the same additions, in the same order, as numpy's own pairwise sum."""
    while values.shape[1] > 1:
        odd = values[:, -1:] if values.shape[1] % 2 else None
        values = combine(values[:, 0:-1:2], values[:, 1::2])
        if odd is not None:
            values = np.concatenate([values, odd], axis=1)
    combined: np.ndarray = values[:, 0]
    return combined


def _uniform(count: int, generator: torch.Generator) -> np.ndarray:
    """``count`` float64 uniforms in ``[0, 1)`` from ``generator``, as a numpy array."""
    draw = torch.rand(count, dtype=torch.float64, generator=generator, device=generator.device)
    return draw.numpy() if draw.device.type == "cpu" else draw.cpu().numpy()


def _on(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` (on the CPU) on ``device``; no call at all for the CPU (a no-op ``to``
    still costs microseconds per draw)."""
    return tensor if device.type == "cpu" else tensor.to(device)


def _cpu(generator: torch.Generator) -> torch.Generator:
    """``generator`` if it is a CPU one, else a CPU generator seeded from its stream (the exact
    window draw runs on the CPU, where the priorities are)."""
    if generator.device.type == "cpu":
        return generator
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    return torch.Generator().manual_seed(seed)


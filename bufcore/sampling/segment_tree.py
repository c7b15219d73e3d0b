"""Sum and min segment trees over float64 leaves, for prioritized sampling (DESIGN §2 decision 10).

Each tree is a complete binary heap in one float64 array: node 1 is the root, node ``i`` has the
children ``2i`` and ``2i + 1``, and the leaves are the nodes ``[size, 2 * size)``, ``size`` being
the capacity rounded up to a power of two (the padding leaves hold the neutral value, so any
capacity works). :class:`SumTree` sums its leaves and finds the leaf where a prefix sum falls;
:class:`MinTree` gives the smallest *positive* leaf (a zero leaf is an empty slot, as an item
given priority 0 is in DI-engine's trees); :class:`LeafMinimum` gives the same for a sum tree's
leaves without a second tree (what the prioritized sampler uses; see its docstring).

How it stays exact and fast:

- A node is always recomputed from its two children, never adjusted by a difference. The
  internal nodes are therefore a pure function of the leaves: no error accumulates however
  many updates come (the root is a pairwise sum of the leaves, within ``depth`` roundings of
  the exact sum), :meth:`SegmentTree.rebuild` gives the very same array, and a node above two
  updated leaves gets the same value whichever of them is processed last, so a batch needs no
  sort. Duplicate leaves in one :meth:`~SegmentTree.set` are resolved once, last write wins.
- Every batch operation is a few whole-batch numpy operations per tree level, never a Python
  loop over items. At a batch of ~1,000 an operation costs about a microsecond, so the count of
  operations is the cost. An update walks the updated leaves' paths only through the levels
  that have many more nodes than the batch (per level: a shift, one gather of both children
  through a complex128 view of the array, one combine, one scatter) and recomputes the levels
  above whole from strided slices, without index arrays. A search takes one gather, one
  comparison and three in-place updates per level for the whole batch, branch-free. Measured
  no faster, in a loop of draws and updates at 1,000,000 leaves (not in a loop repeating one
  call, whose cache and branch predictor flatter them): a ``searchsorted`` over the top ten
  levels' cumulative sums (65 µs against the 55 µs of those levels: a mispredicted branch per
  step on random targets), gathering the 8 leaves under a node as one 64-byte row to descend
  3 levels per cache miss (slower: numpy copies 64-byte rows one ``memcpy`` at a time), 8-ary
  nodes (numpy reduces along short axes slowly) and gathers into preallocated outputs
  (``np.take(out=)`` is slower than indexing). The lower levels of a large tree cost 2-3x the
  upper ones: they miss the cache. numpy rather than torch: a torch operation on the CPU costs
  several microseconds at these sizes.
- Sorting the targets measured no faster (draws alternating with updates, medians of 5
  rounds, load 3-6; at 1M x 1024 / 1M x 256 / 131,072 x 1024 / 131,072 x 256). Sorted targets
  descend in the time random ones take (165 / 85 / 119 / 69 µs either way: the lower levels'
  misses overlap in any order), so ``argsort`` and putting the leaves back only add their own
  30 / 7 / 30 / 7 µs; sorted leaves update no faster, before the sort's cost (55 / 34 / 38 /
  26 µs either way). A ``searchsorted`` of sorted targets over a cumulative sum of level 10
  (remade per draw), then the lower levels, draws 12 µs faster at batch 256 (88 -> 77 and
  72 -> 60) and no faster at 1024, yet a whole ``sample_index`` + ``update_priority`` step
  with it runs 0.99-1.01x today's at 256 and 0.95-0.96x at 1024; nor is it this search: its
  buckets and residuals round differently, so a target within a few ulps of a boundary may
  land one leaf over and the sample streams change. Making it agree (each residual
  recomputed along the found path as the descent subtracts, a margin check falling back to
  the descent) costs more than it saves (92 -> 99 and 71 -> 78 µs per draw at batch 256,
  195 -> 256 at 1M x 1024).
- An 8-ary tree whose nodes hold their children's exclusive prefix sums, descended 3 binary
  levels per step with 8 calls (gather a 64-byte row, compare, ``np.bitwise_count`` of the 8
  comparisons seen as one uint64, gather the prefix, subtract, move), measured no faster:
  a draw took 66 against 63 µs at 131,072 x 256 and 267 against 154 at 1M x 1024 (a row
  gather and a broadcast compare cost 2-5 µs each, not the ~0.7 of a 1-D call), and an
  update 5x longer (a prefix row is a ``cumsum`` along 8 values: ~13 µs per call).

The search returns, for each target ``x``, the leaf ``i`` with
``cumsum(leaves[:i]) <= x < cumsum(leaves[:i + 1])``, so a zero leaf is never returned. Where
rounding (a target at or beyond the total, REFERENCE §11.4's "target equals total", or a
residual that rounds past the node it descends into) would land on a zero leaf, the search
returns the last positive leaf before it instead: the one the target belongs to.

The ``_``-methods taking numpy arrays skip the checks, for
:class:`~bufcore.sampling.prioritized.PrioritizedSampler`, which checks its inputs once.

Needed by: ``tests/sampling/test_segment_tree.py`` (the model test, the §11.4 numbers, the
drift test) and ``python -m bench.prioritized`` (sample + update steps per second).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
import torch

from bufcore.checks import check_int
from bufcore.tree import real_values, to_tensor

# An update recomputes whole every level of at most this many nodes, or twice the batch: a
# strided pass over them costs less than walking the batch's paths through them.
_WHOLE_LEVEL = 4096
# Leaves at most this many: capacities beyond any storage's rows are refused up front.
MAX_LEAVES = 2**40
_FLOAT_MAX = float(np.finfo(np.float64).max)
# CPU tensors read straight through numpy (widening float32 is exact).
_FAST_DTYPES = (torch.float64, torch.float32)


def check_leaf_index(index: Any, count: int, argument: str = "index") -> np.ndarray:
    """``index`` as a 1-D int64 numpy array of leaves in ``[0, count)``.

    Takes an int, a list, a numpy array or a tensor (on any device).

    Raises:
        TypeError: not integers (floats, bools, strings).
        IndexError: an index outside ``[0, count)``.
    """
    if isinstance(index, np.ndarray) and index.dtype == np.int64:
        flat = index.reshape(-1)  # the fast path: what the buffers pass
    else:
        tensor = to_tensor(index, argument)
        if tensor.numel() == 0:
            return np.empty(0, dtype=np.int64)  # `[]` has no integer dtype; nothing to check
        if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
            raise TypeError(f"{argument}: expected integer indices, got dtype {tensor.dtype}")
        wide = tensor.detach().reshape(-1).cpu()
        if wide.dtype == torch.uint64:
            # torch has no comparisons for uint64; values past int64 are out of range anyway.
            wide = wide.to(torch.float64)
        if bool(((wide < 0) | (wide >= count)).any()):
            position = int(((wide < 0) | (wide >= count)).nonzero()[0, 0])
            raise IndexError(
                f"{argument}: expected indices in [0, {count}), got {wide[position].item()} at "
                f"position {position}"
            )
        flat = wide.to(torch.int64).numpy()
    if len(flat) and (flat.min() < 0 or flat.max() >= count):
        position = int(np.flatnonzero((flat < 0) | (flat >= count))[0])
        raise IndexError(
            f"{argument}: expected indices in [0, {count}), got {flat[position]} at position "
            f"{position}"
        )
    return flat


def check_weights(values: Any, count: int, argument: str = "values") -> np.ndarray:
    """``values`` as a float64 numpy array of ``count`` finite, non-negative numbers (a single
    number is repeated ``count`` times).

    Raises:
        TypeError: not real numbers (bools, complex, strings).
        ValueError: not one value per index, or a value NaN, infinite or negative.
    """
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.ndim:
        flat = values.reshape(-1)  # the fast paths: what the buffers and training loops pass
    elif (
        isinstance(values, torch.Tensor)
        and values.dtype in _FAST_DTYPES
        and values.device.type == "cpu"
        and values.ndim
    ):
        plain = values.ndim == 1 and not values.requires_grad  # one call instead of three
        flat = values.numpy() if plain else values.detach().reshape(-1).numpy()
        if flat.dtype != np.float64:
            flat = flat.astype(np.float64)  # a loss's float32 TD errors: exact in float64
    else:
        tensor = real_values(values, argument).detach()
        if tensor.ndim == 0:
            tensor = tensor.expand(count)
        flat = tensor.reshape(-1).cpu().numpy()
    if len(flat) != count:
        raise ValueError(
            f"{argument}: expected one value per index ({count}), got {len(flat)} values"
        )
    # Two reductions answer for every value (a NaN makes the minimum NaN); the mask only to
    # name the first bad one.
    if len(flat) and not (flat.min() >= 0 and flat.max() <= _FLOAT_MAX):
        position = int(np.flatnonzero(~(np.isfinite(flat) & (flat >= 0)))[0])
        raise ValueError(
            f"{argument}: expected finite values >= 0, got {flat[position]} at position "
            f"{position}"
        )
    return flat


def last_writes(index: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """Positions of ``index`` that are the last occurrence of their value (last write wins).

    ``scratch`` is an int64 array longer than the largest index, all -1, and left so:
    ``np.maximum.at`` is unbuffered, so each index keeps its largest position there (a few
    microseconds for a batch of 1,000, where a sort takes tens).
    """
    if len(index) < 2:
        return np.ones(len(index), dtype=bool)
    order = np.arange(len(index))
    np.maximum.at(scratch, index, order)
    kept: np.ndarray = scratch[index] == order
    scratch[index] = -1
    return kept


class SegmentTree(ABC):
    """A binary tree over ``capacity`` float64 leaves whose nodes combine their children.

    Leaves start at 0. Values must be finite and non-negative, and at most
    :attr:`max_leaf`, so that no sum overflows.

    Args:
        capacity: Leaves (any count from 1).

    Raises:
        TypeError: ``capacity`` is not an int.
        ValueError: ``capacity`` is outside ``[1, 2**40]``.
    """

    # What an empty slot holds, and how two nodes combine.
    _neutral: ClassVar[float]
    _combine: ClassVar[np.ufunc]

    def __init__(self, capacity: int) -> None:
        self.capacity = check_int(capacity, "capacity", minimum=1, maximum=MAX_LEAVES)
        self._depth = (self.capacity - 1).bit_length()
        self._size = 1 << self._depth
        self._tree = np.full(2 * self._size, self._neutral, dtype=np.float64)
        # The same memory as complex numbers: element k holds the children of node k (nodes 2k
        # and 2k + 1), so one gather reads both.
        self._pairs = self._tree.view(np.complex128)
        self._scratch: np.ndarray | None = None  # for last_writes, made on the first set

    def __len__(self) -> int:
        return self.capacity

    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self.capacity})"

    @property
    def max_leaf(self) -> float:
        """The largest value a leaf may hold: even with every leaf there, the sum stays
        finite."""
        return _FLOAT_MAX / (2 * self._size)

    @abstractmethod
    def _stored(self, values: np.ndarray) -> np.ndarray:
        """Leaf values as the tree stores them."""

    @abstractmethod
    def _shown(self, stored: np.ndarray) -> np.ndarray:
        """Stored leaves as the values they were set to."""

    # ----------------------------------------------------------------- reading
    def __getitem__(self, index: Any) -> np.ndarray:
        """The values of the leaves at ``index`` (an int or integer array), as a 1-D array.

        Raises:
            TypeError: not integers.
            IndexError: an index outside ``[0, capacity)``.
        """
        leaves = check_leaf_index(index, self.capacity)
        return self._shown(self._tree[leaves + self._size])

    def _leaves(self, leaves: np.ndarray) -> np.ndarray:
        """Stored values at int64 ``leaves`` known to be in range (no checks: the sampler's
        fast path; any shape)."""
        stored: np.ndarray = self._tree[leaves + self._size]
        return stored

    def _last_writes(self, leaves: np.ndarray) -> np.ndarray:
        """:func:`last_writes` of int64 ``leaves`` in range, with the leaves themselves as the
        scratch: a search that reached them left their memory in cache, where a separate
        scratch array costs a cache miss per index. The leaves at ``leaves`` are left holding
        positions: the caller sets them (:meth:`_set_checked` of the kept ones) or puts back
        the values they held (:meth:`_put_back`)."""
        if len(leaves) < 2:
            return np.ones(len(leaves), dtype=bool)
        node = leaves + self._size
        order = np.arange(len(leaves), dtype=np.float64)
        self._tree[node] = -1.0
        np.maximum.at(self._tree, node, order)
        kept: np.ndarray = self._tree[node] == order
        return kept

    def _put_back(self, leaves: np.ndarray, stored: np.ndarray) -> None:
        """Give ``leaves`` back the stored values they held (undoes :meth:`_last_writes`)."""
        self._tree[leaves + self._size] = stored

    def _stored_leaves(self) -> np.ndarray:
        """The stored leaves ``[capacity]``, a view (no copy)."""
        return self._tree[self._size : self._size + self.capacity]

    def values(self) -> np.ndarray:
        """A copy of every leaf's value, ``[capacity]``."""
        return self._shown(self._stored_leaves())

    def reduce(self, start: int = 0, end: int | None = None) -> float:
        """The combination of the leaves ``[start, end)`` (``end`` None: to the last leaf).

        An empty range gives the neutral value (0 for a sum, ``inf`` for a minimum).

        Raises:
            TypeError: bounds that are not ints.
            ValueError: not ``0 <= start <= end <= capacity``.
        """
        stop = self.capacity if end is None else check_int(end, "end", maximum=self.capacity)
        begin = check_int(start, "start", minimum=0, maximum=stop)
        if begin == 0 and stop == self.capacity:
            return float(self._tree[1])
        tree, combine = self._tree, self._combine
        result = self._neutral
        low, high = begin + self._size, stop + self._size
        while low < high:
            if low & 1:
                result = float(combine(result, tree[low]))
                low += 1
            if high & 1:
                high -= 1
                result = float(combine(result, tree[high]))
            low >>= 1
            high >>= 1
        return result

    # ----------------------------------------------------------------- writing
    def set(self, index: Any, values: Any) -> None:
        """Set the leaves at ``index`` to ``values`` (one each, or one for all).

        For a leaf given more than once, the last value wins. Nothing changes unless every
        index and value is valid.

        Raises:
            TypeError: indices that are not integers, or values that are not real numbers.
            IndexError: an index outside ``[0, capacity)``.
            ValueError: not one value per index, or a value NaN, infinite, negative or above
                :attr:`max_leaf`.
        """
        leaves = check_leaf_index(index, self.capacity)
        weights = self._checked(values, len(leaves))
        if self._scratch is None:
            self._scratch = np.full(self.capacity, -1, dtype=np.int64)
        kept = last_writes(leaves, self._scratch)
        self._set_checked(leaves[kept], weights[kept])

    def set_range(self, start: int, values: Any) -> None:
        """Set the consecutive leaves ``[start, start + len(values))``.

        Raises:
            TypeError: ``start`` is not an int, or values that are not real numbers.
            ValueError: the range leaves ``[0, capacity)``, or a value NaN, infinite,
                negative or above :attr:`max_leaf`.
        """
        first = check_int(start, "start", minimum=0, maximum=self.capacity)
        count = real_values(values, "values").numel()
        check_int(count, "len(values)", maximum=self.capacity - first)
        self._set_range_checked(first, self._checked(values, count))

    def clear(self) -> None:
        """Every leaf back to 0 (in place)."""
        self._tree[:] = self._neutral

    def rebuild(self) -> None:
        """Recompute every internal node from the leaves (gives the same array: nodes are
        never adjusted by differences; see the module docstring)."""
        self._recompute_levels(self._depth)

    def _checked(self, values: Any, count: int) -> np.ndarray:
        weights = check_weights(values, count)
        if count and weights.max() > self.max_leaf:
            raise ValueError(
                f"values: expected values <= {self.max_leaf:.6g} (the tree's sum must stay "
                f"finite), got {weights.max()}"
            )
        return weights

    def _set_checked(self, leaves: np.ndarray, values: np.ndarray) -> None:
        """Set distinct ``leaves`` to checked ``values`` and recompute their ancestors."""
        if len(leaves) == 0:
            return
        tree, pairs, combine = self._tree, self._pairs, self._combine
        node = leaves + self._size
        tree[node] = self._stored(values)
        level = self._depth
        whole = max(_WHOLE_LEVEL, 2 * len(leaves))
        # Walk the paths while the parent level has many more nodes than the batch.
        while level > 0 and (1 << (level - 1)) > whole:
            node >>= 1
            children = pairs[node]
            tree[node] = combine(children.real, children.imag)
            level -= 1
        self._recompute_levels(level)

    def _set_range_checked(self, start: int, values: np.ndarray) -> None:
        """Set the consecutive leaves from ``start`` to checked ``values``; each level's
        touched nodes are one slice."""
        if len(values) == 0:
            return
        tree, combine = self._tree, self._combine
        low = start + self._size
        high = low + len(values)  # exclusive
        tree[low:high] = self._stored(values)
        while low > 1:
            low, high = low >> 1, ((high - 1) >> 1) + 1
            combine(tree[2 * low : 2 * high : 2], tree[2 * low + 1 : 2 * high : 2],
                    out=tree[low:high])

    def _recompute_levels(self, level: int) -> None:
        """Recompute every node above ``level`` (the nodes ``[1, 2**level)``), level by level."""
        tree, combine = self._tree, self._combine
        for above in range(level - 1, -1, -1):
            low, high = 1 << above, 2 << above
            combine(tree[2 * low : 2 * high : 2], tree[2 * low + 1 : 2 * high : 2],
                    out=tree[low:high])


class SumTree(SegmentTree):
    """Sum of the leaves, and the prefix-sum search over them (see the module docstring)."""

    _neutral = 0.0
    _combine = np.add

    def _stored(self, values: np.ndarray) -> np.ndarray:
        return values

    def _shown(self, stored: np.ndarray) -> np.ndarray:
        return np.array(stored)

    @property
    def total(self) -> float:
        """The sum of every leaf (the root)."""
        return float(self._tree[1])

    def find(self, targets: Any) -> np.ndarray:
        """The leaf each prefix sum in ``targets`` falls in: ``i`` with
        ``cumsum(leaves[:i]) <= x < cumsum(leaves[:i + 1])``, never a zero leaf. A target at
        or beyond :attr:`total` gives the last positive leaf.

        Raises:
            TypeError: targets that are not real numbers.
            ValueError: a target NaN, infinite or negative, or every leaf zero.
        """
        checked = real_values(targets, "targets").detach().reshape(-1).cpu().numpy()
        bad = ~(np.isfinite(checked) & (checked >= 0))
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"targets: expected finite values >= 0, got {checked[position]} at position "
                f"{position}"
            )
        if not self.total > 0:
            raise ValueError("targets: cannot search a tree whose leaves are all zero")
        return self._find_checked(checked.copy())[0]

    def _find_checked(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Leaves and their values for non-negative ``targets`` (overwritten: they become the
        residuals) in a tree whose total is positive."""
        tree = self._tree
        node = np.ones(len(targets), dtype=np.int64)
        for _ in range(self._depth):
            node <<= 1
            left = tree[node]
            right = targets >= left
            # Going right subtracts the left sum (a multiply by the 0/1 choice is cheaper
            # than a masked subtract).
            left *= right
            targets -= left
            node += right
        values = tree[node]
        leaves = node - self._size
        landed_on_zero = values <= 0
        if landed_on_zero.any():
            for position in np.flatnonzero(landed_on_zero):
                leaves[position] = self._positive_before(int(leaves[position]))
            values = tree[leaves + self._size]
        return leaves, values

    def _positive_before(self, leaf: int) -> int:
        """The last positive leaf before the zero leaf ``leaf``.

        A search enters a zero subtree only by going right past a positive left sibling (a
        left child is entered only when the target is below its sum, so that sum is positive),
        so such a sibling exists on the way up.
        """
        tree = self._tree
        node = leaf + self._size
        while not (node & 1 and tree[node - 1] > 0):
            node >>= 1
        node -= 1
        while node < self._size:
            node = 2 * node + 1 if tree[2 * node + 1] > 0 else 2 * node
        return node - self._size


class MinTree(SegmentTree):
    """The smallest positive leaf (zero leaves are empty slots; ``inf`` when all are)."""

    _neutral = math.inf
    _combine = np.minimum

    def _stored(self, values: np.ndarray) -> np.ndarray:
        return np.where(values > 0, values, math.inf)

    def _shown(self, stored: np.ndarray) -> np.ndarray:
        return np.where(np.isinf(stored), 0.0, stored)

    @property
    def minimum(self) -> float:
        """The smallest positive leaf (the root); ``inf`` when every leaf is zero."""
        return float(self._tree[1])


class LeafMinimum:
    """The smallest positive leaf of a :class:`SumTree`, kept from what each update replaces.

    What :class:`~bufcore.sampling.prioritized.PrioritizedSampler` needs of a minimum is the
    root of a :class:`MinTree`, and keeping that tree cost as much as the sum tree itself (a
    second walk up every updated leaf's path, through memory the draw did not touch). This
    keeps the minimum and how many leaves hold it instead: an update compares the values it
    replaces and writes with it (a few whole-batch operations), and only when the last leaf
    holding the minimum changes is the minimum found again by a scan of every leaf, at the next
    read. The sampler updates the rows it drew, and a row is drawn in proportion to its weight,
    so the lightest row is among ``batch`` draws with probability at most ``batch / rows``:
    the scans cost O(batch) per update on average, the trees' O(batch * log rows) bound holds.
    Updating the lightest row on purpose every time costs a scan each time.

    Needed by (DESIGN rule 5): ``python -m bench --only prioritized`` (the update cost);
    ``tests/property/test_segment_tree.py`` pins it to the :class:`MinTree`'s root.

    Args:
        tree: The tree whose leaves it follows (it must be told of every change to them).
    """

    def __init__(self, tree: SumTree) -> None:
        self._tree = tree
        self._value = math.inf
        self._count = 0  # leaves holding _value; 0 with _scan set: unknown until the next scan
        self._scan = False

    def replaced(self, old: np.ndarray, new: np.ndarray) -> None:
        """Distinct leaves that held ``old`` now hold ``new`` (the stored values)."""
        if len(new) == 0:
            return
        if self._count:
            self._count -= int(np.count_nonzero(old == self._value))
        smallest = float(new.min())
        if smallest <= 0:  # zero weights are empty slots, not the minimum
            smallest = float(np.min(new, where=new > 0, initial=math.inf))
        if smallest < self._value:
            # Below every other positive leaf: the old minimum bounded them from below.
            self._value, self._count, self._scan = smallest, 0, False
        if smallest == self._value and smallest < math.inf:
            # Every leaf holding it is counted: the others were counted before (or none are).
            self._count += int(np.count_nonzero(new == smallest))
            self._scan = False
        elif self._count == 0 and self._value < math.inf:
            self._scan = True  # the last leaf holding it changed: scan at the next read

    def clear(self) -> None:
        """Every leaf is 0 again."""
        self._value, self._count, self._scan = math.inf, 0, False

    @property
    def value(self) -> float:
        """The smallest positive leaf; ``inf`` when every leaf is 0."""
        if self._scan:
            leaves = self._tree._stored_leaves()
            self._value = float(np.min(leaves, where=leaves > 0, initial=math.inf))
            self._count = int(np.count_nonzero(leaves == self._value))
            self._scan = False
        return self._value


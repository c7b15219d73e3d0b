"""The sum and min trees against a numpy array of leaves, over random update and search sequences.

Capacities are small and odd as often as powers of two, values range from subnormal to huge, and
batches repeat indices, so padding leaves, duplicate writes and rounding at node boundaries all
come up.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from bufcore.sampling.segment_tree import LeafMinimum, MinTree, SumTree

VALUES = st.one_of(
    st.just(0.0),
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
    st.floats(min_value=1e-300, max_value=1e-250),
    st.floats(min_value=1e200, max_value=1e250),
)


class TreeMachine(RuleBasedStateMachine):
    """A SumTree and a MinTree fed the same updates as a numpy model."""

    @initialize(capacity=st.integers(1, 40))
    def start(self, capacity: int) -> None:
        self.capacity = capacity
        self.sums = SumTree(capacity)
        self.minima = MinTree(capacity)
        self.minimum = LeafMinimum(self.sums)  # told what each update replaces, as the sampler does
        self.model = np.zeros(capacity)

    def _follow(self, leaves: list[int], values: list[float]) -> None:
        """Set ``leaves`` in the sum tree and tell the leaf minimum (distinct leaves, last
        value each)."""
        last = dict(zip(leaves, values, strict=True))
        distinct = np.array(list(last), dtype=np.int64)
        replaced = self.sums.values()[distinct]
        self.sums.set(leaves, values)
        self.minimum.replaced(replaced, np.array(list(last.values()), dtype=np.float64))

    @rule(data=st.data())
    def set_batch(self, data: st.DataObject) -> None:
        index = data.draw(st.lists(st.integers(0, self.capacity - 1), max_size=12))
        values = data.draw(st.lists(VALUES, min_size=len(index), max_size=len(index)))
        self._follow(index, values)
        self.minima.set(index, values)
        for i, value in zip(index, values, strict=True):
            self.model[i] = value  # in order: the last write wins

    @rule(data=st.data())
    def set_range(self, data: st.DataObject) -> None:
        start = data.draw(st.integers(0, self.capacity))
        values = data.draw(st.lists(VALUES, max_size=self.capacity - start))
        self._follow(list(range(start, start + len(values))), values)
        self.minima.set_range(start, values)
        self.model[start : start + len(values)] = values

    @rule(data=st.data())
    def search(self, data: st.DataObject) -> None:
        total = math.fsum(self.model.tolist())
        if total == 0:
            return
        fractions = data.draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=16))
        targets = np.array(fractions) * self.sums.total
        leaves = self.sums.find(targets)
        cumulative = np.concatenate([[0.0], np.cumsum(self.model)])
        tolerance = 1e-12 * total
        for target, leaf in zip(targets.tolist(), leaves.tolist(), strict=True):
            assert self.model[leaf] > 0
            # cumsum(<i) <= x < cumsum(<=i), up to rounding; a target at the total lands on
            # the last positive leaf.
            assert cumulative[leaf] - tolerance <= target
            last_positive = int(np.flatnonzero(self.model)[-1])
            assert target < cumulative[leaf + 1] + tolerance or leaf == last_positive

    @rule(data=st.data())
    def reduce(self, data: st.DataObject) -> None:
        end = data.draw(st.integers(0, self.capacity))
        start = data.draw(st.integers(0, end))
        part = self.model[start:end]
        assert math.isclose(
            self.sums.reduce(start, end), math.fsum(part.tolist()), rel_tol=1e-12, abs_tol=0.0
        )
        positive = part[part > 0]
        assert self.minima.reduce(start, end) == (positive.min() if len(positive) else math.inf)

    @invariant()
    def root_is_the_sum_of_the_leaves(self) -> None:
        assert math.isclose(
            self.sums.total, math.fsum(self.model.tolist()), rel_tol=1e-12, abs_tol=0.0
        )

    @invariant()
    def leaves_match_the_model(self) -> None:
        assert np.array_equal(self.sums.values(), self.model)
        assert np.array_equal(self.minima.values(), self.model)
        positive = self.model[self.model > 0]
        assert self.minima.minimum == (positive.min() if len(positive) else math.inf)

    @invariant()
    def the_leaf_minimum_equals_the_min_trees_root(self) -> None:
        assert self.minimum.value == self.minima.minimum


TestTreeMachine = TreeMachine.TestCase
TestTreeMachine.settings = settings(max_examples=150, stateful_step_count=25, deadline=None)


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(1, 64),
    updates=st.lists(st.tuples(st.integers(0, 63), VALUES), max_size=40),
)
def test_a_batched_update_equals_a_loop_of_single_updates(
    capacity: int, updates: list[tuple[int, float]]
) -> None:
    updates = [(i % capacity, value) for i, value in updates]
    batched, looped = SumTree(capacity), SumTree(capacity)
    batched_min, looped_min = MinTree(capacity), MinTree(capacity)
    batched.set([i for i, _ in updates], [v for _, v in updates])
    batched_min.set([i for i, _ in updates], [v for _, v in updates])
    for i, value in updates:
        looped.set(i, value)
        looped_min.set(i, value)
    # Nodes are functions of the leaves: the same leaves give the same arrays, bit for bit.
    assert np.array_equal(batched._tree, looped._tree)
    assert np.array_equal(batched_min._tree, looped_min._tree)

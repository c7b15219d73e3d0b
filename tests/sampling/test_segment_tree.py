"""Sum and min segment trees: REFERENCE §11.4's numbers, edges, input checks and float drift."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bufcore.sampling.segment_tree import LeafMinimum, MinTree, SegmentTree, SumTree

# REFERENCE §11.4: priorities [1, 2, 4, 0.5] at alpha 0.6.
REFERENCE_WEIGHTS = [1.0, 1.5157, 2.2974, 0.6598]


def reference_tree(kind: type[SegmentTree] = SumTree) -> SegmentTree:
    tree = kind(4)
    tree.set([0, 1, 2, 3], np.array([1.0, 2.0, 4.0, 0.5]) ** 0.6)
    return tree


def test_the_reference_leaves_total_and_minimum() -> None:
    sums, minima = reference_tree(SumTree), reference_tree(MinTree)
    assert isinstance(sums, SumTree) and isinstance(minima, MinTree)
    assert sums.values() == pytest.approx(REFERENCE_WEIGHTS, abs=1e-4)
    assert sums.total == pytest.approx(5.4729, abs=1e-4)
    assert minima.minimum == pytest.approx(0.6598, abs=1e-4)


@pytest.mark.parametrize(
    ("target", "leaf"),
    [(0.0, 0), (0.9999, 0), (1.0, 1), (2.52, 2), (4.8, 2), (5.4, 3)],
)
def test_the_reference_prefix_sums_find_their_leaves(target: float, leaf: int) -> None:
    tree = reference_tree()
    assert isinstance(tree, SumTree)
    assert tree.find([target]).tolist() == [leaf]


def test_a_target_equal_to_the_total_finds_the_last_leaf() -> None:
    tree = reference_tree()
    assert isinstance(tree, SumTree)
    assert tree.find([tree.total]).tolist() == [3]


@pytest.mark.parametrize("capacity", [4, 5, 7])
def test_a_total_held_by_leaf_0_alone_finds_leaf_0(capacity: int) -> None:
    # REFERENCE §11.4 bug (b): leaves [1, 0, 0, 0] and target 1.0 raised in DI-engine.
    tree = SumTree(capacity)
    tree.set(0, 1.0)
    assert tree.find([1.0, 0.5, 7.0]).tolist() == [0, 0, 0]


def test_zero_leaves_between_positive_ones_are_never_found() -> None:
    tree = SumTree(8)
    tree.set([1, 6], [2.0, 3.0])
    targets = np.linspace(0.0, 6.0, 1001)
    assert set(tree.find(targets).tolist()) == {1, 6}


@pytest.mark.parametrize("capacity", [1, 2, 3, 5, 1000, 1025])
def test_any_capacity_holds_and_sums_every_leaf(capacity: int) -> None:
    values = np.arange(1, capacity + 1, dtype=np.float64)
    tree = SumTree(capacity)
    tree.set(np.arange(capacity), values)
    assert len(tree) == capacity
    assert tree.total == values.sum()
    assert tree.find([values.sum() - 0.5]).tolist() == [capacity - 1]


def test_a_repeated_index_keeps_its_last_value() -> None:
    tree = SumTree(4)
    tree.set([2, 1, 2, 2], [5.0, 1.0, 7.0, 3.0])
    assert tree.values().tolist() == [0.0, 1.0, 3.0, 0.0]


def test_the_minimum_skips_zero_leaves_and_is_inf_when_all_are_zero() -> None:
    tree = MinTree(5)
    assert tree.minimum == math.inf
    tree.set([0, 3], [0.0, 0.25])
    assert tree.minimum == 0.25
    assert tree.values().tolist() == [0.0, 0.0, 0.0, 0.25, 0.0]
    tree.set(3, 0.0)
    assert tree.minimum == math.inf


@pytest.mark.parametrize(("start", "end"), [(0, 0), (2, 2), (0, 1), (1, 3), (1, 4), (3, 4)])
def test_reduce_combines_any_range(start: int, end: int) -> None:
    values = [1.0, 2.5, 0.0, 4.0]
    sums, minima = SumTree(4), MinTree(4)
    sums.set([0, 1, 2, 3], values)
    minima.set([0, 1, 2, 3], values)
    part = values[start:end]
    assert sums.reduce(start, end) == sum(part)
    positive = [v for v in part if v > 0]
    assert minima.reduce(start, end) == (min(positive) if positive else math.inf)


def test_set_range_equals_set_of_the_same_leaves() -> None:
    values = np.random.default_rng(0).random(37)
    by_range, by_index = SumTree(100), SumTree(100)
    by_range.set_range(40, values)
    by_index.set(np.arange(40, 77), values)
    assert np.array_equal(by_range._tree, by_index._tree)


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, -1e-300])
@pytest.mark.parametrize("kind", [SumTree, MinTree])
def test_a_bad_value_raises_value_error_and_changes_nothing(
    value: float, kind: type[SegmentTree]
) -> None:
    tree = kind(4)
    tree.set([0, 1], [1.0, 2.0])
    before = tree._tree.copy()
    with pytest.raises(ValueError, match=r"values: expected finite values >= 0"):
        tree.set([2, 3], [1.0, value])
    with pytest.raises(ValueError, match=r"values: expected finite values >= 0"):
        tree.set_range(2, [value])
    assert np.array_equal(tree._tree, before)


def test_a_value_that_could_overflow_the_sum_is_refused() -> None:
    tree = SumTree(4)
    with pytest.raises(ValueError, match="sum must stay finite"):
        tree.set(0, 1e308)
    assert tree.total == 0.0


@pytest.mark.parametrize("index", [4, -1, [0, 9]])
def test_an_index_out_of_range_raises_index_error(index: object) -> None:
    with pytest.raises(IndexError, match=r"index: expected indices in \[0, 4\)"):
        SumTree(4).set(index, 1.0)


@pytest.mark.parametrize("index", [1.0, [True], np.array([0.5])])
def test_a_non_integer_index_raises_type_error(index: object) -> None:
    with pytest.raises(TypeError, match="index: expected integer indices"):
        SumTree(4).set(index, 1.0)


def test_values_not_one_per_index_raise_value_error() -> None:
    with pytest.raises(ValueError, match=r"one value per index \(2\), got 3"):
        SumTree(4).set([0, 1], [1.0, 2.0, 3.0])


def test_a_range_past_the_last_leaf_raises_value_error() -> None:
    with pytest.raises(ValueError, match="len"):
        SumTree(4).set_range(3, [1.0, 2.0])


@pytest.mark.parametrize("target", [-1.0, math.nan, math.inf])
def test_a_bad_target_raises_value_error(target: float) -> None:
    tree = reference_tree()
    assert isinstance(tree, SumTree)
    with pytest.raises(ValueError, match="targets: expected finite values >= 0"):
        tree.find([1.0, target])


def test_searching_an_all_zero_tree_raises_value_error() -> None:
    with pytest.raises(ValueError, match="leaves are all zero"):
        SumTree(4).find([0.0])


def test_indices_and_values_come_as_tensors_on_any_device_type() -> None:
    tree = SumTree(4)
    tree.set(torch.tensor([3, 1]), torch.tensor([0.5, 2.0], dtype=torch.float64))
    assert tree[torch.tensor([1, 3])].tolist() == [2.0, 0.5]


def test_the_root_stays_the_sum_of_the_leaves_through_tiny_and_huge_updates() -> None:
    rng = np.random.default_rng(7)
    capacity = 3000
    tree = SumTree(capacity)
    for step in range(300):
        index = rng.integers(0, capacity, 64)
        scale = 10.0 ** rng.choice([-300, -12, 0, 12, 250])
        tree.set(index, rng.random(64) * scale)
        if step % 3 == 0:
            tree.set_range(int(rng.integers(0, capacity - 10)), rng.random(10) * 1e-200)
    exact = math.fsum(tree.values().tolist())
    assert tree.total == pytest.approx(exact, rel=1e-13)
    before = tree._tree.copy()
    tree.rebuild()
    # Nodes are recomputed from their children, never adjusted: a rebuild changes nothing.
    assert np.array_equal(tree._tree, before)


def _followed(values: list[float]) -> tuple[SumTree, LeafMinimum]:
    tree = SumTree(len(values))
    minimum = LeafMinimum(tree)
    tree.set_range(0, values)
    minimum.replaced(np.zeros(len(values)), np.array(values))
    return tree, minimum


def _update(tree: SumTree, minimum: LeafMinimum, leaves: list[int], values: list[float]) -> None:
    replaced = tree.values()[leaves]
    tree.set(leaves, values)
    minimum.replaced(replaced, np.array(values))


@pytest.mark.parametrize(
    ("leaves", "values", "expected"),
    [
        ([0, 3], [5.0, 5.0], 3.0),  # both holders raised: the next lightest, by a scan
        ([0, 3, 1], [9.0, 9.0, 9.0], 4.0),
        ([1], [1.0], 1.0),  # a new lightest leaf
        ([1], [0.0], 2.0),  # a leaf emptied: zero is no minimum
        ([0, 3, 1, 2], [0.0] * 4, math.inf),  # every leaf emptied
        ([2], [2.0], 2.0),  # a third holder of the minimum
    ],
)
def test_the_leaf_minimum_follows_updates(
    leaves: list[int], values: list[float], expected: float
) -> None:
    tree, minimum = _followed([2.0, 3.0, 4.0, 2.0])
    _update(tree, minimum, leaves, values)
    assert minimum.value == expected


def test_the_leaf_minimum_counts_every_leaf_holding_it() -> None:
    tree, minimum = _followed([2.0, 3.0, 4.0, 2.0])
    _update(tree, minimum, [0], [6.0])  # one of two holders left: no scan needed
    assert minimum.value == 2.0
    _update(tree, minimum, [3], [7.0])
    assert minimum.value == 3.0
    minimum.clear()
    assert minimum.value == math.inf

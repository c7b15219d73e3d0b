"""The Z-buffer view's data functions (no Streamlit): subsets, ages, sources, PCA, norms,
cosine similarity, and reading only the subset's rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from app.zspace import (
    cosine_to_mean,
    norms,
    parse_sources,
    pca_2d,
    read_sources,
    read_z,
    slot_ages,
    subset_slots,
)
from bufcore import ZBuffer
from tests.support import TINY_DEMO


@pytest.mark.parametrize(("length", "count"), [(0, 5), (1, 1), (2, 5), (7, 3), (100, 100)])
def test_a_subset_holds_distinct_ascending_slots_of_the_buffer(length: int, count: int) -> None:
    slots = subset_slots(length, count, seed=3)
    assert len(slots) == min(length, count)
    assert np.all(np.diff(slots) > 0)
    assert slots.size == 0 or (slots.min() >= 0 and slots.max() < length)


def test_the_same_seed_draws_the_same_subset_and_another_seed_another() -> None:
    assert subset_slots(1000, 20, 1).tolist() == subset_slots(1000, 20, 1).tolist()
    assert subset_slots(1000, 20, 1).tolist() != subset_slots(1000, 20, 2).tolist()


@pytest.mark.parametrize("argument", ["length", "count"])
def test_a_negative_size_is_refused_naming_it(argument: str) -> None:
    sizes = {"length": 5, "count": 2, argument: -1}
    with pytest.raises(ValueError, match=argument):
        subset_slots(sizes["length"], sizes["count"], 0)


@pytest.mark.parametrize(("capacity", "writes"), [(1, 1), (1, 5), (2, 1), (2, 3), (7, 4),
                                                   (7, 7), (7, 19), (16, 40)])
def test_age_counts_the_writes_since_each_slot_was_written(capacity: int, writes: int) -> None:
    # A model: write k goes to slot k % capacity; a slot's age is writes after its last one.
    last = {}
    for k in range(writes):
        last[k % capacity] = k
    length = min(writes, capacity)
    cursor = writes % capacity
    slots = np.arange(length)
    expected = [writes - 1 - last[s] for s in slots]
    assert slot_ages(slots, cursor, length).tolist() == expected


def test_a_slot_outside_the_buffer_has_no_age() -> None:
    with pytest.raises(ValueError, match="slots"):
        slot_ages(np.array([3]), 1, 3)


def test_sources_name_each_slot() -> None:
    tags = parse_sources({"labels": ["expert", "random"], "slots": [0, 1, 1, 0]}, 4)
    assert tags.names(np.array([0, 2, 3])).tolist() == ["expert", "random", "expert"]


@pytest.mark.parametrize("saved", [
    [0, 1], {"labels": [], "slots": []}, {"labels": ["a"], "slots": [1]},
    {"labels": ["a"], "slots": [True]}, {"labels": ["a", "b"], "slots": [0]},
])
def test_malformed_sources_are_refused_naming_z_source(saved: object) -> None:
    with pytest.raises(ValueError, match="z_source"):
        parse_sources(saved, 2)


def test_the_demo_run_tags_every_stored_z(demo_run: Path) -> None:
    tags = read_sources(demo_run / "checkpoint", TINY_DEMO.z_capacity)
    assert tags is not None and tags.labels == ("expert", "random")
    assert len(tags.codes) == TINY_DEMO.z_capacity


def test_a_run_that_did_not_record_sources_has_none(run_copy: Path) -> None:
    state_file = run_copy / "checkpoint" / "run.json"
    state = json.loads(state_file.read_text())
    del state["z_source"]
    state_file.write_text(json.dumps(state))
    assert read_sources(run_copy / "checkpoint", TINY_DEMO.z_capacity) is None


@pytest.mark.parametrize(("n", "dim"), [(1, 1), (2, 1), (2, 3), (7, 2), (50, 16)])
def test_pca_gives_two_coordinates_per_vector_and_shares_that_sum_to_one(n: int,
                                                                         dim: int) -> None:
    z = np.random.default_rng(0).normal(size=(n, dim))
    projection = pca_2d(z)
    assert projection.coords.shape == (n, 2)
    assert len(projection.explained) == min(n, dim)
    if n > 1:
        assert projection.explained.sum() == pytest.approx(1.0)
        assert np.all(np.diff(projection.explained) <= 1e-12)


def test_pca_finds_the_direction_of_largest_spread() -> None:
    generator = torch.Generator().manual_seed(0)
    t = torch.randn(500, generator=generator, dtype=torch.float64)
    noise = 0.01 * torch.randn(500, 3, generator=generator, dtype=torch.float64)
    direction = torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64) / 3
    z = (t[:, None] * direction + noise).numpy()
    projection = pca_2d(z)
    assert projection.explained[0] > 0.99
    # The first coordinate is the position along the line (up to the fixed sign).
    assert abs(np.corrcoef(projection.coords[:, 0], t.numpy())[0, 1]) > 0.999


def test_identical_vectors_project_to_the_origin_with_no_variance() -> None:
    projection = pca_2d(np.ones((5, 4)))
    assert np.all(projection.coords == 0) and np.all(projection.explained == 0)


def test_the_projection_does_not_flip_between_calls() -> None:
    z = np.random.default_rng(1).normal(size=(30, 5))
    assert pca_2d(z).coords.tolist() == pca_2d(z.copy()).coords.tolist()


@pytest.mark.parametrize("z", [np.zeros((0, 3)), np.zeros(3), np.array([[np.nan, 1.0]])])
def test_pca_refuses_an_empty_or_non_finite_input_naming_z(z: np.ndarray) -> None:
    with pytest.raises(ValueError, match="z"):
        pca_2d(z)


def test_norms_are_euclidean() -> None:
    assert norms(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist() == [5.0, 0.0]


def test_cosine_to_the_mean_is_one_along_it_and_minus_one_against_it() -> None:
    cosine = cosine_to_mean(np.array([[2.0, 0.0], [1.0, 0.0], [-0.5, 0.0]]))
    assert cosine.tolist() == pytest.approx([1.0, 1.0, -1.0])


def test_cosine_is_undefined_for_a_zero_vector_or_a_zero_mean() -> None:
    assert np.isnan(cosine_to_mean(np.array([[1.0, 0.0], [0.0, 0.0]]))[1])
    assert np.all(np.isnan(cosine_to_mean(np.array([[1.0, 0.0], [-1.0, 0.0]]))))


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_read_z_returns_the_rows_of_the_given_slots(tmp_path: Path, capacity: int) -> None:
    zbuffer = ZBuffer(capacity, 3)
    zbuffer.add(torch.arange(3 * (capacity + 1), dtype=torch.float32).view(-1, 3))
    zbuffer.save(tmp_path / "z")
    slots = np.arange(capacity)[::-1].copy()
    rows = read_z(tmp_path / "z", slots)
    # Row k of the batch went to slot k % capacity; the last write to a slot wins.
    holds = {k % capacity: k for k in range(capacity + 1)}
    expected = [[3.0 * holds[s] + j for j in range(3)] for s in slots]
    assert rows.tolist() == expected

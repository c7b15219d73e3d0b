"""The prioritized sampler on its own: distributions, importance weights, annealing, updates."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from bufcore.sampling import priority_maths
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import RingPosition

DRAWS = 100_000
# A seeded test fails by chance with probability 1e-6 at this p-value.
P_VALUE = 1e-6


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def filled(
    rows: int, priorities: list[float] | None = None, **options: object
) -> PrioritizedSampler:
    """A sampler bound to a full ring of ``rows`` rows, with ``priorities`` given."""
    sampler = PrioritizedSampler(**options)  # type: ignore[arg-type]
    sampler.bind(rows, 1)
    sampler.written(RingPosition(rows, rows), 0, rows)
    if priorities is not None:
        sampler.update(np.arange(rows), priorities)
    return sampler


def counts(sampler: PrioritizedSampler, rows: int, draws: int = DRAWS) -> np.ndarray:
    index = sampler.draw(RingPosition(rows, rows), draws, generator())
    return np.bincount(index.rows.numpy(), minlength=rows)


def test_the_reference_priorities_are_drawn_in_proportion_to_their_weights() -> None:
    # REFERENCE §11.4: priorities [1, 2, 4, 0.5] at alpha 0.6 weigh [1, 1.5157, 2.2974, 0.6598].
    sampler = filled(4, [1.0, 2.0, 4.0, 0.5], alpha=0.6, eps=0.0)
    weights = np.array([1.0, 1.5157, 2.2974, 0.6598])
    assert chisquare(counts(sampler, 4), weights / weights.sum() * DRAWS).pvalue > P_VALUE


def test_the_reference_importance_weights() -> None:
    # REFERENCE §11.3: IS = (p_i / p_min) ** -beta with p = w / total; beta 0.4.
    sampler = filled(4, [1.0, 2.0, 4.0, 0.5], alpha=0.6, beta=0.4, eps=0.0)
    index = sampler.draw(RingPosition(4, 4), 2000, generator())
    expected = (np.array([1.0, 1.5157, 2.2974, 0.6598]) / 0.6598) ** -0.4
    assert index.weights is not None and index.weights.dtype == torch.float32
    got = index.weights.numpy()
    assert got == pytest.approx(expected[index.rows.numpy()], rel=1e-4)
    assert got.max() == pytest.approx(1.0)  # the lightest item weighs 1


@pytest.mark.parametrize("rows", [7, 1000])
def test_draws_follow_random_priorities(rows: int) -> None:
    priorities = np.random.default_rng(rows).random(rows) * 10
    sampler = filled(rows, priorities.tolist(), alpha=0.7, eps=0.0)
    weights = priorities**0.7
    expected = weights / weights.sum() * DRAWS
    assert chisquare(counts(sampler, rows), expected).pvalue > P_VALUE


@pytest.mark.parametrize("rows", [1, 5, 64])
def test_equal_priorities_draw_uniformly(rows: int) -> None:
    sampler = filled(rows, [3.0] * rows)
    observed = counts(sampler, rows)
    if rows > 1:
        assert chisquare(observed).pvalue > P_VALUE
    assert observed.sum() == DRAWS


def test_a_zero_priority_is_never_drawn() -> None:
    sampler = filled(6, [1.0, 0.0, 2.0, 0.0, 0.0, 1e-9], eps=0.0)
    observed = counts(sampler, 6)
    assert observed[[1, 3, 4]].tolist() == [0, 0, 0]
    assert observed[[0, 2]].min() > 0


def test_alpha_zero_is_uniform_over_positive_priorities_only() -> None:
    sampler = filled(4, [1.0, 100.0, 0.0, 5.0], alpha=0.0, eps=0.0)
    observed = counts(sampler, 4)
    assert observed[2] == 0
    assert chisquare(observed[[0, 1, 3]]).pvalue > P_VALUE


def test_beta_anneals_by_one_step_per_draw_as_di_engine() -> None:
    sampler = filled(4, anneal_steps=100_000, beta=0.4)
    assert sampler.beta == 0.4
    sampler.draw(RingPosition(4, 4), 8, generator())
    # DI-engine: beta += (1 - beta0) / anneal_step after each sample.
    assert sampler.beta == pytest.approx(0.4 + 0.6 / 100_000, abs=1e-15)
    sampler.steps = 100_000
    assert sampler.beta == 1.0
    sampler.steps = 250_000
    assert sampler.beta == 1.0


def test_without_annealing_beta_stays() -> None:
    sampler = filled(4, anneal_steps=None, beta=0.5)
    for _ in range(3):
        sampler.draw(RingPosition(4, 4), 1, generator())
    assert (sampler.beta, sampler.steps) == (0.5, 3)


def test_a_draw_uses_the_beta_before_its_own_step() -> None:
    sampler = filled(2, [1.0, 4.0], alpha=1.0, beta=0.0, anneal_steps=1, eps=0.0)
    first = sampler.draw(RingPosition(2, 2), 200, generator())
    second = sampler.draw(RingPosition(2, 2), 200, generator())
    assert first.weights is not None and second.weights is not None
    assert set(first.weights.tolist()) == {1.0}  # beta 0
    assert set(second.weights.tolist()) == {1.0, 0.25}  # beta 1: (4 / 1) ** -1


def test_new_rows_get_the_largest_priority_seen_without_eps() -> None:
    sampler = filled(4, [1.0, 7.0, 2.0, 0.5], eps=0.25)
    assert sampler.max_priority == 7.0
    assert sampler.priorities().tolist() == [1.25, 7.25, 2.25, 0.75]
    sampler.written(RingPosition(4, 4), 2, 1)
    assert sampler.priorities().tolist() == [1.25, 7.25, 7.0, 0.75]


def test_a_repeated_row_keeps_its_last_priority() -> None:
    sampler = filled(3, eps=0.0)
    assert sampler.update([2, 0, 2], [5.0, 1.0, 3.0]) == 3
    assert sampler.priorities().tolist() == [1.0, 1.0, 3.0]


def test_rows_left_out_by_keep_are_not_updated() -> None:
    sampler = filled(3, eps=0.0)
    applied = sampler.update([0, 1, 2], [5.0, 6.0, 7.0], keep=[True, False, True])
    assert applied == 2
    assert sampler.priorities().tolist() == [5.0, 1.0, 7.0]


@pytest.mark.parametrize("value", [math.nan, math.inf, -0.5])
def test_a_bad_priority_raises_value_error_and_changes_nothing(value: float) -> None:
    sampler = filled(3, [1.0, 2.0, 3.0])
    before = sampler.state_dict()
    with pytest.raises(ValueError, match="priority: expected finite values >= 0"):
        sampler.update([0, 1], [4.0, value])
    after = sampler.state_dict()
    assert after["state"] == before["state"]
    assert torch.equal(after["tensors"]["priority"], before["tensors"]["priority"])


def test_an_update_leaving_nothing_to_draw_is_refused() -> None:
    sampler = filled(2, [0.0, 3.0], eps=0.0)
    with pytest.raises(ValueError, match="every held row weight 0"):
        sampler.update([1], [0.0])
    assert sampler.priorities().tolist() == [0.0, 3.0]


@pytest.mark.parametrize(
    ("priority", "match"),
    [([2.0, 5.0, 0.0], "every held row weight 0"), ([2.0, 5.0, 1e308], r"priority \*\* alpha")],
)
def test_a_refused_update_of_repeated_rows_leaves_the_trees_as_they_were(
    priority: list[float], match: str
) -> None:
    # The update resolves repeated rows with the leaves as scratch; a refusal puts them back.
    sampler = filled(3, [0.0, 3.0, 0.0], eps=0.0, alpha=1.0)
    sums, minimum = sampler._trees()
    before = sums._tree.copy()
    with pytest.raises(ValueError, match=match):
        sampler.update([1, 1, 1], priority)
    assert np.array_equal(sums._tree, before)
    assert minimum.value == 3.0
    assert set(counts(sampler, 3, 1000).nonzero()[0].tolist()) == {1}


def test_a_priority_whose_weight_overflows_is_refused() -> None:
    with pytest.raises(ValueError, match=r"priority \*\* alpha <="):
        filled(2, [1e308, 1.0], alpha=1.0)


def test_rows_beyond_the_held_ones_raise_index_error() -> None:
    sampler = PrioritizedSampler()
    sampler.bind(8, 1)
    sampler.written(RingPosition(4, 8), 0, 4)  # a ring of 8 rows holding 4
    with pytest.raises(IndexError, match=r"index: expected rows in \[0, 4\)"):
        sampler.update([5], [1.0])
    with pytest.raises(IndexError, match=r"index: expected indices in \[0, 8\)"):
        sampler.update([8], [1.0])


def test_reset_forgets_priorities_and_the_max_but_not_the_annealing() -> None:
    sampler = filled(3, [9.0, 1.0, 1.0])
    sampler.draw(RingPosition(3, 3), 1, generator())
    sampler.reset()
    assert (sampler.max_priority, sampler.steps) == (1.0, 1)
    assert len(sampler.priorities()) == 0
    with pytest.raises(ValueError, match="every held row has priority zero"):
        sampler.draw(RingPosition(0, 3), 1, generator())


def test_a_sampler_serves_one_ring_shape() -> None:
    sampler = filled(4)
    sampler.bind(4, 1)  # the same shape again: nothing happens
    with pytest.raises(ValueError, match="a sampler serves one buffer"):
        sampler.bind(8, 1)


def test_a_sampler_without_rows_cannot_draw() -> None:
    with pytest.raises(ValueError, match="no rows yet"):
        PrioritizedSampler().draw(RingPosition(0, 4), 1, generator())


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"alpha": -0.1}, ValueError, "alpha"),
        ({"alpha": math.nan}, ValueError, "alpha"),
        ({"beta": 1.5}, ValueError, "beta"),
        ({"beta": "0.4"}, TypeError, "beta"),
        ({"anneal_steps": 0}, ValueError, "anneal_steps"),
        ({"anneal_steps": 2.5}, TypeError, "anneal_steps"),
        ({"eps": -1e-9}, ValueError, "eps"),
        ({"reduction": "min"}, ValueError, "reduction"),
    ],
)
def test_bad_options_raise_typed_errors_naming_them(
    options: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        PrioritizedSampler(**options)  # type: ignore[arg-type]


def test_the_state_round_trips_through_plain_data() -> None:
    sampler = filled(5, [1.0, 2.0, 0.0, 4.0, 3.0], alpha=0.5, beta=0.3, eps=0.01)
    sampler.draw(RingPosition(5, 5), 3, generator())
    state = sampler.state_dict()
    copy = PrioritizedSampler.from_state_dict(state)
    copy.bind(5, 1)
    copy.load_rows(RingPosition(5, 5), state["tensors"])
    assert copy.config() == sampler.config()
    assert (copy.steps, copy.max_priority) == (sampler.steps, sampler.max_priority)
    ours = sampler.draw(RingPosition(5, 5), 50, generator(3))
    theirs = copy.draw(RingPosition(5, 5), 50, generator(3))
    assert torch.equal(ours.rows, theirs.rows) and torch.equal(ours.weights, theirs.weights)


# ------------------------------------------------------------------------ figures
STATS_KEYS = {
    "beta", "max_priority", "priority_min", "priority_q25", "priority_median", "priority_q75",
    "priority_max", "is_weight_min", "is_weight_median", "is_weight_max",
}


def test_stats_give_the_quantiles_of_the_held_priorities_and_their_importance_weights() -> None:
    sampler = filled(5, [1.0, 2.0, 4.0, 0.5, 8.0], alpha=0.5, beta=0.4, eps=0.0,
                     anneal_steps=None)
    stats = sampler.stats()
    assert set(stats) == STATS_KEYS
    assert (stats["beta"], stats["max_priority"]) == (0.4, 8.0)
    assert [stats[f"priority_{q}"] for q in ("min", "q25", "median", "q75", "max")] == [
        0.5, 1.0, 2.0, 4.0, 8.0]
    # IS = (w / w_min) ** -beta with w = p ** alpha: at p = 0.5, 2 and 8.
    assert stats["is_weight_max"] == pytest.approx(1.0)
    assert stats["is_weight_median"] == pytest.approx((2.0 / 0.5) ** (0.5 * -0.4))
    assert stats["is_weight_min"] == pytest.approx((8.0 / 0.5) ** (0.5 * -0.4))


def test_stats_weigh_like_a_draw_at_the_current_beta() -> None:
    sampler = filled(4, [1.0, 2.0, 4.0, 0.5], alpha=0.6, beta=0.4, eps=0.0, anneal_steps=10)
    sampler.draw(RingPosition(4, 4), 3, generator())
    stats = sampler.stats()
    index = sampler.draw(RingPosition(4, 4), 2000, generator())
    assert stats["beta"] == pytest.approx(0.46)
    assert index.weights is not None
    assert stats["is_weight_min"] == pytest.approx(float(index.weights.min()), rel=1e-6)


def test_rows_of_priority_zero_are_left_out_of_the_importance_weights() -> None:
    sampler = filled(3, [0.0, 1.0, 4.0], alpha=1.0, beta=1.0, eps=0.0, anneal_steps=None)
    stats = sampler.stats()
    assert stats["priority_min"] == 0.0
    assert (stats["is_weight_min"], stats["is_weight_max"]) == (0.25, 1.0)


def test_a_sampler_without_rows_reports_no_quantiles() -> None:
    stats = PrioritizedSampler().stats()
    assert (stats["beta"], stats["max_priority"]) == (0.4, 1.0)
    assert all(stats[key] is None for key in STATS_KEYS - {"beta", "max_priority"})


@pytest.mark.parametrize(("alpha", "beta"), [(-1.0, 0.5), (0.5, 1.5), (0.5, -0.1)])
def test_importance_quantiles_refuse_bad_exponents(alpha: float, beta: float) -> None:
    with pytest.raises(ValueError, match="alpha" if alpha < 0 else "beta"):
        priority_maths.importance_quantiles([1.0, 2.0], alpha=alpha, beta=beta)

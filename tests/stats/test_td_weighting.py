"""build_weights (REFERENCE §12.2), compute_td_errors and the TDWeighting helper."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from bufcore import TDStatsEMA, TDWeighting, build_weights, compute_td_errors
from tests.stats.helpers import host_reads_forbidden

NAN, INF = float("nan"), float("inf")
TD = torch.tensor([[0.0, 1.0, 2.0]])
ALL = torch.ones(1, 3, dtype=torch.bool)
TWO = torch.tensor([[True, True, False]])


# --------------------------------------------------------------- REFERENCE §12.2 examples
@pytest.mark.parametrize(
    ("td", "mask", "kwargs", "expected"),
    [
        (TD, ALL, {"external_mean": 1.0, "external_std": 1.0}, [0.3679, 1.0, 2.7183]),
        (TD, ALL, {"beta": 0.5, "external_mean": 1.0, "external_std": 1.0}, [0.1353, 1.0, 5.0]),
        (TD, TWO, {"beta": 0.5, "external_mean": 1.0, "external_std": 1.0}, [0.1353, 1.0, 0.0]),
        (TD, ALL, {}, [0.3679, 1.0, 2.7183]),
        (TD, TWO, {"beta": 0.5}, [0.2431, 4.1133, 0.0]),
        (
            torch.tensor([[0.2, -0.3, 0.1]]),
            ALL,
            {"external_mean": 0.0, "external_std": 1.0},
            [1.2214, 0.7408, 1.1052],
        ),
    ],
    ids=["ext-beta1", "ext-beta0.5-clipped", "ext-masked", "batch", "batch-masked", "prior"],
)
def test_the_reference_examples(
    td: torch.Tensor, mask: torch.Tensor, kwargs: dict[str, Any], expected: list[float]
) -> None:
    weights = build_weights(td, mask, **kwargs)
    torch.testing.assert_close(weights, torch.tensor([expected]), atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    ("given_name", "missing"),
    [("external_mean", "external_std"), ("external_std", "external_mean")],
)
def test_only_one_external_statistic_is_a_value_error_naming_the_missing_one(
    given_name: str, missing: str
) -> None:
    # The reference silently fell back to the batch's statistics.
    with pytest.raises(ValueError, match=rf"{missing}: expected it with {given_name}"):
        build_weights(TD, ALL, **{given_name: 1.0})


@pytest.mark.parametrize("external", [True, False], ids=["external", "batch"])
@pytest.mark.parametrize("masked", [NAN, INF, -INF])
def test_masked_positions_weigh_exactly_zero_even_where_td_is_not_finite(
    external: bool, masked: float
) -> None:
    td = torch.tensor([[0.0, 1.0, masked, 2.0]])
    mask = torch.tensor([[True, True, False, True]])
    stats = {"external_mean": 1.0, "external_std": 1.0} if external else {}
    weights = build_weights(td, mask, **stats)
    assert weights[0, 2].item() == 0.0
    torch.testing.assert_close(weights[:, [0, 1, 3]], build_weights(TD, ALL, **stats))


@pytest.mark.parametrize("external", [True, False], ids=["external", "batch"])
@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_a_non_finite_td_inside_the_mask_weighs_zero_and_stays_out_of_the_batch_statistics(
    external: bool, bad: float
) -> None:
    td = torch.tensor([[0.0, bad, 1.0, 2.0]])
    stats = {"external_mean": 1.0, "external_std": 1.0} if external else {}
    weights = build_weights(td, torch.ones(1, 4, dtype=torch.bool), **stats)
    assert weights[0, 1].item() == 0.0
    torch.testing.assert_close(weights[:, [0, 2, 3]], build_weights(TD, ALL, **stats))


@pytest.mark.parametrize("valid", [0, 1])
def test_batch_mode_with_at_most_one_valid_token_weighs_valid_tokens_one(valid: int) -> None:
    mask = torch.tensor([[True] * valid + [False] * (3 - valid)])
    weights = build_weights(torch.tensor([[7.0, NAN, 3.0]]), mask)
    assert weights.tolist() == [[1.0] * valid + [0.0] * (3 - valid)]


def test_a_zero_external_std_saturates_the_weights_at_the_bounds() -> None:
    assert build_weights(TD, ALL, external_mean=1.0, external_std=0.0).tolist() == [
        [pytest.approx(0.1), 1.0, 5.0]
    ]


def test_equal_bounds_give_every_valid_token_that_weight() -> None:
    weights = build_weights(TD, TWO, min_weight=2.0, max_weight=2.0)
    assert weights.tolist() == [[2.0, 2.0, 0.0]]


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (torch.float16, torch.float32),
        (torch.bfloat16, torch.float32),
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
    ],
)
def test_weights_are_float32_or_float64_for_float64_input(
    dtype: torch.dtype, expected: torch.dtype
) -> None:
    assert build_weights(TD.to(dtype), ALL).dtype == expected


def test_weights_carry_no_gradient() -> None:
    td = TD.clone().requires_grad_(True)
    assert not build_weights(td, ALL).requires_grad


def test_statistics_read_from_a_log_as_floats_or_cpu_tensors_give_the_same_weights() -> None:
    ema = TDStatsEMA("cpu", warmup_steps=1)
    ema.update(torch.tensor([[0.5, 1.5, 4.0]]), ALL)
    logged = ema.state_dict()  # what a dashboard reads back: plain floats
    td = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    mask = torch.ones(1, 4, dtype=torch.bool)
    mean, std = ema.get_stats()
    from_ema = build_weights(td, mask, external_mean=mean, external_std=std)
    from_floats = build_weights(
        td, mask, external_mean=logged["ema_mean"], external_std=logged["ema_std"]
    )
    from_float64 = build_weights(
        td,
        mask,
        external_mean=torch.tensor(logged["ema_mean"], dtype=torch.float64),
        external_std=torch.tensor(logged["ema_std"], dtype=torch.float64),
    )
    assert torch.equal(from_ema, from_floats) and torch.equal(from_ema, from_float64)


def test_batch_mode_reads_no_tensor_value_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    td = torch.tensor([[0.0, NAN, 1.0, 2.0]])
    mask = torch.tensor([[True, True, True, False]])
    with host_reads_forbidden(monkeypatch):
        weights = build_weights(td, mask)
    assert weights.shape == td.shape


# -------------------------------------------------------------------- option validation
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"beta": 0.0}, ValueError, "beta: expected a number > 0, got 0.0"),
        ({"beta": -1.0}, ValueError, "beta: expected a number > 0"),
        ({"beta": NAN}, ValueError, "beta: expected a finite number"),
        ({"beta": "1"}, TypeError, "beta: expected a number"),
        ({"min_weight": -0.1}, ValueError, "min_weight: expected a number >= 0.0"),
        ({"max_weight": INF}, ValueError, "max_weight: expected a finite number"),
        (
            {"min_weight": 2.0, "max_weight": 1.0},
            ValueError,
            r"max_weight: expected a number >= min_weight \(2.0\), got 1.0",
        ),
        (
            {"external_mean": NAN, "external_std": 1.0},
            ValueError,
            "external_mean: expected a finite number",
        ),
        (
            {"external_mean": 0.0, "external_std": -1.0},
            ValueError,
            "external_std: expected a number >= 0.0",
        ),
        (
            {"external_mean": 0.0, "external_std": torch.tensor(-1.0)},
            ValueError,
            "external_std: expected a number >= 0.0",
        ),
        (
            {"external_mean": torch.zeros(1), "external_std": 1.0},
            TypeError,
            r"external_mean: expected a number or a 0-d real tensor, got a tensor of shape \(1,\)",
        ),
        (
            {"external_mean": True, "external_std": 1.0},
            TypeError,
            "external_mean: expected a number",
        ),
        (
            {"external_mean": torch.tensor(True), "external_std": 1.0},
            TypeError,
            "external_mean: expected a number or a 0-d real tensor",
        ),
        ({"loss_mask": torch.ones(3)}, ValueError, "loss_mask: expected the shape of td_errors"),
        (
            {"loss_mask": torch.tensor([[0.0, 0.5, 1.0]])},
            ValueError,
            "loss_mask: expected a bool or 0/1 mask",
        ),
        (
            {"td_errors": torch.tensor([[0, 1, 2]])},
            TypeError,
            "td_errors: expected a floating tensor, got dtype int64",
        ),
    ],
)
def test_build_weights_refuses_bad_input_naming_the_argument(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        build_weights(**{"td_errors": TD, "loss_mask": ALL, **kwargs})


@given(
    st.lists(
        st.tuples(
            st.one_of(st.floats(-1e30, 1e30), st.sampled_from([NAN, INF, -INF])), st.booleans()
        ),
        max_size=16,
    ),
    st.booleans(),
    st.floats(0.05, 5.0),
)
def test_weights_are_within_the_bounds_on_valid_tokens_and_zero_elsewhere(
    tokens: list[tuple[float, bool]], external: bool, beta: float
) -> None:
    td = torch.tensor([value for value, _ in tokens], dtype=torch.float32)
    mask = torch.tensor([valid for _, valid in tokens], dtype=torch.bool)
    stats = {"external_mean": 0.5, "external_std": 2.0} if external else {}
    weights = build_weights(td, mask, beta=beta, min_weight=0.1, max_weight=5.0, **stats)
    valid = mask & torch.isfinite(td)
    assert bool(torch.isfinite(weights).all())
    assert bool((weights[~valid] == 0).all())
    assert bool(((weights[valid] >= 0.1 - 1e-7) & (weights[valid] <= 5.0)).all())


# ----------------------------------------------------------------------- compute_td_errors
def test_td_errors_of_a_full_row_bootstrap_the_last_token_from_zero() -> None:
    values = torch.tensor([[0.5, 0.7, 0.9]])
    td = compute_td_errors(values, torch.tensor([[0.0, 0.0, 1.0]]), ALL)
    torch.testing.assert_close(td, torch.tensor([[0.2, 0.2, 0.1]]))


def test_gamma_discounts_the_next_value() -> None:
    values = torch.tensor([[1.0, 2.0, 4.0]])
    td = compute_td_errors(values, torch.tensor([[1.0, 1.0, 1.0]]), ALL, gamma=0.5)
    torch.testing.assert_close(td, torch.tensor([[1.0, 1.0, -3.0]]))


@pytest.mark.parametrize("valid", [1, 2, 3, 7])
def test_the_last_valid_token_bootstraps_from_zero_whatever_the_padding_holds(
    valid: int,
) -> None:
    length = 9
    values = torch.arange(1.0, length + 1).unsqueeze(0)
    values[0, valid:] = NAN  # padding
    rewards = torch.full((1, length), NAN)
    rewards[0, :valid] = 0.0
    mask = (torch.arange(length) < valid).unsqueeze(0)
    td = compute_td_errors(values, rewards, mask)
    expected = [1.0] * (valid - 1) + [-float(valid)] + [0.0] * (length - valid)
    assert td.tolist() == [expected]


def test_masked_tokens_between_valid_ones_are_skipped() -> None:
    values = torch.tensor([[1.0, NAN, 3.0, 10.0]])
    mask = torch.tensor([[True, False, True, False]])
    td = compute_td_errors(values, torch.zeros(1, 4), mask)
    assert td.tolist() == [[2.0, 0.0, -3.0, 0.0]]


def test_leading_axes_are_independent_rows() -> None:
    values = torch.arange(24.0).reshape(2, 3, 4)
    rewards = torch.zeros(2, 3, 4)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[1, 2, 2:] = False
    td = compute_td_errors(values, rewards, mask)
    expected = torch.ones(2, 3, 4)
    expected[..., -1] = -values[..., -1]
    expected[1, 2] = torch.tensor([1.0, -21.0, 0.0, 0.0])
    torch.testing.assert_close(td, expected)


def test_an_empty_sequence_axis_gives_an_empty_result() -> None:
    empty = torch.zeros(2, 0)
    assert compute_td_errors(empty, empty, empty.bool()).shape == (2, 0)


def test_gradients_flow_into_the_values() -> None:
    values = torch.tensor([[0.5, 0.7, 0.9]], requires_grad=True)
    compute_td_errors(values, torch.zeros(1, 3), TWO).sum().backward()
    assert values.grad is not None
    # (V1 - V0) + (0 - V1) = -V0; the masked V2 gets no gradient.
    assert values.grad.tolist() == [[-1.0, 0.0, 0.0]]


def test_non_finite_values_and_rewards_in_masked_positions_leave_the_gradient_finite() -> None:
    values = torch.tensor([[0.5, 0.7, NAN]], requires_grad=True)
    compute_td_errors(values, torch.tensor([[0.0, 0.0, NAN]]), TWO).sum().backward()
    assert values.grad is not None
    assert values.grad.tolist() == [[-1.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    ("values", "rewards", "expected"),
    [
        (torch.float32, torch.int64, torch.float32),
        (torch.bfloat16, torch.bfloat16, torch.float32),
        (torch.float64, torch.float32, torch.float64),
    ],
)
def test_td_errors_come_in_at_least_float32(
    values: torch.dtype, rewards: torch.dtype, expected: torch.dtype
) -> None:
    td = compute_td_errors(torch.ones(1, 3, dtype=values), torch.ones(1, 3, dtype=rewards), ALL)
    assert td.dtype == expected


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"gamma": -0.1}, ValueError, "gamma: expected a number >= 0.0"),
        ({"gamma": 1.5}, ValueError, r"gamma: expected a number in \[0, 1\], got 1.5"),
        ({"gamma": NAN}, ValueError, "gamma: expected a finite number"),
        ({"gamma": "1"}, TypeError, "gamma: expected a number"),
        ({"values": torch.tensor(1.0)}, ValueError, "values: expected a tensor"),
        (
            {"values": torch.ones(1, 3, dtype=torch.int64)},
            TypeError,
            "values: expected a floating tensor",
        ),
        ({"rewards": torch.ones(1, 2)}, ValueError, "rewards: expected the shape of values"),
        ({"rewards": torch.ones(1, 3, dtype=torch.bool)}, TypeError, "rewards: expected a real"),
        ({"loss_mask": torch.ones(3, 1)}, ValueError, "loss_mask: expected the shape of values"),
        ({"loss_mask": torch.full((1, 3), 2)}, ValueError, "loss_mask: expected a bool or 0/1"),
    ],
)
def test_compute_td_errors_refuses_bad_input_naming_the_argument(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    base = {"values": torch.ones(1, 3), "rewards": torch.ones(1, 3), "loss_mask": ALL}
    with pytest.raises(error, match=match):
        compute_td_errors(**{**base, **kwargs})


def td_oracle(
    values: list[float], rewards: list[float], mask: list[bool], gamma: float
) -> list[float]:
    """The definition, one token at a time."""
    out = []
    for t, valid in enumerate(mask):
        if not valid:
            out.append(0.0)
            continue
        later = [values[j] for j in range(t + 1, len(mask)) if mask[j]]
        out.append(rewards[t] + gamma * (later[0] if later else 0.0) - values[t])
    return out


@given(
    st.lists(st.tuples(st.floats(-10, 10), st.floats(-10, 10), st.booleans()), max_size=12),
    st.floats(0.0, 1.0),
)
def test_td_errors_match_the_definition_token_by_token(
    tokens: list[tuple[float, float, bool]], gamma: float
) -> None:
    values = [float(torch.tensor(v)) for v, _, _ in tokens]
    rewards = [float(torch.tensor(r)) for _, r, _ in tokens]
    mask = [m for _, _, m in tokens]
    td = compute_td_errors(
        torch.tensor([values]),
        torch.tensor([rewards]),
        torch.tensor([mask], dtype=torch.bool),
        gamma=gamma,
    )
    assert td[0].tolist() == pytest.approx(td_oracle(values, rewards, mask, gamma), abs=1e-5)


# ---------------------------------------------------------------------------- TDWeighting
def test_the_first_batch_is_weighted_with_the_prior() -> None:
    helper = TDWeighting(TDStatsEMA("cpu"), beta=0.5)
    expected = build_weights(TD, ALL, beta=0.5, external_mean=0.0, external_std=1.0)
    assert torch.equal(helper.weights(TD, ALL), expected)


def test_a_batch_is_weighted_with_the_statistics_of_the_batches_before_it() -> None:
    ema = TDStatsEMA("cpu", warmup_steps=1)
    helper = TDWeighting(ema)
    helper.update(TD, ALL)
    second = torch.tensor([[3.0, 4.0, 5.0]])
    expected = build_weights(second, ALL, external_mean=1.0, external_std=math.sqrt(2 / 3))
    torch.testing.assert_close(helper.weights(second, ALL), expected)


def test_update_returns_the_metrics_as_zero_d_tensors() -> None:
    helper = TDWeighting(TDStatsEMA("cpu", warmup_steps=1), beta=1.0)
    td = torch.tensor([[0.0, 1.0, 2.0, -3.0, NAN]])
    metrics = helper.update(td, torch.ones(1, 5, dtype=torch.bool))
    assert all(isinstance(v, torch.Tensor) and v.ndim == 0 for v in metrics.values())
    read = {key: value.item() for key, value in metrics.items()}
    population = torch.tensor([0.0, 1.0, 2.0, -3.0], dtype=torch.float64).std(unbiased=False)
    # Prior (0, 1), beta 1: raw weights exp([0, 1, 2, -3]) = [1, 2.72, 7.39, 0.0498].
    assert read == {
        "td/ema_mean": pytest.approx(0.0),
        "td/ema_std": pytest.approx(population.item()),
        "td/batch_mean": pytest.approx(0.0),
        "td/batch_std": pytest.approx(population.item()),
        "td/batch_tokens": 4,
        "td/clip_min_fraction": 0.25,
        "td/clip_max_fraction": 0.25,
        "td/nonfinite_count": 1,
    }


def test_a_batch_without_valid_tokens_reports_nan_and_changes_nothing() -> None:
    ema = TDStatsEMA("cpu")
    helper = TDWeighting(ema)
    before = ema.state_dict()
    metrics = helper.update(TD, torch.zeros(1, 3, dtype=torch.bool))
    assert ema.state_dict() == before
    for key in ("td/batch_mean", "td/batch_std", "td/clip_min_fraction", "td/clip_max_fraction"):
        assert math.isnan(metrics[key].item())
    assert metrics["td/batch_tokens"].item() == 0


def test_helper_update_reads_no_tensor_value_on_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    helper = TDWeighting(TDStatsEMA("cpu", warmup_steps=2))
    with host_reads_forbidden(monkeypatch):
        for _ in range(3):
            metrics = helper.update(TD, ALL)
    assert metrics["td/batch_tokens"].item() == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"loss_mask": torch.ones(3)}, ValueError, "loss_mask: expected the shape of td_errors"),
        ({"td_errors": torch.tensor([[0, 1, 2]])}, TypeError, "td_errors: expected a floating"),
        ({"td_errors": torch.empty(1, 3, device="meta")}, TypeError, "td_errors"),
    ],
)
def test_helper_update_refuses_bad_input_and_leaves_the_ema_unchanged(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    ema = TDStatsEMA("cpu")
    helper = TDWeighting(ema)
    helper.update(TD, ALL)
    before = ema.state_dict()
    with pytest.raises(error, match=match):
        helper.update(**{"td_errors": TD, "loss_mask": ALL, **kwargs})
    assert ema.state_dict() == before


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (({"ema_mean": 0.0},), {}, TypeError, "ema: expected a TDStatsEMA, got dict"),
        ((), {"beta": 0.0}, ValueError, "beta: expected a number > 0"),
        ((), {"min_weight": 3.0, "max_weight": 2.0}, ValueError, "max_weight"),
        ((), {"distributed": "yes"}, TypeError, "distributed: expected a bool"),
    ],
)
def test_the_helper_refuses_bad_arguments_naming_them(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        TDWeighting(*(args or (TDStatsEMA("cpu"),)), **kwargs)


def test_the_helper_reports_its_options() -> None:
    helper = TDWeighting(
        TDStatsEMA("cpu"), beta=0.9, min_weight=0.2, max_weight=3, distributed=False
    )
    assert helper.options == {
        "beta": 0.9,
        "min_weight": 0.2,
        "max_weight": 3.0,
        "distributed": False,
        "quantiles": 0,
    }

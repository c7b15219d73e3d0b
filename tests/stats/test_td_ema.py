"""TDStatsEMA: the shipped formula (REFERENCE §12.3, DESIGN §2 item 7), state, validation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from bufcore import TDStatsEMA, distributed
from bufcore.errors import StateError
from tests.stats.helpers import host_reads_forbidden

FLOOR = 1e-4  # population std floor


def ones(*shape: int) -> torch.Tensor:
    return torch.ones(*shape, dtype=torch.bool)


def feed(ema: TDStatsEMA, *batches: list[float]) -> list[tuple[float, float]]:
    """Update with each batch (all tokens valid); the statistics after each."""
    seen = []
    for batch in batches:
        ema.update(torch.tensor([batch]), ones(1, len(batch)))
        seen.append((ema.ema_mean.item(), ema.ema_std.item()))
    return seen


# ------------------------------------------------------------ REFERENCE §12.3, shipped rows
def test_constant_batches_one_to_five_follow_the_shipped_warmup_and_momentum() -> None:
    ema = TDStatsEMA("cpu", momentum=0.1, warmup_steps=4)
    seen = feed(ema, *[[float(v)] * 4 for v in range(1, 6)])
    assert [mean for mean, _ in seen] == pytest.approx([1.0, 1.75, 2.375, 2.78125, 3.003125])
    assert [std for _, std in seen] == pytest.approx([FLOOR] * 5)
    assert int(ema.step_count) == 5


def test_one_warmup_step_initialises_from_the_first_batch_then_blends_with_momentum() -> None:
    seen = feed(TDStatsEMA("cpu", warmup_steps=1), [0.0, 1.0, 2.0], [1.0, 2.0, 3.0])
    assert seen == [
        pytest.approx((1.0, math.sqrt(2 / 3))),
        pytest.approx((1.1, math.sqrt(2 / 3))),
    ]


def test_zero_warmup_steps_is_a_plain_ema_from_the_prior_from_the_first_batch_on() -> None:
    # W = 0, k = 1: no division by zero; batch 1 is blended into the prior (0, 1) with m.
    std1 = 0.9 * 1.0 + 0.1 * math.sqrt(2 / 3)
    seen = feed(TDStatsEMA("cpu", warmup_steps=0), [0.0, 1.0, 2.0], [2.0, 2.0, 2.0])
    assert seen == [pytest.approx((0.1, std1)), pytest.approx((0.29, 0.9 * std1 + 0.1 * FLOOR))]


@pytest.mark.parametrize("warmup", [1, 2, 3, 5])
def test_the_last_warmup_batch_still_moves_the_statistics(warmup: int) -> None:
    # The seed's weight k/W is 1 at k == W, so it ignored batch W entirely.
    ema = TDStatsEMA("cpu", warmup_steps=warmup)
    feed(ema, *[[0.0, 0.0]] * (warmup - 1))
    ((mean, _),) = feed(ema, [10.0, 10.0])
    assert mean == pytest.approx(10.0 / warmup)


def test_the_largest_warmup_keeps_blending_as_a_warmup() -> None:
    ema = TDStatsEMA("cpu", warmup_steps=2**63 - 1)
    seen = feed(ema, [2.0, 2.0], [4.0, 4.0])
    assert [mean for mean, _ in seen] == pytest.approx([2.0, 4.0])  # keep weight 1/(2**63-1)


@pytest.mark.parametrize("momentum", [0.1, 0.5, 1.0])
def test_after_the_warmup_a_batch_enters_with_weight_momentum(momentum: float) -> None:
    ema = TDStatsEMA("cpu", momentum=momentum, warmup_steps=1)
    feed(ema, [2.0, 2.0])
    ((mean, _),) = feed(ema, [4.0, 4.0])
    assert mean == pytest.approx((1 - momentum) * 2.0 + momentum * 4.0)


@pytest.mark.parametrize("batch", [[5.0], [3.0, 3.0, 3.0]])
def test_a_batch_without_spread_gives_the_std_floor_not_nan(batch: list[float]) -> None:
    # The seed's unbiased std of one token is NaN, which poisoned the EMA for good.
    assert feed(TDStatsEMA("cpu"), batch) == [pytest.approx((batch[0], FLOOR))]


def test_the_batch_std_is_the_population_std() -> None:
    batch = TDStatsEMA("cpu").update(torch.tensor([[1.0, 3.0]]), ones(1, 2))
    assert batch.std.item() == pytest.approx(1.0)  # unbiased would be sqrt(2)


# ------------------------------------------------------------- empty and non-finite batches
@pytest.mark.parametrize(
    ("td", "mask"),
    [
        (torch.tensor([[1.0, 2.0]]), torch.zeros(1, 2, dtype=torch.bool)),
        (torch.zeros(0), torch.zeros(0, dtype=torch.bool)),
        (torch.zeros(2, 0), torch.zeros(2, 0, dtype=torch.bool)),
        (torch.tensor([[float("nan"), float("inf")]]), ones(1, 2)),
    ],
    ids=["all-masked", "empty", "zero-length", "all-non-finite"],
)
def test_a_batch_without_a_valid_token_leaves_mean_std_and_step_count_unchanged(
    td: torch.Tensor, mask: torch.Tensor
) -> None:
    ema = TDStatsEMA("cpu", warmup_steps=2)
    feed(ema, [1.0, 2.0])
    before = ema.state_dict()
    batch = ema.update(td, mask)
    after = ema.state_dict()
    after["nonfinite_count"] = before["nonfinite_count"]  # counted separately below
    assert after == before
    assert int(batch.tokens) == 0
    assert math.isnan(batch.mean.item()) and math.isnan(batch.std.item())


def test_non_finite_tokens_in_the_mask_are_excluded_and_counted() -> None:
    ema = TDStatsEMA("cpu", warmup_steps=1)
    td = torch.tensor([[1.0, float("nan"), 3.0, float("inf"), -float("inf")]])
    batch = ema.update(td, ones(1, 5))
    assert (ema.ema_mean.item(), ema.ema_std.item()) == pytest.approx((2.0, 1.0))
    assert (int(batch.tokens), int(batch.nonfinite), int(ema.nonfinite_count)) == (2, 3, 3)


def test_non_finite_tokens_outside_the_mask_are_neither_used_nor_counted() -> None:
    ema = TDStatsEMA("cpu", warmup_steps=1)
    ema.update(torch.tensor([[1.0, float("nan"), 3.0]]), torch.tensor([[True, False, True]]))
    assert (ema.ema_mean.item(), int(ema.nonfinite_count)) == (2.0, 0)


def test_a_batch_whose_statistics_overflow_float32_is_skipped_and_its_tokens_counted() -> None:
    ema = TDStatsEMA("cpu", warmup_steps=1)
    feed(ema, [1.0, 1.0])
    before = ema.get_stats()
    ema.update(torch.tensor([[1e39, -1e39, 1e39]], dtype=torch.float64), ones(1, 3))
    assert ema.get_stats() == before
    assert (int(ema.step_count), int(ema.nonfinite_count)) == (1, 3)


def test_a_zero_one_numeric_mask_selects_like_a_bool_mask() -> None:
    td = torch.tensor([[1.0, 5.0, 3.0]])
    by_bool, by_float = TDStatsEMA("cpu"), TDStatsEMA("cpu")
    by_bool.update(td, torch.tensor([[True, False, True]]))
    by_float.update(td, torch.tensor([[1.0, 0.0, 1.0]]))
    assert by_bool.state_dict() == by_float.state_dict()


# ------------------------------------------------------------------ tensors, no host sync
def test_statistics_are_float32_tensors_on_the_device_without_gradient() -> None:
    ema = TDStatsEMA(torch.device("cpu"))
    ema.update(torch.tensor([[1.0, 2.0]], requires_grad=True), ones(1, 2))
    for value in (ema.ema_mean, ema.ema_std):
        assert (value.dtype, value.device, value.ndim, value.requires_grad) == (
            torch.float32,
            torch.device("cpu"),
            0,
            False,
        )
    assert ema.step_count.dtype == ema.nonfinite_count.dtype == torch.int64


def test_the_host_read_guard_catches_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    ema = TDStatsEMA("cpu")
    # A float mask is value-checked on CPU, which reads it: the guard must notice.
    with host_reads_forbidden(monkeypatch), pytest.raises(AssertionError, match="host"):
        ema.update(torch.tensor([1.0]), torch.tensor([1.0]))


def test_update_reads_no_tensor_value_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    ema = TDStatsEMA("cpu", warmup_steps=2)
    td = torch.tensor([[1.0, float("nan"), 2.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[True, True, True], [False, False, False]])
    with host_reads_forbidden(monkeypatch):
        for _ in range(3):
            ema.update(td, mask)
        ema.update(td, torch.zeros_like(mask))
    assert int(ema.step_count) == 3


# ---------------------------------------------------------------------------- distributed
def test_a_one_process_gloo_group_gives_the_single_process_statistics(tmp_path: Path) -> None:
    batches = [[0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [5.0, float("nan")]]
    local = TDStatsEMA("cpu", warmup_steps=1)
    feed(local, *batches)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        grouped = TDStatsEMA("cpu", warmup_steps=1)
        feed(grouped, *batches)
    finally:
        dist.destroy_process_group()
    assert grouped.state_dict() == local.state_dict()


class OtherRank:
    """Stands in for a second process: adds its totals in ``bufcore.distributed``'s sum."""

    def __init__(self, td: torch.Tensor, mask: torch.Tensor) -> None:
        twin = TDStatsEMA("cpu")
        captured: list[torch.Tensor] = []
        self.calls = 0

        def capture(totals: torch.Tensor) -> torch.Tensor:
            captured.append(totals.clone())
            return totals

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(distributed, "is_initialized", lambda: True)
            patch.setattr(distributed, "all_reduce_sum", capture)
            twin.update(td, mask)
        self.totals = captured[0]

    def all_reduce_sum(self, totals: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return totals + self.totals


def with_other_rank(
    monkeypatch: pytest.MonkeyPatch, td: torch.Tensor, mask: torch.Tensor
) -> OtherRank:
    other = OtherRank(td, mask)
    monkeypatch.setattr(distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed, "all_reduce_sum", other.all_reduce_sum)
    return other


def test_ranks_with_different_token_counts_get_exactly_the_global_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rank 0 holds one token, rank 1 three: the seed's mean of per-rank means would be 2.5.
    mine, theirs = torch.tensor([[0.0]]), torch.tensor([[4.0, 6.0, 6.0, float("nan")]])
    with_other_rank(monkeypatch, theirs, ones(1, 4))
    ema = TDStatsEMA("cpu", warmup_steps=1)
    batch = ema.update(mine, ones(1, 1))
    population = torch.tensor([0.0, 4.0, 6.0, 6.0], dtype=torch.float64)
    assert batch.mean.item() == pytest.approx(4.0)
    assert batch.std.item() == pytest.approx(population.std(unbiased=False).item())
    assert (int(batch.tokens), int(ema.nonfinite_count)) == (4, 1)


def test_a_rank_with_no_valid_token_still_joins_the_all_reduce_and_follows_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = with_other_rank(monkeypatch, torch.tensor([[2.0, 4.0]]), ones(1, 2))
    ema = TDStatsEMA("cpu", warmup_steps=1)
    ema.update(torch.tensor([[7.0]]), torch.zeros(1, 1, dtype=torch.bool))
    assert other.calls == 1
    assert (ema.ema_mean.item(), int(ema.step_count)) == (3.0, 1)


def test_distributed_false_never_all_reduces(monkeypatch: pytest.MonkeyPatch) -> None:
    other = with_other_rank(monkeypatch, torch.tensor([[2.0]]), ones(1, 1))
    TDStatsEMA("cpu").update(torch.tensor([[1.0]]), ones(1, 1), distributed=False)
    assert other.calls == 0


# ---------------------------------------------------------------------------------- state
def test_state_dict_is_plain_json_under_one_kilobyte() -> None:
    ema = TDStatsEMA("cpu", momentum=0.25, warmup_steps=3)
    feed(ema, [1.0, float("nan"), 2.0])
    state = ema.state_dict()
    assert {key: type(value) for key, value in state.items()} == {
        "ema_mean": float,
        "ema_std": float,
        "step_count": int,
        "nonfinite_count": int,
        "momentum": float,
        "warmup_steps": int,
    }
    assert len(json.dumps(state).encode()) < 1024
    assert (state["momentum"], state["warmup_steps"], state["nonfinite_count"]) == (0.25, 3, 1)


@pytest.mark.parametrize("warmup", [0, 1, 3, 10])
def test_a_restored_state_continues_exactly_as_the_original(warmup: int) -> None:
    generator = torch.Generator().manual_seed(warmup)
    batches = [torch.randn(4, 7, generator=generator) * 3 + i for i in range(8)]
    masks = [torch.rand(4, 7, generator=generator) > 0.3 for _ in range(8)]
    original = TDStatsEMA("cpu", momentum=0.2, warmup_steps=warmup)
    for td, mask in zip(batches[:2], masks[:2], strict=True):
        original.update(td, mask)
    # Constructed with other options: load_state_dict restores momentum and warmup_steps.
    restored = TDStatsEMA("cpu", momentum=0.9, warmup_steps=99)
    restored.load_state_dict(json.loads(json.dumps(original.state_dict())))
    for td, mask in zip(batches[2:], masks[2:], strict=True):
        original.update(td, mask)
        restored.update(td, mask)
        assert torch.equal(original.ema_mean, restored.ema_mean)
        assert torch.equal(original.ema_std, restored.ema_std)
        assert torch.equal(original.step_count, restored.step_count)


def test_load_state_dict_restores_momentum_and_warmup_steps() -> None:
    ema = TDStatsEMA("cpu")
    ema.load_state_dict(
        {"ema_mean": 1.0, "ema_std": 2.0, "step_count": 3, "momentum": 0.5, "warmup_steps": 7}
    )
    assert (ema.momentum, ema.warmup_steps) == (0.5, 7)


def test_a_seed_state_without_options_or_count_loads_and_keeps_this_objects_options() -> None:
    ema = TDStatsEMA("cpu", momentum=0.3, warmup_steps=4)
    ema.load_state_dict({"ema_mean": 0.5, "ema_std": 0.25, "step_count": 12})
    assert ema.state_dict() == {
        "ema_mean": 0.5,
        "ema_std": 0.25,
        "step_count": 12,
        "nonfinite_count": 0,
        "momentum": 0.3,
        "warmup_steps": 4,
    }


GOOD_STATE = {
    "ema_mean": 0.5,
    "ema_std": 0.25,
    "step_count": 2,
    "nonfinite_count": 1,
    "momentum": 0.2,
    "warmup_steps": 3,
}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ema_mean", float("nan")),
        ("ema_mean", float("inf")),
        ("ema_mean", 1e39),  # finite, but inf once stored as float32
        ("ema_mean", "0.5"),
        ("ema_mean", True),
        ("ema_std", 0.0),
        ("ema_std", -1.0),
        ("ema_std", 1e-50),  # > 0, but 0 once stored as float32
        ("ema_std", float("nan")),
        ("step_count", -1),
        ("step_count", 1.5),
        ("step_count", True),
        ("step_count", 2**63),
        ("nonfinite_count", -1),
        ("momentum", 0.0),
        ("momentum", 1.5),
        ("momentum", None),
        ("warmup_steps", -1),
        ("warmup_steps", 2.0),
        ("warmup_steps", 2**63),
    ],
)
def test_load_state_dict_refuses_a_bad_value_naming_its_key_and_changes_nothing(
    key: str, value: Any
) -> None:
    ema = TDStatsEMA("cpu", warmup_steps=2)
    feed(ema, [1.0, 2.0])
    before = ema.state_dict()
    with pytest.raises(StateError, match=rf"state\['{key}'\]"):
        ema.load_state_dict({**GOOD_STATE, key: value})
    assert ema.state_dict() == before


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({k: v for k, v in GOOD_STATE.items() if k != "ema_std"}, "missing key 'ema_std'"),
        ({**GOOD_STATE, "ema_var": 1.0}, r"unknown key\(s\) \['ema_var'\]"),
        ([1.0, 2.0, 3], "expected a mapping"),
    ],
    ids=["missing", "unknown", "not-a-mapping"],
)
def test_load_state_dict_refuses_a_malformed_state_and_changes_nothing(
    state: Any, match: str
) -> None:
    ema = TDStatsEMA("cpu")
    before = ema.state_dict()
    with pytest.raises(StateError, match=match):
        ema.load_state_dict(state)
    assert ema.state_dict() == before


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"momentum": 0.0}, ValueError, r"momentum: expected a number > 0"),
        ({"momentum": 1.01}, ValueError, r"momentum: expected a number in \(0, 1\]"),
        ({"momentum": float("nan")}, ValueError, "momentum: expected a finite number"),
        ({"momentum": "0.1"}, TypeError, "momentum: expected a number"),
        ({"momentum": True}, TypeError, "momentum: expected a number"),
        (
            {"warmup_steps": -1},
            ValueError,
            r"warmup_steps: expected an int in \[0, 9223372036854775807\], got -1",
        ),
        ({"warmup_steps": 2.0}, TypeError, "warmup_steps: expected an int"),
        (
            {"warmup_steps": 2**63},
            ValueError,
            r"warmup_steps: expected an int in \[0, 9223372036854775807\]",
        ),
        ({"warmup_steps": True}, TypeError, "warmup_steps: expected an int"),
        ({"device": 3}, TypeError, "device: expected a torch device"),
        ({"device": "gpu0"}, ValueError, "device: expected a torch device"),
    ],
)
def test_the_constructor_refuses_bad_arguments_naming_them(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        TDStatsEMA(**{"device": "cpu", **kwargs})


def test_the_constructor_refuses_a_device_this_process_cannot_use() -> None:
    # No machine here has a hundredth GPU (and a CPU-only torch has none at all).
    with pytest.raises(ValueError, match="device: device 'cuda:99' is not usable"):
        TDStatsEMA("cuda:99")


UPDATE_CASES: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    (
        "int-td",
        {"td_errors": torch.tensor([[1, 2]])},
        TypeError,
        "td_errors: expected a floating tensor, got dtype int64",
    ),
    ("str-td", {"td_errors": "x"}, TypeError, "td_errors: expected"),
    ("meta-td", {"td_errors": torch.empty(1, 2, device="meta")}, TypeError, "td_errors"),
    (
        "shape",
        {"loss_mask": ones(2, 1)},
        ValueError,
        r"loss_mask: expected the shape of td_errors, \(1, 2\), got \(2, 1\)",
    ),
    (
        "mask-two",
        {"loss_mask": torch.tensor([[1, 2]])},
        ValueError,
        "loss_mask: expected a bool or 0/1 mask, got 1 other value",
    ),
    (
        "mask-half",
        {"loss_mask": torch.tensor([[0.5, 1.0]])},
        ValueError,
        "loss_mask: expected a bool or 0/1 mask",
    ),
    (
        "mask-complex",
        {"loss_mask": torch.ones(1, 2, dtype=torch.complex64)},
        TypeError,
        "loss_mask: expected a bool or 0/1 tensor",
    ),
    ("distributed", {"distributed": 1}, TypeError, "distributed: expected a bool"),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [case[1:] for case in UPDATE_CASES],
    ids=[case[0] for case in UPDATE_CASES],
)
def test_update_refuses_bad_input_naming_the_argument_and_changes_nothing(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    ema = TDStatsEMA("cpu", warmup_steps=2)
    feed(ema, [1.0, 2.0])
    before = ema.state_dict()
    with pytest.raises(error, match=match):
        ema.update(**{"td_errors": torch.tensor([[1.0, 2.0]]), "loss_mask": ones(1, 2), **kwargs})
    assert ema.state_dict() == before


def test_options_and_statistics_are_read_only() -> None:
    ema = TDStatsEMA("cpu")
    for name in ("momentum", "warmup_steps", "ema_mean", "ema_std", "step_count", "device"):
        with pytest.raises(AttributeError):
            setattr(ema, name, 0)


# ----------------------------------------------------------------------------- properties
def shipped_oracle(
    batches: list[list[float]], momentum: float, warmup: int
) -> tuple[float, float, int]:
    """REFERENCE §12.3's shipped update in plain Python (batches: their valid values)."""
    mean, std, steps = 0.0, 1.0, 0
    for values in batches:
        if not values:
            continue
        steps += 1
        batch_mean = sum(values) / len(values)
        var = sum(v * v for v in values) / len(values) - batch_mean**2
        batch_std = math.sqrt(max(var, 1e-8))
        keep = (steps - 1) / warmup if steps <= warmup else 1 - momentum
        mean = keep * mean + (1 - keep) * batch_mean
        std = keep * std + (1 - keep) * batch_std
    return mean, std, steps


TOKEN = st.one_of(
    st.floats(-100.0, 100.0),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
)
BATCH = st.lists(st.tuples(TOKEN, st.booleans()), min_size=0, max_size=12)


@given(
    batches=st.lists(BATCH, min_size=1, max_size=8),
    momentum=st.floats(0.01, 1.0),
    warmup=st.integers(0, 4),
)
def test_random_masks_and_injected_non_finite_tokens_keep_the_statistics_finite_and_exact(
    batches: list[list[tuple[float, bool]]], momentum: float, warmup: int
) -> None:
    ema = TDStatsEMA("cpu", momentum=momentum, warmup_steps=warmup)
    for batch in batches:
        td = torch.tensor([value for value, _ in batch], dtype=torch.float32)
        mask = torch.tensor([valid for _, valid in batch], dtype=torch.bool)
        ema.update(td, mask)
        assert math.isfinite(ema.ema_mean.item()) and ema.ema_std.item() >= FLOOR * (1 - 1e-6)
    valid = [
        [float(torch.tensor(v, dtype=torch.float32)) for v, m in batch if m and math.isfinite(v)]
        for batch in batches
    ]
    mean, std, steps = shipped_oracle(valid, momentum, warmup)
    assert ema.ema_mean.item() == pytest.approx(mean, rel=1e-5, abs=1e-4)
    assert ema.ema_std.item() == pytest.approx(std, rel=1e-5, abs=1e-4)
    assert int(ema.step_count) == steps
    nonfinite = sum(1 for batch in batches for v, m in batch if m and not math.isfinite(v))
    assert int(ema.nonfinite_count) == nonfinite


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=10))
def test_any_float64_values_keep_the_statistics_finite(values: list[float]) -> None:
    ema = TDStatsEMA("cpu", warmup_steps=1)
    for _ in range(2):
        ema.update(torch.tensor(values, dtype=torch.float64), ones(len(values)))
    assert math.isfinite(ema.ema_mean.item()) and math.isfinite(ema.ema_std.item())
    assert ema.ema_std.item() > 0


def test_from_state_dict_builds_statistics_equal_to_the_saved_ones() -> None:
    ema = TDStatsEMA("cpu", momentum=0.3, warmup_steps=2)
    ema.update(torch.tensor([[1.0, 2.0, 4.0]]), torch.ones(1, 3, dtype=torch.bool))
    twin = TDStatsEMA.from_state_dict(ema.state_dict(), device="cpu")
    assert twin.state_dict() == ema.state_dict()
    assert (twin.momentum, twin.warmup_steps) == (0.3, 2)


def test_from_state_dict_refuses_a_malformed_state_naming_the_key() -> None:
    with pytest.raises(StateError, match="ema_std"):
        TDStatsEMA.from_state_dict({"ema_mean": 0.0, "ema_std": -1.0, "step_count": 0},
                                   device="cpu")


def test_a_meta_device_is_refused_since_the_statistics_could_never_be_read() -> None:
    with pytest.raises(ValueError, match="device: 'meta'"):
        TDStatsEMA("meta")

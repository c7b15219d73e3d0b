"""Fading push/sample counts and the throughput controller, on a fake clock (REFERENCE §11.5)."""

from __future__ import annotations

import math

import pytest

from bufcore.buffers.ding.throughput import DecayedCounts, ThruputController
from bufcore.fields import Field


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_thirty_second_window_keeps_0_8577_of_a_count_after_one_second() -> None:
    clock = FakeClock()
    counts = DecayedCounts(30, clock=clock)
    counts.add(pushed=100, sampled=100)
    clock.now = 1.0
    push, sample = counts.counts()
    assert push == pytest.approx(85.77, abs=0.01) and sample == pytest.approx(85.77, abs=0.01)


def test_a_count_keeps_one_percent_after_the_window() -> None:
    clock = FakeClock()
    counts = DecayedCounts(30, clock=clock)
    counts.add(pushed=200)
    clock.now = 30.0
    assert counts.counts()[0] == pytest.approx(2.0)


def test_decay_by_elapsed_time_equals_the_per_second_ticks_at_whole_seconds() -> None:
    clock = FakeClock()
    counts = DecayedCounts(10, clock=clock)
    counts.add(pushed=50)
    for second in range(1, 6):
        clock.now = second
        counts.counts()
    assert counts.counts()[0] == pytest.approx(50 * (0.01 ** (1 / 10)) ** 5)


def test_a_clock_stepping_back_decays_nothing() -> None:
    clock = FakeClock()
    clock.now = 5.0
    counts = DecayedCounts(30, clock=clock)
    counts.add(pushed=10)
    clock.now = 4.0
    assert counts.counts()[0] == 10


def test_rates_are_exact_for_a_steady_rate_from_the_start() -> None:
    clock = FakeClock()
    counts = DecayedCounts(30, clock=clock)
    for step in range(1, 201):
        clock.now = step * 0.1
        counts.add(pushed=4, sampled=2)
    push_rate, sample_rate = counts.rates()
    # Counts added at the end of each 0.1 s step: the estimate sits within one step's weight.
    assert push_rate == pytest.approx(40, rel=0.02) and sample_rate == pytest.approx(20, rel=0.02)


def test_rates_are_zero_before_any_time_passed() -> None:
    counts = DecayedCounts(30, clock=FakeClock())
    counts.add(pushed=5)
    assert counts.rates() == (0.0, 0.0)


def test_the_controller_is_off_without_limits() -> None:
    controller = ThruputController(clock=FakeClock())
    controller.counts.add(pushed=1000)
    assert not controller.enabled
    assert controller.can_push(1) is None and controller.can_sample(1_000_000) is None


def test_a_push_is_allowed_before_any_sample() -> None:
    controller = ThruputController(max_rate=1.0, clock=FakeClock())
    controller.counts.add(pushed=1000)
    assert controller.can_push(10) is None


def test_a_push_raising_push_over_sample_above_max_is_refused() -> None:
    # push 10 + 10 over sample 10 is 2.0 > max 1.5 (the code's semantics: max blocks pushes).
    controller = ThruputController(max_rate=1.5, clock=FakeClock())
    controller.counts.add(pushed=10, sampled=10)
    assert controller.can_push(5) is None
    assert "limit max" in (controller.can_push(10) or "")


def test_a_sample_dropping_push_over_sample_below_min_is_refused() -> None:
    # push 10 over sample 10 + 10 is 0.5 < min 0.8 (min blocks samples).
    controller = ThruputController(min_rate=0.8, clock=FakeClock())
    controller.counts.add(pushed=10, sampled=10)
    assert controller.can_sample(2) is None
    assert "limit min" in (controller.can_sample(10) or "")


def test_decay_lets_a_refused_push_through_later_only_as_far_as_the_ratio_allows() -> None:
    clock = FakeClock()
    controller = ThruputController(max_rate=1.0, window_seconds=30, clock=clock)
    controller.counts.add(pushed=10, sampled=10)
    assert controller.can_push(5) is not None
    clock.now = 30.0  # both counts fade alike: 0.1 and 0.1, so a push of 5 is still too many
    assert controller.can_push(5) is not None
    assert controller.can_push(0) is None


def test_the_ratio_is_none_before_any_sample() -> None:
    controller = ThruputController(clock=FakeClock())
    controller.counts.add(pushed=3)
    assert controller.ratio() is None
    controller.counts.add(sampled=2)
    assert controller.ratio() == pytest.approx(1.5)


def test_a_max_below_the_min_is_refused() -> None:
    with pytest.raises(ValueError, match="max_rate"):
        ThruputController(max_rate=1.0, min_rate=2.0)


def test_a_clock_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="clock"):
        DecayedCounts(30, clock=3.0)  # type: ignore[arg-type]


def test_a_window_of_zero_seconds_is_refused() -> None:
    with pytest.raises(ValueError, match="window_seconds"):
        DecayedCounts(0)


def test_the_counts_survive_a_state_round_trip_on_another_clock() -> None:
    clock = FakeClock()
    counts = DecayedCounts(30, clock=clock)
    counts.add(pushed=7, sampled=3)
    clock.now = 2.0
    state = counts.state_dict()
    other = DecayedCounts(30, clock=FakeClock())
    other.load_state_dict(Field(state, "state", part="state"))
    assert other.counts() == pytest.approx(counts.counts())
    assert math.isclose(other.state_dict()["age"], 2.0)


def test_moving_to_another_clock_keeps_the_counts_and_their_age() -> None:
    first, second = FakeClock(), FakeClock()
    first.now, second.now = 10.0, 500.0
    counts = DecayedCounts(30, clock=first)
    counts.add(pushed=8)
    first.now = 12.0
    before = counts.state_dict()
    counts.use_clock(second)
    assert counts.state_dict() == pytest.approx(before)
    second.now = 530.0
    assert counts.counts()[0] == pytest.approx(before["push"] * 0.01)

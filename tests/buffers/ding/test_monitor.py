"""What the DI-engine buffers report about themselves, and its way into a run's metrics log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bufcore import (
    AdvancedReplayBuffer,
    EpisodeReplayBuffer,
    NaiveReplayBuffer,
    RunLogger,
    read_metrics,
)

BASE_KEYS = {
    "buffer", "count", "capacity", "push_count", "sample_count", "sample_calls", "push_rate",
    "sample_rate", "refused_pushes", "refused_samples", "removed", "use_mean", "use_max",
    "staleness_mean", "staleness_max", "last_refusal",
}
ADVANCED_KEYS = {
    "beta", "max_priority", "priority_min", "priority_q25", "priority_median", "priority_q75",
    "priority_max", "thruput_ratio", "thruput_min", "thruput_max",
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("cls", [NaiveReplayBuffer, EpisodeReplayBuffer])
def test_every_buffer_reports_the_same_base_figures(cls: type[Any]) -> None:
    assert set(cls(replay_buffer_size=2).stats()) == BASE_KEYS


def test_the_advanced_buffer_adds_priorities_beta_and_throughput() -> None:
    assert set(AdvancedReplayBuffer(replay_buffer_size=2).stats()) == BASE_KEYS | ADVANCED_KEYS


def test_counts_follow_pushes_samples_and_refusals() -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=3, seed=0)
    buffer.push([{"i": i} for i in range(5)], 0)
    buffer.sample(2, 0)
    buffer.sample(4, 0)  # refused: 3 items, no replacement
    stats = buffer.stats()
    assert (stats["count"], stats["push_count"], stats["removed"]) == (3, 5, 2)
    assert (stats["sample_count"], stats["sample_calls"], stats["refused_samples"]) == (2, 1, 1)
    assert stats["last_refusal"].startswith("sample: not enough items")


def test_figures_are_none_before_any_sample() -> None:
    stats = AdvancedReplayBuffer(replay_buffer_size=2).stats()
    assert stats["use_mean"] is None and stats["staleness_max"] is None
    assert stats["priority_median"] is None and stats["thruput_ratio"] is None


def test_use_and_staleness_combine_the_last_average_range_samples() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=1, seed=0,
                                  monitor={"sampled_data_attr": {"average_range": 2}})
    buffer.push({"i": 0, "collect_iter": 0}, 0)
    for iteration in (1, 2, 3):
        buffer.sample(1, iteration)  # use 1, 2, 3; staleness 1, 2, 3
    stats = buffer.stats()
    assert (stats["use_mean"], stats["use_max"]) == (2.5, 3.0)
    assert (stats["staleness_mean"], stats["staleness_max"]) == (2.5, 3.0)


def test_priority_quantiles_cover_the_valid_items() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=5, seed=0)
    buffer.push([{"i": i, "priority": float(i)} for i in range(1, 6)], 0)
    stats = buffer.stats()
    assert (stats["priority_min"], stats["priority_median"], stats["priority_max"]) == (
        1.0, 3.0, 5.0)


def test_rates_are_items_per_second_on_the_buffers_clock() -> None:
    clock = FakeClock()
    buffer = NaiveReplayBuffer(replay_buffer_size=1000, seed=0, clock=clock)
    for second in range(1, 121):
        clock.now = float(second)
        buffer.push([{"i": 0}] * 10, 0)
    assert buffer.stats()["push_rate"] == pytest.approx(10.0, rel=0.05)


def test_the_throughput_band_and_ratio_are_reported() -> None:
    buffer = AdvancedReplayBuffer(
        replay_buffer_size=10, seed=0, clock=FakeClock(),
        thruput_controller={"push_sample_rate_limit": {"max": 4.0, "min": 0.5}},
    )
    buffer.push([{"i": i} for i in range(6)], 0)
    buffer.sample(3, 0)
    stats = buffer.stats()
    assert (stats["thruput_ratio"], stats["thruput_min"], stats["thruput_max"]) == (2.0, 0.5, 4.0)


def test_a_refused_push_is_counted() -> None:
    buffer = AdvancedReplayBuffer(
        replay_buffer_size=10, seed=0, clock=FakeClock(),
        thruput_controller={"push_sample_rate_limit": {"max": 1.0}},
    )
    buffer.push([{"i": 0}, {"i": 1}], 0)
    buffer.sample(2, 0)
    buffer.push([{"i": 2}] * 3, 0)
    assert buffer.stats()["refused_pushes"] == 1 and buffer.count() == 2


def test_stats_go_to_a_run_metrics_log(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=4, seed=0)
    buffer.push([{"i": i} for i in range(4)], 0)
    buffer.sample(2, 0)
    with RunLogger(tmp_path) as log:
        buffer.log_stats(log, 7)
    records, _ = read_metrics(tmp_path / "metrics.jsonl")
    (record,) = records
    assert (record["kind"], record["step"], record["count"]) == ("replay", 7, 4)
    assert record["thruput_max"] is None and record["sample_count"] == 2


def test_stats_are_strict_json() -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0)
    buffer.push({"i": 0}, 0)
    buffer.sample(1, 0)
    json.dumps(buffer.stats(), allow_nan=False)


def test_log_stats_refuses_what_has_no_log_method() -> None:
    with pytest.raises(TypeError, match="logger"):
        NaiveReplayBuffer(replay_buffer_size=2).log_stats(object(), 0)  # type: ignore[arg-type]


def test_counters_survive_a_save(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=2, seed=0)
    buffer.push([{"i": 0}, {"i": 1}], 0)
    buffer.sample(1, 0)
    buffer.save(tmp_path / "ckpt")
    loaded = NaiveReplayBuffer.load(tmp_path / "ckpt")
    assert {k: loaded.stats()[k] for k in ("push_count", "sample_count", "sample_calls")} == {
        "push_count": 2, "sample_count": 1, "sample_calls": 1}

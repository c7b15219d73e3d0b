"""The Replay statistics view's data and figures: log-scale and count histograms, replay
records as series, seeded draws that leave the buffer alone, trajectory dominance, log ticks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from app.replay_figures import thruput_figure
from app.replay_view import (
    DrawRequest,
    count_histogram,
    dominance,
    draw_batch,
    log_histogram,
    replay_series,
)
from app.vega import log_ticks
from bufcore import DictBuffer, PrioritizedSampler, TrajectoryDictBufferMultiDim
from bufcore.inspect import window_shares


def record(step: int, **fields: object) -> dict[str, object]:
    return {"step": step, "time": 1000.0 + step, "kind": "replay", **fields}


# ------------------------------------------------------------------ histograms
def test_a_log_histogram_gives_each_population_as_shares() -> None:
    hist = log_histogram(np.array([0.1, 1.0, 10.0, 10.0]),
                         probability=np.array([0.1, 0.2, 0.35, 0.35]), drawn=np.array([10.0]))
    assert hist.held.sum() == pytest.approx(1.0)
    assert hist.expected is not None and hist.expected.sum() == pytest.approx(1.0)
    assert hist.drawn is not None and hist.drawn[-1] == 1.0 and hist.drawn_count == 1


def test_a_log_histogram_spans_the_values_geometrically() -> None:
    hist = log_histogram(np.array([0.01, 100.0]), bins=4)
    assert hist.edges == pytest.approx([0.01, 0.1, 1.0, 10.0, 100.0])


def test_zero_and_infinite_values_are_left_off_the_log_axis_and_counted() -> None:
    hist = log_histogram(np.array([0.0, 1.0, 2.0, math.inf]))
    assert hist.left_out == 2 and hist.held.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("values", [np.zeros(0), np.array([3.0, 3.0])])
def test_a_log_histogram_of_no_spread_still_has_bins(values: np.ndarray) -> None:
    hist = log_histogram(values, bins=5)
    assert len(hist.edges) == 6 and hist.edges[0] < hist.edges[-1]


def test_a_log_histogram_refuses_a_probability_per_other_count() -> None:
    with pytest.raises(ValueError, match="one per value"):
        log_histogram(np.ones(3), probability=np.ones(2))


def test_a_count_histogram_has_one_bar_per_whole_value_when_few() -> None:
    hist = count_histogram(np.array([0.0, 1.0, 1.0, 3.0, math.nan]))
    assert hist.per_value and hist.left.tolist() == [0, 1, 2, 3]
    assert hist.counts.tolist() == [1, 2, 0, 1] and hist.missing == 1


def test_a_count_histogram_bins_a_wide_range() -> None:
    hist = count_histogram(np.arange(1000.0), bins=10)
    assert not hist.per_value and len(hist.counts) == 10 and hist.counts.sum() == 1000


# ------------------------------------------------------------------ the log
def test_replay_records_are_grouped_by_buffer_in_order_of_appearance() -> None:
    records = [record(0, buffer="b", count=1), record(0, kind="train", count=9),
               record(1, buffer="a", count=2), record(2, count=3)]
    series = replay_series(records)
    assert list(series) == ["b", "a", "replay"]
    assert series["a"].column("count").tolist() == [2.0]


def test_a_logged_none_or_missing_key_reads_as_nan() -> None:
    series = replay_series([record(0, use_mean=None), record(1, use_mean=2.0),
                            record(2)])["replay"]
    column = series.column("use_mean")
    assert math.isnan(column[0]) and column[1] == 2.0 and math.isnan(column[2])


def test_the_groups_a_log_lacks_are_named() -> None:
    series = replay_series([record(0, push_rate=1.0, sample_rate=None)])["replay"]
    lacking = series.lacking()
    assert "push and sample rates" not in lacking and "staleness" in lacking


def test_keys_the_page_does_not_know_are_kept_as_extra() -> None:
    series = replay_series([record(0, count=3, dominant_share=0.4, note="text")])["replay"]
    assert series.extra == ["dominant_share"]


def test_refusals_are_listed_each_time_the_reason_changes() -> None:
    reasons = [None, "push: full", "push: full", "sample: few", "push: full"]
    series = replay_series([record(i, last_refusal=r) for i, r in enumerate(reasons)])
    assert series["replay"].refusals == ((1, "push: full"), (3, "sample: few"),
                                         (4, "push: full"))


def test_a_long_log_is_spread_to_the_drawn_maximum_keeping_its_ends() -> None:
    series = replay_series([record(i, count=i) for i in range(10_001)])["replay"]
    assert len(series) <= 4_000 and series.total == 10_001
    assert (series.steps[0], series.steps[-1]) == (0, 10_000)


# ------------------------------------------------------------------ drawing
def prioritized_rows() -> DictBuffer:
    buffer = DictBuffer(capacity=32, seed=0, sampler=PrioritizedSampler(anneal_steps=10))
    buffer.extend({"x": torch.arange(32.0)[:, None]})
    index = buffer.sample_index(32, generator=torch.Generator().manual_seed(0))
    buffer.update_priority(index, torch.linspace(0.1, 10.0, 32))
    return buffer


def test_a_draw_leaves_the_buffer_and_its_annealing_as_they_were() -> None:
    buffer = prioritized_rows()
    steps, beta = buffer.sampler.steps, buffer.sampler.beta
    draw_batch(buffer, DrawRequest("DictBuffer", 16, None, 0))
    assert (buffer.sampler.steps, buffer.sampler.beta) == (steps, beta)


def test_a_draw_is_what_sample_index_gives_with_that_seed() -> None:
    buffer = prioritized_rows()
    drawn = draw_batch(buffer, DrawRequest("DictBuffer", 16, None, 7))
    index = buffer.sample_index(16, generator=torch.Generator().manual_seed(7))
    assert drawn.rows.tolist() == index.rows.tolist()
    assert index.weights is not None
    assert drawn.importance.tolist() == index.weights.double().tolist()
    assert drawn.priority.tolist() == buffer.sampler.priorities(drawn.rows).tolist()


def test_a_draw_uses_the_saved_draw_count_whatever_the_buffer_says_now() -> None:
    buffer = prioritized_rows()
    saved = buffer.sampler.steps
    expected = draw_batch(buffer, DrawRequest("DictBuffer", 16, None, 1, steps=saved))
    buffer.sampler.steps = saved + 5  # another page drew from the shared cached buffer
    drawn = draw_batch(buffer, DrawRequest("DictBuffer", 16, None, 1, steps=saved))
    assert drawn.importance.tolist() == expected.importance.tolist()


def test_draw_requests_refuse_an_empty_batch() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        DrawRequest("DictBuffer", 0, None, 0)


# ------------------------------------------------------------------ trajectories
def test_equal_priorities_spread_window_draws_as_the_window_counts() -> None:
    done = torch.zeros(10, 2, dtype=torch.bool)
    done[9, :] = True
    buffer = TrajectoryDictBufferMultiDim(capacity=10, n_dim=2, output_key_t=["x"],
                                          output_key_tp1=[], sampler=PrioritizedSampler())
    buffer.extend({"x": torch.zeros(10, 2, 1), "done": done})
    ranking = dominance(window_shares(buffer, 3))
    # Two trajectories of 10 rows, every window alike: each draws half.
    assert ranking.eligible == 2 and ranking.effective == pytest.approx(2.0)
    assert ranking.share == pytest.approx(ranking.uniform)


# ------------------------------------------------------------------ figures
def test_log_ticks_are_written_in_full_and_thinned_to_decades_over_a_wide_span() -> None:
    assert log_ticks(0.5, 50.0) == pytest.approx([0.5, 1, 2, 5, 10, 20, 50])
    assert log_ticks(1e-4, 1e2) == pytest.approx([1e-4, 1e-3, 1e-2, 0.1, 1, 10, 100])


def test_log_ticks_inside_one_step_give_the_ends_and_their_middle() -> None:
    assert log_ticks(0.3, 0.35) == pytest.approx([0.3, math.sqrt(0.3 * 0.35), 0.35])


def test_the_throughput_chart_says_when_there_is_no_maximum() -> None:
    series = replay_series([record(0, thruput_ratio=1.0, thruput_min=0.5, thruput_max=None)])
    figure = thruput_figure(series["replay"])
    assert "no max" in figure["title"]["subtitle"]
    assert figure["layer"][0]["encoding"]["color"]["scale"]["domain"] == [
        "min: samples refused below", "pushed / sampled"]

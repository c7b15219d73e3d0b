"""Figures of the Replay statistics page (app/replay_figures.py): what each Vega-Lite spec
shows, read from the spec (series in the legend, log axes written in full, limits as named
lines, whole-number counts, notes)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from app.replay_figures import (
    DASHED,
    TOP_TRAJECTORIES,
    count_histogram_figure,
    dominance_figure,
    log_histogram_figure,
    mean_max_figure,
    quantile_figure,
    refusals_figure,
    scalar_figure,
    top_share_figure,
)
from app.replay_view import (
    GROUPS,
    Dominance,
    ReplaySeries,
    count_histogram,
    log_histogram,
    replay_series,
)


def series(*records: dict[str, Any]) -> ReplaySeries:
    rows = [{"step": step, "time": 1000.0 + step, "kind": "replay", **fields}
            for step, fields in enumerate(records)]
    return replay_series(rows)["replay"]


def legend(spec: dict[str, Any]) -> list[str]:
    """The names of a chart's colour legend, over its layers (and their groups)."""
    names: list[str] = []
    for one in spec["layer"]:
        for inner in one.get("layer", [one]):
            domain = inner.get("encoding", {}).get("color", {}).get("scale", {}).get("domain", [])
            names += [name for name in domain if name not in names]
    return names


def marks(spec: dict[str, Any]) -> list[str]:
    return [one["mark"]["type"] if isinstance(one["mark"], dict) else one["mark"]
            for outer in spec["layer"] for one in outer.get("layer", [outer])]


# ------------------------------------------------------------------ checkpoint histograms
def test_a_log_histogram_draws_held_and_drawn_bars_and_the_promised_share_on_a_log_axis() -> None:
    hist = log_histogram(np.array([0.01, 0.1, 1.0, 10.0]),
                         probability=np.array([0.1, 0.2, 0.3, 0.4]), drawn=np.array([10.0]))
    spec = log_histogram_figure(hist, title="Priority distribution", x="priority", unit="row")
    assert legend(spec) == ["held rows", "drawn batch",
                            "share of draws the sampler promises"]
    assert marks(spec) == ["bar", "bar", "line"]
    x = spec["layer"][0]["encoding"]["x"]
    assert x["scale"]["type"] == "log"
    assert x["axis"]["format"] == "~g"  # ticks written in full: 0.5 and 50 never both "5"
    low, high = x["scale"]["domain"]
    assert low < hist.edges[0] and high > hist.edges[-1]  # the edge bars stay inside
    bins = spec["datasets"]["bins"]
    assert bins["held"].sum() == pytest.approx(100) and bins["drawn"].iloc[-1] == 100
    # The step line ends on the last edge at the last bin's share.
    assert len(spec["datasets"]["steps"]) == len(hist.edges)
    assert spec["title"]["subtitle"] == "drawn batch: 1 rows"


def test_a_log_histogram_counts_the_values_its_axis_cannot_show() -> None:
    hist = log_histogram(np.array([0.0, 0.0, 1.0, 2.0]))
    spec = log_histogram_figure(hist, title="t", x="priority", unit="item")
    assert spec["title"]["subtitle"] == "2 items at 0 (never drawn) not on the log axis"
    assert legend(spec) == ["held items"]
    assert "steps" not in spec["datasets"]


def test_a_count_histogram_names_a_finite_limit_in_the_legend() -> None:
    spec = count_histogram_figure(count_histogram(np.array([0.0, 1.0, 1.0, 3.0])), title="Use",
                                  x="use", unit="item", limit=5, limit_label="max_use")
    assert legend(spec) == ["items", "max_use"]
    rule = spec["layer"][-1]
    assert rule["mark"]["type"] == "rule" and rule["data"]["values"][0]["x"] == 5
    y = spec["layer"][0]["encoding"]["y"]["axis"]
    assert y["format"] == ",d" and y["tickMinStep"] == 1


@pytest.mark.parametrize("limit", [None, math.inf])
def test_a_count_histogram_without_a_finite_limit_draws_no_line(limit: float | None) -> None:
    spec = count_histogram_figure(count_histogram(np.array([0.0, 1.0])), title="Use", x="use",
                                  unit="item", limit=limit, limit_label="max_use")
    assert marks(spec) == ["bar"] and legend(spec) == ["items"]


def test_one_bar_per_value_is_centred_on_it_and_a_bin_spans_its_values() -> None:
    per_value = count_histogram_figure(count_histogram(np.array([2.0, 3.0])), title="t",
                                       x="use", unit="item")["datasets"]["counts"]
    assert per_value["left"].tolist() == pytest.approx([1.6, 2.6])
    binned = count_histogram_figure(count_histogram(np.arange(200.0), bins=10), title="t",
                                    x="use", unit="item")["datasets"]["counts"]
    assert binned["left"].iloc[1] == binned["right"].iloc[0]  # bins touch


def test_a_count_histogram_notes_the_items_without_a_value() -> None:
    spec = count_histogram_figure(count_histogram(np.array([1.0, np.nan])), title="t",
                                  x="staleness", unit="item")
    assert spec["title"]["subtitle"] == "1 items without a value not shown"


# ------------------------------------------------------------------ log series
PRIORITIES = GROUPS["priority quantiles"]


def quantile_records(low: float) -> ReplaySeries:
    return series(*({"priority_min": low, "priority_q25": 0.5, "priority_median": 1.0,
                     "priority_q75": 2.0, "priority_max": 50.0} for _ in range(3)))


def test_quantiles_are_two_bands_and_a_median_on_a_log_axis_written_in_full() -> None:
    spec = quantile_figure(quantile_records(0.05), PRIORITIES, title="Priority quantiles",
                           y="priority", log_y=True)
    assert legend(spec) == ["min to max", "25 % to 75 %", "median"]
    assert marks(spec)[:3] == ["area", "area", "line"]
    y = spec["layer"][2]["encoding"]["y"]
    assert y["scale"] == {"type": "log", "domain": [0.05, 50.0], "nice": False}
    assert y["axis"]["values"] == pytest.approx([0.1, 1, 10])
    assert y["axis"]["format"] == "~g"


def test_quantiles_at_or_below_zero_are_left_off_the_log_axis_and_counted() -> None:
    spec = quantile_figure(quantile_records(0.0), PRIORITIES, title="t", y="priority",
                           log_y=True)
    assert spec["title"]["subtitle"] == "3 records; 3 values at or below 0 not on the log axis"
    assert spec["datasets"]["series"]["priority_min"].isna().all()


def test_quantiles_on_a_linear_axis_keep_every_value() -> None:
    spec = quantile_figure(quantile_records(0.0), PRIORITIES, title="t", y="priority",
                           log_y=False)
    assert "type" not in spec["layer"][2]["encoding"]["y"].get("scale", {})
    assert spec["datasets"]["series"]["priority_min"].tolist() == [0.0, 0.0, 0.0]


def test_a_quantile_tooltip_names_every_quantile_of_the_record() -> None:
    spec = quantile_figure(quantile_records(0.05), PRIORITIES, title="t", y="priority",
                           log_y=True)
    titles = [field["title"] for field in spec["layer"][-1]["encoding"]["tooltip"]]
    assert titles == ["step", "min", "25 %", "median", "75 %", "max"]


def test_refusals_are_whole_numbers_drawn_as_steps() -> None:
    spec = refusals_figure(series({"refused_pushes": 0, "refused_samples": 1},
                                  {"refused_pushes": 2, "refused_samples": 1}))
    line = spec["layer"][0]
    assert line["mark"]["interpolate"] == "step-after"
    assert line["encoding"]["y"]["axis"]["format"] == ",d"
    assert legend(spec) == ["refused pushes", "refused samples"]


def test_a_finite_limit_is_a_dashed_line_named_in_the_legend() -> None:
    records = series({"use_mean": 1.0, "use_max": 3.0}, {"use_mean": 1.5, "use_max": 4.0})
    spec = mean_max_figure(records, "use", limit=5)
    assert legend(spec) == ["mean use", "max use", "max_use"]
    dashes = spec["layer"][0]["encoding"]["strokeDash"]["scale"]
    assert dashes["range"][dashes["domain"].index("max_use")] == DASHED
    data = spec["datasets"]["series"]
    assert data[data["series"] == "max_use"]["value"].tolist() == [5.0, 5.0]


def test_an_unlimited_use_draws_no_limit() -> None:
    spec = mean_max_figure(series({"use_mean": 1.0, "use_max": 3.0}), "use", limit=math.inf)
    assert legend(spec) == ["mean use", "max use"]


def test_the_top_share_and_the_trajectories_drawn_get_an_axis_each() -> None:
    spec = top_share_figure(series({"top_share": 0.2, "trajectories_drawn": 40}), top="5")
    assert spec["resolve"] == {"scale": {"y": "independent"}}
    right = spec["layer"][1]["layer"][0]["encoding"]["y"]["axis"]
    assert right["orient"] == "right" and right["format"] == ",d"
    data = spec["datasets"]["series"]
    assert data[data["series"] == "top 5 trajectories' share (%)"]["value"].tolist() == [20.0]


def test_a_key_with_dots_and_brackets_is_drawn_under_its_name() -> None:
    spec = scalar_figure(series({"loss.a[0]": 1.0}, {"loss.a[0]": 2.0}), "loss.a[0]")
    assert spec["title"]["text"] == "loss.a[0]"
    # Vega-Lite reads "." and "[" in a field as a path: the column is sent as "value".
    assert spec["datasets"]["series"]["value"].tolist() == [1.0, 2.0]


# ------------------------------------------------------------------ dominance
def ranking(count: int) -> Dominance:
    share = np.arange(count, 0, -1, dtype=float)
    share /= share.sum()
    return Dominance(order=np.argsort(-share, kind="stable"), share=share,
                     uniform=np.full(count, 1 / count), eligible=count, effective=3.0,
                     top_share=0.5)


@pytest.mark.parametrize("count", [1, TOP_TRAJECTORIES, TOP_TRAJECTORIES + 7])
def test_the_dominance_chart_groups_the_largest_trajectories_bars_in_order(count: int) -> None:
    drawn = np.zeros(count)
    drawn[0] = 4
    spec = dominance_figure(ranking(count), drawn, windows=4)
    shown = min(count, TOP_TRAJECTORIES)
    x = spec["layer"][0]["encoding"]["x"]
    assert x["sort"] == [f"#{i}" for i in range(shown)]
    assert spec["layer"][0]["encoding"]["xOffset"]["field"] == "series"
    shares = spec["datasets"]["shares"]
    assert len(shares) == 3 * shown
    assert shares[shares["series"] == "drawn batch"]["share"].iloc[0] == 100


def test_the_dominance_chart_without_a_draw_has_two_bars_per_trajectory() -> None:
    spec = dominance_figure(ranking(3), None, windows=0)
    assert legend(spec) == ["share of draws", "without priorities (every window alike)"]


def test_a_bins_tooltip_names_its_first_and_last_whole_value() -> None:
    hist = count_histogram(np.arange(0.0, 18.0), bins=5)  # edges 0, 3.6, 7.2, ...
    counts = count_histogram_figure(hist, title="t", x="staleness",
                                    unit="item")["datasets"]["counts"]
    assert counts["value"].tolist()[:2] == [0, 4] and counts["last"].tolist()[:2] == [3, 7]
    assert counts["count"].tolist()[:2] == [4, 4]

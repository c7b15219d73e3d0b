"""The Metrics view's data and chart without Streamlit: scalars found in records, traces
(smoothing, reduction, log axis, x axes), and a CSV that holds exactly the drawn points."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import numpy as np
import pytest

from app import metrics_view
from app.metrics_figures import metric_figure
from app.metrics_view import (
    RAW,
    RELATIVE,
    SMOOTHED,
    STEP,
    WALL,
    Curve,
    default_metrics,
    metric_traces,
    run_scalars,
    traces_csv,
)


def record(step: int, kind: str = "train", when: float | None = None,
           **fields: Any) -> dict[str, Any]:
    return {"step": step, "time": 1000.0 + step if when is None else when, "kind": kind,
            **fields}


def curve(values: list[float], *, start: float = 1000.0) -> Curve:
    steps = np.arange(len(values), dtype=np.float64) * 10
    return Curve(steps, start + steps / 10, np.array(values, dtype=np.float64))


def test_scalars_are_named_by_kind_and_key_path_in_order_of_first_appearance() -> None:
    scalars = run_scalars([
        record(0, "run", options={"steps": 9}, writer="me"),
        record(4, loss=1.5, td={"ema": 0.1}),
        record(5, "buffer", train={"len": 3, "full": False}),
        record(8, loss=1.0),
    ])
    assert list(scalars.curves) == ["run/options/steps", "train/loss", "train/td/ema",
                                    "buffer/train/len"]
    loss = scalars.curves["train/loss"]
    assert loss.steps.tolist() == [4, 8] and loss.values.tolist() == [1.5, 1.0]
    assert loss.times.tolist() == [1004.0, 1008.0]
    assert scalars.start == 1000.0 and scalars.dropped == 0


@pytest.mark.parametrize("value", [True, "fast", [1.0, 2.0], None, 10**400])
def test_values_that_are_not_drawable_numbers_are_not_scalars(value: Any) -> None:
    assert run_scalars([record(1, x=value)]).curves == {}


def test_an_int_beyond_int64_is_a_scalar_when_float_can_hold_it() -> None:
    scalars = run_scalars([record(1, x=2**70)])
    assert scalars.curves["train/x"].values.tolist() == [float(2**70)]


def test_a_nan_value_is_kept_so_that_it_draws_as_a_gap() -> None:
    values = run_scalars([record(1, x=1.0), record(2, x=math.nan)]).curves["train/x"].values
    assert math.isnan(values[1])


def test_no_records_give_no_scalars_and_no_start() -> None:
    scalars = run_scalars([])
    assert scalars.curves == {} and scalars.start is None


def test_distinct_scalar_names_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_view, "MAX_SERIES", 3)
    scalars = run_scalars([record(k, **{f"m{k}": 1.0}) for k in range(5)] + [record(9, m0=2.0)])
    assert list(scalars.curves) == ["train/m0", "train/m1", "train/m2"]
    assert scalars.dropped == 2
    assert scalars.curves["train/m0"].values.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(("names", "expected"), [
    (["train/td/ema_mean", "train/value_loss", "eval/mean_emd", "train/policy_loss"],
     ["train/policy_loss", "train/value_loss", "eval/mean_emd"]),
    (["a", "b", "c", "d"], ["a", "b", "c"]),
    (["a"], ["a"]),
    ([], []),
])
def test_the_usual_rl_curves_are_shown_first(names: list[str], expected: list[str]) -> None:
    assert default_metrics(names) == expected


def test_without_smoothing_only_the_raw_curve_is_drawn() -> None:
    traces, hidden = metric_traces(curve([1.0, 2.0, 3.0]), run="a", metric="m", axis=STEP,
                                   start=1000.0, smoothing=0.0, log_y=False)
    assert [t.curve for t in traces] == [RAW] and hidden == 0
    assert traces[0].x.tolist() == [0, 10, 20] and traces[0].y.tolist() == [1.0, 2.0, 3.0]


def test_smoothing_draws_the_smoothed_curve_over_the_raw_one() -> None:
    traces, _ = metric_traces(curve([0.0, 2.0]), run="a", metric="m", axis=STEP,
                              start=1000.0, smoothing=0.5, log_y=False)
    assert [t.curve for t in traces] == [RAW, SMOOTHED]
    assert traces[1].y.tolist() == [0.0, 1.0]


@pytest.mark.parametrize(("axis", "first"), [(STEP, 0.0), (RELATIVE, 5.0), (WALL, 1005.0)])
def test_the_x_axis_is_steps_seconds_since_the_start_or_the_clock(axis: str,
                                                                  first: float) -> None:
    traces, _ = metric_traces(curve([1.0, 2.0], start=1005.0), run="a", metric="m",
                              axis=axis, start=1000.0, smoothing=0.0, log_y=False)
    assert traces[0].x[0] == first


def test_long_curves_are_reduced_and_the_chart_says_so() -> None:
    values = np.sin(np.arange(1000) / 7.0)
    traces, _ = metric_traces(curve(values.tolist()), run="a", metric="m", axis=STEP,
                              start=1000.0, smoothing=0.0, log_y=False, max_points=100)
    assert traces[0].reduced and len(traces[0].x) <= 100
    # The extremes survive the reduction.
    assert traces[0].y.max() == values.max() and traces[0].y.min() == values.min()
    figure = metric_figure(traces, metric="m", runs=["a"], axis=STEP, log_y=False,
                           smoothing=0.0)
    note = figure["title"]["subtitle"]
    assert "1,000 -> " in note and "min/max per bucket" in note
    assert len(figure["datasets"]["curves"]) == len(traces[0].x)


def test_on_a_log_axis_values_at_or_below_zero_are_left_out_and_counted() -> None:
    traces, hidden = metric_traces(curve([-1.0, 0.0, 2.0, math.nan, 4.0]), run="a",
                                   metric="m", axis=STEP, start=1000.0, smoothing=0.0,
                                   log_y=True)
    assert hidden == 2
    assert traces[0].x.tolist() == [20, 30, 40]
    figure = metric_figure(traces, metric="m", runs=["a"], axis=STEP, log_y=True,
                           smoothing=0.0, hidden=hidden)
    y_scale = figure["layer"][0]["encoding"]["y"]["scale"]
    assert y_scale["type"] == "log" and y_scale["domain"] == [2.0, 5.0]
    assert "2 values <= 0 not drawn on the log axis" in figure["title"]["subtitle"]


@pytest.mark.parametrize(("kwargs", "match"), [({"axis": "epoch"}, "axis"),
                                               ({"smoothing": 1.0}, "smoothing"),
                                               ({"smoothing": -0.1}, "smoothing")])
def test_bad_trace_options_are_refused_naming_them(kwargs: dict[str, Any], match: str) -> None:
    options: dict[str, Any] = {"axis": STEP, "smoothing": 0.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        metric_traces(curve([1.0]), run="a", metric="m", start=0.0, log_y=False, **options)


def test_several_runs_get_their_own_colour_with_the_raw_curve_faint_in_it() -> None:
    traces = []
    for run in ("a", "b"):
        drawn, _ = metric_traces(curve([1.0, 2.0, 3.0]), run=run, metric="m", axis=STEP,
                                 start=1000.0, smoothing=0.6, log_y=False)
        traces += drawn
    figure = metric_figure(traces, metric="m", runs=["a", "b"], axis=STEP, log_y=False,
                           smoothing=0.6)
    back, front = figure["layer"][:2]
    names = back["encoding"]["color"]["scale"]["domain"]
    assert names == ["a (raw)", "a (smoothed 0.60)", "b (raw)", "b (smoothed 0.60)"]
    colours = back["encoding"]["color"]["scale"]["range"]
    assert colours[0] == colours[1] != colours[2] == colours[3]
    opacity = back["encoding"]["opacity"]["scale"]["range"]
    assert opacity[0] < 1 and opacity[1] == 1
    # The raw curves are drawn first, behind the smoothed ones.
    assert back["transform"][0]["filter"]["oneOf"] == ["a (raw)", "b (raw)"]
    assert front["transform"][0]["filter"]["oneOf"] == ["a (smoothed 0.60)",
                                                        "b (smoothed 0.60)"]


def test_wall_clock_is_drawn_as_utc_dates() -> None:
    traces, _ = metric_traces(curve([1.0]), run="a", metric="m", axis=WALL, start=0.0,
                              smoothing=0.0, log_y=False)
    figure = metric_figure(traces, metric="m", runs=["a"], axis=WALL, log_y=False,
                           smoothing=0.0)
    x = figure["layer"][0]["encoding"]["x"]
    assert x["type"] == "temporal" and x["scale"] == {"type": "utc"}
    # Vega reads a time as milliseconds since the epoch.
    assert figure["datasets"]["curves"]["x"].tolist() == [1_000_000.0]


@pytest.mark.parametrize("axis", [STEP, RELATIVE, WALL])
def test_the_csv_holds_exactly_the_points_the_chart_draws(axis: str) -> None:
    traces = []
    for run in ("a", "b"):
        drawn, _ = metric_traces(curve(np.cos(np.arange(300) / 5.0).tolist()), run=run,
                                 metric="m", axis=axis, start=1000.0, smoothing=0.6,
                                 log_y=False, max_points=50)
        traces += drawn
    figure = metric_figure(traces, metric="m", runs=["a", "b"], axis=axis, log_y=False,
                           smoothing=0.6)
    rows = list(csv.reader(io.StringIO(traces_csv(traces, axis=axis))))
    assert rows[0] == ["run", "metric", "curve", metrics_view.X_COLUMNS[axis], "value"]
    drawn_y = figure["datasets"]["curves"]["y"].tolist()
    assert [float(row[4]) for row in rows[1:]] == drawn_y
    assert {row[2] for row in rows[1:]} == {RAW, SMOOTHED}


def test_csv_x_values_read_as_steps_seconds_or_utc_times() -> None:
    for axis, expected in ((STEP, "10"), (RELATIVE, "1.0"), (WALL, "1970-01-01T00:16:41+00:00")):
        traces, _ = metric_traces(curve([1.0, 2.0]), run="a", metric="m", axis=axis,
                                  start=1000.0, smoothing=0.0, log_y=False)
        rows = list(csv.reader(io.StringIO(traces_csv(traces, axis=axis))))
        assert rows[2][3] == expected


def test_the_csv_refuses_an_unknown_axis() -> None:
    with pytest.raises(ValueError, match="axis"):
        traces_csv([], axis="epoch")


@pytest.mark.parametrize(("values", "domain"), [
    ([5.0], [5.0, 10.0]),  # one value on a tick: up to the next
    ([1.10343, 1.70671], [1.0, 2.0]),  # a narrow range: out to the ticks around it
    ([0.3, 0.7], [0.2, 1.0]),
    ([0.0012, 4500.0], [0.001, 5000.0]),
    ([-1.0, 0.0], [1.0, 10.0]),  # nothing to draw: a domain all the same
])
def test_a_log_axis_spans_the_ticks_around_the_drawn_values(values: list[float],
                                                     domain: list[float]) -> None:
    traces, hidden = metric_traces(curve(values), run="a", metric="m", axis=STEP,
                                   start=1000.0, smoothing=0.0, log_y=True)
    figure = metric_figure(traces, metric="m", runs=["a"], axis=STEP, log_y=True,
                           smoothing=0.0, hidden=hidden)
    assert figure["layer"][0]["encoding"]["y"]["scale"]["domain"] == pytest.approx(domain)


@pytest.mark.parametrize(("axis", "whole"), [(STEP, True), (RELATIVE, False)])
def test_steps_tick_on_whole_numbers_and_seconds_as_they_fall(axis: str, whole: bool) -> None:
    traces, _ = metric_traces(curve([1.0, 2.0]), run="a", metric="m", axis=axis,
                              start=1000.0, smoothing=0.0, log_y=False)
    figure = metric_figure(traces, metric="m", runs=["a"], axis=axis, log_y=False,
                           smoothing=0.0)
    x_axis = figure["layer"][0]["encoding"]["x"]["axis"]
    assert x_axis["title"] == metrics_view.X_AXES[axis]
    assert (x_axis.get("format") == ",d") == whole


@pytest.mark.parametrize(("metric", "columns"), [("m", 2), ("train/reward_mean", 1)])
def test_a_legend_puts_its_entries_side_by_side_only_while_they_fit_half_the_page(
    metric: str, columns: int
) -> None:
    traces, _ = metric_traces(curve([1.0, 2.0, 3.0]), run="a", metric=metric, axis=STEP,
                              start=1000.0, smoothing=0.6, log_y=False)
    figure = metric_figure(traces, metric=metric, runs=["a"], axis=STEP, log_y=False,
                           smoothing=0.6)
    assert figure["config"]["legend"]["columns"] == columns

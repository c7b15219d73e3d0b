"""The TD-EMA page's figures: the EMA against each batch with the raw curve faint behind, the
clipped-fraction chart not flattened by the warmup, and the weight histogram naming its basis
and its bounds in the legend (Vega-Lite specs)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.td_figures import clip_figure, stat_figure, weight_histogram_figure
from app.td_view import preview_weights, td_series

# The warmup's first batch is normalised with the prior: 70% of it clips, later ones ~3%.
CLIPPED = [0.70, 0.30, 0.05, 0.03, 0.02, 0.03, 0.04, 0.03]


def records() -> list[dict[str, Any]]:
    return [
        {"step": 4 * (k + 1), "kind": "train", "td/ema_mean": 0.0, "td/ema_std": 1.0,
         "td/batch_mean": 0.1 * k, "td/batch_std": 1.0, "td/clip_min_fraction": value,
         "td/clip_max_fraction": value / 2,
         "td/norm_quantiles": np.linspace(-2.4, 1.5, 201).tolist()}
        for k, value in enumerate(CLIPPED)
    ]


def figure(warmup_step: int | None) -> Any:
    series = td_series(records())
    rows = np.arange(len(series))
    preview = preview_weights(series, rows, beta=1.0, min_weight=0.1, max_weight=5.0)
    return clip_figure(preview, series, logged=True, warmup_step=warmup_step)


def line_layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [layer for layer in spec["layer"] if layer["mark"]["type"] == "line"]


def drawn(layer: dict[str, Any]) -> list[str]:
    """The curves a line layer draws (its filter), in legend order."""
    return list(layer["transform"][0]["filter"]["oneOf"])


def legend(spec: dict[str, Any]) -> list[str]:
    return list(line_layers(spec)[0]["encoding"]["color"]["scale"]["domain"])


def test_after_a_warmup_the_y_axis_fits_the_later_steps_and_names_the_peak() -> None:
    chart = figure(warmup_step=8)  # the warmup is the first two updates
    (top,) = {tuple(layer["encoding"]["y"]["scale"]["domain"]) for layer in line_layers(chart)}
    assert top[0] == 0.0 and 0.05 <= top[1] < 0.1
    assert "peaks at 70%, off the axis" in chart["title"]["subtitle"]
    # The warmup is shaded behind the curves.
    assert chart["layer"][0]["mark"]["type"] == "rect"


@pytest.mark.parametrize("warmup_step", [None, 1000])
def test_without_a_warmup_after_which_to_fit_the_axis_every_value_is_in_range(
    warmup_step: int | None,
) -> None:
    chart = figure(warmup_step=warmup_step)
    for layer in line_layers(chart):
        scale = layer["encoding"]["y"]["scale"]
        assert "domain" not in scale and scale["zero"] is True
    assert not [layer for layer in chart["layer"] if layer["mark"]["type"] == "rect"]


def test_the_logged_fractions_lie_wide_and_pale_behind_the_preview() -> None:
    chart = figure(warmup_step=None)
    back, front = line_layers(chart)
    assert drawn(back) == ["logged: clipped at min", "logged: clipped at max"]
    assert drawn(front) == ["preview: clipped at min", "preview: clipped at max"]
    widths = dict(zip(legend(chart), back["encoding"]["strokeWidth"]["scale"]["range"],
                      strict=True))
    assert widths["logged: clipped at min"] > widths["preview: clipped at min"]
    assert chart["layer"][-1]["encoding"]["y"]["axis"]["format"] == ".1%"


@pytest.mark.parametrize(("empirical", "words"), [
    (True, "the logged TD error distribution"),
    (False, "Normal(batch mean, batch std): no distribution logged"),
])
def test_the_histogram_names_its_basis(empirical: bool, words: str) -> None:
    chart = weight_histogram_figure(np.array([0.1, 1.0, 5.0]), min_weight=0.1, max_weight=5.0,
                                    step=4, empirical=empirical)
    assert chart["title"]["text"] == "Previewed TD weights at step 4"
    assert words in chart["title"]["subtitle"]


@pytest.mark.parametrize("weights", [1, 2, 500])
def test_the_histogram_shares_sum_to_one_and_names_its_bounds_in_the_legend(
    weights: int,
) -> None:
    chart = weight_histogram_figure(np.linspace(0.1, 5.0, weights), min_weight=0.1,
                                    max_weight=5.0, step=4, empirical=True, bins=10)
    assert chart["datasets"]["bins"]["share"].sum() == pytest.approx(1.0)
    rules = [layer for layer in chart["layer"] if layer["mark"]["type"] == "rule"]
    assert [rule["data"]["values"][0]["label"] for rule in rules] == [
        "min weight 0.1", "max weight 5"]
    assert rules[0]["encoding"]["color"]["scale"]["domain"] == [
        "TD errors", "min weight 0.1", "max weight 5"]


def test_a_histogram_without_finite_weights_still_draws_its_bounds_on_a_titled_axis() -> None:
    chart = weight_histogram_figure(np.array([np.nan]), min_weight=0.1, max_weight=5.0, step=4,
                                    empirical=False)
    assert "datasets" not in chart
    assert {layer["mark"]["type"] for layer in chart["layer"]} == {"rule"}
    assert chart["layer"][0]["encoding"]["x"]["title"] == "weight (after clipping)"


@pytest.mark.parametrize("stat", ["mean", "std"])
def test_the_stat_figure_draws_the_raw_batch_curve_faint_behind_the_smoothed_one(
    stat: str,
) -> None:
    series = td_series(records())
    chart = stat_figure(series, stat, smoothing=0.5, warmup_step=8, warmup=2)
    back, front = line_layers(chart)
    assert drawn(back) == [f"batch {stat} (raw)"]
    assert drawn(front) == [f"batch {stat} (smoothed 0.50)", f"EMA {stat}"]
    names = legend(chart)
    opacity = dict(zip(names, back["encoding"]["opacity"]["scale"]["range"], strict=True))
    assert opacity[f"batch {stat} (raw)"] < opacity[f"batch {stat} (smoothed 0.50)"] == 1.0
    assert chart["title"] == {"text": f"TD error {stat}: EMA vs each batch",
                              "subtitle": "8 points"}
    assert len(chart["datasets"]["curves"]) == 3 * len(series)


def test_the_warmups_end_is_a_line_named_in_the_legend_not_text_on_the_plot() -> None:
    chart = stat_figure(td_series(records()), "mean", smoothing=0.0, warmup_step=8, warmup=2)
    assert legend(chart) == ["batch mean", "EMA mean", "warmup ends (2 updates)"]
    rule = next(layer for layer in chart["layer"] if layer["mark"]["type"] == "rule")
    assert rule["data"]["values"] == [{"x": 8.0, "label": "warmup ends (2 updates)"}]
    assert not [layer for layer in chart["layer"] if layer["mark"]["type"] == "text"]


def test_without_smoothing_or_warmup_the_stat_figure_draws_two_curves_only() -> None:
    chart = stat_figure(td_series(records()), "std", smoothing=0.0, warmup_step=None,
                        warmup=None)
    (front,) = line_layers(chart)
    assert drawn(front) == ["batch std", "EMA std"]
    assert {layer["mark"]["type"] for layer in chart["layer"]} == {"line", "point"}


@pytest.mark.parametrize("points", [10, 11, 100])
def test_a_long_stat_series_is_reduced_and_the_note_says_so(points: int) -> None:
    many = [dict(records()[0], step=k + 1, **{"td/batch_mean": float(np.sin(k))})
            for k in range(points)]
    chart = stat_figure(td_series(many), "mean", smoothing=0.0, warmup_step=None, warmup=None,
                        max_points=10)
    assert (f"{points:,} -> " in chart["title"]["subtitle"]) == (points > 10)
    assert chart["datasets"]["curves"].groupby("label").size().max() <= 10


def test_the_stat_figure_refuses_an_unknown_statistic() -> None:
    with pytest.raises(ValueError, match="stat: expected 'mean' or 'std'"):
        stat_figure(td_series(records()), "median", smoothing=0.0, warmup_step=None,
                    warmup=None)

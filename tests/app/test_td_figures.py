"""The TD-EMA page's figures: the clipped-fraction chart is not flattened by the warmup, and
the weight histogram says which distribution it was drawn from."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.td_figures import clip_figure, weight_histogram_figure
from app.td_view import preview_weights, td_series

# The warmup's first batch is normalised with the prior: 70% of it clips, later ones ~3%.
CLIPPED = [0.70, 0.30, 0.05, 0.03, 0.02, 0.03, 0.04, 0.03]


def records() -> list[dict[str, Any]]:
    return [
        {"step": 4 * (k + 1), "kind": "train", "td/ema_mean": 0.0, "td/ema_std": 1.0,
         "td/batch_mean": 0.0, "td/batch_std": 1.0, "td/clip_min_fraction": value,
         "td/clip_max_fraction": value / 2,
         "td/norm_quantiles": np.linspace(-2.4, 1.5, 201).tolist()}
        for k, value in enumerate(CLIPPED)
    ]


def figure(warmup_step: int | None) -> Any:
    series = td_series(records())
    rows = np.arange(len(series))
    preview = preview_weights(series, rows, beta=1.0, min_weight=0.1, max_weight=5.0)
    return clip_figure(preview, series, logged=True, warmup_step=warmup_step)


def test_after_a_warmup_the_y_axis_fits_the_later_steps_and_names_the_peak() -> None:
    chart = figure(warmup_step=8)  # the warmup is the first two updates
    top = chart.layout.yaxis.range[1]
    assert 0.05 <= top < 0.1
    assert "peaks at 70%, off the axis" in chart.layout.title.text


@pytest.mark.parametrize("warmup_step", [None, 1000])
def test_without_a_warmup_after_which_to_fit_the_axis_every_value_is_in_range(
    warmup_step: int | None,
) -> None:
    chart = figure(warmup_step=warmup_step)
    assert chart.layout.yaxis.range is None
    assert chart.layout.yaxis.rangemode == "tozero"


@pytest.mark.parametrize(("empirical", "words"), [
    (True, "the logged TD error distribution"),
    (False, "Normal(batch mean, batch std): no distribution logged"),
])
def test_the_histogram_names_its_basis(empirical: bool, words: str) -> None:
    chart = weight_histogram_figure(np.array([0.1, 1.0, 5.0]), min_weight=0.1, max_weight=5.0,
                                    step=4, empirical=empirical)
    assert words in chart.layout.title.text

"""The Live page's figures (Vega-Lite specs): what they draw, their notes, and the spec that
stays the same while the run grows, so the page swaps their data in place."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from app.live import Series, occupancy
from app.live_figures import eval_figure, occupancy_figure, td_figure
from app.ring import occupancy as ring_occupancy
from app.ring_figures import occupancy_figure as fifo_occupancy_figure


def buffer_record(step: int, length: int, capacity: int) -> dict[str, object]:
    return {"step": step, "time": 0.0, "kind": "buffer",
            "train": {"len": length, "capacity": capacity}}


def note(spec: dict[str, Any]) -> str:
    """The note a Live chart reads from its ``note`` dataset."""
    return str(spec["datasets"]["note"]["note"][0])


def without_data(spec: dict[str, Any]) -> str:
    """The spec as Streamlit compares it between reruns: its datasets travel apart."""
    return json.dumps({k: v for k, v in spec.items() if k != "datasets"}, sort_keys=True)


def td(points: int, *, band: bool = True, batch: bool = True) -> dict[str, Series]:
    x = np.arange(points, dtype=np.float64)
    fields = {"td/ema_mean": np.zeros(points)}
    if band:
        fields["td/ema_std"] = np.ones(points)
    if batch:
        fields["td/batch_mean"] = np.ones(points)
    return {name: Series(name, x, y) for name, y in fields.items()}


@pytest.mark.parametrize("points", [1, 2, 3, 60_001])
def test_the_occupancy_figure_says_how_many_points_it_plots(points: int) -> None:
    x = np.arange(points, dtype=np.float64)
    spec = occupancy_figure([Series("train", x, np.full(points, 50.0))])
    assert spec["title"]["text"] == "Buffer occupancy"
    assert (f"{points:,} -> " in note(spec)) == (points > 50_000)
    assert len(spec["datasets"]["occupancy"]) <= 50_000


@pytest.mark.parametrize("records", [1, 2, 5])
def test_the_occupancy_figure_names_its_x_axis_as_the_fifo_page_does(records: int) -> None:
    # The same records' step, charted on two pages: one name for it (the log's training step).
    rows = [buffer_record(s, 1, 4) for s in range(1, records + 1)]
    live = occupancy_figure(occupancy(rows))
    fifo = fifo_occupancy_figure(ring_occupancy(rows, "train"))
    fill_line = next(layer for group in fifo["layer"] for layer in group["layer"]
                     if layer["mark"]["type"] == "line")
    assert live["layer"][0]["encoding"]["x"]["axis"]["title"] == (
        fill_line["encoding"]["x"]["axis"]["title"])


def test_the_occupancy_figure_draws_a_step_line_per_buffer_from_0_to_105_percent() -> None:
    x = np.arange(3, dtype=np.float64)
    spec = occupancy_figure([Series("train", x, x * 10), Series("z", x, x * 20)])
    line = spec["layer"][0]
    assert line["mark"]["interpolate"] == "step-after"
    assert line["encoding"]["color"]["scale"]["domain"] == ["train", "z"]
    assert line["encoding"]["y"]["scale"]["domain"] == [0, 105]
    assert spec["datasets"]["occupancy"]["label"].tolist() == ["train"] * 3 + ["z"] * 3


def test_the_occupancy_figure_refuses_no_series() -> None:
    with pytest.raises(ValueError, match="series"):
        occupancy_figure([])


def test_the_td_figure_draws_the_band_and_the_batch_mean_when_given() -> None:
    spec = td_figure(td(3))
    names = spec["layer"][0]["encoding"]["color"]["scale"]["domain"]
    assert names == ["batch mean", "EMA mean \u00b1 std", "EMA mean"]
    # The batch mean faint first, then the band, the EMA mean on top.
    assert [layer["mark"]["type"] for layer in spec["layer"][:3]] == ["line", "area", "line"]
    band = spec["datasets"]["band"]
    np.testing.assert_array_equal(band["high"], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(band["low"], [-1.0, -1.0, -1.0])


def test_the_td_figure_without_std_or_batch_draws_the_ema_mean_alone() -> None:
    spec = td_figure(td(3, band=False, batch=False))
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["EMA mean"]
    assert "band" not in spec["datasets"]


def test_the_td_figure_refuses_series_without_the_ema_mean() -> None:
    with pytest.raises(ValueError, match="ema_mean"):
        td_figure({})


@pytest.mark.parametrize("build", [
    lambda n: occupancy_figure([Series("train", np.arange(n, dtype=np.float64), np.ones(n))]),
    lambda n: td_figure(td(n)),
])
def test_a_growing_run_changes_the_live_charts_data_and_note_but_not_their_spec(
    build: Any,
) -> None:
    before, after = build(10), build(12)
    assert without_data(before) == without_data(after)
    assert note(before) == "10 points" and note(after) == "12 points"


@pytest.mark.parametrize("motions", [1, 2, 5])
def test_the_eval_figure_has_one_bar_per_motion_and_names_the_round(motions: int) -> None:
    record = {"step": 300, "round": 2, "kind": "eval", "motion_ids": list(range(motions)),
              "emd": [float(m) for m in range(motions)], "probability": [1 / motions] * motions}
    spec = eval_figure(record)
    np.testing.assert_array_equal(spec["datasets"]["eval"]["emd"], list(range(motions)))
    assert spec["title"]["text"].startswith("Evaluation round 2 at step 300")
    tips = [tip["title"] for tip in spec["layer"][0]["encoding"]["tooltip"]]
    assert tips == ["motion", "EMD", "sampling probability now"]


def test_the_eval_figure_keeps_the_records_motion_order() -> None:
    spec = eval_figure({"motion_ids": [10, 2, 1], "emd": [1.0, 2.0, 3.0]})
    assert spec["datasets"]["eval"]["motion"].tolist() == ["10", "2", "1"]
    assert spec["layer"][0]["encoding"]["x"]["sort"] is None


def test_the_eval_figure_names_the_mean_in_the_legend_not_over_the_bars() -> None:
    record = {"step": 300, "round": 2, "motion_ids": [0, 1, 2], "emd": [1.0, 2.0, 0.978]}
    spec = eval_figure(record)
    marks = [layer["mark"] if isinstance(layer["mark"], str) else layer["mark"]["type"]
             for layer in spec["layer"]]
    assert marks == ["bar", "rule"]  # no text written on the plot
    rule = spec["layer"][1]
    assert rule["data"]["values"] == [{"y": pytest.approx(1.326, abs=1e-3),
                                       "label": "mean 1.326"}]
    assert rule["encoding"]["color"]["scale"]["domain"] == ["EMD", "mean 1.326"]


def test_an_eval_round_of_null_emds_draws_no_mean() -> None:
    spec = eval_figure({"motion_ids": [0, 1], "emd": [None, None]})
    assert [layer["mark"] for layer in spec["layer"]] == ["bar"]


def test_the_eval_figure_refuses_a_record_without_matching_lists() -> None:
    with pytest.raises(ValueError, match="motion_ids"):
        eval_figure({"motion_ids": [0, 1], "emd": [1.0]})

"""Figures of the Z-buffer page (app/z_figures.py): what each Vega-Lite spec shows, counts and
component numbers ticked on whole numbers on small buffers."""

from __future__ import annotations

import numpy as np
import pytest

from app.z_figures import (
    MAX_COMPONENTS,
    histogram_figure,
    projection_figure,
    variance_figure,
)


def _projection(count: int, *, sources: np.ndarray | None = None) -> dict[str, object]:
    coords = np.random.default_rng(0).normal(size=(count, 2))
    return projection_figure(coords, np.array([0.6, 0.3, 0.1]), slots=np.arange(count),
                             ages=np.arange(count)[::-1], sources=sources)


@pytest.mark.parametrize("vectors", [1, 3, 7])
def test_a_histogram_of_a_few_vectors_ticks_its_counts_on_whole_numbers(vectors: int) -> None:
    spec = histogram_figure(np.arange(vectors, dtype=float), title="t", x="x")
    axis = spec["layer"][0]["encoding"]["y"]["axis"]
    assert axis["format"] == ",d" and axis["tickMinStep"] == 1


def test_a_histogram_counts_every_finite_value_and_notes_the_undefined_ones() -> None:
    spec = histogram_figure(np.array([1.0, 2.0, 2.5, np.nan]), title="t", x="x")
    assert spec["datasets"]["bins"]["count"].sum() == 3
    assert spec["title"]["subtitle"] == "3 vectors, 1 undefined"


def test_a_histogram_by_group_draws_one_colour_per_group_over_shared_bins() -> None:
    groups = np.array(["expert", "random", "expert", "random", "expert"])
    spec = histogram_figure(np.arange(5, dtype=float), title="t", x="x", groups=groups)
    bins = spec["datasets"]["bins"]
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == ["expert", "random"]
    assert bins.groupby("group")["count"].sum().to_dict() == {"expert": 3, "random": 2}
    lefts = bins.groupby("group")["left"].apply(list)
    assert lefts["expert"] == lefts["random"]


def test_a_single_population_has_no_legend() -> None:
    spec = histogram_figure(np.arange(5, dtype=float), title="t", x="x")
    assert spec["layer"][0]["encoding"]["color"]["legend"] is None


def test_two_components_tick_on_whole_component_numbers() -> None:
    spec = variance_figure(np.array([0.7, 0.3]))
    axis = spec["layer"][0]["encoding"]["x"]["axis"]
    assert axis["format"] == ",d" and axis["tickMinStep"] == 1
    assert spec["datasets"]["variance"]["cumulative"].tolist() == pytest.approx([0.7, 1.0])


def test_the_variance_chart_shows_the_first_components_and_says_how_many_there_are() -> None:
    spec = variance_figure(np.full(MAX_COMPONENTS + 5, 1 / (MAX_COMPONENTS + 5)))
    assert len(spec["datasets"]["variance"]) == MAX_COMPONENTS
    assert spec["title"]["subtitle"] == f"first {MAX_COMPONENTS} of {MAX_COMPONENTS + 5} components"


def test_the_projection_colours_by_age_on_a_reversed_viridis_scale() -> None:
    spec = _projection(50)
    colour = spec["layer"][0]["encoding"]["color"]
    assert colour["field"] == "age" and colour["type"] == "quantitative"
    assert colour["scale"] == {"scheme": "viridis", "reverse": True}
    assert colour["legend"]["title"] == "age (writes)"


def test_the_projection_colours_by_source_in_order_of_first_appearance() -> None:
    spec = _projection(4, sources=np.array(["random", "expert", "random", "expert"]))
    colour = spec["layer"][0]["encoding"]["color"]
    assert colour["field"] == "source"
    assert colour["scale"]["domain"] == ["random", "expert"]
    assert [t["field"] for t in spec["layer"][0]["encoding"]["tooltip"]] == [
        "slot", "age", "source"]


@pytest.mark.parametrize("count", [1, 5_001, 20_000])
def test_the_projection_sends_every_point_and_names_the_axes_by_their_variance(
    count: int,
) -> None:
    spec = _projection(count)
    assert len(spec["datasets"]["z"]) == count
    assert spec["title"]["subtitle"] == f"{count:,} vectors"
    assert spec["layer"][0]["encoding"]["x"]["axis"]["title"] == "PC1 (60.0% of variance)"
    assert spec["layer"][0]["params"][0]["bind"] == "scales"  # wheel zoom, drag pan

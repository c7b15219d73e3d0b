"""The shared Vega-Lite helpers (app/vega.py): what every chart gets, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.vega import (
    band,
    bin_bars,
    chart,
    colours,
    frame,
    hover_points,
    layer,
    legend_columns,
    log_position,
    position,
    tooltip,
    vertical_rule,
    zoom,
)


def _bars() -> dict[str, object]:
    return layer("bar", data="d", encoding={"x": position("x", title="x")})


def test_a_chart_titles_itself_with_the_note_under_the_title() -> None:
    spec = chart([_bars()], title="T", note="1,000 -> 10 points", datasets={"d": frame(x=[1])})
    assert spec["title"] == {"text": "T", "subtitle": "1,000 -> 10 points"}
    assert spec["config"]["legend"]["orient"] == "bottom"


def test_a_chart_without_a_note_has_no_subtitle() -> None:
    spec = chart([_bars()], title="T", datasets={"d": frame(x=[1])})
    assert spec["title"] == {"text": "T"}


def test_a_chart_needs_a_layer() -> None:
    with pytest.raises(ValueError, match="layers: expected at least one layer"):
        chart([], title="T")


def test_a_layer_naming_a_missing_dataset_is_refused() -> None:
    with pytest.raises(ValueError, match=r"layers\[0\]: expected a dataset in \['e'\], got 'd'"):
        chart([_bars()], title="T", datasets={"e": frame(x=[1])})


def test_inline_rows_travel_in_the_spec_and_named_data_by_name() -> None:
    assert layer("rule", data=[{"x": 1}], encoding={})["data"] == {"values": [{"x": 1}]}
    assert layer("rule", data="d", encoding={})["data"] == {"name": "d"}


def test_a_frame_keeps_nan_for_the_browser_to_skip() -> None:
    data = frame(x=np.arange(3), y=np.array([1.0, np.nan, 2.0]))
    assert list(data.columns) == ["x", "y"] and data["y"].isna().tolist() == [False, True, False]


def test_a_count_axis_ticks_whole_numbers_with_separators() -> None:
    axis = position("slot", title="slot", whole=True)["axis"]
    assert axis == {"title": "slot", "format": ",d", "tickMinStep": 1}


def test_a_given_domain_is_not_rounded_out_or_extended_to_zero() -> None:
    scale = position("x", title="x", scale={"domain": [5, 9]})["scale"]
    assert scale == {"nice": False, "zero": False, "domain": [5, 9]}


def test_a_position_without_a_title_has_no_axis() -> None:
    assert position("y", title=None)["axis"] is None


def test_colours_pair_the_domain_with_the_palette() -> None:
    channel = colours(["a", "b"], ["#000", "#fff"], field="series")
    assert channel["scale"] == {"domain": ["a", "b"], "range": ["#000", "#fff"]}
    assert channel["field"] == "series"
    assert colours(["a"], ["#000"], datum="a")["datum"] == "a"


@pytest.mark.parametrize(("palette", "field", "datum", "match"), [
    (["#000"], "s", None, "palette: expected 2 colours, got 1"),
    (["#000", "#fff"], None, None, "field, datum: expected exactly one"),
    (["#000", "#fff"], "s", "a", "field, datum: expected exactly one"),
])
def test_colours_refuse_a_mismatched_palette_or_source(
    palette: list[str], field: str | None, datum: str | None, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        colours(["a", "b"], palette, field=field, datum=datum)


def test_a_rule_named_in_the_legend_uses_the_charts_colours() -> None:
    rule = vertical_rule(2.5, colour="#f00", label="cursor", legend=(["age", "cursor"],
                                                                       ["#00f", "#f00"]))
    assert rule["data"]["values"] == [{"x": 2.5, "label": "cursor"}]
    assert rule["encoding"]["color"]["scale"]["domain"] == ["age", "cursor"]
    assert rule["mark"]["strokeDash"] == [6, 4]


def test_an_unnamed_rule_has_no_legend_and_no_tooltip() -> None:
    rule = vertical_rule(1.0, colour="#f00", dashed=False)
    assert "color" not in rule["encoding"] and rule["mark"]["tooltip"] is None
    assert "strokeDash" not in rule["mark"]


def test_a_rule_label_outside_the_legend_is_refused() -> None:
    with pytest.raises(ValueError, match="label: expected one of"):
        vertical_rule(1.0, colour="#f00", label="other", legend=(["age"], ["#00f"]))


def test_tooltips_format_numbers_and_leave_text_alone() -> None:
    assert tooltip(("slot", "slot", ",d"), ("name", "state", None)) == [
        {"field": "slot", "title": "slot", "type": "quantitative", "format": ",d"},
        {"field": "name", "title": "state", "type": "nominal"}]


def test_zoom_binds_an_interval_to_the_scales() -> None:
    assert zoom("x") == {"name": "zoom", "select": {"type": "interval", "encodings": ["x"]},
                         "bind": "scales"}


def test_hover_points_are_invisible_and_carry_the_tooltip() -> None:
    points = hover_points("d", x=position("x", title="x"), y=position("y", title="y"),
                          fields=[("y", "y", ".1f")])
    assert points["mark"]["opacity"] == 0
    assert points["encoding"]["tooltip"] == [
        {"field": "y", "title": "y", "type": "quantitative", "format": ".1f"}]


def test_a_log_position_ticks_its_domain_with_values_written_in_full() -> None:
    channel = log_position("p", title="priority", low=0.5, high=50.0)
    assert channel["scale"] == {"type": "log", "domain": [0.5, 50.0], "nice": False}
    assert channel["axis"]["values"] == pytest.approx([0.5, 1, 2, 5, 10, 20, 50])
    assert channel["axis"]["format"] == "~g"


def test_a_log_position_of_a_count_prints_thousands_separators() -> None:
    assert log_position("n", title="rows", low=1.0, high=1e6, whole=True)["axis"]["format"] == ",d"


@pytest.mark.parametrize(("low", "high"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0), (1.0, math.inf),
                                           (math.nan, 1.0)])
def test_a_log_position_refuses_a_domain_a_log_axis_cannot_draw(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="low, high"):
        log_position("p", title="priority", low=low, high=high)


def test_bin_bars_span_each_bin_from_zero_with_a_tooltip() -> None:
    bars = bin_bars("bins", x=position("left", title="x"), right="right",
                    y=position("count", title="n"), colour=colours(["a"], ["#000"], datum="a"),
                    fields=[("count", "n", ",d")], opacity=0.5)
    assert bars["mark"] == {"type": "bar", "opacity": 0.5}
    assert bars["encoding"]["x2"] == {"field": "right"}
    assert bars["encoding"]["y2"] == {"datum": 0}  # a bar, not a bin-wide tick at its height
    assert bars["encoding"]["tooltip"][0]["field"] == "count"


def test_a_band_fills_between_two_fields_without_a_tooltip_of_its_own() -> None:
    area = band("d", x=position("step", title="step"), low=position("lo", title="y"),
                high="hi", colour=colours(["range"], ["rgba(0, 0, 0, 0.2)"], datum="range"))
    assert area["mark"] == {"type": "area", "tooltip": None}
    assert area["encoding"]["y"]["field"] == "lo" and area["encoding"]["y2"] == {"field": "hi"}


def test_legend_columns_change_the_charts_legend_alone() -> None:
    spec = chart([_bars()], title="T", datasets={"d": frame(x=[1])})
    narrow = legend_columns(spec, 2)
    assert narrow["config"]["legend"]["columns"] == 2
    assert narrow["config"]["legend"]["orient"] == "bottom"
    assert spec["config"]["legend"]["columns"] == 4  # the shared look is left as it was


def test_legend_columns_refuse_fewer_than_one() -> None:
    with pytest.raises(ValueError, match="columns: expected >= 1, got 0"):
        legend_columns(chart([_bars()], title="T", datasets={"d": frame(x=[1])}), 0)

"""The shared Vega-Lite helpers (app/vega.py): what every chart gets, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.vega import (
    bar_spans,
    chart,
    colours,
    frame,
    hover_points,
    layer,
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


def test_a_horizontal_rule_named_in_the_legend_shows_its_value_on_hover() -> None:
    from app.vega import horizontal_rule

    rule = horizontal_rule(0.25, colour="#888", label="uniform",
                           legend=(["p", "uniform"], ["#00f", "#888"]))
    assert rule["data"]["values"] == [{"y": 0.25, "label": "uniform"}]
    assert rule["encoding"]["color"]["scale"]["domain"] == ["p", "uniform"]
    assert [t["field"] for t in rule["encoding"]["tooltip"]] == ["label", "y"]


def test_an_unnamed_horizontal_rule_has_no_legend_and_no_tooltip() -> None:
    from app.vega import horizontal_rule

    rule = horizontal_rule(1.0, colour="#f00", dashed=False)
    assert "color" not in rule["encoding"] and rule["mark"]["tooltip"] is None
    assert "strokeDash" not in rule["mark"]


def test_a_horizontal_rule_label_outside_the_legend_is_refused() -> None:
    from app.vega import horizontal_rule

    with pytest.raises(ValueError, match="label: expected one of"):
        horizontal_rule(1.0, colour="#f00", label="other", legend=(["p"], ["#00f"]))


def test_a_category_position_keeps_labels_level_and_sorts_by_the_field_named() -> None:
    from app.vega import category_position

    channel = category_position("motion", title="motion id", order="rank")
    assert channel["type"] == "ordinal"
    assert channel["sort"] == {"field": "rank", "op": "min"}
    assert channel["axis"]["labelAngle"] == 0
    assert "sort" not in category_position("motion", title="motion id")


def test_bar_spans_keep_the_bins_middle_and_leave_a_gap_either_side() -> None:
    left, right = bar_spans(np.array([0.0, 10.0]), np.array([10.0, 30.0]), fill=0.9)
    assert left.tolist() == pytest.approx([0.5, 11.0])
    assert right.tolist() == pytest.approx([9.5, 29.0])


@pytest.mark.parametrize("fill", [0.0, -0.5, 1.5])
def test_bar_spans_refuse_a_fill_that_is_not_a_fraction(fill: float) -> None:
    with pytest.raises(ValueError, match="fill: expected a fraction"):
        bar_spans(np.zeros(1), np.ones(1), fill=fill)


def test_bar_spans_refuse_ends_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="right: expected one per left"):
        bar_spans(np.zeros(2), np.ones(3))

"""The shared Vega-Lite helpers (app/vega.py): what every chart gets, and the refusals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from app.vega import (
    band,
    bar_spans,
    bin_bars,
    category_position,
    chart,
    colours,
    frame,
    horizontal_rule,
    hover_points,
    hover_rows,
    layer,
    legend_columns,
    lines,
    log_position,
    long_frame,
    note_as_data,
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
    rule = horizontal_rule(0.25, colour="#888", label="uniform",
                           legend=(["p", "uniform"], ["#00f", "#888"]))
    assert rule["data"]["values"] == [{"y": 0.25, "label": "uniform"}]
    assert rule["encoding"]["color"]["scale"]["domain"] == ["p", "uniform"]
    assert [t["field"] for t in rule["encoding"]["tooltip"]] == ["label", "y"]


def test_an_unnamed_horizontal_rule_has_no_legend_and_no_tooltip() -> None:
    rule = horizontal_rule(1.0, colour="#f00", dashed=False)
    assert "color" not in rule["encoding"] and rule["mark"]["tooltip"] is None
    assert "strokeDash" not in rule["mark"]


def test_a_horizontal_rule_label_outside_the_legend_is_refused() -> None:
    with pytest.raises(ValueError, match="label: expected one of"):
        horizontal_rule(1.0, colour="#f00", label="other", legend=(["p"], ["#00f"]))


def test_a_category_position_keeps_labels_level_and_sorts_by_the_field_named() -> None:
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


def _lines(**options: Any) -> dict[str, Any]:
    return lines("d", x=position("x", title="x"), y=position("y", title="y"),
                 names=["raw", "smoothed"], palette=["#00f", "#00f"], **options)


def test_lines_give_each_name_its_colour_opacity_and_width_in_one_legend() -> None:
    encoding = _lines(opacity=[0.3, 1.0], width=[1.0, 2.0])["encoding"]
    for channel, values in (("color", ["#00f", "#00f"]), ("opacity", [0.3, 1.0]),
                            ("strokeWidth", [1.0, 2.0])):
        # One field and one domain on every channel: Vega-Lite merges them into one legend.
        assert encoding[channel]["field"] == "label"
        assert encoding[channel]["scale"]["domain"] == ["raw", "smoothed"]
        assert encoding[channel]["scale"]["range"] == values
    # The i-th name takes the i-th value, not a point spread between the first two.
    assert encoding["opacity"]["scale"]["type"] == "ordinal"


def test_lines_default_to_opaque_two_pixel_lines_drawing_every_name() -> None:
    spec = _lines()
    assert spec["encoding"]["opacity"]["scale"]["range"] == [1.0, 1.0]
    assert spec["encoding"]["strokeWidth"]["scale"]["range"] == [2.0, 2.0]
    assert "transform" not in spec and spec["mark"]["clip"] is True


def test_lines_drawing_some_names_filter_the_others_out() -> None:
    assert _lines(draw=["raw"])["transform"] == [{"filter": {"field": "label",
                                                             "oneOf": ["raw"]}}]


@pytest.mark.parametrize(("options", "match"), [
    ({"opacity": [1.0]}, "opacity: expected 2 values, got 1"),
    ({"width": [1.0, 2.0, 3.0]}, "width: expected 2 values, got 3"),
    ({"draw": ["other"]}, r"draw: expected names among \['raw', 'smoothed'\], got \['other'\]"),
])
def test_lines_refuse_looks_that_do_not_match_the_names(options: dict[str, object],
                                                        match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _lines(**options)


@pytest.mark.parametrize("lengths", [(0, 3), (1, 1), (2, 5)])
def test_a_long_frame_holds_every_curves_points_in_order(lengths: tuple[int, int]) -> None:
    curves = [(name, np.arange(n, dtype=np.float64), np.full(n, float(k)))
              for k, (name, n) in enumerate(zip(("a", "b"), lengths, strict=True))]
    data = long_frame(curves, x="step", y="value")
    assert list(data.columns) == ["label", "step", "value"]
    assert data["label"].tolist() == ["a"] * lengths[0] + ["b"] * lengths[1]
    assert data["value"].tolist() == [0.0] * lengths[0] + [1.0] * lengths[1]


def test_a_long_frame_of_no_curves_is_empty() -> None:
    assert len(long_frame([], x="x", y="y")) == 0


def test_a_chart_is_drawn_on_a_canvas_without_a_description_per_mark() -> None:
    spec = chart([_bars()], title="T", datasets={"d": frame(x=[1])})
    assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"
    assert spec["config"]["aria"] is False


@pytest.mark.parametrize("lengths", [(1, 2), (2, 7), (7, 8), (3, 1000)])
def test_hover_rows_keep_at_most_the_limit_per_curve_with_its_ends_in_order(
    lengths: tuple[int, int]
) -> None:
    most = 7
    curves = [(name, np.arange(n, dtype=np.float64) * 10, np.full(n, float(k)))
              for k, (name, n) in enumerate(zip(("a", "b"), lengths, strict=True))]
    kept = hover_rows(long_frame(curves, x="step", y="value"), most=most)
    for (name, xs, _), n in zip(curves, lengths, strict=True):
        steps = kept.loc[kept["label"] == name, "step"].tolist()
        assert len(steps) == min(n, most)
        assert steps[0] == xs[0] and steps[-1] == xs[-1]
        assert steps == sorted(steps) and set(steps) <= set(xs)
    assert kept["label"].tolist() == sorted(kept["label"].tolist())


def test_hover_rows_spread_evenly_over_a_long_curve() -> None:
    data = long_frame([("a", np.arange(101.0), np.zeros(101))], x="step", y="value")
    assert hover_rows(data, most=5)["step"].tolist() == [0.0, 25.0, 50.0, 75.0, 100.0]


def test_hover_rows_of_no_rows_are_empty() -> None:
    assert len(hover_rows(long_frame([], x="x", y="y"))) == 0


@pytest.mark.parametrize(("options", "message"), [({"most": 1}, "most"),
                                                  ({"field": "curve"}, "field")])
def test_hover_rows_refuse_a_limit_below_two_or_a_missing_field(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        hover_rows(long_frame([("a", np.arange(3.0), np.zeros(3))], x="x", y="y"), **options)


def test_a_note_as_data_leaves_the_spec_the_same_whatever_the_note() -> None:
    specs = [note_as_data(chart([_bars()], title="T", note=f"{n} points",
                                datasets={"d": frame(x=[1])})) for n in (1, 2)]
    assert [s["datasets"]["note"]["note"].tolist() for s in specs] == [["1 points"],
                                                                        ["2 points"]]
    first, second = ({k: v for k, v in s.items() if k != "datasets"} for s in specs)
    assert first == second
    assert "data('note')" in first["title"]["subtitle"]["expr"]
    # The layer that makes Vega-Lite compile the dataset draws nothing.
    assert first["layer"][-1]["data"] == {"name": "note"}
    assert first["layer"][-1]["mark"]["opacity"] == 0


def test_a_note_as_data_needs_a_note_and_a_free_name() -> None:
    with pytest.raises(ValueError, match="spec: expected a chart with a note"):
        note_as_data(chart([_bars()], title="T", datasets={"d": frame(x=[1])}))
    with pytest.raises(ValueError, match="name: expected a dataset name the chart lacks"):
        note_as_data(chart([_bars()], title="T", note="n", datasets={"d": frame(x=[1])}),
                     name="d")


@pytest.mark.parametrize("columns", [1, 2, 3])
def test_legend_columns_set_the_columns_and_keep_the_rest_of_the_look(columns: int) -> None:
    spec = legend_columns(chart([_bars()], title="T", datasets={"d": frame(x=[1])}), columns)
    assert spec["config"]["legend"]["columns"] == columns
    assert spec["config"]["legend"]["orient"] == "bottom"


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

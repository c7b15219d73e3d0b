"""Figures of the FIFO page (app/ring_figures.py) on their figure data, without Streamlit:
the cursor's sides, the episode-end map's wording, slot age per slot, whole-number axes."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from app.ring import boundary_map, ring_state, slot_age_series
from app.ring_figures import AGE_BARS, boundary_map_figure, slot_age_figure


def _map(capacity: int, envs: int, cursor: int, *, full: bool) -> go.Figure:
    flags = np.zeros((capacity, envs), dtype=bool)
    return boundary_map_figure(boundary_map(flags), cursor, end_key="truncated", full=full)


def _labels(figure: go.Figure) -> dict[str, str]:
    """Each annotation's text -> the side of its x it extends to (``xanchor``)."""
    return {str(a.text): str(a.xanchor) for a in figure.layout.annotations}


def test_the_newest_rows_are_labelled_left_of_the_cursor_and_the_oldest_right() -> None:
    # A full ring of 10 with the cursor at 4: slot 3 is the newest row, slot 4 the oldest.
    labels = _labels(_map(10, 2, 4, full=True))
    newest = next(text for text in labels if "newest" in text)
    oldest = next(text for text in labels if "oldest" in text)
    assert labels[newest] == "right"  # the text ends at the line: it names the left side
    assert labels[oldest] == "left"


def test_a_ring_that_never_wrapped_has_no_oldest_side_right_of_the_cursor() -> None:
    labels = _labels(_map(10, 2, 6, full=False))
    assert [text for text in labels if "oldest" in text] == []
    assert any("newest" in text for text in labels)


@pytest.mark.parametrize("cursor", [0, 5, 9])
def test_the_cursor_labels_sit_above_the_map_at_the_cursor(cursor: int) -> None:
    figure = _map(10, 2, cursor, full=True)
    for annotation in figure.layout.annotations:
        assert annotation.x == cursor - 0.5
        assert annotation.y >= 1.0 and annotation.yanchor == "bottom"


def test_the_map_calls_its_flags_episode_ends_naming_the_flag() -> None:
    title = _map(10, 2, 4, full=True).layout.title.text
    assert title.startswith("Episode ends (the truncated flag)")


@pytest.mark.parametrize(("capacity", "kind"), [(1, go.Bar), (30, go.Bar), (AGE_BARS, go.Bar),
                                                (AGE_BARS + 1, go.Scatter)])
def test_slot_age_is_one_bar_or_marker_per_slot_never_a_line(
    capacity: int, kind: type
) -> None:
    state = ring_state(capacity, capacity, 0, True)
    figure = slot_age_figure(slot_age_series(state), capacity, 0)
    (trace,) = figure.data
    assert isinstance(trace, kind)
    assert "lines" not in str(getattr(trace, "mode", "") or "")
    assert len(trace.x) == capacity


@pytest.mark.parametrize(("capacity", "envs"), [(3, 1), (7, 4), (30, 4), (1000, 64)])
def test_the_map_ticks_envs_and_time_rows_on_whole_numbers(capacity: int, envs: int) -> None:
    layout = _map(capacity, envs, 0, full=True).layout
    for axis in (layout.xaxis, layout.yaxis):
        assert isinstance(axis.dtick, int) and axis.dtick >= 1
        assert axis.tickformat == ",d"


@pytest.mark.parametrize("capacity", [2, 7, 30, 1000])
def test_slot_age_ticks_slots_and_ages_on_whole_numbers(capacity: int) -> None:
    state = ring_state(capacity, capacity, 1, True)
    layout = slot_age_figure(slot_age_series(state), capacity, 1).layout
    for axis in (layout.xaxis, layout.yaxis):
        assert isinstance(axis.dtick, int) and axis.dtick >= 1


def test_the_slot_age_cursor_is_named_in_the_legend_not_written_on_the_bars() -> None:
    state = ring_state(8, 8, 3, True)
    figure = slot_age_figure(slot_age_series(state), 8, 3)
    assert not figure.layout.annotations
    (shape,) = figure.layout.shapes
    assert shape.showlegend and "cursor" in shape.name

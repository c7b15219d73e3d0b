"""The Sampling lab's landing map (app/sampling_figures.py) on its figure data, without
Streamlit: each drawn window covers exactly its ring slots, wrapped ones included."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from app.ring import boundary_map
from app.sampling_figures import RUN_EDGE, landing_map_figure


def window_bars(figure: go.Figure) -> list[tuple[int, list[int]]]:
    """Each red bar of the drawn-window trace as ``(env, slots it covers)``."""
    (trace,) = [t for t in figure.data if str(t.name).startswith("drawn window")]
    xs, ys = np.asarray(trace.x, dtype=np.float64), np.asarray(trace.y, dtype=np.float64)
    bars = []
    for a, b, y in zip(xs[0::3], xs[1::3], ys[0::3], strict=True):
        first, last = round(a + RUN_EDGE), round(b - RUN_EDGE)
        bars.append((int(y), list(range(first, last + 1))))
    return bars


def figure_for(capacity: int, envs: int, starts: list[int], on: list[int],
               seq_length: int) -> go.Figure:
    flags = np.zeros((capacity, envs), dtype=bool)
    return landing_map_figure(boundary_map(flags), 0, np.array(starts), np.array(on),
                              seq_length, end_key="done", full=True)


def test_a_window_of_4_from_slot_5_of_7_covers_slots_5_6_0_1() -> None:
    bars = window_bars(figure_for(7, 2, [5], [1], 4))
    assert bars == [(1, [5, 6]), (1, [0, 1])]
    assert sorted(slot for _, slots in bars for slot in slots) == [0, 1, 5, 6]


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_every_drawn_window_covers_seq_length_slots(capacity: int) -> None:
    starts = sorted({0, capacity // 2, capacity - 1})
    for seq_length in sorted({1, capacity}):
        bars = window_bars(figure_for(capacity, 1, starts, [0] * len(starts), seq_length))
        slots = [slot for _, run in bars for slot in run]
        expected = [(s + k) % capacity for s in starts for k in range(seq_length)]
        assert slots == expected


def test_the_title_counts_the_windows_that_wrap() -> None:
    figure = figure_for(7, 1, [5, 0], [0, 0], 4)
    assert "1 run past the last slot" in figure.layout.title.text


def test_envs_that_do_not_match_the_starts_are_refused() -> None:
    with pytest.raises(ValueError, match="envs"):
        figure_for(7, 1, [1, 2], [0], 2)

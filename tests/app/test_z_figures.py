"""Figures of the Z-buffer page (app/z_figures.py): counts and component numbers tick on whole
numbers on small buffers."""

from __future__ import annotations

import numpy as np
import pytest

from app.z_figures import histogram_figure, variance_figure


@pytest.mark.parametrize("vectors", [1, 3, 7])
def test_a_histogram_of_a_few_vectors_ticks_its_counts_on_whole_numbers(vectors: int) -> None:
    layout = histogram_figure(np.arange(vectors, dtype=float), title="t", x="x").layout
    assert layout.yaxis.dtick == 1 and layout.yaxis.tickformat == ",d"


def test_two_components_tick_on_whole_component_numbers() -> None:
    assert variance_figure(np.array([0.7, 0.3])).layout.xaxis.dtick == 1

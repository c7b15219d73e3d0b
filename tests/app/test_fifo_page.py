"""The FIFO occupancy page on the demo run, an empty buffer and a damaged one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import app.loaders
from bufcore import DictBuffer
from tests.app.conftest import Dashboard


def _metric(at: object, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)  # type: ignore[attr-defined]


def _titles(at: AppTest) -> list[str]:
    """The titles of the Vega-Lite charts drawn, in order; the page draws no Plotly chart."""
    assert not at.get("plotly_chart")
    return [json.loads(chart.proto.spec)["title"]["text"] for chart in at.get("vega_lite_chart")]


def test_the_fifo_page_shows_the_ring_of_the_online_buffer(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("fifo", demo_run, query={"buffer": "train"})
    assert not at.exception
    config_cursor = _metric(at, "Cursor (next write)")
    assert _metric(at, "Oldest slot") == config_cursor  # a full ring: the oldest is at the cursor
    assert _metric(at, "Wraps") not in ("", "0")
    titles = _titles(at)
    assert [t.split(":")[0].split(" (")[0] for t in titles] == [
        "Ring", "Slot age", "Episode ends", "Occupancy over training"]
    assert not at.error


def test_a_buffer_without_env_axis_shows_no_boundary_map(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("fifo", demo_run, query={"buffer": "z"})
    assert not at.exception
    assert not [t for t in _titles(at) if t.startswith("Episode ends")]
    assert len(_titles(at)) == 3


def test_an_empty_buffer_says_so(dashboard: Dashboard, tmp_path: Path) -> None:
    path = tmp_path / "empty"
    DictBuffer(capacity=7).save(path)
    at = dashboard("fifo", path)
    assert not at.exception
    assert any("empty" in info.value and str(path) in info.value for info in at.info)


def test_a_damaged_buffer_is_named_in_a_message(dashboard: Dashboard, run_copy: Path) -> None:
    (run_copy / "checkpoint/buffers/train/buffer.hdf5").write_bytes(b"not hdf5")
    at = dashboard("fifo", run_copy, query={"buffer": "train"})
    assert not at.exception
    assert any("train" in w.value for w in at.warning)


def test_a_torn_log_line_still_draws_occupancy(dashboard: Dashboard, run_copy: Path) -> None:
    with open(run_copy / "metrics.jsonl", "a") as log:
        log.write('{"step": 9999, "kind": "buff')
    at = dashboard("fifo", run_copy, query={"buffer": "train"})
    assert not at.exception
    assert len(_titles(at)) == 4




@pytest.mark.parametrize("page", ["fifo", "sampling_lab"])
def test_end_flags_that_cannot_be_read_are_an_error_naming_the_file_and_leaf(
    dashboard: Dashboard, demo_run: Path, monkeypatch: pytest.MonkeyPatch, page: str
) -> None:
    def unreadable(path: str, key_path: object, key: object) -> object:
        raise OSError("the disk said no")

    monkeypatch.setattr(app.loaders, "_cached_end_map", unreadable)
    at = dashboard(page, demo_run, query={"buffer": "train"})
    assert not at.exception
    assert any(
        "cannot read the end flags" in error.value and "the disk said no" in error.value
        for error in at.error
    )



def test_the_filled_metric_shows_its_fraction_without_a_delta_arrow(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("fifo", demo_run, query={"buffer": "train"})
    (filled,) = [m for m in at.metric if m.label.startswith("Filled")]
    assert filled.label == "Filled (100%)"  # the demo's train ring is full
    assert not filled.delta


def test_the_episode_map_is_headed_as_episode_ends_naming_the_flag(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("fifo", demo_run, query={"buffer": "train"})
    headers = [h.value for h in at.subheader]
    assert "Episode ends (the `truncated` flag)" in headers
    assert not [h for h in headers if "boundaries" in h.lower()]


def test_the_charts_reach_the_browser_with_their_data_as_arrow(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("fifo", demo_run, query={"buffer": "train"})
    charts = at.get("vega_lite_chart")
    # Each chart's frames left the spec for binary Arrow datasets, one per name.
    named = [sorted(d.name for d in chart.proto.datasets) for chart in charts]
    assert named == [["arcs"], ["age"], ["ends"], ["occupancy"]]
    assert all("datasets" not in json.loads(chart.proto.spec) for chart in charts)
    assert all(d.data.data for chart in charts for d in chart.proto.datasets)


def test_the_episode_end_map_is_pooled_once_per_checkpoint_version(
    dashboard: Dashboard, demo_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    pool = app.loaders.boundary_map

    def counted(flags: object) -> object:
        calls.append(1)
        return pool(flags)  # type: ignore[arg-type]

    monkeypatch.setattr(app.loaders, "boundary_map", counted)
    app.loaders._cached_end_map.clear()
    for seed in (1, 2):  # a Resample: another seed, the same checkpoint
        at = dashboard("sampling_lab", demo_run, query={"buffer": "train", "lab_seed": seed})
        assert not at.exception
    assert len(calls) == 1

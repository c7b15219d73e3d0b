"""The Z-buffer page on the demo run: projection, URL-bound subset and colour, Resample, and
its messages for empty, damaged and untagged buffers."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

from bufcore import ZBuffer
from tests.app.conftest import Dashboard, shown
from tests.support import TINY_DEMO


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


def projection(at: AppTest) -> bytes:
    """The projection chart's points as they reach the browser (an Arrow dataset); the page
    draws Vega-Lite charts only."""
    assert not at.get("plotly_chart")
    chart = at.get("vega_lite_chart")[0]
    return b"".join(named.data.data for named in chart.proto.datasets)


def drop_sources(run: Path) -> None:
    state_file = run / "checkpoint" / "run.json"
    state = json.loads(state_file.read_text())
    del state["z_source"]
    state_file.write_text(json.dumps(state))


def test_the_page_projects_the_stored_z(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("z_buffer", demo_run)
    assert not at.exception
    # The tiny run holds fewer z than the default subset: all of them are shown.
    assert f"{TINY_DEMO.z_capacity} of {TINY_DEMO.z_capacity} stored z (seed 0)" in captions(at)


def test_resample_draws_another_subset_under_a_new_seed(dashboard: Dashboard,
                                                        demo_run: Path) -> None:
    at = dashboard("z_buffer", demo_run, query={"z_points": "10"})
    assert "10 of 64 stored z (seed 0)" in captions(at)
    at.button[0].click().run()
    assert not at.exception
    assert at.number_input(key="z_seed").value == 1
    assert "10 of 64 stored z (seed 1)" in captions(at)


def test_resample_logs_no_widget_state_warning_and_puts_the_seed_in_the_link(
    dashboard: Dashboard, demo_run: Path, widget_warnings: list[str]
) -> None:
    at = dashboard("z_buffer", demo_run, query={"z_points": "10"})
    before = projection(at)
    at.button[0].click().run()
    at.button[0].click().run()
    assert not at.exception
    assert widget_warnings == []
    assert at.query_params["z_seed"] == "2"
    assert projection(at) != before  # another subset is drawn


def test_a_link_with_the_resampled_seed_shows_the_same_subset(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("z_buffer", demo_run, query={"z_points": "10"})
    at.button[0].click().run()
    resampled = projection(at)
    shared = dashboard("z_buffer", demo_run, query={"z_points": "10", "z_seed": "1"})
    assert shared.number_input(key="z_seed").value == 1
    assert projection(shared) == resampled


def test_query_parameters_restore_the_subset_and_colour(dashboard: Dashboard,
                                                        demo_run: Path) -> None:
    at = dashboard("z_buffer", demo_run,
                   query={"z_points": "12", "z_seed": "5", "z_colour": "source"})
    assert not at.exception
    assert at.number_input(key="z_points").value == 12
    assert at.number_input(key="z_seed").value == 5
    assert "12 of 64 stored z (seed 5)" in captions(at)
    # The demo records sources: the page colours by them.
    assert "where each z came from" in captions(at)
    assert not at.info


def test_a_run_without_sources_says_so_and_colours_by_age(dashboard: Dashboard,
                                                         run_copy: Path) -> None:
    drop_sources(run_copy)
    at = dashboard("z_buffer", run_copy, query={"z_colour": "source"})
    assert not at.exception
    assert any("did not record z sources" in i.value for i in at.info)
    assert "Colour: age" in captions(at)


def test_sources_that_do_not_match_the_buffer_are_reported(dashboard: Dashboard,
                                                           run_copy: Path) -> None:
    state_file = run_copy / "checkpoint" / "run.json"
    state = json.loads(state_file.read_text())
    state["z_source"]["slots"] = state["z_source"]["slots"][:3]
    state_file.write_text(json.dumps(state))
    at = dashboard("z_buffer", run_copy, query={"z_colour": "source"})
    assert not at.exception
    assert any("z_source" in shown(w.value) and "run.json" in w.value for w in at.warning)


def test_an_empty_z_buffer_says_so_naming_it(dashboard: Dashboard, run_copy: Path) -> None:
    z_dir = run_copy / "checkpoint" / "buffers" / "z"
    ZBuffer(TINY_DEMO.z_capacity, TINY_DEMO.z_dim).save(z_dir)
    at = dashboard("z_buffer", run_copy)
    assert not at.exception
    assert any("empty" in i.value and str(z_dir) in i.value for i in at.info)


def test_a_damaged_z_buffer_is_reported_naming_the_file(dashboard: Dashboard,
                                                        run_copy: Path) -> None:
    config = run_copy / "checkpoint" / "buffers" / "z" / "config.json"
    config.write_text("{not json")
    at = dashboard("z_buffer", run_copy)
    assert not at.exception
    assert any("`z` is unusable" in e.value and "config.json" in e.value for e in at.error)
    assert any("This needs a ZBuffer checkpoint" in i.value for i in at.info)


def test_the_page_draws_its_four_charts_as_vega_lite_with_arrow_data(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("z_buffer", demo_run)
    charts = at.get("vega_lite_chart")
    assert [json.loads(c.proto.spec)["title"]["text"] for c in charts] == [
        "z projected on its first two principal components", "Explained variance",
        "Norm of each z", "Cosine similarity to the mean z"]
    assert all("datasets" not in json.loads(c.proto.spec) for c in charts)
    assert all(named.data.data for c in charts for named in c.proto.datasets)
    assert not at.get("plotly_chart")

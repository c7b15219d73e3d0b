"""The Trajectories page on a demo run: it renders, seq_length comes from the URL, and the
samplable fractions follow it."""

from __future__ import annotations

import json
from pathlib import Path

from bufcore import load_buffer
from tests.app.conftest import Dashboard


def test_the_trajectories_page_renders_the_demo_run(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("trajectories", demo_run)
    assert not at.exception
    assert not at.error
    assert at.dataframe[0].value["buffer"].tolist() == ["online", "expert"]


def test_the_page_draws_its_charts_with_vega_lite_and_none_with_plotly(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("trajectories", demo_run)
    assert not at.get("plotly_chart")
    titles = [json.loads(c.proto.spec)["title"]["text"] for c in at.get("vega_lite_chart")]
    assert titles == ["What a window length can still sample", "Trajectory lengths, all envs",
                      "Trajectory lengths per env", "Expert trajectory length per motion"]


def test_the_trajectory_count_is_the_online_buffers_own(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("trajectories", demo_run)
    table = at.dataframe[0].value.set_index("buffer")
    online = load_buffer(demo_run / "checkpoint" / "buffers" / "train")
    assert table.loc["online", "trajectories"] == len(online.trajectories().env)


def test_seq_length_is_restored_from_the_url_and_changes_the_need(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("trajectories", demo_run, query={"traj_seq": "5"})
    assert not at.exception
    assert at.number_input(key="traj_seq").value == 5
    assert at.dataframe[0].value["window needs (rows)"].tolist() == [6, 6]
    at.number_input(key="traj_seq").set_value(11).run()
    assert at.dataframe[0].value["window needs (rows)"].tolist() == [12, 12]


def test_a_damaged_online_checkpoint_shows_a_message_naming_it(
    dashboard: Dashboard, run_copy: Path
) -> None:
    payload = run_copy / "checkpoint" / "buffers" / "train" / "buffer.hdf5"
    payload.write_bytes(b"not hdf5")
    at = dashboard("trajectories", run_copy)
    assert not at.exception
    assert any("train" in w.value for w in [*at.warning, *at.error])

"""The Replay statistics page: each section for each kind of source, what a source lacks,
Resample (deterministic by seed, the seed in the URL) and the drawn rows on the priority
histogram."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from bufcore import DictBuffer, PrioritizedSampler, RunLogger
from tests.app.conftest import PAGES, Dashboard
from tests.app.test_sampling_url_keys import _bound_keys
from tests.replay_support import prioritized_rows, write_replay_run


@pytest.fixture(scope="module")
def replay_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with replay records and a checkpoint of each kind (do not modify)."""
    run = tmp_path_factory.mktemp("replay-page") / "run"
    write_replay_run(run)
    return run


def charts(at: Any) -> dict[str, dict[str, Any]]:
    """Every drawn chart's Vega-Lite spec by its title, its Arrow datasets decoded into
    ``spec["datasets"]`` (the page draws no Plotly chart)."""
    assert not at.get("plotly_chart")
    found = {}
    for element in at.get("vega_lite_chart"):
        spec = json.loads(element.proto.spec)
        spec["datasets"] = {named.name: pa.ipc.open_stream(named.data.data).read_pandas()
                            for named in element.proto.datasets}
        found[spec["title"]["text"]] = spec
    return found


def legend(spec: dict[str, Any]) -> list[str]:
    """The names a chart's colour legend lists (its layers' colour domains, in order)."""
    names: list[str] = []
    for one in spec["layer"]:
        for inner in one.get("layer", [one]):
            colour = inner.get("encoding", {}).get("color", {})
            names += [n for n in colour.get("scale", {}).get("domain", []) if n not in names]
    return names


def texts(at: Any, kind: str) -> str:
    return " ".join(str(element.value) for element in getattr(at, kind))


def button(at: Any, label: str) -> Any:
    return next(b for b in at.button if b.label == label)


# The lazy expander of the drawn batch's table, opened.
BATCH = ("rp_batch_table",)
# The URL of the log's tab (the checkpoint's is open by default).
LOG_TAB_QUERY = {"rp_part": "From the log"}


def drawn_table(at: Any) -> Any:
    """The drawn batch's table (the one with an importance weight column)."""
    return next(frame.value for frame in at.dataframe
                if "importance weight" in frame.value.columns)


def drawn_rows(at: Any) -> list[int]:
    table = drawn_table(at)
    return table[table.columns[0]].tolist()


# Per checkpoint: the subheaders its part draws and the charts it draws.
SECTIONS = {
    "rows": (["Priorities and importance weights"],
             ["Priority distribution", "Importance weights at beta = 0.4036"]),
    "windows": (["Priorities and importance weights", "Which trajectories dominate"],
                ["Priority distribution", "Importance weights of windows of 4 rows, at beta = "
                 "0.5", "Which trajectories the window draws favour"]),
    "advanced": (["Priorities and importance weights", "Use and staleness"],
                 ["Priority distribution", "Importance weights at beta = 0.4002",
                  "Use: times each item was sampled", "Staleness at learner iteration 39"]),
    "naive": (["Use and staleness"],
              ["Use: times each item was sampled", "Staleness at learner iteration 5"]),
    "episode": ([], []),
}
LOG_CHARTS = ["Priority quantiles", "Push and sample rates",
              "Throughput ratio (pushed / sampled items)", "Refused pushes and samples (so far)",
              "Use of the sampled items", "Staleness of the sampled items"]


@pytest.mark.parametrize("name", list(SECTIONS))
def test_each_checkpoint_kind_draws_its_sections(
    dashboard: Dashboard, replay_run: Path, name: str
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": name})
    assert not at.exception and not at.error
    subheaders, titles = SECTIONS[name]
    assert [h.value for h in at.subheader] == subheaders
    assert set(titles) <= set(charts(at))


@pytest.mark.parametrize("name", list(SECTIONS))
def test_a_lone_checkpoint_draws_the_same_sections_without_a_log(
    dashboard: Dashboard, replay_run: Path, name: str
) -> None:
    at = dashboard("replay", replay_run / "checkpoint" / "buffers" / name)
    assert not at.exception and not at.error
    assert [h.value for h in at.subheader] == SECTIONS[name][0]


def test_the_log_tab_of_a_lone_checkpoint_says_what_it_needs(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run / "checkpoint" / "buffers" / "rows", query=LOG_TAB_QUERY)
    assert not at.exception and not at.error
    assert "This needs `replay` records in metrics.jsonl" in texts(at, "info")
    assert not charts(at)


def test_the_checkpoint_tab_draws_no_log_chart_and_the_log_tab_no_checkpoint_chart(
    dashboard: Dashboard, replay_run: Path
) -> None:
    now = dashboard("replay", replay_run, query={"buffer": "advanced"})
    over = dashboard("replay", replay_run, query={"buffer": "advanced", **LOG_TAB_QUERY})
    assert set(charts(now)) == set(SECTIONS["advanced"][1])
    assert set(charts(over)) == set(LOG_CHARTS)


def click_tab(at: Any, label: str) -> None:
    """Open the tab ``label`` as a click does (its value in session state) and rerun."""
    at.session_state["rp_part"] = label
    at.run()


def test_switching_tabs_in_a_session_draws_the_other_parts_charts(
    dashboard: Dashboard, replay_run: Path
) -> None:
    # The URL side of a switch (rp_part written, then removed) is the frontend's: the browser
    # tests pin it; AppTest does not write widget values back into its query parameters.
    at = dashboard("replay", replay_run, query={"buffer": "advanced"})
    click_tab(at, "From the log")
    assert set(charts(at)) == set(LOG_CHARTS)
    click_tab(at, "From the checkpoint")
    assert set(charts(at)) == set(SECTIONS["advanced"][1])


def test_a_tab_name_the_page_does_not_have_opens_the_checkpoints_tab(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "advanced", "rp_part": "nonsense"})
    assert not at.exception
    assert "rp_part" not in at.query_params
    assert set(charts(at)) == set(SECTIONS["advanced"][1])


def log_only_run(run: Path) -> Path:
    """A run whose log holds ``replay`` records and which has no checkpoint."""
    write_log(run, [{"push_rate": 1.0, "sample_rate": 2.0}] * 3)
    return run


def test_a_run_with_only_a_log_opens_on_its_tab(dashboard: Dashboard, tmp_path: Path) -> None:
    at = dashboard("replay", log_only_run(tmp_path / "run"))
    assert list(charts(at)) == ["Push and sample rates"]


def test_a_hand_made_link_to_the_checkpoint_tab_of_a_log_only_run_says_what_it_needs(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    # The browser leaves the default tab out of a link; this URL is typed by hand.
    at = dashboard("replay", log_only_run(tmp_path / "run"),
                   query={"rp_part": "From the checkpoint"})
    assert not charts(at)
    assert "This needs a buffer checkpoint with a `PrioritizedSampler`" in texts(at, "info")


def test_a_tab_name_the_page_does_not_have_opens_a_log_only_run_on_its_log(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    at = dashboard("replay", log_only_run(tmp_path / "run"), query={"rp_part": "nonsense"})
    assert not at.exception
    assert list(charts(at)) == ["Push and sample rates"]


def test_a_log_only_run_stays_on_the_log_tab_when_a_checkpoint_is_written(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    run = log_only_run(tmp_path / "run")
    at = dashboard("replay", run)
    assert list(charts(at)) == ["Push and sample rates"]
    prioritized_rows().save(run / "checkpoint" / "buffers" / "x")
    at.session_state["rp_log"] = False  # any widget: the page runs again
    at.run()
    assert not at.exception
    assert at.selectbox(key="buffer").value == "x"  # the page saw the new checkpoint
    assert list(charts(at)) == ["Push and sample rates"]


def switch_source(at: Any, run: Path) -> None:
    """Pick ``run`` in the sidebar's source menu and run the page again."""
    picker = at.selectbox(key="run")
    picker.set_value(next(label for label in picker.options if run.name in label)).run()


def test_switching_to_a_log_only_run_opens_its_log_tab(
    dashboard: Dashboard, replay_run: Path, tmp_path: Path
) -> None:
    log_only = log_only_run(tmp_path / "log-only")
    at = dashboard("replay", replay_run, log_only, query={"buffer": "advanced"})
    assert set(charts(at)) == set(SECTIONS["advanced"][1])
    switch_source(at, log_only)
    assert not at.exception
    assert list(charts(at)) == ["Push and sample rates"]


def test_switching_to_a_run_with_both_parts_keeps_the_tab_the_user_opened(
    dashboard: Dashboard, replay_run: Path, tmp_path: Path
) -> None:
    log_only = log_only_run(tmp_path / "log-only")
    at = dashboard("replay", log_only, replay_run)
    switch_source(at, replay_run)
    assert set(charts(at)) == set(LOG_CHARTS)


def test_coming_back_from_another_page_keeps_the_open_tab(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "advanced"})
    click_tab(at, "From the log")
    at.switch_page(PAGES["overview"]).run()
    at.switch_page(PAGES["replay"]).run()
    assert set(charts(at)) == set(LOG_CHARTS)


def damaged_run(run: Path, *, readable: bool) -> None:
    """A log, a damaged prioritized buffer ``x`` and, if ``readable``, a sound one ``y``."""
    buffers = log_only_run(run) / "checkpoint" / "buffers"
    DictBuffer(capacity=4, sampler=PrioritizedSampler()).save(buffers / "x")
    (buffers / "x" / "buffer.hdf5").write_bytes(b"not hdf5")
    if readable:
        prioritized_rows().save(buffers / "y")


@pytest.mark.parametrize("query", [{}, {"rp_part": "From the checkpoint"}],
                         ids=["log tab", "checkpoint tab"])
def test_an_unusable_buffer_is_named_once_above_the_tabs_whichever_is_open(
    dashboard: Dashboard, tmp_path: Path, query: dict[str, str]
) -> None:
    damaged_run(tmp_path / "run", readable=False)
    at = dashboard("replay", tmp_path / "run", query=query)
    assert not at.exception
    assert bool(charts(at)) == (not query)  # the log tab draws its chart, the other none
    unusable = [e.value for e in at.error if "is unusable" in e.value]
    assert len(unusable) == 1 and "Buffer `x` is unusable" in unusable[0]


def test_an_unusable_buffer_beside_a_sound_one_is_a_warning_on_the_log_tab_too(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    damaged_run(tmp_path / "run", readable=True)
    at = dashboard("replay", tmp_path / "run", query=LOG_TAB_QUERY)
    assert not at.exception
    assert "Buffer `x` is unusable" in texts(at, "warning")
    assert list(charts(at)) == ["Push and sample rates"]


def test_the_log_part_draws_every_logged_group(dashboard: Dashboard, replay_run: Path) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "advanced", **LOG_TAB_QUERY})
    assert set(LOG_CHARTS) <= set(charts(at))


def test_a_log_without_importance_weights_names_the_keys_it_lacks(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "advanced", **LOG_TAB_QUERY})
    assert "lack importance weights (`is_weight_min`" in texts(at, "info")
    assert "Importance weights (min, median, max)" not in charts(at)


def test_a_uniform_buffer_says_it_has_no_priorities_to_draw(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "naive"})
    assert "`NaiveReplayBuffer` draws uniformly" in texts(at, "info")
    assert not [b for b in at.button if b.label == "Resample"]


def test_an_episode_buffer_shows_its_counters_and_says_why_no_more(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "episode"})
    assert "Pushed" in [m.label for m in at.metric]
    assert "`EpisodeReplayBuffer` draws episodes uniformly" in texts(at, "info")


def test_a_run_without_replay_data_says_what_the_page_needs(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("replay", demo_run)
    assert not at.exception
    info = texts(at, "info")
    assert "This needs a buffer checkpoint with a `PrioritizedSampler`" in info
    assert "`replay` records in metrics.jsonl" in info and "buffer `train`" in info


def test_a_log_and_a_checkpoint_of_different_buffers_are_said_to_differ(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "rows", **LOG_TAB_QUERY})
    assert "describe different buffers" in texts(at, "warning")


def test_a_log_of_the_checkpoints_buffer_raises_no_warning(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "advanced", **LOG_TAB_QUERY})
    assert not at.warning
    assert set(LOG_CHARTS) <= set(charts(at))


def write_log(run: Path, records: list[dict[str, Any]]) -> None:
    with RunLogger(run) as log:
        for step, record in enumerate(records):
            log.log("replay", step, record)


def test_importance_weights_and_keys_the_page_does_not_know_are_drawn(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    write_log(run, [{"buffer": "online", "is_weight_min": 0.1 + i / 100, "is_weight_median":
                     0.5, "is_weight_max": 1.0, "top_trajectory_share": 0.3} for i in range(5)])
    at = dashboard("replay", run)
    assert not at.exception
    drawn = charts(at)
    assert {"Importance weights (min, median, max)", "top_trajectory_share"} <= set(drawn)
    assert "`top_trajectory_share`" in texts(at, "caption")


def test_a_log_with_some_keys_lists_every_group_it_lacks(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    write_log(run, [{"push_rate": 1.0, "sample_rate": 2.0}] * 3)
    at = dashboard("replay", run)
    assert list(charts(at)) == ["Push and sample rates"]
    info = texts(at, "info")
    for group in ("priority quantiles", "throughput ratio", "refused pushes and samples", "use",
                  "staleness", "importance weights"):
        assert f"{group} (`" in info


def test_a_log_of_several_buffers_offers_a_picker_bound_to_the_url(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    write_log(run, [{"buffer": "a", "push_rate": 1.0}, {"buffer": "b", "sample_rate": 1.0}])
    at = dashboard("replay", run, query={"rp_log_buffer": "b"})
    assert at.selectbox(key="rp_log_buffer").value == "b"
    assert "records of `b`" in texts(at, "caption")


def test_resample_moves_the_seed_in_the_url_and_draws_other_rows(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "rows", "rp_seed": "4"}, opened=BATCH)
    first = drawn_rows(at)
    button(at, "Resample").click().run()
    assert not at.exception
    assert at.query_params["rp_seed"] == "5"
    assert drawn_rows(at) != first


@pytest.mark.parametrize("name", ["rows", "windows", "advanced"])
def test_a_seed_always_draws_the_same_rows(
    dashboard: Dashboard, replay_run: Path, name: str
) -> None:
    query = {"buffer": name, "rp_seed": "9"}
    first = drawn_rows(dashboard("replay", replay_run, query=query, opened=BATCH))
    again = dashboard("replay", replay_run, query=query, opened=BATCH)
    button(again, "Resample").click().run()
    assert drawn_rows(again) != first
    assert drawn_rows(dashboard("replay", replay_run, query=query, opened=BATCH)) == first


@pytest.mark.parametrize("name", ["rows", "windows", "advanced"])
def test_the_drawn_rows_are_marked_on_the_priority_histogram(
    dashboard: Dashboard, replay_run: Path, name: str
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": name, "rp_seed": "3"}, opened=BATCH)
    figure = charts(at)["Priority distribution"]
    assert "drawn batch" in legend(figure)
    bins = figure["datasets"]["bins"]
    edges = np.append(bins["left"].to_numpy(), bins["right"].to_numpy()[-1])
    priorities = drawn_table(at)["priority"].to_numpy()
    expected = 100 * np.histogram(priorities, bins=edges)[0] / len(priorities)
    assert bins["drawn"].to_numpy() == pytest.approx(expected)


@pytest.mark.parametrize("name", ["rows", "windows", "advanced"])
def test_a_resample_keeps_every_charts_spec_so_the_browser_swaps_its_data_in_place(
    dashboard: Dashboard, replay_run: Path, name: str
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": name, "rp_seed": "3"})
    before = [chart.proto.spec for chart in at.get("vega_lite_chart")]
    button(at, "Resample").click().run()
    assert not at.exception
    assert [chart.proto.spec for chart in at.get("vega_lite_chart")] == before


@pytest.mark.parametrize("key", ["rp_batch_table", "rp_top_table"])
def test_a_table_is_sent_only_once_its_expander_is_open(
    dashboard: Dashboard, replay_run: Path, key: str
) -> None:
    query = {"buffer": "windows"}
    closed = dashboard("replay", replay_run, query=query)
    opened = dashboard("replay", replay_run, query=query, opened=(key,))
    assert not closed.exception and not opened.exception
    assert len(opened.dataframe) == len(closed.dataframe) + 1


def test_the_drawn_windows_are_marked_on_the_trajectory_chart(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "windows", "rp_batch": "40"},
                   opened=("rp_top_table",))
    shares = charts(at)["Which trajectories the window draws favour"]["datasets"]["shares"]
    drawn = shares[shares["series"] == "drawn batch"]
    table = at.dataframe[0].value  # the trajectories, largest share first
    assert sum(table["drawn windows"]) == 10  # 40 rows in windows of 4
    assert drawn["share"].to_numpy() == pytest.approx(100 * table["drawn windows"][:20] / 10)


def test_drawing_does_not_advance_the_checkpoints_beta(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "rows"})
    button(at, "Resample").click().run()
    button(at, "Resample").click().run()
    assert next(m.value for m in at.metric if m.label == "beta (next draw)") == "0.4036"
    assert "Importance weights at beta = 0.4036" in charts(at)


def test_a_batch_that_is_not_a_multiple_of_seq_length_shows_the_sampler_message(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "windows", "rp_batch": "10"})
    assert not at.exception
    assert "cannot draw" in texts(at, "error")


def test_the_staleness_iteration_comes_from_the_url(
    dashboard: Dashboard, replay_run: Path
) -> None:
    at = dashboard("replay", replay_run, query={"buffer": "advanced", "rp_iter": "100"})
    assert "Staleness at learner iteration 100" in charts(at)


def test_an_empty_prioritized_buffer_says_there_is_nothing_to_draw(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    DictBuffer(capacity=4, sampler=PrioritizedSampler()).save(tmp_path / "empty")
    at = dashboard("replay", tmp_path / "empty")
    assert not at.exception
    assert "holds no items" in texts(at, "info")


def test_every_url_key_the_readme_lists_for_the_page_is_bound() -> None:
    root = Path(__file__).resolve().parents[2]
    text = (root / "README.md").read_text()
    section = text[text.index("### Replay statistics"):]
    start = section.index("Controls (URL keys):")
    controls = section[start:section.index("\n\n", start)]
    listed = set(re.findall(r"`([a-z_]+)`", controls))
    assert {"rp_seed", "buffer"} <= listed
    assert listed <= _bound_keys(root / "pages" / "replay.py", root / "app" / "ui.py")


def test_every_chart_sends_its_data_as_arrow_not_inside_the_spec(
    dashboard: Dashboard, replay_run: Path
) -> None:
    elements = [*dashboard("replay", replay_run, query={"buffer": "advanced"}
                           ).get("vega_lite_chart"),
                *dashboard("replay", replay_run, query={"buffer": "advanced", **LOG_TAB_QUERY}
                           ).get("vega_lite_chart")]
    assert len(elements) == 10  # 4 of the checkpoint, 6 of the log
    assert all("datasets" not in json.loads(c.proto.spec) for c in elements)
    assert all(named.data.data for c in elements for named in c.proto.datasets)

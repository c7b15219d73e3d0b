"""The Curriculum page on a demo run: it renders, the re-prioritize preview follows the mode,
Apply keeps a session copy, Save writes new checkpoint versions and leaves the source alone."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from bufcore import load_buffer
from tests.app.conftest import Dashboard, shown


@pytest.fixture
def dashboard(dashboard: Dashboard) -> Dashboard:
    """The page with its per-motion table open: it is in a lazy expander, and most tests here
    read it (test_lazy_tables.py pins that it is not sent while closed)."""
    return functools.partial(dashboard, opened=("cur_table",))


def charts(at: AppTest) -> list[dict]:  # type: ignore[type-arg]
    """The Vega-Lite specs drawn, in order; the page draws no Plotly chart."""
    assert not at.get("plotly_chart")
    return [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]


def _preview(at) -> np.ndarray:  # type: ignore[no-untyped-def]
    return at.dataframe[-1].value["P(sampled) new"].to_numpy()


def _versions(run: Path) -> list[str]:
    folder = run / "reprioritized"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_curriculum_page_renders_the_demo_run(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("curriculum", demo_run)
    assert not at.exception
    assert not at.error
    assert "motion" in at.dataframe[-1].value.columns


def test_the_preview_changes_with_the_mode(dashboard: Dashboard, demo_run: Path) -> None:
    lin = _preview(dashboard("curriculum", demo_run, query={"cur_mode": "lin"}))
    exp = _preview(dashboard("curriculum", demo_run, query={"cur_mode": "exp"}))
    assert not np.allclose(lin, exp)


def test_query_parameters_restore_the_sort_and_knobs(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("curriculum", demo_run,
                   query={"cur_sort": "last EMD", "cur_min": "0.7", "cur_scale": "3.0"})
    assert not at.exception
    assert at.selectbox(key="cur_sort").value == "last EMD"
    assert at.number_input(key="cur_min").value == 0.7
    assert at.number_input(key="cur_scale").value == 3.0
    emd = at.dataframe[-1].value["last EMD"].to_numpy()
    assert (np.diff(emd) <= 0).all()


def test_options_that_cannot_apply_show_a_message_not_a_traceback(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("curriculum", demo_run, query={"cur_min": "3.0", "cur_max": "1.0"})
    assert not at.exception
    assert any("min_val" in shown(e.value) for e in at.error)


def test_apply_keeps_the_new_priorities_in_the_session(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("curriculum", demo_run, query={"cur_mode": "lin"})
    at.button(key="cur_apply").click().run()
    assert not at.exception
    copies = at.session_state["reprioritized"]
    assert len(copies) == 1
    stored = next(iter(copies.values()))
    assert abs(float(stored.sum()) - 1.0) < 1e-9


def test_save_writes_new_versions_that_load_and_leaves_the_source_identical(
    dashboard: Dashboard, run_copy: Path
) -> None:
    source = run_copy / "checkpoint" / "buffers" / "expert"
    before = {p.name: p.read_bytes() for p in source.iterdir()}
    at = dashboard("curriculum", run_copy, query={"cur_mode": "lin"})
    wanted = {}
    for clamp in (2.0, 4.0):  # two knob settings: two versions
        at.number_input(key="cur_max").set_value(clamp).run()
        wanted[clamp] = _preview(at)
        at.button(key="cur_save").click().run()
    assert not at.exception and not at.error
    first = run_copy / "reprioritized" / "expert-lin-1"
    second = run_copy / "reprioritized" / "expert-lin-2"
    motions = at.dataframe[-1].value["motion"].tolist()
    for written, clamp in ((first, 2.0), (second, 4.0)):
        buffer = load_buffer(written)
        by_motion = dict(zip(buffer.motion_ids, buffer.priorities.tolist(), strict=True))
        np.testing.assert_allclose([by_motion[m] for m in motions], wanted[clamp], rtol=1e-5)
    assert any(str(second) in s.value for s in at.success)
    assert {p.name: p.read_bytes() for p in source.iterdir()} == before


def test_saving_twice_with_the_same_knobs_writes_one_version_and_says_so(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("curriculum", run_copy, query={"cur_mode": "lin"})
    at.button(key="cur_save").click().run()
    at.button(key="cur_save").click().run()
    assert not at.exception and not at.error
    assert _versions(run_copy) == ["expert-lin-1"]
    (said,) = [i.value for i in at.info if i.value.startswith("Not saved")]
    assert "expert-lin-1" in said and "Nothing was written" in said


def test_a_refused_save_does_not_show_the_earlier_saved_message_beside_it(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("curriculum", run_copy, query={"cur_mode": "lin"})
    at.button(key="cur_save").click().run()
    assert any(s.value.startswith("Saved a new expert checkpoint") for s in at.success)
    at.button(key="cur_save").click().run()
    assert not at.success


def test_saving_the_checkpoints_own_priorities_writes_nothing(
    dashboard: Dashboard, run_copy: Path
) -> None:
    # The run's own options give the priorities the checkpoint already holds.
    at = dashboard("curriculum", run_copy)
    at.button(key="cur_save").click().run()
    assert not at.exception and not at.error
    assert _versions(run_copy) == []
    assert any(str(run_copy / "checkpoint" / "buffers" / "expert") in i.value for i in at.info)


def test_a_save_on_one_run_is_not_reported_on_another(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    first, second = tmp_path / "runs" / "first", tmp_path / "runs" / "second"
    for run in (first, second):
        shutil.copytree(demo_run, run)
    at = dashboard("curriculum", first, second, query={"cur_mode": "lin"})
    at.button(key="cur_save").click().run()
    assert any("Saved a new expert checkpoint" in s.value for s in at.success)
    picker = at.selectbox(key="run")
    picker.set_value(next(o for o in picker.options if o.endswith("second"))).run()
    assert not at.exception and not at.error
    assert not any("Saved a new expert checkpoint" in s.value for s in at.success)


def test_an_unchanged_probability_shows_as_zero_not_minus_zero(
    dashboard: Dashboard, demo_run: Path
) -> None:
    # The run's own options: the new probabilities equal the current ones up to float noise,
    # which the table (4 decimals) must not print as "-0.0000".
    at = dashboard("curriculum", demo_run)
    change = at.dataframe[-1].value["change"].to_numpy()
    shown = np.round(change, 4)
    assert not np.any(np.signbit(change) & (shown == 0))


def test_the_motion_query_parameter_picks_the_followed_motion(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("curriculum", demo_run, query={"motion": "2"})
    assert not at.exception
    assert at.selectbox(key="motion").value == 2
    assert "Motion 2 across rounds" in [c["title"]["text"] for c in charts(at)]


def rewrite_eval_records(run: Path, change) -> None:  # type: ignore[no-untyped-def]
    """Rewrite every eval record of ``run``'s metrics.jsonl with ``change(record)``."""
    log = run / "metrics.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text("".join(
        json.dumps(change(r) if r.get("kind") == "eval" else r) + "\n" for r in records
    ))


def two_episodes_per_motion(record: dict) -> dict:  # type: ignore[type-arg]
    """The record as an expert buffer holding every motion twice would log it."""
    doubled = {k: [v for v in record[k] for _ in range(2)]
               for k in ("motion_ids", "emd", "priority")}
    doubled["probability"] = [p / 2 for p in record["probability"] for _ in range(2)]
    return {**record, **doubled}


def test_a_log_with_several_episodes_per_motion_shows_a_per_motion_history(
    dashboard: Dashboard, run_copy: Path
) -> None:
    rewrite_eval_records(run_copy, two_episodes_per_motion)
    at = dashboard("curriculum", run_copy)
    assert not at.exception and not at.error
    captions = " ".join(c.value for c in at.caption)
    assert "from `metrics.jsonl`" in captions
    assert "several episodes" in captions
    assert not at.info
    assert len(charts(at)) >= 5  # heatmap, priorities, spread, bars, motion


def test_eval_records_that_cannot_be_mapped_say_so_naming_the_log(
    dashboard: Dashboard, run_copy: Path
) -> None:
    rewrite_eval_records(run_copy, lambda r: {**r, "emd": r["emd"][:1]})
    at = dashboard("curriculum", run_copy)
    assert not at.exception
    log = str(run_copy / "metrics.jsonl")
    assert any(log in i.value and "cannot be mapped" in i.value for i in at.info)
    # The rounds saved in run.json are shown instead.
    assert "from `run.json`" in " ".join(c.value for c in at.caption)


def test_unmappable_records_and_no_saved_curriculum_explain_both(
    dashboard: Dashboard, run_copy: Path
) -> None:
    rewrite_eval_records(run_copy, lambda r: {**r, "emd": r["emd"][:1]})
    state_file = run_copy / "checkpoint" / "run.json"
    state = json.loads(state_file.read_text())
    del state["curriculum"]
    state_file.write_text(json.dumps(state))
    at = dashboard("curriculum", run_copy)
    assert not at.exception
    messages = [i.value for i in at.info]
    assert any(str(run_copy / "metrics.jsonl") in m and "cannot be mapped" in m
               for m in messages)
    assert any(m.startswith("This needs evaluation rounds") for m in messages)
    # What the checkpoint alone gives is still drawn: the expert buffer's saved priorities.
    assert "Priorities saved in the expert buffer `expert`" in [s.value for s in at.subheader]
    assert [c["title"]["text"] for c in charts(at)] == [
        "Sampling probability per motion, as saved in the buffer"]


def test_the_preview_is_one_chart_and_no_table_column_repeats_another(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("curriculum", demo_run, query={"cur_mode": "lin"})
    assert len(charts(at)) == 6  # five of the history, one preview
    table = at.dataframe[-1].value
    numeric = [c for c in table.columns[3:]]
    for i, a in enumerate(numeric):
        for b in numeric[i + 1:]:
            assert not np.allclose(table[a], table[b]), (a, b)


@pytest.mark.parametrize("weighting", ["trajectory", "window"])
def test_the_saved_priority_is_a_column_only_when_it_differs_from_the_probability(
    dashboard: Dashboard, run_copy: Path, weighting: str
) -> None:
    # With window weighting a motion's probability also counts its windows.
    expert = run_copy / "checkpoint" / "buffers" / "expert"
    load_buffer(expert).with_weighting(weighting).save(expert)
    at = dashboard("curriculum", run_copy, query={"cur_mode": "lin"})
    assert not at.exception
    columns = at.dataframe[-1].value.columns
    assert ("priority new (saved)" in columns) == (weighting == "window")


def test_the_spread_chart_gives_entropy_and_effective_motions_separate_axes(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("curriculum", demo_run)
    spread = next(c for c in charts(at) if "spread" in c["title"]["text"])
    # Each quantity on a scale and ticks of its own, not ticks shared over one plot.
    assert spread["resolve"] == {"scale": {"y": "independent"}}
    effective = spread["layer"][1]["layer"][0]["encoding"]["y"]["axis"]
    assert effective["tickMinStep"] == 1 and effective["format"] == ",d"


def test_the_curriculum_page_draws_every_chart_with_vega_lite(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("curriculum", demo_run)
    assert not at.exception
    assert [c["title"]["text"].split(" (")[0] for c in charts(at)] == [
        "Tracking error", "Priority evolution", "How spread the sampling is",
        "Current priorities", "Motion 0 across rounds",
        "P(a sampled window comes from the motion): now vs new"]

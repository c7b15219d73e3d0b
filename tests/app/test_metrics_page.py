"""The Metrics page: logged scalars over training, URL-bound choices, runs overlaid, the CSV
download, and plain words for sources without a log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from bufcore import RunLogger
from tests.app.conftest import Dashboard


def specs(at: AppTest) -> list[dict[str, Any]]:
    """The Vega-Lite charts drawn, in order; the page draws no Plotly chart."""
    assert not at.get("plotly_chart")
    return [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]


def titles(at: AppTest) -> list[str]:
    return [spec["title"]["text"] for spec in specs(at)]


def trace_names(at: AppTest) -> list[str]:
    """The curves each chart draws, raw ones (drawn first, behind) before smoothed ones."""
    return [name for spec in specs(at) for layer in spec["layer"]
            if layer["mark"]["type"] == "line"
            for name in layer["transform"][0]["filter"]["oneOf"]]


def infos(at: AppTest) -> str:
    return "\n".join(str(i.value) for i in at.info)


def test_the_demo_run_shows_its_losses_and_reward_by_default(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("metrics", demo_run)
    assert not at.exception
    assert at.title[0].value == "Metrics"
    assert at.multiselect(key="m_metrics").value == [
        "train/policy_loss", "train/value_loss", "train/reward_mean"]
    # Two columns of charts: the page tree lists the left column first.
    assert sorted(titles(at)) == [
        "train/policy_loss", "train/reward_mean", "train/value_loss"]
    # Smoothed by default, the raw curve faint behind.
    assert "train/policy_loss (raw)" in trace_names(at)
    assert [b.label for b in at.get("download_button")] == ["Download the shown points (CSV)"]


def test_downloading_the_csv_does_not_rerun_the_page(dashboard: Dashboard, demo_run: Path) -> None:
    (button,) = dashboard("metrics", demo_run).get("download_button")
    assert button.proto.ignore_rerun  # on_click="ignore": the charts are not drawn again


def test_every_logged_scalar_can_be_picked(dashboard: Dashboard, demo_run: Path) -> None:
    options = dashboard("metrics", demo_run).multiselect(key="m_metrics").options
    for name in ("eval/mean_emd", "buffer/train/len", "train/td/ema_mean", "run/options/steps"):
        assert name in options


def test_the_link_restores_metrics_axis_smoothing_and_log_scale(
    dashboard: Dashboard, demo_run: Path
) -> None:
    query = {"m_metrics": ["eval/mean_emd", "buffer/z/len"], "m_x": "Relative time",
             "m_smooth": "0.0", "m_log": "true"}
    at = dashboard("metrics", demo_run, query=query)
    assert not at.exception
    assert at.multiselect(key="m_metrics").value == ["eval/mean_emd", "buffer/z/len"]
    assert at.radio(key="m_x").value == "Relative time"
    assert at.slider(key="m_smooth").value == 0.0
    assert at.toggle(key="m_log").value is True
    lines = [spec["layer"][0]["encoding"] for spec in specs(at)]
    assert all(encoding["y"]["scale"]["type"] == "log" for encoding in lines)
    assert lines[0]["x"]["axis"]["title"] == "time since the run's first record (s)"
    # No smoothing: only the raw curves, drawn in full.
    assert not any("(raw)" in name for name in trace_names(at))


def test_other_runs_under_the_roots_can_be_overlaid(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(demo_run, root / "a")
    shutil.copytree(demo_run, root / "b")
    at = dashboard("metrics", roots=(root,), query={"run": "a", "m_runs": "b",
                                                    "m_metrics": "train/value_loss"})
    assert not at.exception
    assert at.multiselect(key="m_runs").options == ["b"]
    assert trace_names(at) == ["a (raw)", "b (raw)", "a (smoothed 0.60)", "b (smoothed 0.60)"]


def test_a_checkpoint_without_a_log_says_plainly_there_is_nothing_to_plot(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("metrics", demo_run / "checkpoint")
    assert not at.exception
    assert f"{demo_run / 'checkpoint'}: no metrics.jsonl here" in infos(at)
    assert not at.get("plotly_chart") and not at.get("vega_lite_chart")


def test_a_run_without_a_log_still_overlays_the_runs_that_have_one(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(demo_run, root / "logged")
    shutil.copytree(demo_run / "checkpoint", root / "bare" / "checkpoint")
    at = dashboard("metrics", roots=(root,),
                   query={"run": "bare", "m_runs": "logged", "m_metrics": "eval/mean_emd"})
    assert not at.exception
    assert "no metrics.jsonl here" in infos(at)
    assert trace_names(at) == ["eval/mean_emd (raw)", "eval/mean_emd (smoothed 0.60)"]


def test_a_log_without_numbers_says_so(dashboard: Dashboard, tmp_path: Path) -> None:
    with RunLogger(tmp_path / "run") as logger:
        logger.log("note", 0, {"text": "hello", "flag": True})
    at = dashboard("metrics", tmp_path / "run")
    assert not at.exception
    assert "no numeric scalar logged yet (1 records)" in infos(at)


def test_a_metric_one_overlaid_run_lacks_is_named_under_its_chart(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    root = tmp_path / "runs"
    shutil.copytree(demo_run, root / "a")
    with RunLogger(root / "b") as logger:
        logger.log("train", 4, {"other": 1.0})
    at = dashboard("metrics", roots=(root,), query={"run": "a", "m_runs": "b",
                                                    "m_metrics": "train/value_loss"})
    assert not at.exception
    assert any(c.value == "Not logged by: b." for c in at.caption)


def test_torn_log_lines_are_listed_and_the_rest_is_drawn(
    dashboard: Dashboard, run_copy: Path
) -> None:
    with open(run_copy / "metrics.jsonl", "ab") as file:
        file.write(b'{"step": 1, "ti\n')
    at = dashboard("metrics", run_copy)
    assert not at.exception
    assert any("log lines of" in e.label and "skipped" in e.label for e in at.expander)
    assert len(specs(at)) == 3


def test_the_charts_reach_the_browser_with_their_points_as_arrow(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("metrics", demo_run)
    charts = at.get("vega_lite_chart")
    assert [[d.name for d in chart.proto.datasets] for chart in charts] == [["curves", "hover"]] * 3
    assert all("datasets" not in json.loads(chart.proto.spec) for chart in charts)

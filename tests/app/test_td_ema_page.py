"""The TD-EMA page on the demo run: charts, warmup, URL-bound knobs, the weight preview, and
its messages for logs without TD statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app.conftest import Dashboard
from tests.support import TINY_DEMO


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def captions(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption)


def test_the_page_draws_ema_and_batch_charts_with_the_warmup_marked(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("td_ema", demo_run)
    assert not at.exception
    text = captions(at)
    assert f"warmup ({TINY_DEMO.td_warmup} updates" in text
    assert not at.get("plotly_chart")
    specs = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    assert [spec["title"]["text"] for spec in specs] == [
        "TD error mean: EMA vs each batch", "TD error std: EMA vs each batch",
        f"Previewed TD weights at step {last_step(demo_run)}",
        "Fraction of TD weights clipped at each bound"]
    # The warmup's end is named in the legend of both statistics' charts.
    for spec in specs[:2]:
        legend = spec["layer"][1]["encoding"]["color"]["scale"]["domain"]
        assert f"warmup ends ({TINY_DEMO.td_warmup} updates)" in legend


def last_step(run: Path) -> int:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return max(json.loads(line)["step"] for line in lines if '"kind": "train"' in line)


def test_the_sliders_default_to_the_runs_own_settings(dashboard: Dashboard,
                                                      demo_run: Path) -> None:
    at = dashboard("td_ema", demo_run)
    assert at.slider(key="td_beta").value == TINY_DEMO.beta
    assert at.slider(key="td_min_weight").value == TINY_DEMO.min_weight
    assert at.slider(key="td_max_weight").value == TINY_DEMO.max_weight
    # At the run's settings the logged fractions are shown beside the preview.
    assert metric(at, "Clipped at min (logged)").endswith("%")


def test_query_parameters_restore_the_knobs(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("td_ema", demo_run,
                   query={"td_smooth": "0.3", "td_beta": "2.0", "td_max_weight": "3.0"})
    assert not at.exception
    assert at.slider(key="td_smooth").value == 0.3
    assert at.slider(key="td_beta").value == 2.0
    assert at.slider(key="td_max_weight").value == 3.0


def test_a_lower_max_weight_clips_more_at_max(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("td_ema", demo_run)
    before = float(metric(at, "Clipped at max (preview)").rstrip("%"))
    at.slider(key="td_max_weight").set_value(1.0).run()
    assert not at.exception
    after = float(metric(at, "Clipped at max (preview)").rstrip("%"))
    assert after > before
    # Off the run's settings there is no logged value to compare with.
    assert not any(m.label.endswith("(logged)") for m in at.metric)


def test_equal_bounds_clip_every_weight_at_one_bound_or_the_other(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("td_ema", demo_run, query={"td_min_weight": "1.0", "td_max_weight": "1.0"})
    assert not at.exception
    # As training counts: raised to 1 (clipped at min) or lowered to 1 (clipped at max).
    low = float(metric(at, "Clipped at min (preview)").rstrip("%"))
    high = float(metric(at, "Clipped at max (preview)").rstrip("%"))
    assert low + high == pytest.approx(100.0, abs=0.15)


def test_the_demo_is_previewed_from_its_logged_td_error_distribution(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("td_ema", demo_run)
    assert "from the logged distribution" in captions(at)
    for bound in ("min", "max"):
        preview = float(metric(at, f"Clipped at {bound} (preview)").rstrip("%"))
        logged = float(metric(at, f"Clipped at {bound} (logged)").rstrip("%"))
        assert abs(preview - logged) < 0.5


def test_a_log_without_the_distribution_is_previewed_as_normal_and_says_so(
    dashboard: Dashboard, run_copy: Path
) -> None:
    log = run_copy / "metrics.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for record in records:
        record.pop("td/norm_quantiles", None)
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    at = dashboard("td_ema", run_copy)
    assert not at.exception
    assert "assumes each batch's TD errors were Normal(batch mean, batch std)" in captions(at)
    assert metric(at, "Clipped at min (preview, Normal)").endswith("%")


def test_records_appended_to_the_log_are_shown_on_the_next_run(
    dashboard: Dashboard, run_copy: Path
) -> None:
    at = dashboard("td_ema", run_copy)
    updates = len([1 for line in (run_copy / "metrics.jsonl").read_text().splitlines()
                   if "td/ema_mean" in json.loads(line)])
    assert f"{updates:,} updates." in captions(at)
    log = run_copy / "metrics.jsonl"
    last = next(json.loads(line) for line in reversed(log.read_text().splitlines())
                if "td/ema_mean" in json.loads(line))
    with log.open("a") as out:
        out.write(json.dumps({**last, "step": last["step"] + 1}) + "\n")
    at.run()
    assert not at.exception
    assert f"{updates + 1:,} updates." in captions(at)


def test_a_log_without_train_records_says_so_naming_the_file(
    dashboard: Dashboard, run_copy: Path
) -> None:
    log = run_copy / "metrics.jsonl"
    kept = [line for line in log.read_text().splitlines()
            if json.loads(line)["kind"] != "train"]
    log.write_text("\n".join(kept) + "\n")
    at = dashboard("td_ema", run_copy)
    assert not at.exception
    assert any("no train record with TD statistics" in i.value and str(log) in i.value
               for i in at.info)


def test_torn_log_lines_are_skipped_and_listed(dashboard: Dashboard, run_copy: Path) -> None:
    log = run_copy / "metrics.jsonl"
    with log.open("a") as out:
        out.write('{"step": 9999, "kind": "tr\nnot json\n')
    at = dashboard("td_ema", run_copy)
    assert not at.exception
    assert any("log lines skipped" in e.label for e in at.expander)


def test_a_checkpoint_without_a_log_says_there_is_no_metrics_file(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("td_ema", demo_run / "checkpoint")
    assert not at.exception
    assert any("no metrics.jsonl" in i.value for i in at.info)

"""The Sampling lab page: Resample, Draw N, URL state, and its messages for bad buffers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bufcore import DictBuffer, load_buffer
from bufcore.inspect import summarize_checkpoint
from tests.app.conftest import PAGES, Dashboard

# The lazy expander of the batch table, opened: its table is the drawn rows.
TABLE = ("lab_table",)


def _rows(at: object) -> list[int]:
    return at.dataframe[0].value["row"].tolist()  # type: ignore[attr-defined]


def _button(at: object, label: str) -> object:
    return next(b for b in at.button if b.label.startswith(label))  # type: ignore[attr-defined]


def test_resample_draws_a_different_batch(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("sampling_lab", demo_run, opened=TABLE, query={"buffer": "train"})
    assert not at.exception
    first = _rows(at)
    _button(at, "Resample").click().run()  # type: ignore[attr-defined]
    assert not at.exception
    assert _rows(at) != first


def test_draw_n_reports_a_p_value(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "expert", "lab_draws": "50"})
    _button(at, "Draw 50").click().run()  # type: ignore[attr-defined]
    assert not at.exception
    p_value = next(m.value for m in at.metric if m.label == "chi-square p-value")
    assert 0.0 <= float(p_value) <= 1.0


def test_query_parameters_restore_seed_and_batch(dashboard: Dashboard, demo_run: Path) -> None:
    query = {"buffer": "train", "lab_seed": "17", "lab_batch": "64", "lab_weighting": "window"}
    at = dashboard("sampling_lab", demo_run, opened=TABLE, query=query)
    assert not at.exception
    assert at.number_input(key="lab_seed").value == 17
    assert at.number_input(key="lab_batch").value == 64
    assert at.radio(key="lab_weighting").value == "window"
    assert len(_rows(at)) == 64
    assert "manual_seed(17)" in at.code[0].value
    assert "with_weighting('window')" in at.code[0].value


def test_the_same_link_reproduces_the_same_first_batch(
    dashboard: Dashboard, demo_run: Path
) -> None:
    query = {"buffer": "z", "lab_seed": "5", "lab_batch": "32"}
    first = _rows(dashboard("sampling_lab", demo_run, opened=TABLE, query=query))
    assert _rows(dashboard("sampling_lab", demo_run, opened=TABLE, query=query)) == first


def test_an_empty_buffer_says_there_is_nothing_to_sample(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    path = tmp_path / "empty"
    DictBuffer(capacity=3).save(path)
    at = dashboard("sampling_lab", path)
    assert not at.exception
    assert any("nothing to sample" in info.value for info in at.info)


def test_an_unreadable_buffer_is_named_in_a_message(dashboard: Dashboard, run_copy: Path) -> None:
    (run_copy / "checkpoint/buffers/expert/buffer.hdf5").write_bytes(b"garbage")
    at = dashboard("sampling_lab", run_copy, query={"buffer": "expert"})
    assert not at.exception
    assert any("expert" in w.value for w in at.warning)


def test_a_batch_that_is_not_a_multiple_of_seq_length_shows_the_sampler_message(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "train", "lab_batch": "30"})
    assert not at.exception
    assert any("divisible" in e.value for e in at.error)


def test_resample_moves_the_seed_in_the_url_so_the_link_shows_the_same_batch(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("sampling_lab", demo_run, opened=TABLE,
                   query={"buffer": "train", "lab_seed": "7"})
    _button(at, "Resample").click().run()  # type: ignore[attr-defined]
    assert not at.exception
    assert at.number_input(key="lab_seed").value == 8
    assert at.query_params["lab_seed"] == "8"
    assert "manual_seed(8)" in at.code[0].value
    shown = _rows(at)
    link = dict(at.query_params)
    assert _rows(dashboard("sampling_lab", demo_run, opened=TABLE, query=link)) == shown


def test_draw_n_counts_batches_and_windows_under_their_own_names(
    dashboard: Dashboard, demo_run: Path
) -> None:
    query = {"buffer": "train", "lab_draws": "20", "lab_batch": "64", "lab_seq": "8"}
    at = dashboard("sampling_lab", demo_run, query=query)
    _button(at, "Draw 20 batches").click().run()  # type: ignore[attr-defined]
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Batches drawn"] == "20"
    assert metrics["Windows drawn"] == "160"  # 20 batches x 8 windows of 8 rows
    assert "Draws" not in metrics


def test_the_batch_count_box_has_a_visible_label(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "train"})
    box = at.number_input(key="lab_draws")
    assert box.label == "Batches to draw"
    assert box.proto.label_visibility.value == box.proto.label_visibility.VISIBLE


def test_the_count_of_trajectories_is_spelled_as_a_plural(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "train", "lab_draws": "5"})
    _button(at, "Draw 5").click().run()  # type: ignore[attr-defined]
    labels = [m.label for m in at.metric]
    assert "Trajectories" in labels and "Trajectorys" not in labels
    spec = at.get("vega_lite_chart")[-1].proto.spec
    assert "rajectorys" not in spec


def test_the_expert_landing_chart_draws_the_motion_boundaries(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "expert"})
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    (rule,) = [one for one in spec["layer"] if one["mark"]["type"] == "rule"]
    assert rule["data"] == {"name": "boundaries"}


@pytest.mark.parametrize(("buffer", "landing", "frequency"), [
    ("expert", "draws along the", "Empirical vs expected frequency per motion"),
    ("z", "draws along the", "Empirical vs expected frequency per row bin"),
    ("train", "windows on the episode map", "Empirical vs expected frequency per trajectory"),
])
def test_the_lab_draws_every_chart_with_vega_lite_and_none_with_plotly(
    dashboard: Dashboard, demo_run: Path, buffer: str, landing: str, frequency: str
) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": buffer, "lab_draws": "5"})
    _button(at, "Draw 5").click().run()  # type: ignore[attr-defined]
    assert not at.exception
    assert not at.get("plotly_chart")
    first, second = [json.loads(c.proto.spec)["title"]["text"]
                     for c in at.get("vega_lite_chart")]
    assert first.startswith("Where the batch landed: ") and landing in first
    assert second == frequency


def test_applying_priorities_on_the_curriculum_page_turns_them_on_in_the_lab(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("curriculum", demo_run, query={"cur_mode": "lin"})
    at.button(key="cur_apply").click().run()
    at.switch_page(PAGES["sampling_lab"]).run()
    assert not at.exception
    assert at.toggle(key="lab_reprioritized").value is True
    assert "re-prioritized priorities" in at.code[0].value


def test_the_snippet_pins_the_checkpoint_it_drew_from(
    dashboard: Dashboard, demo_run: Path
) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "expert"})
    digest = summarize_checkpoint(demo_run / "checkpoint/buffers/expert").digest
    assert digest is not None and f"!= {digest!r}" in at.code[0].value
    assert at.query_params["lab_pin"] == digest[:16]


def test_a_link_made_on_another_checkpoint_warns(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "expert", "lab_pin": "0" * 16})
    assert not at.exception
    assert any("link was made on another checkpoint" in w.value for w in at.warning)


def test_a_checkpoint_replaced_between_draws_warns(dashboard: Dashboard, run_copy: Path) -> None:
    at = dashboard("sampling_lab", run_copy, query={"buffer": "expert"})
    assert not at.warning
    path = run_copy / "checkpoint/buffers/expert"
    buffer = load_buffer(path)
    buffer.update_priorities(torch.linspace(1.0, 2.0, len(buffer.priorities)),
                             torch.arange(len(buffer.priorities)))
    buffer.save(path)
    _button(at, "Resample").click().run()  # type: ignore[attr-defined]
    assert not at.exception
    assert any("now holds another checkpoint" in w.value for w in at.warning)


def test_downloading_the_batch_does_not_rerun_the_lab(dashboard: Dashboard, demo_run: Path) -> None:
    (button,) = dashboard("sampling_lab", demo_run, query={"buffer": "expert"}).get(
        "download_button")
    assert button.proto.ignore_rerun  # on_click="ignore": no new draw, no redraw

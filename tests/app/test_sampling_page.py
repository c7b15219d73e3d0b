"""The Sampling lab page: Resample, Draw N, URL state, and its messages for bad buffers."""

from __future__ import annotations

from pathlib import Path

from bufcore import DictBuffer
from tests.app.conftest import Dashboard


def _rows(at: object) -> list[int]:
    return at.dataframe[0].value["row"].tolist()  # type: ignore[attr-defined]


def _button(at: object, label: str) -> object:
    return next(b for b in at.button if b.label.startswith(label))  # type: ignore[attr-defined]


def test_resample_draws_a_different_batch(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("sampling_lab", demo_run, query={"buffer": "train"})
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
    at = dashboard("sampling_lab", demo_run, query=query)
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
    first = _rows(dashboard("sampling_lab", demo_run, query=query))
    assert _rows(dashboard("sampling_lab", demo_run, query=query)) == first


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

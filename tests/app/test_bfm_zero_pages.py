"""A BFM-Zero work directory, laid out as BFM-Zero writes it, opens on every page: each page
draws what the run has and says plainly what it needs and the run lacks (no metrics.jsonl, no
run.json, only the train buffer), never an empty chart or an error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bufcore.inspect import summarize_checkpoint
from tests.app.conftest import PAGES, Dashboard

# What each page can draw from the train buffer alone, or the lack it names instead.
DRAWS = {
    "overview": "Checkpoint env step",
    "fifo": "Capacity (time rows)",
    "trajectories": None,
    "sampling_lab": None,
    "compare": None,
}
LACKS = {
    "z_buffer": "This needs a ZBuffer checkpoint",
    "curriculum": "This needs evaluation rounds",
    "td_ema": "This needs `train` records with TD statistics",
    "live": "This needs a metrics.jsonl to follow",
    "fifo": "This needs `buffer` records in metrics.jsonl",
}


@pytest.mark.parametrize("where", ["", "checkpoint"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_a_bfm_zero_work_directory_and_its_checkpoint(
    dashboard: Dashboard, bfm_zero_run: Path, page: str, where: str
) -> None:
    at = dashboard(page, bfm_zero_run / where if where else bfm_zero_run)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    assert not any("buffer.hdf5: file is missing" in w.value for w in at.warning)


@pytest.mark.parametrize("page", sorted(LACKS))
def test_a_page_says_what_it_needs_and_what_the_bfm_zero_run_lacks(
    dashboard: Dashboard, bfm_zero_run: Path, page: str
) -> None:
    at = dashboard(page, bfm_zero_run)
    (said,) = [i.value for i in at.info if LACKS[page] in i.value]
    assert "no metrics.jsonl" in said and "buffer `train` (TrajectoryDictBufferMultiDim)" in said
    assert "BFM-Zero checkpoints its train buffer" in said


@pytest.mark.parametrize("page", ["overview", "fifo"])
def test_a_page_draws_what_the_train_buffer_alone_gives(
    dashboard: Dashboard, bfm_zero_run: Path, page: str
) -> None:
    at = dashboard(page, bfm_zero_run)
    assert DRAWS[page] in [m.label for m in at.metric]


def test_the_overview_lists_what_the_bfm_zero_run_lacks(
    dashboard: Dashboard, bfm_zero_run: Path
) -> None:
    at = dashboard("overview", bfm_zero_run)
    (lacks,) = [i.value for i in at.info if i.value.startswith("What this run lacks")]
    assert "No metrics.jsonl" in lacks and "No checkpoint/run.json" in lacks
    assert "No expert buffer" in lacks and "No z buffer" in lacks
    assert any("BFM-Zero's format" in s.value for s in at.success)


def test_the_curriculum_draws_an_expert_buffers_saved_priorities_without_a_log(
    dashboard: Dashboard, bfm_zero_run: Path, demo_run: Path
) -> None:
    shutil.copytree(demo_run / "checkpoint" / "buffers" / "expert",
                    bfm_zero_run / "checkpoint" / "buffers" / "expert")
    at = dashboard("curriculum", bfm_zero_run)
    assert not at.exception and not at.error
    assert "Priorities saved in the expert buffer `expert`" in [s.value for s in at.subheader]
    assert {m.label for m in at.metric} == {"Motions", "Entropy (nats)", "Effective motions"}
    assert not at.get("plotly_chart") and len(at.get("vega_lite_chart")) == 1


def test_the_sampling_lab_pins_a_bfm_zero_checkpoint_by_its_file_stamp(
    dashboard: Dashboard, bfm_zero_run: Path
) -> None:
    at = dashboard("sampling_lab", bfm_zero_run)
    stamp = summarize_checkpoint(bfm_zero_run / "checkpoint" / "buffers" / "train").file_stamp
    assert stamp is not None and f".file_stamp != {stamp!r}" in at.code[0].value
    assert at.query_params["lab_pin"] == stamp[:16]

"""The Overview page on a demo run, and its messages for what cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import pytest

from tests.app.conftest import Dashboard, shown
from tests.support import reseal, rewrite_file


def test_overview_lists_every_buffer_of_the_demo_run(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("overview", demo_run)
    assert not at.exception
    table = at.dataframe[0].value
    assert sorted(table["buffer"]) == ["expert", "train", "z"]
    kinds = dict(zip(table["buffer"], table["kind"], strict=True))
    assert kinds["train"] == "TrajectoryDictBufferMultiDim"


def test_overview_shows_the_run_step_and_round(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("overview", demo_run)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Checkpoint step"] == "60"
    assert metrics["Curriculum round"] == "2"


def test_a_corrupt_buffer_shows_its_error_and_the_others_still_show(
    dashboard: Dashboard, run_copy: Path
) -> None:
    payload = run_copy / "checkpoint" / "buffers" / "z" / "config.json"
    payload.write_text("{not json")
    at = dashboard("overview", run_copy)
    assert not at.exception
    assert any("config.json" in e.value for e in at.error)
    table = at.dataframe[0].value
    kinds = dict(zip(table["buffer"], table["kind"], strict=True))
    assert kinds["z"] == "unreadable" and kinds["train"] == "TrajectoryDictBufferMultiDim"


def test_torn_log_lines_are_listed_as_skipped(dashboard: Dashboard, run_copy: Path) -> None:
    with open(run_copy / "metrics.jsonl", "a") as log:
        log.write('{"step": 1, "kind"\n')
    at = dashboard("overview", run_copy)
    assert not at.exception
    assert any("1 log lines skipped" in e.label for e in at.expander)


def test_a_typed_path_outside_the_roots_is_refused(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("overview", demo_run)
    at.sidebar.text_input(key="open_path").input("/etc").run()
    assert not at.exception
    assert any("outside the dashboard's roots" in e.value for e in at.sidebar.error)


def test_a_typed_directory_that_is_not_a_run_is_refused(
    dashboard: Dashboard, tmp_path: Path, demo_run: Path
) -> None:
    (tmp_path / "notes").mkdir()
    at = dashboard("overview", demo_run, roots=(tmp_path,))
    at.sidebar.text_input(key="open_path").input("notes").run()
    assert any("not a run directory" in e.value for e in at.sidebar.error)


def test_a_typed_checkpoint_inside_a_root_opens(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("overview", demo_run)
    at.sidebar.text_input(key="open_path").input("checkpoint/buffers/z").run()
    assert not at.exception
    assert list(at.dataframe[0].value["buffer"]) == ["z"]


def test_no_runs_under_the_roots_says_how_to_start_one(
    dashboard: Dashboard, tmp_path: Path
) -> None:
    at = dashboard("overview", roots=(tmp_path,))
    assert not at.exception
    assert any("bufcore demo" in i.value for i in at.info)


def test_the_run_query_parameter_picks_the_run(
    dashboard: Dashboard, demo_run: Path, tmp_path: Path
) -> None:
    import shutil

    for name in ("a", "b"):
        shutil.copytree(demo_run, tmp_path / name)
    at = dashboard("overview", roots=(tmp_path,), query={"run": "b"})
    assert at.sidebar.selectbox(key="run").value == "b"
    assert str(tmp_path / "b") in at.caption[0].value


# ---------------------------------------------------------------------------- health check
def set_target(buffer: Path, target: str) -> None:
    """Name another ``__target__`` in config.json and the manifest, re-sealed as a hand edit
    would be."""
    config = json.loads((buffer / "config.json").read_text())
    config["__target__"] = target
    rewrite_file(buffer, "config.json", json.dumps(config).encode())
    reseal(buffer, lambda manifest: manifest.update(target=target))


def flip_a_row_byte(buffer: Path) -> None:
    payload = buffer / "buffer.hdf5"
    with h5py.File(payload, "r") as h5:
        offset = h5["action"].id.get_offset()
    data = bytearray(payload.read_bytes())
    data[offset] ^= 0xFF
    payload.write_bytes(bytes(data))


def test_a_whole_run_is_reported_healthy(dashboard: Dashboard, demo_run: Path) -> None:
    at = dashboard("overview", demo_run)
    (healthy,) = at.success
    assert healthy.value == ("Healthy: all 3 buffers open (rows verified against the manifest); "
                             "run.json and metrics.jsonl read.")
    health = dict(zip(at.dataframe[0].value["buffer"], at.dataframe[0].value["health"],
                      strict=True))
    assert set(health.values()) == {"ok: rows match the manifest"}


def test_rows_that_fail_verification_are_an_error_naming_the_block(
    dashboard: Dashboard, run_copy: Path
) -> None:
    flip_a_row_byte(run_copy / "checkpoint" / "buffers" / "train")
    at = dashboard("overview", run_copy)
    assert not at.exception and not at.success
    (error,) = at.error
    assert error.value.startswith("Buffer `train` is damaged")
    assert "buffer.hdf5: sha256 of block 0" in error.value
    health = dict(zip(at.dataframe[0].value["buffer"], at.dataframe[0].value["health"],
                      strict=True))
    assert health["train"].startswith("damaged")


@pytest.mark.parametrize("target", ["os.system", "bufcore.NoSuchBuffer", ""])
def test_an_unknown_target_is_an_error_with_the_reason(
    dashboard: Dashboard, run_copy: Path, target: str
) -> None:
    set_target(run_copy / "checkpoint" / "buffers" / "z", target)
    at = dashboard("overview", run_copy)
    assert not at.exception and not at.success
    (error,) = at.error
    assert error.value.startswith("Buffer `z` cannot be used")
    assert f"unknown __target__ {target!r}" in shown(error.value)
    kinds = dict(zip(at.dataframe[0].value["buffer"], at.dataframe[0].value["kind"], strict=True))
    assert kinds["z"] == "unreadable"


@pytest.mark.parametrize("page", ["fifo", "sampling_lab", "z_buffer", "trajectories"])
def test_a_page_left_without_a_usable_buffer_says_why_each_is_unusable(
    dashboard: Dashboard, run_copy: Path, page: str
) -> None:
    for name in ("train", "expert", "z"):
        set_target(run_copy / "checkpoint" / "buffers" / name, "os.system")
    at = dashboard(page, run_copy)
    assert not at.exception
    unusable = [shown(e.value) for e in at.error if "is unusable" in e.value]
    assert unusable and all("unknown __target__ 'os.system'" in e for e in unusable)
    assert any(i.value.startswith("This needs a") for i in at.info)

"""The dashboard opens RLinf buffer directories (bufcore's and laid out as RLinf writes them):
Overview, Trajectories, Sampling lab and FIFO show them; the other pages say what they need;
hostile directories show an error with the reason; nothing is written into the directory."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from streamlit.testing.v1 import AppTest

from app import loaders
from app.sources import DashboardConfig, discover
from bufcore import Trajectory, TrajectoryReplayBuffer
from bufcore.inspect import RLINF_DIRECTORY
from tests.app.conftest import Dashboard, shown
from tests.buffers.rlinf.rlinf_data import trajectory, write_rlinf_directory

RLINF_PAGES = ("overview", "trajectories", "sampling_lab", "fifo")
# What each page that cannot show an RLinf directory says instead.
OTHER_PAGES = {
    "z_buffer": "is an RLinf buffer directory holding 12 trajectories",
    "curriculum": "is an RLinf buffer directory holding 12 trajectories",
    "td_ema": "is an RLinf buffer directory holding 12 trajectories",
    "replay": "is an RLinf buffer directory holding 12 trajectories",
    "metrics": "no metrics.jsonl here",
    "live": "metrics.jsonl: no records yet",
    "compare": "Both sides need an online",
}


def with_dones(number: int, steps: int, envs: int, *, weights: str = "w") -> Trajectory:
    """:func:`trajectory` whose env 0 ends an episode every third step (one epoch row)."""
    item = trajectory(number, steps, envs, weights=weights)
    dones = torch.zeros(steps + 1, envs, dtype=torch.bool)
    dones[3::3, 0] = True
    item.dones = dones
    return item


@pytest.fixture
def ours(tmp_path: Path) -> Path:
    """A directory written by bufcore's TrajectoryReplayBuffer (auto_save): 12 trajectories."""
    path = tmp_path / "runs" / "ours"
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(path))
    rb.add_trajectories([with_dones(i, 6 + i % 3, 2, weights=f"step_{i // 4}")
                         for i in range(12)])
    rb.close()
    return path


@pytest.fixture
def theirs(tmp_path: Path) -> Path:
    """A checkpoint laid out as RLinf writes one: 8 indexed, files only for ids 4-7."""
    path = tmp_path / "runs" / "theirs"
    write_rlinf_directory(path, [trajectory(i, 4, 2) for i in range(8)], with_files=[4, 5, 6, 7])
    return path


def texts(at: AppTest) -> str:
    parts = [el.value for kind in ("error", "warning", "info", "success", "caption", "markdown")
             for el in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def with_options(at: AppTest, **values: int) -> AppTest:
    """Set sidebar or page number inputs by key and rerun (a page opened after the Overview
    starts its widgets afresh, as a page switch in the browser does)."""
    for key, value in values.items():
        at.number_input(key=key).set_value(value)
    return at.run()


def snapshot(path: Path) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in path.iterdir())


def test_discovery_lists_rlinf_directories_under_the_roots(ours: Path, theirs: Path) -> None:
    found = discover(DashboardConfig((), (ours.parent,)))
    assert {(s.label, s.kind) for s in found} == {("ours", RLINF_DIRECTORY),
                                                  ("theirs", RLINF_DIRECTORY)}


def test_a_typed_path_opens_an_rlinf_directory(dashboard: Dashboard, ours: Path) -> None:
    at = dashboard("overview", roots=(ours.parent,), query={"open_path": str(ours)})
    assert not at.exception
    assert metrics(at)["Trajectories"] == "12"
    assert "Showing the typed path" in "\n".join(c.value for c in at.sidebar.caption)


def test_the_overview_shows_counts_window_cache_and_leaves(
    dashboard: Dashboard, ours: Path
) -> None:
    at = dashboard("overview", ours, query={"rl_window": "5", "rl_cache": "2"})
    assert not at.exception
    assert metrics(at) == {"Trajectories": "12", "Samples (rows)": "168",
                           "In the window": "5", "Cached": "2", "Format": "pt"}
    assert "Healthy" in at.success[0].value
    table = at.dataframe[0].value
    values = dict(zip(table["what"], table["value"], strict=True))
    assert values["window"] == "5: ids 7..11, 5 trajectories, 72 samples"
    assert values["cache"] == "2: ids 10..11, 2 trajectories, 30 samples"
    assert values["seed"] == "1234"
    leaves = at.dataframe[1].value
    assert "['curr_obs']['state']" in leaves["key path"].tolist()


def test_an_rlinf_checkpoint_with_absent_files_shows_an_error_naming_them(
    dashboard: Dashboard, theirs: Path
) -> None:
    at = dashboard("overview", theirs)
    assert not at.exception
    assert "4 trajectories whose file is absent" in at.error[0].value
    assert "trajectory_0_w.pt" in at.error[0].value
    assert metrics(at)["In the window"] == "4"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("symlink", "symbolic link"),
        ("index", "trajectory_index.json"),
        ("pickle payload", "weights_only load refuses"),
        ("shape", "the index says"),
    ],
)
def test_a_hostile_directory_shows_an_error_with_the_reason(
    dashboard: Dashboard, theirs: Path, tmp_path: Path, damage: str, reason: str
) -> None:
    newest = theirs / "trajectory_7_w.pt"
    if damage == "symlink":
        newest.rename(tmp_path / "outside.pt")
        newest.symlink_to(tmp_path / "outside.pt")
    elif damage == "index":
        (theirs / "trajectory_index.json").write_text("{not json")
    elif damage == "pickle payload":
        torch.save({"rewards": _Evil()}, newest)
    else:
        torch.save({"rewards": torch.zeros(9, 2)}, newest)
    at = dashboard("overview", theirs)
    assert not at.exception
    assert any(reason in shown(e.value) for e in at.error), [e.value for e in at.error]


class _Evil:
    """An object whose unpickling would run code (a weights_only load refuses it)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("unpickled!",))


def pkl_directory(path: Path) -> Path:
    """A pkl-format directory whose files would run code if unpickled."""
    write_rlinf_directory(path, [trajectory(i, 2, 2) for i in range(3)], with_files=[])
    metadata = path / "metadata.json"
    metadata.write_text(json.dumps({**json.loads(metadata.read_text()),
                                    "trajectory_format": "pkl"}))
    for i in range(3):
        (path / f"trajectory_{i}_w.pkl").write_bytes(pickle.dumps(_Evil()))
    return path


@pytest.mark.parametrize("page", ["overview", "trajectories"])
def test_a_pkl_directory_is_summarized_and_never_unpickled(
    dashboard: Dashboard, tmp_path: Path, page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = pkl_directory(tmp_path / "runs" / "pkl")
    at = dashboard(page, path)
    assert not at.exception
    assert "never opens them" in texts(at)
    assert "unpickled!" not in capsys.readouterr().out


def test_the_trajectories_page_shows_episodes_inside_the_trajectories_read(
    dashboard: Dashboard, ours: Path
) -> None:
    at = dashboard("trajectories", ours, query={"rl_read": "3"})
    assert not at.exception
    assert "Reading 3 of 12 trajectory files: positions 9..11 (ids 9..11)" in texts(at)
    table = at.dataframe[-1].value
    assert table["trajectory id"].tolist() == [9, 10, 11]
    assert table["T"].tolist() == [6, 7, 8]
    # Env 0 ends an episode at steps 2, 5 (after the epoch row is dropped): 2 flags, 1 whole.
    assert table["episodes ended"].tolist() == [2, 2, 2]
    assert table["whole episodes"].tolist() == [1, 1, 1]
    assert table["end flag"].tolist() == ["dones"] * 3
    assert not at.get("plotly_chart")
    assert [json.loads(c.proto.spec)["title"]["text"] for c in at.get("vega_lite_chart")] == [
        "Samples per trajectory (T x B rows each)", "Episode lengths inside each trajectory read",
        "Episode segment lengths"]


def test_the_trajectories_page_reads_a_bounded_number_of_files(
    dashboard: Dashboard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs" / "many"
    write_rlinf_directory(path, [trajectory(i, 1, 1) for i in range(250)])
    reads: list[int] = []
    real = loaders.read_rlinf_trajectory

    def counted(index: Any, trajectory_id: int) -> Any:
        reads.append(trajectory_id)
        return real(index, trajectory_id)

    monkeypatch.setattr(loaders, "read_rlinf_trajectory", counted)
    at = dashboard("trajectories", path)
    assert not at.exception
    assert sorted(reads) == list(range(230, 250))
    assert "Reading 20 of 250 trajectory files" in texts(at)


@pytest.mark.parametrize(("page", "key"), [("trajectories", "tr_index_table"),
                                           ("sampling_lab", "lab_rlinf_table")])
def test_a_table_is_sent_only_once_its_expander_is_open(
    dashboard: Dashboard, ours: Path, page: str, key: str
) -> None:
    closed = dashboard(page, ours)
    opened = dashboard(page, ours, opened=(key,))
    assert not closed.exception and not opened.exception
    assert len(opened.dataframe) == len(closed.dataframe) + 1


def test_the_sampling_lab_draws_from_the_window_and_its_snippet_reproduces_the_batch(
    dashboard: Dashboard, ours: Path
) -> None:
    at = with_options(dashboard("sampling_lab", ours, opened=("lab_rlinf_table",)),
                      rl_window=3, lab_batch=40, lab_seed=7)
    assert not at.exception
    batch = at.dataframe[0].value
    assert set(batch["trajectory_id"]) <= {9, 10, 11}
    code = at.code[0].value
    assert "sample_window_size=3" in code and "manual_seed(7)" in code
    scope: dict[str, Any] = {}
    exec(code, scope)  # the exported snippet, run as a user would
    rewards = scope["batch"]["rewards"].long()
    assert (rewards // 1000).tolist() == batch["trajectory_id"].tolist()
    assert (rewards % 1000).tolist() == batch["row"].tolist()


def test_the_sampling_lab_compares_drawn_with_expected_frequencies(
    dashboard: Dashboard, ours: Path
) -> None:
    at = with_options(dashboard("sampling_lab", ours), rl_window=4, lab_draws=50)
    next(b for b in at.button if b.label == "Draw 50 batches").click().run()
    assert not at.exception
    shown = metrics(at)
    assert shown["Rows drawn"] == f"{50 * 256:,}"
    assert shown["Trajectories"] == "4"
    assert float(shown["chi-square p-value"]) > 1e-6
    assert not at.get("plotly_chart")
    assert [json.loads(c.proto.spec)["title"]["text"] for c in at.get("vega_lite_chart")] == [
        "Where the batch landed: 256 rows", "Empirical vs expected frequency per trajectory"]


def test_resample_moves_the_seed_on(dashboard: Dashboard, ours: Path) -> None:
    at = dashboard("sampling_lab", ours, query={"lab_seed": "3"})
    next(b for b in at.button if b.label == "Resample").click().run()
    assert not at.exception
    assert "Seed 4:" in texts(at)


def test_the_fifo_page_shows_which_ids_the_window_and_cache_hold(
    dashboard: Dashboard, theirs: Path
) -> None:
    at = with_options(dashboard("fifo", theirs), rl_window=3, rl_cache=2)
    assert not at.exception
    shown = metrics(at)
    assert (shown["Window"], shown["Cache"], shown["Without a file"]) == ("5..7", "6..7", "4")
    assert not at.get("plotly_chart")
    titles = [json.loads(c.proto.spec)["title"]["text"] for c in at.get("vega_lite_chart")]
    assert titles == ["Trajectory ids, oldest to newest",
                      "How the window slid as trajectories were added"]


@pytest.mark.parametrize("page", RLINF_PAGES)
def test_no_page_writes_into_the_directory(dashboard: Dashboard, ours: Path, page: str) -> None:
    before = snapshot(ours)
    at = dashboard(page, ours)
    assert not at.exception
    assert snapshot(ours) == before


@pytest.mark.parametrize("page", list(OTHER_PAGES))
def test_other_pages_say_what_they_need_for_an_rlinf_directory(
    dashboard: Dashboard, ours: Path, page: str
) -> None:
    at = dashboard(page, ours)
    assert not at.exception
    assert OTHER_PAGES[page] in texts(at)

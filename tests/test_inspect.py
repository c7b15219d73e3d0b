"""bufcore.inspect, the public read-only view: every public name is there and does what its home
module does; window settings come from the class parser with ``need``; the sampler maths it
exposes is what the sampler draws from. (Summaries, single-leaf reads and source kinds are tested
in depth in tests/runs/.)"""

from __future__ import annotations

import inspect
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import bufcore
import bufcore.inspect as view
from bufcore import DictBuffer, TrajectoryDictBuffer, TrajectoryDictBufferMultiDim, ZBuffer
from bufcore.errors import CorruptCheckpointError
from bufcore.runs.demo import run_demo
from tests.support import TINY_DEMO, reseal, rewrite_file


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny demo run (read only)."""
    root = tmp_path_factory.mktemp("inspect") / "run"
    run_demo(root, TINY_DEMO)
    return root


def expert(lengths: list[int], **options: object) -> TrajectoryDictBuffer:
    episodes = [
        {"observation": np.full((n, 2), i, np.float32), "motion_id": np.full((n, 1), 10 + i)}
        for i, n in enumerate(lengths)
    ]
    return TrajectoryDictBuffer(episodes, **options)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ the surface
@pytest.mark.parametrize("name", view.__all__)
def test_every_public_name_exists_and_is_documented(name: str) -> None:
    value = getattr(view, name)
    if inspect.isfunction(value) or inspect.isclass(value):
        assert value.__module__.startswith("bufcore.")
        assert value.__doc__, f"bufcore.inspect.{name} has no docstring"


def test_the_view_is_not_part_of_the_buffer_surface() -> None:
    # bufcore exports the buffers; the read-only view is its own module, imported on demand.
    assert not set(view.__all__) & set(bufcore.__all__)


# ------------------------------------------------------------------------- run directories
def test_the_run_directory_names_are_the_files_a_demo_run_writes(demo: Path) -> None:
    assert (demo / view.METRICS_FILE).is_file()
    checkpoint = demo / view.CHECKPOINT_DIR
    assert (checkpoint / view.RUN_STATE).is_file()
    assert [p.name for p in view.buffer_dirs(checkpoint)] == sorted(
        p.name for p in (checkpoint / view.BUFFERS_DIR).iterdir()
    )
    assert all((p / view.CONFIG_FILE).is_file() for p in view.buffer_dirs(checkpoint))


@pytest.mark.parametrize(
    ("where", "kind"),
    [
        ("", view.RUN_DIRECTORY),
        ("checkpoint", view.RUN_CHECKPOINT),
        ("checkpoint/buffers/expert", view.BUFFER_CHECKPOINT),
    ],
)
def test_source_kind_names_each_kind_of_directory(demo: Path, where: str, kind: str) -> None:
    assert view.source_kind(demo / where if where else demo) == kind


def test_a_work_directory_with_only_buffers_is_a_bfm_zero_work_directory(tmp_path: Path) -> None:
    DictBuffer(capacity=4).save(tmp_path / "checkpoint" / "buffers" / "train")
    assert view.source_kind(tmp_path) == view.BFM_ZERO_WORKDIR


BFM_ZERO = Path(__file__).resolve().parent / "fixtures" / "bfm_zero_workdir"


@pytest.mark.parametrize(
    ("where", "kind"),
    [
        ("", view.BFM_ZERO_WORKDIR),
        ("checkpoint", view.RUN_CHECKPOINT),
        ("checkpoint/buffers/train", view.BUFFER_CHECKPOINT),
        ("checkpoint/model", None),
    ],
)
def test_source_kind_reads_a_bfm_zero_work_directory_as_bfm_zero_writes_it(
    where: str, kind: str | None
) -> None:
    assert view.source_kind(BFM_ZERO / where if where else BFM_ZERO) == kind


def bfm_zero_payload(folder: Path, config: bytes | None) -> Path:
    """``folder`` holding a BFM-Zero buffer.hdf5 and, unless None, ``config`` as config.json."""
    shutil.copytree(BFM_ZERO / "checkpoint" / "buffers" / "train", folder)
    if config is None:
        (folder / view.CONFIG_FILE).unlink()
    else:
        (folder / view.CONFIG_FILE).write_bytes(config)
    return folder


@pytest.mark.parametrize(
    ("config", "is_buffer"),
    [
        pytest.param(b'{"name": "FBcprAuxAgent", "model": {}}', False, id="an agent config"),
        pytest.param(b'{"__target__": "os.system"}', True, id="an unknown target"),
        pytest.param(b"{oops", True, id="damaged: the load names it"),
        pytest.param(b"[1, 2]", True, id="not an object: the load names it"),
        pytest.param(None, True, id="no config: the load names it"),
    ],
)
def test_a_config_json_beside_buffer_hdf5_is_a_buffer_unless_it_names_no_target(
    tmp_path: Path, config: bytes | None, is_buffer: bool
) -> None:
    folder = bfm_zero_payload(tmp_path / "ckpt", config)
    assert view.is_buffer_checkpoint(folder) is is_buffer


def test_a_config_json_with_a_target_but_no_buffer_hdf5_is_not_a_buffer(tmp_path: Path) -> None:
    (tmp_path / view.CONFIG_FILE).write_text('{"__target__": "bufcore.DictBuffer"}')
    assert view.source_kind(tmp_path) is None


def test_a_fifo_as_config_json_is_taken_as_damage_without_blocking(tmp_path: Path) -> None:
    folder = bfm_zero_payload(tmp_path / "ckpt", None)
    os.mkfifo(folder / view.CONFIG_FILE)
    assert view.is_buffer_checkpoint(folder) is True


def test_the_committed_bfm_zero_fixture_is_what_its_maker_writes(tmp_path: Path) -> None:
    from tests.fixtures.make_bfm_zero_workdir import write

    write(tmp_path / "work")
    made = sorted(p.relative_to(tmp_path / "work") for p in (tmp_path / "work").rglob("*"))
    assert made == sorted(p.relative_to(BFM_ZERO) for p in BFM_ZERO.rglob("*"))
    for name in made:
        if name.suffix == ".json":
            assert json.loads((BFM_ZERO / name).read_text()) == json.loads(
                (tmp_path / "work" / name).read_text()
            )


def test_run_state_and_the_curriculum_parsers_read_what_the_run_saved(demo: Path) -> None:
    state = view.read_run_state(demo / view.CHECKPOINT_DIR)
    curriculum = state["curriculum"]
    options = view.options_from_state(curriculum)
    assert options.mode in view.PRIORITY_MODES
    motions = set(curriculum["rounds"][0]["motion_ids"])
    rounds = view.rounds_from_state(curriculum, motions)
    summary = view.summarize_run_checkpoint(demo / view.CHECKPOINT_DIR)
    assert summary.curriculum is not None and summary.curriculum.rounds == len(rounds)


def test_the_metrics_summary_counts_every_record_and_keeps_the_last(demo: Path) -> None:
    lines = (demo / view.METRICS_FILE).read_text(encoding="utf-8").splitlines()
    summary = view.summarize_metrics(demo)
    assert summary.records == len(lines)
    assert summary.last == json.loads(lines[-1])


def test_inspect_path_renders_and_serialises_every_buffer(demo: Path) -> None:
    inspection = view.inspect_path(demo)
    names = [name for name, _ in inspection.buffers]
    assert [entry["name"] for entry in view.to_json(inspection)["buffers"]] == names
    text = "\n".join(view.render(inspection))
    assert all(f"buffer {name}:" in text for name in names)


@pytest.mark.parametrize(("count", "text"), [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB")])
def test_human_bytes_uses_binary_units(count: int, text: str) -> None:
    assert view.human_bytes(count) == text


def test_format_key_path_writes_a_key_path_as_its_subscripts() -> None:
    assert view.format_key_path(("observation", "state")) == "['observation']['state']"


# --------------------------------------------------------------- summaries and leaf reads
def online_with_envs() -> TrajectoryDictBufferMultiDim:
    buffer = TrajectoryDictBufferMultiDim(capacity=4, n_dim=2)
    buffer.extend({"observation": torch.zeros(1, 3, 2), "done": torch.zeros(1, 3, 1)})
    return buffer


@pytest.mark.parametrize(
    ("make", "kind", "batch_dims"),
    [
        (lambda: DictBuffer(capacity=4), "DictBuffer", 1),
        (online_with_envs, "TrajectoryDictBufferMultiDim", 2),
        (lambda: ZBuffer(4, 3), "ZBuffer", 1),
    ],
)
def test_a_summary_names_the_class_that_loads_the_checkpoint(
    tmp_path: Path, make: Callable[[], Any], kind: str, batch_dims: int
) -> None:
    make().save(tmp_path / "ckpt")
    summary = view.summarize_checkpoint(tmp_path / "ckpt")
    assert (summary.kind, summary.batch_dims) == (kind, batch_dims)


def test_a_summary_of_an_unknown_target_lists_the_known_ones(tmp_path: Path) -> None:
    DictBuffer(capacity=4).save(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text(encoding="utf-8"))
    config["__target__"] = "somewhere.Else"
    rewrite_file(tmp_path / "ckpt", "config.json", json.dumps(config).encode())
    reseal(tmp_path / "ckpt", lambda manifest: manifest.update(target="somewhere.Else"))
    with pytest.raises(ValueError, match=r"unknown __target__ 'somewhere.Else'; known targets"):
        view.summarize_checkpoint(tmp_path / "ckpt")


def test_read_leaf_returns_one_leafs_rows_and_the_summary_its_spec(tmp_path: Path) -> None:
    buffer = expert([3, 2])
    buffer.save(tmp_path / "ckpt")
    rows = view.read_leaf(tmp_path / "ckpt", "observation", rows=[4, 0])
    np.testing.assert_array_equal(rows, buffer.storage["observation"][[4, 0]].numpy())
    summary = view.summarize_checkpoint(tmp_path / "ckpt")
    row = next(r for r in summary.spec if r.key_path == ("observation",))
    assert isinstance(row, view.SpecRow) and row.shape == (2,) and row.dtype == "float32"
    assert isinstance(summary.priorities, view.PrioritySummary)


# ------------------------------------------------------------------------- window settings
@pytest.mark.parametrize(
    ("next_keys", "offset"), [(["observation"], 1), ([], 0)]
)
def test_window_settings_of_a_checkpoint_match_the_loaded_buffers(
    tmp_path: Path, next_keys: list[str], offset: int
) -> None:
    buffer = expert([3, 5, 2], seq_length=2, output_key_t=["observation"],
                    output_key_tp1=next_keys, weighting="window")
    buffer.update_priorities(torch.tensor([1.0, 2.0, 1.0]), torch.arange(3))
    buffer.save(tmp_path / "ckpt")
    saved = view.window_settings(tmp_path / "ckpt")
    live = view.window_settings(buffer)
    for settings in (saved, live):
        assert (settings.seq_length, settings.offset, settings.weighting) == (2, offset, "window")
        assert settings.need == 2 + offset
        assert settings.end_path == ("done",) and settings.motion_path == ("motion_id",)
        assert settings.motion_ids is not None and settings.motion_ids.tolist() == [10, 11, 12]
        assert settings.priorities is not None
        np.testing.assert_allclose(settings.priorities, [0.25, 0.5, 0.25], rtol=1e-6)


@pytest.mark.parametrize("seq_length", [1, 2, 9])
def test_need_for_adds_the_next_row_to_any_window_length(seq_length: int) -> None:
    settings = view.window_settings(TrajectoryDictBufferMultiDim(capacity=4, seq_length=3))
    assert settings.offset == 1
    assert settings.need_for(seq_length) == seq_length + 1


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (1.5, TypeError)])
def test_need_for_refuses_a_window_length_below_one(value: object, error: type) -> None:
    settings = view.window_settings(TrajectoryDictBufferMultiDim(capacity=4))
    with pytest.raises(error, match="seq_length"):
        settings.need_for(value)  # type: ignore[arg-type]


def test_window_settings_of_a_buffer_without_windows_say_so(tmp_path: Path) -> None:
    DictBuffer(capacity=4).save(tmp_path / "ckpt")
    with pytest.raises(CorruptCheckpointError, match="samples no windows"):
        view.window_settings(tmp_path / "ckpt")
    with pytest.raises(ValueError, match="samples no windows"):
        view.window_settings(DictBuffer(capacity=4))


# ---------------------------------------------------------------------------- sampler maths
def test_start_counts_and_window_counts_count_valid_starts() -> None:
    lengths = torch.tensor([1, 3, 6])
    assert view.start_counts(lengths, 3).tolist() == [0, 1, 4]
    table = view.TrajectoryTable(torch.zeros(3, dtype=torch.long), torch.tensor([0, 1, 4]),
                                 torch.tensor([0, 3, 9]))
    assert view.window_counts(table, 3).tolist() == [0, 1, 4]


@pytest.mark.parametrize("weighting", view.WEIGHTINGS)
def test_window_weights_are_the_frequencies_a_seeded_expert_buffer_draws(weighting: str) -> None:
    # Lengths 2..9 with need 4 (seq 3 plus next): the length-2 and 3 motions are never drawn.
    buffer = expert([2, 9, 4, 3, 7], seq_length=3, weighting=weighting, seed=0)
    buffer.update_priorities(torch.tensor([1.0, 0.5, 3.0, 2.0, 1.0]), torch.arange(5))
    settings = view.window_settings(buffer)
    weights = view.window_weights(buffer.lengths, need=settings.need, weighting=settings.weighting,
                                  priorities=buffer.priorities)
    expected = (weights / weights.sum()).numpy()
    generator = torch.Generator().manual_seed(1234)
    draws = torch.cat([
        buffer.sample_index(3 * 500, generator=generator).trajectory for _ in range(40)
    ])
    observed = np.bincount(draws.numpy(), minlength=5) / len(draws)
    assert observed[expected == 0].sum() == 0
    # 20,000 draws: 5 standard errors of a frequency is at most 0.018.
    np.testing.assert_allclose(observed, expected, atol=0.018)

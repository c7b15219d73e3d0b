"""Lazy checkpoint summaries (bufcore.inspect.summarize_checkpoint): what they report, that
they never read rows, and that damage is a CorruptCheckpointError naming the file."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import bufcore
from bufcore.errors import CorruptCheckpointError
from bufcore.inspect import summarize_checkpoint
from bufcore.persist.checkpoint.read_payload import PayloadReader
from tests.support import rewrite_file


def dict_buffer(path: Path, capacity: int, rows: int) -> bufcore.DictBuffer:
    buffer = bufcore.DictBuffer(capacity=capacity, seed=0)
    if rows:
        buffer.extend(
            {
                "observation": {"state": np.ones((rows, 3), np.float32)},
                "action": np.zeros((rows, 2), np.int64),
            }
        )
    buffer.save(path)
    return buffer


def flip_a_row_byte(payload: Path) -> None:
    """Change one byte of a dataset's rows, leaving the HDF5 metadata intact."""
    with h5py.File(payload, "r") as h5:
        offset = h5["action"].id.get_offset()
    data = bytearray(payload.read_bytes())
    data[offset] ^= 0xFF
    payload.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("capacity", "rows"), [(1, 1), (2, 1), (2, 3), (5, 0), (5, 4), (7, 7), (7, 10)]
)
def test_the_summary_reports_capacity_length_cursor_and_full_as_the_buffer_has_them(
    tmp_path: Path, capacity: int, rows: int
) -> None:
    buffer = dict_buffer(tmp_path / "ckpt", capacity, rows)
    summary = summarize_checkpoint(tmp_path / "ckpt")
    assert (summary.kind, summary.target, summary.format) == (
        "DictBuffer", "bufcore.DictBuffer", "bufcore v2"
    )
    assert (summary.capacity, summary.length, summary.cursor, summary.full) == (
        capacity, len(buffer), buffer.cursor, buffer.is_full
    )


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_the_spec_rows_give_each_leaf_its_dtype_shape_and_bytes(tmp_path: Path, rows: int) -> None:
    dict_buffer(tmp_path / "ckpt", 5, rows)
    summary = summarize_checkpoint(tmp_path / "ckpt")
    table = {row.key_path: (row.dtype, row.shape, row.row_bytes, row.total_bytes) for row in
             summary.spec}
    assert table == {
        ("observation", "state"): ("float32", (3,), 12, 12 * rows),
        ("action",): ("int64", (2,), 16, 16 * rows),
    }
    assert summary.row_bytes == 28


def test_an_empty_buffer_summarizes_with_no_spec(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 3, 0)
    summary = summarize_checkpoint(tmp_path / "ckpt")
    assert (summary.length, summary.spec, summary.row_bytes) == (0, (), 0)


@pytest.mark.parametrize("envs", [1, 3])
def test_an_online_buffer_counts_the_bytes_of_every_env_in_a_row(
    tmp_path: Path, envs: int
) -> None:
    buffer = bufcore.TrajectoryDictBufferMultiDim(
        capacity=4, n_dim=2, output_key_t=["obs"], output_key_tp1=["obs"], seed=0
    )
    done = torch.zeros(3, envs, 1, dtype=torch.bool)
    buffer.extend({"obs": torch.ones(3, envs, 2), "done": done})
    buffer.save(tmp_path / "ckpt")
    summary = summarize_checkpoint(tmp_path / "ckpt")
    assert (summary.batch_dims, summary.env_count, summary.length) == (2, envs, 3)
    assert {row.key_path: row.row_bytes for row in summary.spec} == {
        ("obs",): 8 * envs, ("done",): envs
    }


def test_an_expert_buffer_summarizes_its_priorities(tmp_path: Path) -> None:
    episodes = [
        {"observation": np.zeros((n, 2), np.float32), "motion_id": np.full(n, 10 + i)}
        for i, n in enumerate([3, 4, 5])
    ]
    buffer = bufcore.TrajectoryDictBuffer(episodes, seed=0)
    buffer.update_priorities([1.0, 3.0, 4.0], [0, 1, 2])
    buffer.save(tmp_path / "ckpt")
    p = summarize_checkpoint(tmp_path / "ckpt").priorities
    assert p is not None
    expected = np.array([1.0, 3.0, 4.0]) / 8
    assert p.count == 3
    assert p.minimum == pytest.approx(1 / 8) and p.maximum == pytest.approx(1 / 2)
    assert p.entropy == pytest.approx(-(expected * np.log(expected)).sum())
    assert p.effective_size == pytest.approx(1 / (expected**2).sum())
    assert [m for m, _ in p.top] == [12, 11, 10]


def test_a_buffer_without_priorities_has_none(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 3, 2)
    assert summarize_checkpoint(tmp_path / "ckpt").priorities is None


def test_a_bfm_zero_directory_summarizes_with_its_ring_position_derived(tmp_path: Path) -> None:
    path = tmp_path / "bfm"
    path.mkdir()
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("observation-state", data=np.ones((3, 5), np.float32))
    config = {"capacity": 8, "device": "cpu", "__target__":
              "humanoidverse.agents.buffers.transition.DictBuffer"}
    (path / "config.json").write_text(json.dumps(config))
    summary = summarize_checkpoint(path, verify=True)
    assert (summary.format, summary.kind, summary.verified) == ("BFM-Zero", "DictBuffer", False)
    assert (summary.length, summary.cursor, summary.full) == (3, 3, False)
    assert summary.spec[0].key_path == ("observation", "state")


def _expert(priorities: list[float]) -> bufcore.TrajectoryDictBuffer:
    episodes = [{"observation": np.full((n, 2), i, np.float32), "motion_id": np.full(n, i)}
                for i, n in enumerate([3, 4, 5])]
    buffer = bufcore.TrajectoryDictBuffer(episodes, seed=0)
    buffer.update_priorities(priorities, [0, 1, 2])
    return buffer


def test_two_saves_of_one_buffer_have_one_digest(tmp_path: Path) -> None:
    buffer = _expert([1.0, 2.0, 3.0])
    buffer.save(tmp_path / "a")
    buffer.save(tmp_path / "b")
    a, b = summarize_checkpoint(tmp_path / "a"), summarize_checkpoint(tmp_path / "b")
    assert a.digest is not None and a.digest == b.digest
    assert a.rows_digest is not None and a.rows_digest == b.rows_digest


def test_other_priorities_change_the_digest_but_not_the_rows_digest(tmp_path: Path) -> None:
    _expert([1.0, 2.0, 3.0]).save(tmp_path / "a")
    _expert([3.0, 2.0, 1.0]).save(tmp_path / "b")
    a, b = summarize_checkpoint(tmp_path / "a"), summarize_checkpoint(tmp_path / "b")
    assert a.digest != b.digest
    assert a.rows_digest == b.rows_digest


def test_other_rows_change_both_digests(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "a", 4, 2)
    dict_buffer(tmp_path / "b", 4, 3)
    a, b = summarize_checkpoint(tmp_path / "a"), summarize_checkpoint(tmp_path / "b")
    assert a.digest != b.digest and a.rows_digest != b.rows_digest


def test_a_bfm_zero_directory_has_no_digest(tmp_path: Path) -> None:
    path = tmp_path / "bfm"
    path.mkdir()
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("observation-state", data=np.ones((3, 5), np.float32))
    config = {"capacity": 8, "device": "cpu", "__target__":
              "humanoidverse.agents.buffers.transition.DictBuffer"}
    (path / "config.json").write_text(json.dumps(config))
    summary = summarize_checkpoint(path)
    assert (summary.digest, summary.rows_digest) == (None, None)


# ------------------------------------------------------------------------------- lazy
def test_damaged_rows_still_summarize_because_no_row_is_read(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 4, 3)
    flip_a_row_byte(tmp_path / "ckpt" / "buffer.hdf5")
    summary = summarize_checkpoint(tmp_path / "ckpt")
    assert (summary.length, summary.verified) == (3, False)


def test_verify_reports_damaged_rows_naming_buffer_hdf5(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 4, 3)
    flip_a_row_byte(tmp_path / "ckpt" / "buffer.hdf5")
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: sha256 of block 0"):
        summarize_checkpoint(tmp_path / "ckpt", verify=True)


def test_verify_marks_an_intact_checkpoint_verified(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 4, 3)
    assert summarize_checkpoint(tmp_path / "ckpt", verify=True).verified is True


def test_a_summary_never_reads_a_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dict_buffer(tmp_path / "ckpt", 4, 3)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("rows were read")

    monkeypatch.setattr(PayloadReader, "read_leaves", refuse)
    monkeypatch.setattr(h5py.Dataset, "read_direct", refuse)
    monkeypatch.setattr(h5py.Dataset, "__getitem__", refuse)
    assert summarize_checkpoint(tmp_path / "ckpt").length == 3


# ----------------------------------------------------------------------------- damage
def test_a_config_that_is_not_json_names_config_json(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 4, 3)
    rewrite_file(tmp_path / "ckpt", "config.json", b"{not json")
    with pytest.raises(CorruptCheckpointError, match=r"config\.json: not valid JSON"):
        summarize_checkpoint(tmp_path / "ckpt")


def test_a_cursor_that_disagrees_with_the_rows_names_the_field(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 4, 3)
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    config["_idx"] = 1
    rewrite_file(tmp_path / "ckpt", "config.json", json.dumps(config).encode())
    with pytest.raises(CorruptCheckpointError, match=r"config\.json: config\['_idx'\]: 1 with"):
        summarize_checkpoint(tmp_path / "ckpt")


@pytest.mark.parametrize(
    ("priorities", "problem"),
    [([0.5, -0.5, 1.0], r"state\['priorities'\]\[1\]"), ([0, 0, 0], "at least one positive")],
)
def test_bad_saved_priorities_name_state_json(
    tmp_path: Path, priorities: list[float], problem: str
) -> None:
    episodes = [{"observation": np.zeros((2, 1), np.float32), "motion_id": np.full(2, i)}
                for i in range(3)]
    bufcore.TrajectoryDictBuffer(episodes, seed=0).save(tmp_path / "ckpt")
    state = json.loads((tmp_path / "ckpt" / "state.json").read_text())
    state["priorities"] = priorities
    rewrite_file(tmp_path / "ckpt", "state.json", json.dumps(state).encode())
    with pytest.raises(CorruptCheckpointError, match=rf"state\.json: .*{problem}"):
        summarize_checkpoint(tmp_path / "ckpt")


def test_a_truncated_buffer_hdf5_names_the_file(tmp_path: Path) -> None:
    dict_buffer(tmp_path / "ckpt", 4, 3)
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    payload.write_bytes(payload.read_bytes()[:1000])
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5"):
        summarize_checkpoint(tmp_path / "ckpt")


def test_a_missing_directory_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        summarize_checkpoint(tmp_path / "nothing")


def test_the_checkpoint_fixtures_summarize_as_they_load(tmp_path: Path) -> None:
    fixtures = Path(__file__).parents[1] / "fixtures" / "checkpoints_format2"
    shutil.copytree(fixtures, tmp_path / "ckpt")
    for name in ("dict", "z", "online", "expert"):
        buffer = bufcore.load_buffer(tmp_path / "ckpt" / name)
        summary = summarize_checkpoint(tmp_path / "ckpt" / name, verify=True)
        assert (summary.kind, summary.length, summary.cursor, summary.full) == (
            type(buffer).__name__, len(buffer), buffer.cursor, buffer.is_full
        )
        assert math.isclose(sum(row.total_bytes for row in summary.spec),
                            summary.row_bytes * summary.length)


@pytest.mark.parametrize("verify", ["no", None, 1])
def test_a_verify_that_is_not_a_bool_is_a_type_error_naming_verify(
    tmp_path: Path, verify: object
) -> None:
    dict_buffer(tmp_path / "ckpt", 2, 2)
    with pytest.raises(TypeError, match=r"verify: expected a bool, got"):
        summarize_checkpoint(tmp_path / "ckpt", verify=verify)  # type: ignore[arg-type]

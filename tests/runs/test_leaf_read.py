"""Reading one stored leaf of a checkpoint (bufcore.inspect.read_leaf): its rows as the buffer
holds them, for every buffer kind and BFM-Zero's directories; only that dataset is read; bad
keys, bad rows and damage are clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

import bufcore
from bufcore.errors import CorruptCheckpointError, KeyPathError
from bufcore.inspect import read_leaf, summarize_checkpoint
from bufcore.persist.checkpoint.read_payload import PayloadReader
from tests.support import rewrite_file


def dict_checkpoint(path: Path, capacity: int, writes: int) -> bufcore.DictBuffer:
    """A DictBuffer whose row ``t`` (absolute) holds ``t`` everywhere; saved at ``path``."""
    buffer = bufcore.DictBuffer(capacity=capacity, seed=0)
    for t in range(writes):
        buffer.extend(
            {
                "obs": {"state": torch.full((1, 3), float(t))},
                "action": torch.full((1, 2), t, dtype=torch.int64),
            }
        )
    buffer.save(path)
    return buffer


def held(view: torch.Tensor, length: int) -> np.ndarray[Any, Any]:
    return view[:length].numpy()


@pytest.mark.parametrize(("capacity", "writes"), [(1, 1), (1, 3), (2, 1), (2, 5), (7, 4), (7, 10)])
def test_a_dict_buffer_leaf_reads_as_the_buffer_holds_it_in_physical_order(
    tmp_path: Path, capacity: int, writes: int
) -> None:
    buffer = dict_checkpoint(tmp_path / "ckpt", capacity, writes)
    storage = buffer.storage
    assert storage is not None
    got = read_leaf(tmp_path / "ckpt", ("obs", "state"))
    np.testing.assert_array_equal(got, held(storage["obs"]["state"], len(buffer)))
    np.testing.assert_array_equal(
        read_leaf(tmp_path / "ckpt", "action"), held(storage["action"], len(buffer))
    )


@pytest.mark.parametrize("envs", [1, 3])
def test_a_time_env_online_buffer_leaf_reads_with_its_env_axis(tmp_path: Path, envs: int) -> None:
    buffer = bufcore.TrajectoryDictBufferMultiDim(
        capacity=5, n_dim=2, output_key_t=["obs"], output_key_tp1=["obs"], seed=0
    )
    for t in range(7):
        obs = (t * envs + torch.arange(envs, dtype=torch.float32))[None, :, None]
        buffer.extend({"obs": obs.expand(1, envs, 2), "done": torch.zeros(1, envs, 1).bool()})
    buffer.save(tmp_path / "ckpt")
    got = read_leaf(tmp_path / "ckpt", "obs", rows=[4, 0, 4])
    storage = buffer.storage
    assert storage is not None and got.shape == (3, envs, 2)
    np.testing.assert_array_equal(got, storage["obs"][[4, 0, 4]].numpy())


def test_an_expert_buffer_leaf_reads_its_episodes_end_to_end(tmp_path: Path) -> None:
    episodes = [
        {"observation": np.full((n, 2), i, np.float32), "motion_id": np.full(n, 10 + i)}
        for i, n in enumerate([3, 1, 4])
    ]
    buffer = bufcore.TrajectoryDictBuffer(episodes, seed=0)
    buffer.save(tmp_path / "ckpt")
    np.testing.assert_array_equal(
        read_leaf(tmp_path / "ckpt", "motion_id"), [10, 10, 10, 11, 12, 12, 12, 12]
    )
    assert summarize_checkpoint(tmp_path / "ckpt").length == 8


@pytest.mark.parametrize(("capacity", "adds"), [(1, 3), (2, 2), (7, 10)])
def test_a_z_buffer_leaf_reads_its_ring_in_physical_order(
    tmp_path: Path, capacity: int, adds: int
) -> None:
    buffer = bufcore.ZBuffer(capacity, 2, seed=0)
    buffer.add(torch.arange(adds, dtype=torch.float32)[:, None].expand(adds, 2))
    buffer.save(tmp_path / "ckpt")
    physical = {t % capacity: float(t) for t in range(adds)}
    expected = np.array([[physical[p]] * 2 for p in range(min(adds, capacity))], np.float32)
    np.testing.assert_array_equal(read_leaf(tmp_path / "ckpt", "z"), expected)


def test_a_bfm_zero_directory_without_a_manifest_reads_its_leaf(tmp_path: Path) -> None:
    path = tmp_path / "bfm"
    path.mkdir()
    data = np.arange(15, dtype=">f4").reshape(5, 3)  # big-endian, as another host may write
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("observation-state", data=data, chunks=(2, 3), compression="gzip")
        h5.create_dataset("action", data=np.zeros((5, 2), np.float32))
    config = {"capacity": 8, "device": "cpu",
              "__target__": "humanoidverse.agents.buffers.transition.DictBuffer"}
    (path / "config.json").write_text(json.dumps(config))
    got = read_leaf(path, ("observation", "state"), rows=np.array([4, 1]))
    assert got.dtype == np.dtype("float32") and got.dtype.isnative
    np.testing.assert_array_equal(got, data[[4, 1]])


def test_a_bfloat16_leaf_reads_back_as_exact_float32(tmp_path: Path) -> None:
    buffer = bufcore.DictBuffer(capacity=4, seed=0)
    values = torch.tensor([[1.5], [-0.0078125], [3.0e38]], dtype=torch.bfloat16)
    buffer.extend({"x": values})
    buffer.save(tmp_path / "ckpt")
    got = read_leaf(tmp_path / "ckpt", "x")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, values.float().numpy())


# -------------------------------------------------------------------------------- rows
ROWS = [
    pytest.param(slice(1, 5), [1, 2, 3, 4], id="slice"),
    pytest.param(slice(None, None, -3), [6, 3, 0], id="negative-step"),
    pytest.param(slice(5, 100), [5, 6], id="slice-past-the-end"),
    pytest.param(slice(4, 2), [], id="empty-slice"),
    pytest.param(np.array([6, 0, 6, 2], np.int32), [6, 0, 6, 2], id="int32-repeats"),
    pytest.param(torch.tensor([3, 3, 1]), [3, 3, 1], id="tensor"),
    pytest.param([0], [0], id="list"),
    pytest.param([], [], id="empty-list"),
    pytest.param(np.array([], np.int64), [], id="empty-array"),
]


@pytest.mark.parametrize(("rows", "expected"), ROWS)
def test_rows_select_those_time_rows_in_their_order(
    tmp_path: Path, rows: Any, expected: list[int]
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 7, 7)
    got = read_leaf(tmp_path / "ckpt", "action", rows=rows)
    assert got.shape == (len(expected), 2)
    np.testing.assert_array_equal(got[:, 0], expected)


@pytest.mark.parametrize("rows", [[0, 199], [150, 3, 150, 7, 199, 0]], ids=["sparse", "mixed"])
def test_far_apart_rows_read_as_the_same_rows_as_a_full_read_gives(
    tmp_path: Path, rows: list[int]
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 200, 200)
    full = read_leaf(tmp_path / "ckpt", ("obs", "state"))
    np.testing.assert_array_equal(read_leaf(tmp_path / "ckpt", ("obs", "state"), rows=rows),
                                  full[rows])


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([0, 7], r"rows: expected row indices in \[0, 7\), got 7 at position 1"),
        (np.array([-1]), r"rows: expected row indices in \[0, 7\), got -1 at position 0"),
        (torch.tensor([2**63], dtype=torch.uint64), r"rows: .*got 9223372036854775808"),
    ],
)
def test_a_row_index_out_of_range_is_an_index_error_naming_rows_bound_and_value(
    tmp_path: Path, rows: Any, message: str
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 7, 7)
    with pytest.raises(IndexError, match=message):
        read_leaf(tmp_path / "ckpt", "action", rows=rows)


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        (3, TypeError, "rows: expected None, a slice or a 1-D array"),
        ("0:3", TypeError, "rows: expected None, a slice or a 1-D array"),
        (np.array([0.0, 1.0]), TypeError, "rows: expected integer row indices"),
        (np.array([True, False]), TypeError, "rows: expected integer row indices"),
        (slice(0.5, 3), TypeError, "rows: slice bound: expected an int"),
        (slice(0, 3, 0), ValueError, "rows: expected a slice step other than 0"),
        (np.zeros((2, 2), np.int64), ValueError, r"rows: expected a 1-D array .* \[2, 2\]"),
        (torch.tensor(3), ValueError, r"rows: expected a 1-D array .* \[\]"),
    ],
)
def test_rows_of_the_wrong_kind_or_shape_are_refused_naming_rows(
    tmp_path: Path, rows: Any, error: type[Exception], message: str
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 7, 7)
    with pytest.raises(error, match=message):
        read_leaf(tmp_path / "ckpt", "action", rows=rows)


# -------------------------------------------------------------------------------- keys
def test_an_unknown_key_is_a_key_error_naming_it_and_listing_the_stored_leaves(
    tmp_path: Path,
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 2)
    with pytest.raises(KeyPathError) as caught:
        read_leaf(tmp_path / "ckpt", ("obs", "velocity"))
    assert isinstance(caught.value, KeyError)
    assert str(caught.value).startswith("key_path: ['obs']['velocity'] is not a stored leaf")
    assert str(caught.value).endswith("stored: ['obs']['state'], ['action']")


def test_a_group_key_is_not_a_leaf(tmp_path: Path) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 2)
    with pytest.raises(KeyPathError, match=r"key_path: \['obs'\] is not a stored leaf"):
        read_leaf(tmp_path / "ckpt", "obs")


def test_an_empty_buffers_checkpoint_has_no_leaf(tmp_path: Path) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 0)
    assert summarize_checkpoint(tmp_path / "ckpt").length == 0
    with pytest.raises(KeyPathError, match="stored: none"):
        read_leaf(tmp_path / "ckpt", "action")


@pytest.mark.parametrize("key", [3, ("obs", 1), (), ["obs", "state"]])
def test_a_key_path_that_is_not_a_str_or_tuple_of_str_is_a_type_error(
    tmp_path: Path, key: Any
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 2)
    with pytest.raises(TypeError, match="key_path: expected a str or a non-empty tuple"):
        read_leaf(tmp_path / "ckpt", key)


# ------------------------------------------------------------------------------- lazy
@pytest.mark.parametrize("rows", [None, slice(0, 2), [2, 0, 2]])
def test_only_the_named_dataset_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: Any
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 3)
    read: list[str] = []
    read_direct, getitem = h5py.Dataset.read_direct, h5py.Dataset.__getitem__

    def spy_read_direct(self: h5py.Dataset, *args: Any, **kwargs: Any) -> Any:
        read.append(self.name)
        return read_direct(self, *args, **kwargs)

    def spy_getitem(self: h5py.Dataset, *args: Any) -> Any:
        read.append(self.name)
        return getitem(self, *args)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("every leaf was read")

    monkeypatch.setattr(PayloadReader, "read_leaves", refuse)
    monkeypatch.setattr(h5py.Dataset, "read_direct", spy_read_direct)
    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy_getitem)
    read_leaf(tmp_path / "ckpt", "action", rows=rows)
    assert read and set(read) == {"/action"}


# ----------------------------------------------------------------------------- damage
def test_a_truncated_buffer_hdf5_is_a_corrupt_checkpoint_naming_it(tmp_path: Path) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 3)
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    payload.write_bytes(payload.read_bytes()[:1000])
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5"):
        read_leaf(tmp_path / "ckpt", "action")


def test_rows_cut_off_by_truncation_are_a_corrupt_checkpoint_naming_buffer_hdf5(
    tmp_path: Path,
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 200, 200)
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    with h5py.File(payload, "r") as h5:
        end = h5["action"].id.get_offset() + 8  # the metadata survives, the rows do not
    payload.write_bytes(payload.read_bytes()[:end])
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5"):
        read_leaf(tmp_path / "ckpt", "action", rows=[199])


def test_a_dataset_the_manifest_does_not_list_is_refused_as_a_load_refuses_it(
    tmp_path: Path,
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 3)
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5", "a") as h5:
        h5.create_dataset("extra", data=np.zeros((3,), np.float32))
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: datasets \['extra'\]"):
        read_leaf(tmp_path / "ckpt", "action")


def test_a_cursor_that_disagrees_with_the_rows_is_refused_naming_config_json(
    tmp_path: Path,
) -> None:
    dict_checkpoint(tmp_path / "ckpt", 4, 3)
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    config["_idx"] = 1
    rewrite_file(tmp_path / "ckpt", "config.json", json.dumps(config).encode())
    with pytest.raises(CorruptCheckpointError, match=r"config\.json: config\['_idx'\]"):
        read_leaf(tmp_path / "ckpt", "action")


def test_a_missing_directory_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_leaf(tmp_path / "nothing", "action")

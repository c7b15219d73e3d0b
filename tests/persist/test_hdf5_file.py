"""read_row_datasets: a lone buffer.hdf5 read whole, refusing what a checkpoint load refuses."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from bufcore.errors import CorruptCheckpointError, CorruptFileError
from bufcore.persist.hdf5_file import read_row_datasets
from bufcore.tree import LeafSpec


def write(path: Path, datasets: dict[str, np.ndarray]) -> Path:
    with h5py.File(path, "w") as h5:
        for name, data in datasets.items():
            h5.create_dataset(name, data=data)
    return path


def test_dataset_names_split_on_the_separator_into_nested_tensors(tmp_path: Path) -> None:
    state = np.arange(12, dtype=np.float32).reshape(4, 3)
    file = write(tmp_path / "b.hdf5", {"observation|state": state, "done": np.zeros((4, 1), bool)})
    rows = read_row_datasets(file, "|", batch_dims=1)
    assert set(rows) == {"observation", "done"}
    assert torch.equal(rows["observation"]["state"], torch.from_numpy(state))
    assert rows["done"].dtype == torch.bool and rows["done"].shape == (4, 1)


def test_two_batch_axes_keep_the_env_axis(tmp_path: Path) -> None:
    file = write(tmp_path / "b.hdf5", {"obs": np.ones((5, 3, 2), np.float32)})
    assert read_row_datasets(file, "-", batch_dims=2)["obs"].shape == (5, 3, 2)


def test_big_endian_datasets_come_back_in_native_order(tmp_path: Path) -> None:
    values = np.arange(6, dtype=">f8").reshape(3, 2)
    file = write(tmp_path / "b.hdf5", {"x": values})
    assert read_row_datasets(file, "-", batch_dims=1)["x"].tolist() == values.tolist()


def test_a_file_without_datasets_gives_an_empty_dict(tmp_path: Path) -> None:
    file = write(tmp_path / "b.hdf5", {})
    assert read_row_datasets(file, "-", batch_dims=1) == {}


def test_int16_bits_come_back_as_bfloat16_where_the_buffer_holds_bfloat16(tmp_path: Path) -> None:
    values = torch.tensor([[1.5], [-2.25]], dtype=torch.bfloat16)
    file = write(tmp_path / "b.hdf5", {"x": values.view(torch.int16).numpy(), "y": np.ones(2)})
    like = {("x",): LeafSpec((1,), torch.bfloat16), ("y",): LeafSpec((), torch.float64)}
    rows = read_row_datasets(file, "-", batch_dims=1, like=like)
    assert rows["x"].dtype == torch.bfloat16 and torch.equal(rows["x"], values)
    assert read_row_datasets(file, "-", batch_dims=1)["x"].dtype == torch.int16


def test_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.hdf5: no such HDF5 file"):
        read_row_datasets(tmp_path / "nope.hdf5", "-", batch_dims=1)


def test_a_directory_or_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(CorruptFileError, match="is not a regular file"):
        read_row_datasets(tmp_path / "fifo", "-", batch_dims=1)
    with pytest.raises(CorruptFileError):
        read_row_datasets(tmp_path, "-", batch_dims=1)


def test_a_file_that_is_not_hdf5_is_a_corrupt_file(tmp_path: Path) -> None:
    (tmp_path / "b.hdf5").write_bytes(b"not hdf5 at all")
    with pytest.raises(CorruptFileError, match=r"b\.hdf5: not a readable HDF5 file"):
        read_row_datasets(tmp_path / "b.hdf5", "-", batch_dims=1)


def test_an_external_link_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "other.hdf5", {"x": np.ones((2, 1))})
    with h5py.File(tmp_path / "b.hdf5", "w") as h5:
        h5["x"] = h5py.ExternalLink(str(tmp_path / "other.hdf5"), "x")
    with pytest.raises(CorruptFileError, match="external link"):
        read_row_datasets(tmp_path / "b.hdf5", "-", batch_dims=1)


def test_external_storage_is_refused(tmp_path: Path) -> None:
    (tmp_path / "raw.bin").write_bytes(np.ones(4, np.float64).tobytes())
    with h5py.File(tmp_path / "b.hdf5", "w") as h5:
        raw = [(str(tmp_path / "raw.bin"), 0, 32)]
        h5.create_dataset("x", shape=(4,), dtype="f8", external=raw)
    with pytest.raises(CorruptFileError, match="external files"):
        read_row_datasets(tmp_path / "b.hdf5", "-", batch_dims=1)


@pytest.mark.parametrize(
    ("datasets", "batch_dims", "match"),
    [
        ({"a": np.ones((3, 2)), "b": np.ones((4, 2))}, 1, "disagree on their leading axes"),
        ({"a": np.ones(3)}, 2, "expected at least 2 leading axes"),
        ({"a": np.ones(3), "a-b": np.ones(3)}, 1, "key paths cannot nest into a leaf"),
    ],
)
def test_malformed_datasets_are_a_corrupt_file_naming_it(
    tmp_path: Path, datasets: dict[str, np.ndarray], batch_dims: int, match: str
) -> None:
    write(tmp_path / "b.hdf5", datasets)
    with pytest.raises(CorruptFileError, match=match):
        read_row_datasets(tmp_path / "b.hdf5", "-", batch_dims=batch_dims)


def test_string_datasets_are_refused(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "b.hdf5", "w") as h5:
        h5.create_dataset("a", data=["x", "y"], dtype=h5py.string_dtype())
    with pytest.raises(CorruptFileError, match="not a numeric one"):
        read_row_datasets(tmp_path / "b.hdf5", "-", batch_dims=1)


def test_groups_are_refused(tmp_path: Path) -> None:
    with h5py.File(tmp_path / "b.hdf5", "w") as h5:
        h5.create_dataset("observation/state", data=np.ones((2, 1)))
    with pytest.raises(CorruptFileError, match="unexpected groups"):
        read_row_datasets(tmp_path / "b.hdf5", "-", batch_dims=1)


def test_a_malformed_file_is_a_corrupt_file_not_a_corrupt_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "rows.hdf5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.zeros((3, 1), dtype=np.float32))
        f.create_dataset("b", data=np.zeros((4, 1), dtype=np.float32))
    with pytest.raises(CorruptFileError, match=r"^corrupt file .*rows\.hdf5: ") as caught:
        read_row_datasets(path, "-", batch_dims=1)
    assert not isinstance(caught.value, CorruptCheckpointError)

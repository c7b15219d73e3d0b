"""Checkpoints of dict-family buffers: layout, round trips, BFM-Zero directories, dispatch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

import bufcore.checkpoint
from bufcore import CorruptCheckpointError, DictBuffer, ZBuffer, load_buffer
from tests.support import DEVICES

BFM_TARGET = "humanoidverse.agents.buffers.transition.DictBuffer"


def batch(ids: range | list[int]) -> dict[str, Any]:
    ids_array = np.asarray(list(ids), dtype=np.int64)
    return {
        "observation": {
            "state": np.stack([ids_array, ids_array + 0.5], 1).astype(np.float32),
            "deep": {"x": ids_array[:, None].astype(np.int32)},
        },
        "id": ids_array,
        "terminated": (ids_array % 3 == 0)[:, None],
    }


def filled(capacity: int, n: int, **kwargs: Any) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=11, **kwargs)
    if n:
        buffer.extend(batch(range(n)))
    return buffer


def assert_same(a: DictBuffer, b: DictBuffer) -> None:
    assert (len(a), a.cursor, a.is_full, a.capacity) == (len(b), b.cursor, b.is_full, b.capacity)
    full_a, full_b = a.get_full_buffer(), b.get_full_buffer()
    assert torch.equal(full_a["id"], full_b["id"]) if full_a else full_b == {}
    if full_a:
        assert torch.equal(full_a["observation"]["state"], full_b["observation"]["state"])
        assert torch.equal(full_a["observation"]["deep"]["x"], full_b["observation"]["deep"]["x"])
        assert torch.equal(full_a["terminated"], full_b["terminated"])


FILLS = [(5, 0), (5, 3), (5, 5), (5, 12), (1, 4), (2, 3), (7, 20)]


@pytest.mark.parametrize(("capacity", "n"), FILLS)
def test_save_and_load_round_trip_contents_and_cursor(
    tmp_path: Path, capacity: int, n: int
) -> None:
    buffer = filled(capacity, n)
    buffer.save(tmp_path / "ckpt")
    assert_same(DictBuffer.load(tmp_path / "ckpt"), buffer)


@pytest.mark.parametrize(("capacity", "n"), FILLS)
def test_writing_continues_at_the_cursor_after_load(tmp_path: Path, capacity: int, n: int) -> None:
    buffer = filled(capacity, n) if n else filled(capacity, 1)
    buffer.save(tmp_path / "ckpt")
    loaded = DictBuffer.load(tmp_path / "ckpt")
    for target in (buffer, loaded):
        target.extend(batch(range(100, 103)))
    assert_same(loaded, buffer)


def test_a_reloaded_buffer_continues_the_same_sample_stream(tmp_path: Path) -> None:
    buffer = filled(9, 20)
    buffer.sample(5)
    buffer.save(tmp_path / "ckpt")
    loaded = DictBuffer.load(tmp_path / "ckpt")
    for _ in range(3):
        assert torch.equal(loaded.sample(7)["id"], buffer.sample(7)["id"])


def test_config_json_keeps_the_bfm_zero_fields(tmp_path: Path) -> None:
    filled(5, 7).save(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config == {
        "capacity": 5,
        "device": "cpu",
        "nested_key_separator": "-",
        "_idx": 2,
        "_is_full": True,
        "__target__": "bufcore.DictBuffer",
    }


@pytest.mark.parametrize("separator", ["-", "|", "::"])
def test_datasets_are_named_by_key_paths_joined_at_every_depth(
    tmp_path: Path, separator: str
) -> None:
    filled(5, 3, nested_key_separator=separator).save(tmp_path / "ckpt")
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5", "r") as h5:
        names = set(h5)
        assert h5["id"][:].tolist() == [0, 1, 2]
    assert names == {
        f"observation{separator}state",
        f"observation{separator}deep{separator}x",
        "id",
        "terminated",
    }
    loaded = DictBuffer.load(tmp_path / "ckpt")
    assert loaded.get_full_buffer()["observation"]["deep"]["x"].shape == (3, 1)


def test_datasets_hold_rows_in_physical_order(tmp_path: Path) -> None:
    filled(4, 6).save(tmp_path / "ckpt")
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5", "r") as h5:
        assert h5["id"][:].tolist() == [4, 5, 2, 3]


def test_the_manifest_lists_format_spec_and_checksums(tmp_path: Path) -> None:
    filled(4, 2).save(tmp_path / "ckpt")
    manifest = json.loads((tmp_path / "ckpt" / "manifest.json").read_text())
    assert manifest["format"] == "bufcore.dict-buffer"
    assert manifest["format_version"] == 1
    spec = {tuple(e["key_path"]): (e["shape"], e["dtype"]) for e in manifest["spec"]}
    assert spec[("observation", "state")] == ([2], "float32")
    assert spec[("terminated",)] == ([1], "bool")
    assert set(manifest["files"]) == {"buffer.hdf5", "config.json", "state.json"}
    for name, entry in manifest["files"].items():
        assert entry["size"] == (tmp_path / "ckpt" / name).stat().st_size
        assert len(entry["sha256"]) == 64


def test_a_key_containing_the_separator_raises_at_save_and_writes_nothing(tmp_path: Path) -> None:
    buffer = DictBuffer(capacity=3)
    with pytest.warns(UserWarning):
        buffer.extend({"obs": {"last-action": np.zeros((1, 2))}})
    with pytest.raises(ValueError, match="'last-action'"):
        buffer.save(tmp_path / "ckpt")
    assert list(tmp_path.iterdir()) == []


def test_saving_over_a_checkpoint_replaces_it_and_leaves_no_staging(tmp_path: Path) -> None:
    filled(4, 2).save(tmp_path / "ckpt")
    newer = filled(6, 5)
    newer.save(tmp_path / "ckpt")
    assert_same(DictBuffer.load(tmp_path / "ckpt"), newer)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_saving_refuses_to_replace_something_that_is_not_a_checkpoint(
    tmp_path: Path, kind: str
) -> None:
    target = tmp_path / "precious"
    if kind == "file":
        target.write_text("keep me")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a checkpoint"):
        filled(3, 1).save(target)
    assert "keep me" in (
        target.read_text() if kind == "file" else (target / "notes.txt").read_text()
    )


def test_an_empty_buffer_saves_a_checkpoint_that_loads(tmp_path: Path) -> None:
    DictBuffer(capacity=4).save(tmp_path / "ckpt")
    loaded = load_buffer(tmp_path / "ckpt")
    assert isinstance(loaded, DictBuffer)
    assert (len(loaded), loaded.capacity, loaded.storage) == (0, 4, None)
    loaded.extend(batch([1]))
    assert loaded.get_full_buffer()["id"].tolist() == [1]


def test_bfloat16_leaves_round_trip(tmp_path: Path) -> None:
    buffer = DictBuffer(capacity=3)
    buffer.extend({"x": torch.tensor([[1.5], [2.25]], dtype=torch.bfloat16)})
    buffer.save(tmp_path / "ckpt")
    loaded = DictBuffer.load(tmp_path / "ckpt").get_full_buffer()["x"]
    assert loaded.dtype == torch.bfloat16
    assert loaded.flatten().tolist() == [1.5, 2.25]


def test_load_puts_tensors_on_the_requested_device(tmp_path: Path) -> None:
    write_bfm_checkpoint(tmp_path / "ckpt", rows=3, capacity=4, device="cuda:0")
    loaded = DictBuffer.load(tmp_path / "ckpt", device="cpu")
    assert loaded.device == torch.device("cpu")
    assert loaded.sample(2)["action"].device.type == "cpu"


def test_load_buffer_refuses_an_unknown_target_listing_known_ones(tmp_path: Path) -> None:
    write_bfm_checkpoint(tmp_path / "ckpt", rows=2, capacity=4, target="some.module.Mystery")
    with pytest.raises(
        ValueError, match=r"unknown __target__ 'some.module.Mystery'.*bufcore.DictBuffer"
    ):
        load_buffer(tmp_path / "ckpt")


def test_loading_a_z_buffer_through_dict_buffer_load_raises(tmp_path: Path) -> None:
    ZBuffer(3, 2).save(tmp_path / "z")
    with pytest.raises(ValueError, match="ZBuffer"):
        DictBuffer.load(tmp_path / "z")


def test_loading_a_missing_directory_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_buffer(tmp_path / "nothing")


# ----------------------------------------------------------- BFM-Zero directories
def write_bfm_checkpoint(
    path: Path,
    *,
    rows: int,
    capacity: int,
    idx: int | None = None,
    full: bool | None = None,
    target: str = BFM_TARGET,
    device: str = "cpu",
    separator: str = "-",
) -> dict[str, np.ndarray]:
    """A checkpoint laid out exactly as BFM-Zero's DictBuffer.save writes it (no manifest)."""
    path.mkdir(parents=True)
    rng = np.random.default_rng(rows)
    data = {
        f"observation{separator}state": rng.standard_normal((rows, 5)).astype(np.float32),
        f"observation{separator}privileged_state": rng.standard_normal((rows, 7)).astype(
            np.float32
        ),
        "action": rng.standard_normal((rows, 3)).astype(np.float32),
        "reward": rng.standard_normal((rows, 1)).astype(np.float32),
        "terminated": rng.random((rows, 1)) < 0.2,
        "step_count": np.arange(rows, dtype=np.int64)[:, None],
    }
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        for name, array in data.items():
            h5.create_dataset(name, data=array)
    config: dict[str, Any] = {
        "capacity": capacity,
        "device": device,
        "nested_key_separator": separator,
    }
    if idx is not None:
        config["_idx"] = idx
    if full is not None:
        config["_is_full"] = full
    config["__target__"] = target
    (path / "config.json").write_text(json.dumps(config, indent=4))
    return data


@pytest.mark.parametrize(
    ("rows", "capacity", "idx", "full"),
    [(3, 8, 3, False), (8, 8, 5, True), (8, 8, 0, True), (1, 1, 0, True)],
)
def test_a_bfm_zero_checkpoint_loads_with_its_contents(
    tmp_path: Path, rows: int, capacity: int, idx: int, full: bool
) -> None:
    data = write_bfm_checkpoint(tmp_path / "ckpt", rows=rows, capacity=capacity, idx=idx, full=full)
    loaded = load_buffer(tmp_path / "ckpt")
    assert isinstance(loaded, DictBuffer)
    assert (len(loaded), loaded.cursor, loaded.is_full) == (rows, idx, full)
    storage = loaded.storage
    assert storage is not None
    assert np.array_equal(storage["observation"]["state"][:rows].numpy(), data["observation-state"])
    assert np.array_equal(storage["terminated"][:rows].numpy(), data["terminated"])
    assert storage["step_count"].dtype == torch.int64


@pytest.mark.parametrize("stored", [">f4", ">i8", ">f8"])
def test_a_bfm_zero_dataset_stored_big_endian_loads_in_native_order(
    tmp_path: Path, stored: str
) -> None:
    data = write_bfm_checkpoint(tmp_path / "ckpt", rows=4, capacity=4, idx=0, full=True)
    values = (np.arange(8).reshape(4, 2) * 1.5).astype(stored)
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5", "a") as h5:
        h5.create_dataset("extra", data=values)
    loaded = load_buffer(tmp_path / "ckpt")
    storage = loaded.storage
    assert (
        storage["extra"].dtype
        == torch.from_numpy(values.astype(values.dtype.newbyteorder("="))).dtype
    )
    np.testing.assert_array_equal(storage["extra"].numpy(), values)
    np.testing.assert_array_equal(storage["action"].numpy(), data["action"])


def test_writing_continues_at_the_cursor_of_a_bfm_zero_checkpoint(tmp_path: Path) -> None:
    write_bfm_checkpoint(tmp_path / "ckpt", rows=6, capacity=6, idx=2, full=True)
    loaded = DictBuffer.load(tmp_path / "ckpt")
    loaded.extend(
        {
            "observation": {
                "state": np.ones((1, 5), np.float32),
                "privileged_state": np.ones((1, 7), np.float32),
            },
            "action": np.ones((1, 3), np.float32),
            "reward": np.ones((1, 1), np.float32),
            "terminated": np.ones((1, 1), bool),
            "step_count": np.full((1, 1), 99),
        }
    )
    assert loaded.cursor == 3
    assert loaded.get_full_buffer()["step_count"][:, 0].tolist() == [3, 4, 5, 0, 1, 99]


@pytest.mark.parametrize(
    ("rows", "capacity", "cursor", "full"), [(3, 8, 3, False), (8, 8, 0, True)]
)
def test_an_old_bfm_zero_config_without_cursor_derives_it_from_the_rows(
    tmp_path: Path, rows: int, capacity: int, cursor: int, full: bool
) -> None:
    write_bfm_checkpoint(tmp_path / "ckpt", rows=rows, capacity=capacity)
    loaded = DictBuffer.load(tmp_path / "ckpt")
    assert (loaded.cursor, loaded.is_full, len(loaded)) == (cursor, full, rows)


def test_a_bfm_zero_checkpoint_with_a_custom_separator_nests_its_keys(tmp_path: Path) -> None:
    write_bfm_checkpoint(tmp_path / "ckpt", rows=2, capacity=4, idx=2, full=False, separator="|")
    storage = DictBuffer.load(tmp_path / "ckpt").storage
    assert storage is not None
    assert set(storage["observation"]) == {"state", "privileged_state"}


def test_metamotivo_targets_load_as_dict_buffers(tmp_path: Path) -> None:
    write_bfm_checkpoint(
        tmp_path / "ckpt",
        rows=2,
        capacity=4,
        idx=2,
        full=False,
        target="metamotivo.buffers.buffers.DictBuffer",
    )
    assert isinstance(load_buffer(tmp_path / "ckpt"), DictBuffer)


@pytest.mark.parametrize(("rows", "idx", "full"), [(3, 2, False), (3, 3, True), (9, 0, True)])
def test_a_cursor_that_disagrees_with_the_rows_is_a_corrupt_checkpoint(
    tmp_path: Path, rows: int, idx: int, full: bool
) -> None:
    write_bfm_checkpoint(tmp_path / "ckpt", rows=rows, capacity=8, idx=idx, full=full)
    with pytest.raises(CorruptCheckpointError, match=r"config\.json"):
        DictBuffer.load(tmp_path / "ckpt")


@pytest.mark.parametrize("device", DEVICES)
def test_a_buffer_on_any_device_round_trips_and_samples_there(tmp_path: Path, device: str) -> None:
    buffer = filled(5, 7, device=device)
    buffer.save(tmp_path / "ckpt")
    loaded = DictBuffer.load(tmp_path / "ckpt")
    assert torch.equal(loaded.sample(4)["id"], buffer.sample(4)["id"])
    assert loaded.device.type == device
    assert loaded.sample(3)["observation"]["state"].device.type == device
    assert_same(loaded, buffer)


# ------------------------------------------------- streamed payload (slots and fallbacks)
def odd_rows(n: int) -> dict[str, Any]:
    """Leaves whose row widths divide no slot size, so chunk edges fall inside rows."""
    ids = np.arange(n)
    return {
        "wide": np.stack([ids + k for k in range(67)], 1).astype(np.float32),
        "triple": np.stack([ids * 0.5, -ids, ids + 0.25], 1),
        "half": torch.arange(n * 5, dtype=torch.int16).view(n, 5),
        "brain": (torch.arange(n * 7) % 97).to(torch.bfloat16).view(n, 7),
        "flag": (ids % 3 == 0)[:, None],
    }


@pytest.mark.parametrize("slot_bytes", [1000, 4099, 1 << 16])
def test_rows_cut_at_every_slot_and_chunk_edge_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slot_bytes: int
) -> None:
    monkeypatch.setattr(bufcore.checkpoint, "_SLOT_BYTES", slot_bytes)
    monkeypatch.setattr(bufcore.checkpoint, "_FIRST_READ_BYTES", 300)
    monkeypatch.setattr(bufcore.checkpoint, "_SAVE_SLOTS", 2)
    monkeypatch.setattr(bufcore.checkpoint, "_LOAD_SLOTS", 2)
    buffer = DictBuffer(capacity=257, seed=3)
    buffer.extend(odd_rows(300))
    buffer.save(tmp_path / "ckpt")
    loaded = DictBuffer.load(tmp_path / "ckpt")
    saved, restored = buffer.storage, loaded.storage
    assert saved is not None and restored is not None
    for key in saved:
        assert torch.equal(restored[key], saved[key]), key
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5", "r") as h5:
        assert np.array_equal(h5["wide"][:], saved["wide"].numpy())
        assert np.array_equal(h5["brain"][:], saved["brain"].view(torch.int16).numpy())


def write_bfm_checkpoint_through_hdf5_only(path: Path) -> dict[str, np.ndarray]:
    """A BFM-Zero checkpoint with a chunked, compressed dataset beside contiguous ones."""
    path.mkdir(parents=True)
    rng = np.random.default_rng(7)
    data = {
        "packed": rng.standard_normal((40, 6)).astype(np.float32),
        "chunked": rng.standard_normal((40, 3)).astype(np.float32),
        "terminated": rng.random((40, 1)) < 0.3,
    }
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("packed", data=data["packed"])
        h5.create_dataset("chunked", data=data["chunked"], chunks=(8, 3), compression="gzip")
        h5.create_dataset("terminated", data=data["terminated"])
    config = {"capacity": 40, "device": "cpu", "_idx": 0, "_is_full": True}
    (path / "config.json").write_text(json.dumps({**config, "__target__": BFM_TARGET}))
    return data


def test_datasets_only_hdf5_can_decode_load_beside_the_raw_ones(tmp_path: Path) -> None:
    data = write_bfm_checkpoint_through_hdf5_only(tmp_path / "ckpt")
    storage = DictBuffer.load(tmp_path / "ckpt").storage
    assert storage is not None
    for name, array in data.items():
        assert np.array_equal(storage[name].numpy(), array)


def rewrite_payload_chunked(checkpoint: Path) -> None:
    """Rewrite buffer.hdf5 with the observation datasets chunked and re-seal the manifest."""
    payload = checkpoint / "buffer.hdf5"
    with h5py.File(payload, "r") as h5:
        arrays = {name: h5[name][:] for name in h5}
    with h5py.File(payload, "w") as h5:
        for name, array in arrays.items():
            if name.startswith("observation"):
                h5.create_dataset(name, data=array, chunks=True, compression="gzip")
            else:
                h5.create_dataset(name, data=array)
    manifest = json.loads((checkpoint / "manifest.json").read_text())
    digest, size = bufcore.checkpoint.file_digest(payload)
    manifest["files"]["buffer.hdf5"] = {"sha256": digest, "size": size}
    manifest["checksum"] = bufcore.checkpoint._manifest_checksum(manifest)
    (checkpoint / "manifest.json").write_text(json.dumps(manifest))


def test_a_verified_payload_with_chunked_datasets_loads_and_is_still_checked(
    tmp_path: Path,
) -> None:
    buffer = filled(6, 9)
    buffer.save(tmp_path / "ckpt")
    rewrite_payload_chunked(tmp_path / "ckpt")
    assert_same(DictBuffer.load(tmp_path / "ckpt"), buffer)
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    damaged = bytearray(payload.read_bytes())
    damaged[-1] ^= 1
    payload.write_bytes(bytes(damaged))
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5"):
        DictBuffer.load(tmp_path / "ckpt")

"""Checkpoints of dict-family buffers: layout, round trips, BFM-Zero directories, dispatch."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

import bufcore.persist.checkpoint.hashing
import bufcore.persist.checkpoint.read_payload
import bufcore.persist.checkpoint.write
from bufcore import CorruptCheckpointError, DictBuffer, RunLogger, ZBuffer, load_buffer
from bufcore.persist.episodes import save_episodes
from bufcore.persist.run_checkpoint import save_run_checkpoint
from tests.support import DEVICES, reseal

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
    assert manifest["format_version"] == 2
    spec = {tuple(e["key_path"]): (e["shape"], e["dtype"]) for e in manifest["spec"]}
    assert spec[("observation", "state")] == ([2], "float32")
    assert spec[("terminated",)] == ([1], "bool")
    assert set(manifest["files"]) == {"buffer.hdf5", "config.json", "state.json"}
    for name, entry in manifest["files"].items():
        data = (tmp_path / "ckpt" / name).read_bytes()
        if name == "buffer.hdf5":
            assert set(entry) == {"size", "block_bytes", "sha256_blocks"}
            assert entry["block_bytes"] == bufcore.persist.checkpoint.write._HASH_BLOCK_BYTES
            assert entry["size"] == len(data)
            assert entry["sha256_blocks"] == block_digests(data, entry["block_bytes"])
        else:
            assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


EMPTY_PATH_WRITERS: dict[str, Callable[[str], object]] = {
    "Buffer.save": lambda path: filled(4, 2).save(path),
    "save_episodes": lambda path: save_episodes(path, [{"x": np.zeros(2, np.float32)}]),
    "save_run_checkpoint": lambda path: save_run_checkpoint(path, buffers={}, state={}),
    "RunLogger": lambda path: RunLogger(path),
}


@pytest.mark.parametrize("write", EMPTY_PATH_WRITERS.values(), ids=list(EMPTY_PATH_WRITERS))
def test_an_empty_path_is_refused_and_nothing_is_written_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[str], object]
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"expected a path, got an empty one \(''\)"):
        write("")
    assert list(tmp_path.iterdir()) == []


def test_a_key_containing_the_separator_raises_at_save_and_writes_nothing(tmp_path: Path) -> None:
    buffer = DictBuffer(capacity=3)
    with pytest.warns(UserWarning):
        buffer.extend({"obs": {"last-action": np.zeros((1, 2))}})
    with pytest.raises(ValueError, match="'last-action'"):
        buffer.save(tmp_path / "ckpt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key", ["a/b", ".", ""])
def test_a_key_hdf5_cannot_name_raises_at_save_and_writes_nothing(tmp_path: Path, key: str) -> None:
    buffer = DictBuffer(capacity=3, nested_key_separator="::")
    buffer.extend({key: np.zeros((1, 2))})
    with pytest.raises(ValueError, match="cannot name an HDF5 dataset"):
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


@pytest.mark.parametrize(
    ("row_block_bytes", "block_bytes"),
    [(1000, 512), (4099, 1024), (1 << 16, 4096), (1000, 1 << 16), (4099, 1 << 20)],
)
def test_rows_cut_at_every_row_block_and_hash_block_edge_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row_block_bytes: int, block_bytes: int
) -> None:
    # Row blocks and hash blocks whose sizes share no multiple below the file size: row blocks
    # straddle hash block edges on both the save and the load.
    monkeypatch.setattr(bufcore.persist.checkpoint.write, "BLOCK_BYTES", row_block_bytes)
    monkeypatch.setattr(bufcore.persist.checkpoint.read_payload, "BLOCK_BYTES", row_block_bytes)
    monkeypatch.setattr(bufcore.persist.checkpoint.write, "_HASH_BLOCK_BYTES", block_bytes)
    buffer = DictBuffer(capacity=257, seed=3)
    buffer.extend(odd_rows(300))
    buffer.save(tmp_path / "ckpt")
    entry = read_manifest(tmp_path / "ckpt")["files"]["buffer.hdf5"]
    data = (tmp_path / "ckpt" / "buffer.hdf5").read_bytes()
    assert entry["block_bytes"] == block_bytes
    assert entry["sha256_blocks"] == block_digests(data, block_bytes)
    loaded = DictBuffer.load(tmp_path / "ckpt")
    saved, restored = buffer.storage, loaded.storage
    assert saved is not None and restored is not None
    for key in saved:
        assert torch.equal(restored[key], saved[key]), key
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5", "r") as h5:
        assert np.array_equal(h5["wide"][:], saved["wide"].numpy())
        assert np.array_equal(h5["brain"][:], saved["brain"].view(torch.int16).numpy())
    # The last block is damaged: the tiny-block path finds it too.
    flip_byte(tmp_path / "ckpt" / "buffer.hdf5", len(data) - 1)
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5.*block"):
        DictBuffer.load(tmp_path / "ckpt")


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
    data = payload.read_bytes()
    block = bufcore.persist.checkpoint.write._HASH_BLOCK_BYTES

    def point_at_new_payload(manifest: dict[str, Any]) -> None:
        manifest["files"]["buffer.hdf5"] = {
            "size": len(data),
            "block_bytes": block,
            "sha256_blocks": block_digests(data, block),
        }

    reseal(checkpoint, point_at_new_payload)


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


# ------------------------------------------- block checksums (format 2), format 1 manifests
def block_digests(data: bytes, block_bytes: int) -> list[str]:
    """sha256 of each ``block_bytes`` block of ``data``, computed independently of bufcore."""
    return [
        hashlib.sha256(data[start : start + block_bytes]).hexdigest()
        for start in range(0, len(data), block_bytes)
    ]


def read_manifest(checkpoint: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((checkpoint / "manifest.json").read_text())
    return manifest


def flip_byte(file: Path, offset: int) -> None:
    data = bytearray(file.read_bytes())
    data[offset] ^= 0x10
    file.write_bytes(bytes(data))


def rewrite_as_format_1(checkpoint: Path) -> None:
    """What bufcore wrote before block checksums: one whole-file sha256 of buffer.hdf5."""
    digest, size = bufcore.persist.checkpoint.hashing.file_digest(checkpoint / "buffer.hdf5")

    def old_style(manifest: dict[str, Any]) -> None:
        manifest["format_version"] = 1
        manifest["files"]["buffer.hdf5"] = {"sha256": digest, "size": size}

    reseal(checkpoint, old_style)


@pytest.fixture
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Blocks of 1 KiB, so that even a small checkpoint has many."""
    monkeypatch.setattr(bufcore.persist.checkpoint.write, "_HASH_BLOCK_BYTES", 1024)
    return 1024


def big_checkpoint(path: Path) -> DictBuffer:
    buffer = DictBuffer(capacity=257, seed=3)
    buffer.extend(odd_rows(300))
    buffer.save(path)
    return buffer


def test_a_format_1_manifest_with_a_whole_file_sha256_loads(tmp_path: Path) -> None:
    buffer = filled(6, 9)
    buffer.save(tmp_path / "ckpt")
    rewrite_as_format_1(tmp_path / "ckpt")
    manifest = read_manifest(tmp_path / "ckpt")
    assert manifest["format_version"] == 1
    assert set(manifest["files"]["buffer.hdf5"]) == {"sha256", "size"}
    assert_same(DictBuffer.load(tmp_path / "ckpt"), buffer)
    assert_same(load_buffer(tmp_path / "ckpt"), buffer)


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_a_flipped_byte_under_a_format_1_manifest_raises_naming_the_payload(
    tmp_path: Path, where: str
) -> None:
    filled(6, 9).save(tmp_path / "ckpt")
    rewrite_as_format_1(tmp_path / "ckpt")
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    size = payload.stat().st_size
    flip_byte(payload, {"start": 0, "middle": size // 2, "end": size - 1}[where])
    with pytest.raises(CorruptCheckpointError, match="sha256 does not match") as caught:
        DictBuffer.load(tmp_path / "ckpt")
    assert caught.value.path == payload


def test_a_format_1_manifest_whose_size_differs_raises_naming_the_payload(tmp_path: Path) -> None:
    filled(6, 9).save(tmp_path / "ckpt")
    rewrite_as_format_1(tmp_path / "ckpt")
    reseal(tmp_path / "ckpt", lambda m: m["files"]["buffer.hdf5"].update(size=1))
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5.*manifest says 1"):
        DictBuffer.load(tmp_path / "ckpt")


def test_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    filled(6, 9).save(tmp_path / "ckpt")
    reseal(tmp_path / "ckpt", lambda m: m.update(format_version=3))
    with pytest.raises(CorruptCheckpointError, match=r"manifest\.json.*reads up to 2"):
        DictBuffer.load(tmp_path / "ckpt")


@pytest.mark.parametrize("block", [0, 1, 7, 13])
def test_a_damaged_block_raises_naming_the_payload_and_the_block(
    tmp_path: Path, tiny_blocks: int, block: int
) -> None:
    big_checkpoint(tmp_path / "ckpt")
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    count = len(read_manifest(tmp_path / "ckpt")["files"]["buffer.hdf5"]["sha256_blocks"])
    assert count > 13
    flip_byte(payload, block * tiny_blocks + tiny_blocks // 2)
    with pytest.raises(CorruptCheckpointError, match=f"block {block} ") as caught:
        DictBuffer.load(tmp_path / "ckpt")
    assert caught.value.path == payload


def test_block_digests_in_the_wrong_order_raise(tmp_path: Path, tiny_blocks: int) -> None:
    big_checkpoint(tmp_path / "ckpt")

    def swap(manifest: dict[str, Any]) -> None:
        blocks = manifest["files"]["buffer.hdf5"]["sha256_blocks"]
        blocks[0], blocks[1] = blocks[1], blocks[0]

    reseal(tmp_path / "ckpt", swap)
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5.*block 0 "):
        DictBuffer.load(tmp_path / "ckpt")


def drop_last(entry: dict[str, Any]) -> None:
    entry["sha256_blocks"].pop()


def add_one(entry: dict[str, Any]) -> None:
    entry["sha256_blocks"].append(entry["sha256_blocks"][0])


BAD_ENTRIES: list[Any] = [
    pytest.param(drop_last, "blocks of", id="a-block-missing"),
    pytest.param(add_one, "blocks of", id="a-block-too-many"),
    pytest.param(lambda e: e.pop("block_bytes"), "block_bytes", id="no-block-bytes"),
    pytest.param(lambda e: e.update(block_bytes=0), "block_bytes", id="zero-block-bytes"),
    pytest.param(lambda e: e.update(block_bytes=-1024), "block_bytes", id="negative-block-bytes"),
    pytest.param(lambda e: e.update(block_bytes=1000), "block_bytes", id="not-a-power-of-two"),
    pytest.param(lambda e: e.update(block_bytes="1024"), "block_bytes", id="a-string"),
    pytest.param(lambda e: e.update(block_bytes=True), "block_bytes", id="a-bool"),
    pytest.param(lambda e: e.update(block_bytes=1024.0), "block_bytes", id="a-float"),
    pytest.param(lambda e: e.update(block_bytes=2048), "blocks of", id="another-power-of-two"),
    pytest.param(lambda e: e.pop("sha256_blocks"), "sha256_blocks", id="no-blocks"),
    pytest.param(lambda e: e.update(sha256_blocks="ab"), "sha256_blocks", id="blocks-a-string"),
    pytest.param(lambda e: e["sha256_blocks"].__setitem__(0, 1), "sha256_blocks", id="a-number"),
    pytest.param(lambda e: e.update(size=e["size"] + 1), "manifest says|blocks of", id="size+1"),
    pytest.param(lambda e: e.update(size=e["size"] - 1024), "blocks of", id="size-a-block-less"),
    pytest.param(lambda e: e.pop("size"), "size", id="no-size"),
    pytest.param(lambda e: e.update(size=None), "size", id="size-null"),
    pytest.param(
        lambda e: e.update(sha256=e.pop("sha256_blocks")[0]), "sha256_blocks", id="whole-file"
    ),
]


@pytest.mark.parametrize(("change", "problem"), BAD_ENTRIES)
def test_a_malformed_or_inconsistent_payload_entry_raises_naming_the_payload(
    tmp_path: Path, tiny_blocks: int, change: Callable[[dict[str, Any]], None], problem: str
) -> None:
    big_checkpoint(tmp_path / "ckpt")
    reseal(tmp_path / "ckpt", lambda m: change(m["files"]["buffer.hdf5"]))
    for load in (DictBuffer.load, load_buffer):
        with pytest.raises(CorruptCheckpointError, match=problem) as caught:
            load(tmp_path / "ckpt")
        assert caught.value.path == tmp_path / "ckpt" / "buffer.hdf5"


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda e: e["sha256_blocks"].__setitem__(2, "0" * 64), id="a-digest"),
        pytest.param(lambda e: e.update(block_bytes=2048), id="block-bytes"),
        pytest.param(drop_last, id="block-count"),
    ],
)
def test_the_manifest_checksum_covers_the_block_fields(
    tmp_path: Path, tiny_blocks: int, change: Callable[[dict[str, Any]], None]
) -> None:
    big_checkpoint(tmp_path / "ckpt")
    manifest = read_manifest(tmp_path / "ckpt")
    change(manifest["files"]["buffer.hdf5"])  # without resealing
    (tmp_path / "ckpt" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorruptCheckpointError, match="its checksum") as caught:
        DictBuffer.load(tmp_path / "ckpt")
    assert caught.value.path.name == "manifest.json"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_save_with_a_non_finite_float_in_its_state_is_refused_and_keeps_the_old_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: float
) -> None:
    buffer = DictBuffer(capacity=3, seed=0)
    buffer.extend({"x": torch.arange(3.0)[:, None]})
    buffer.save(tmp_path / "ckpt")
    before = {p.name: p.read_bytes() for p in (tmp_path / "ckpt").iterdir()}
    real = buffer.state_dict

    def broken() -> dict[str, Any]:
        state = real()
        state["state"]["broken"] = [1.0, bad]
        return state

    monkeypatch.setattr(buffer, "state_dict", broken)
    with pytest.raises(ValueError, match=r"state\.json: Out of range float values"):
        buffer.save(tmp_path / "ckpt")
    assert {p.name: p.read_bytes() for p in (tmp_path / "ckpt").iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]

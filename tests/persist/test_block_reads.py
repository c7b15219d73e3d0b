"""Reads of some rows of buffer.hdf5 (``read_leaf``, loads with ``leaves=``) verify exactly the
manifest blocks their bytes and the HDF5 metadata lie in (bufcore.persist.checkpoint.verify):
damage there is a CorruptCheckpointError naming buffer.hdf5 and the leaf, damage elsewhere is not
looked for, and a format-1 manifest (one digest) makes every read hash the whole file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

import bufcore.persist.checkpoint.write
from bufcore.errors import CorruptCheckpointError
from bufcore.inspect import read_leaf
from bufcore.persist.checkpoint.verify import BlockReader
from tests.support import reseal

BLOCK = 1024  # small blocks, so that a few hundred rows span several


def checkpoint(path: Path, capacity: int, writes: int) -> bufcore.DictBuffer:
    """A DictBuffer of three leaves whose row ``t`` holds ``t``, saved at ``path``."""
    buffer = bufcore.DictBuffer(capacity=capacity, seed=0)
    for t in range(writes):
        buffer.extend(
            {
                "obs": {"state": torch.full((1, 16), float(t))},
                "action": torch.full((1, 4), t, dtype=torch.int64),
                "done": torch.tensor([[t % 3 == 0]]),
            }
        )
    buffer.save(path)
    return buffer


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bufcore.persist.checkpoint.write, "_HASH_BLOCK_BYTES", BLOCK)


def offset_of(path: Path, name: str) -> tuple[int, int]:
    """File offset and bytes of dataset ``name`` of the checkpoint at ``path``."""
    with h5py.File(path / "buffer.hdf5", "r") as h5:
        return int(h5[name].id.get_offset()), int(h5[name].id.get_storage_size())


def flip(path: Path, position: int) -> None:
    payload = path / "buffer.hdf5"
    data = bytearray(payload.read_bytes())
    data[position] ^= 0xFF
    payload.write_bytes(bytes(data))


def hashed_blocks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every block index a BlockReader hashes from now on, in order."""
    seen: list[int] = []
    check = BlockReader._check_block

    def spy(self: BlockReader, index: int, *args: Any) -> None:
        seen.append(index)
        check(self, index, *args)

    monkeypatch.setattr(BlockReader, "_check_block", spy)
    return seen


@pytest.mark.parametrize(("capacity", "writes"), [(1, 1), (2, 5), (7, 4), (7, 10)])
def test_read_leaf_refuses_a_flipped_byte_in_the_rows_it_reads_naming_buffer_hdf5_and_the_leaf(
    tmp_path: Path, capacity: int, writes: int
) -> None:
    checkpoint(tmp_path / "ckpt", capacity, writes)
    offset, _ = offset_of(tmp_path / "ckpt", "obs-state")
    flip(tmp_path / "ckpt", offset + 2)  # inside row 0's first float
    with pytest.raises(
        CorruptCheckpointError, match=r"buffer\.hdf5: leaf \['obs'\]\['state'\]: sha256 of block"
    ):
        read_leaf(tmp_path / "ckpt", ("obs", "state"), rows=[0])


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize("rows", [None, slice(3, 5), [199, 3, 3]], ids=["all", "slice", "indices"])
def test_read_leaf_refuses_a_flipped_byte_in_a_later_block_of_the_rows_it_reads(
    tmp_path: Path, rows: Any
) -> None:
    checkpoint(tmp_path / "ckpt", 200, 200)
    offset, _ = offset_of(tmp_path / "ckpt", "action")
    flip(tmp_path / "ckpt", offset + 4 * 8 * 4)  # row 4 (row 3's end in the slice case)
    with pytest.raises(CorruptCheckpointError, match=r"leaf \['action'\]: sha256 of block"):
        read_leaf(tmp_path / "ckpt", "action", rows=rows)


@pytest.mark.usefixtures("small_blocks")
def test_read_leaf_hashes_only_the_blocks_its_rows_and_the_metadata_lie_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint(tmp_path / "ckpt", 300, 300)
    offset, nbytes = offset_of(tmp_path / "ckpt", "done")
    first = min(offset_of(tmp_path / "ckpt", name)[0] for name in ("obs-state", "action", "done"))
    size = (tmp_path / "ckpt" / "buffer.hdf5").stat().st_size
    seen = hashed_blocks(monkeypatch)
    got = read_leaf(tmp_path / "ckpt", "done")
    metadata = set(range(0, -(-first // BLOCK)))
    rows = set(range(offset // BLOCK, (offset + nbytes - 1) // BLOCK + 1))
    assert len(got) == 300
    assert sorted(seen) == sorted(metadata | rows)
    assert len(seen) < size // BLOCK // 4  # far from the whole file


@pytest.mark.usefixtures("small_blocks")
def test_a_flipped_byte_in_a_block_a_read_does_not_touch_is_not_looked_for(
    tmp_path: Path,
) -> None:
    checkpoint(tmp_path / "ckpt", 300, 300)
    offset, nbytes = offset_of(tmp_path / "ckpt", "obs-state")
    flip(tmp_path / "ckpt", offset + nbytes // 2)
    np.testing.assert_array_equal(read_leaf(tmp_path / "ckpt", "action", rows=[5])[0], [5] * 4)


@pytest.mark.usefixtures("small_blocks")
def test_a_flipped_byte_among_the_hdf5_metadata_is_refused_naming_buffer_hdf5(
    tmp_path: Path,
) -> None:
    checkpoint(tmp_path / "ckpt", 300, 300)
    first = min(offset_of(tmp_path / "ckpt", name)[0] for name in ("obs-state", "action", "done"))
    flip(tmp_path / "ckpt", first - 1)  # the last byte before any dataset: unused by HDF5
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: leaf \['done'\]: sha256"):
        read_leaf(tmp_path / "ckpt", "done", rows=[0])


def test_a_format_1_manifest_makes_any_read_hash_the_whole_file(tmp_path: Path) -> None:
    checkpoint(tmp_path / "ckpt", 300, 300)
    payload = (tmp_path / "ckpt" / "buffer.hdf5").read_bytes()

    def as_format_1(manifest: dict[str, Any]) -> None:
        manifest["format_version"] = 1
        manifest["files"]["buffer.hdf5"] = {
            "sha256": hashlib.sha256(payload).hexdigest(),
            "size": len(payload),
        }

    reseal(tmp_path / "ckpt", as_format_1)
    offset, nbytes = offset_of(tmp_path / "ckpt", "obs-state")
    flip(tmp_path / "ckpt", offset + nbytes // 2)  # far from the leaf read
    with pytest.raises(CorruptCheckpointError, match=r"sha256 of block 0 .* does not match"):
        read_leaf(tmp_path / "ckpt", "action", rows=[5])


def rewrite_chunked(path: Path) -> None:
    """Store every dataset of a checkpoint chunked (4 rows a chunk) and re-seal the manifest
    with the new file's block digests, as a hand-made checkpoint could be."""
    payload = path / "buffer.hdf5"
    with h5py.File(payload, "r") as h5:
        data = {name: h5[name][()] for name in h5}
    with h5py.File(payload, "w") as h5:
        for name, values in data.items():
            h5.create_dataset(name, data=values, chunks=(4, *values.shape[1:]))
    raw = payload.read_bytes()

    def point_at(manifest: dict[str, Any]) -> None:
        blocks = [
            hashlib.sha256(raw[i : i + BLOCK]).hexdigest() for i in range(0, len(raw), BLOCK)
        ]
        manifest["files"]["buffer.hdf5"] = {
            "size": len(raw), "block_bytes": BLOCK, "sha256_blocks": blocks
        }

    reseal(path, point_at)


def test_a_chunked_dataset_is_verified_chunk_by_chunk(tmp_path: Path) -> None:
    checkpoint(tmp_path / "ckpt", 40, 40)
    rewrite_chunked(tmp_path / "ckpt")
    np.testing.assert_array_equal(read_leaf(tmp_path / "ckpt", "action", rows=[9])[0], [9] * 4)
    with h5py.File(tmp_path / "ckpt" / "buffer.hdf5", "r") as h5:
        chunk = h5["action"].id.get_chunk_info(9)  # rows 36..39
    flip(tmp_path / "ckpt", chunk.byte_offset + 1)
    with pytest.raises(CorruptCheckpointError, match=r"leaf \['action'\]: sha256 of block"):
        read_leaf(tmp_path / "ckpt", "action", rows=[0])


@pytest.mark.parametrize(("leaves", "name"), [(["obs"], "obs-state"), (["action"], "action")])
def test_a_partial_load_refuses_a_flipped_byte_in_a_leaf_it_loads(
    tmp_path: Path, leaves: list[str], name: str
) -> None:
    checkpoint(tmp_path / "ckpt", 7, 10)
    offset, _ = offset_of(tmp_path / "ckpt", name)
    flip(tmp_path / "ckpt", offset)
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: leaf \['"):
        bufcore.load_buffer(tmp_path / "ckpt", leaves=leaves)


def test_an_index_only_dict_load_refuses_a_flipped_byte_in_the_metadata_block(
    tmp_path: Path,
) -> None:
    checkpoint(tmp_path / "ckpt", 7, 10)  # one block: the metadata shares it with the rows
    offset, _ = offset_of(tmp_path / "ckpt", "done")
    flip(tmp_path / "ckpt", offset)
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: HDF5 metadata: sha256"):
        bufcore.load_buffer(tmp_path / "ckpt", leaves=[])


@pytest.mark.usefixtures("small_blocks")
def test_an_index_only_dict_load_does_not_look_at_blocks_of_rows(tmp_path: Path) -> None:
    checkpoint(tmp_path / "ckpt", 300, 300)
    offset, nbytes = offset_of(tmp_path / "ckpt", "obs-state")
    flip(tmp_path / "ckpt", offset + nbytes // 2)
    assert len(bufcore.load_buffer(tmp_path / "ckpt", leaves=[])) == 300


def test_an_online_index_only_load_refuses_a_flipped_end_flag(tmp_path: Path) -> None:
    buffer = bufcore.TrajectoryDictBufferMultiDim(capacity=5, n_dim=2, seed=0)
    for _ in range(6):
        buffer.extend({"observation": torch.zeros(1, 3, 2), "done": torch.zeros(1, 3, 1).bool()})
    buffer.save(tmp_path / "ckpt")
    offset, _ = offset_of(tmp_path / "ckpt", "done")
    flip(tmp_path / "ckpt", offset + 1)
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: leaf \['done'\]: sha256"):
        bufcore.load_buffer(tmp_path / "ckpt", leaves=[])


def test_a_bfm_zero_directory_without_a_manifest_loads_some_leaves_unverified(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bfm"
    path.mkdir()
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("observation-state", data=np.arange(15, dtype=np.float32).reshape(5, 3))
        h5.create_dataset("action", data=np.ones((5, 2), np.float32))
    config = {"capacity": 8, "device": "cpu",
              "__target__": "humanoidverse.agents.buffers.transition.DictBuffer"}
    (path / "config.json").write_text(json.dumps(config))
    buffer = bufcore.load_buffer(path, leaves=["action"])
    assert torch.equal(buffer._storage.view(("action",))[:5], torch.ones(5, 2))
    assert buffer._storage.absent == {("observation", "state")}


def empty_checkpoint(path: Path, kind: str) -> None:
    """A checkpoint of ``kind`` that holds no rows (a fixed-spec ZBuffer: its dataset exists)."""
    if kind == "z":
        bufcore.ZBuffer(3, 4, seed=0).save(path)
    elif kind == "dict":
        bufcore.DictBuffer(capacity=2, seed=0).save(path)
    else:
        bufcore.TrajectoryDictBufferMultiDim(capacity=2, n_dim=1, seed=0).save(path)


@pytest.mark.parametrize("kind", ["z", "dict", "online"])
def test_a_partial_load_of_a_checkpoint_without_rows_refuses_a_flipped_metadata_byte(
    tmp_path: Path, kind: str
) -> None:
    # No rows are read, but the spec and ring position came from the metadata: a full load and
    # read_leaf refuse this file, so an index-only load must too.
    empty_checkpoint(tmp_path / "ckpt", kind)
    # Near the end: free space HDF5 does not parse, so the file still opens.
    flip(tmp_path / "ckpt", (tmp_path / "ckpt" / "buffer.hdf5").stat().st_size - 8)
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5: HDF5 metadata: sha256"):
        bufcore.load_buffer(tmp_path / "ckpt", leaves=[])

"""A checkpoint or episode file from an untrusted source cannot make a load read anything but
its own regular files: no paths out of the directory, no links, no FIFOs, and no HDF5 feature
that pulls data from other files (external links and storage, virtual datasets, references)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from bufcore import DictBuffer, load_buffer
from bufcore.errors import CorruptCheckpointError, CorruptFileError
from bufcore.inspect import read_leaf, summarize_checkpoint
from bufcore.persist.episodes import load_episode_based_h5, save_episodes
from bufcore.persist.hdf5_guard import CHUNK_ALLOWANCE
from tests.support import reseal

SECRET = b"root:x:0:0:secret\n" * 4


def saved(path: Path) -> Path:
    buffer = DictBuffer(capacity=4, seed=0)
    buffer.extend({"x": np.arange(4, dtype=np.float32)[:, None].repeat(2, 1)})
    buffer.save(path)
    return path


def list_file(name: str, entry: dict[str, Any] | str) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["files"][name] = entry

    return change


@pytest.mark.parametrize(
    "name", ["../outside.json", "/etc/passwd", "/dev/zero", "sub/state.json", "..", "notes.txt"]
)
def test_a_manifest_listing_a_file_outside_the_checkpoint_is_refused_before_reading_it(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / "outside.json").write_text("{}")
    path = saved(tmp_path / "ckpt")
    reseal(path, list_file(name, {"size": 2, "sha256": "0" * 64}))
    with pytest.raises(CorruptCheckpointError, match="a checkpoint holds only") as caught:
        load_buffer(path)
    assert caught.value.path == path / "manifest.json"


def test_a_member_that_is_a_symbolic_link_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "secret.json").write_bytes(b"{}")
    path = saved(tmp_path / "ckpt")
    (path / "state.json").unlink()
    (path / "state.json").symlink_to(tmp_path / "secret.json")
    reseal(path, list_file("state.json", {"size": 3, "sha256": "0" * 64}))
    with pytest.raises(CorruptCheckpointError, match="symbolic link") as caught:
        load_buffer(path)
    assert caught.value.path == path / "state.json"


def test_a_member_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = saved(tmp_path / "ckpt")
    (path / "state.json").unlink()
    os.mkfifo(path / "state.json")
    with pytest.raises(CorruptCheckpointError, match="not a regular file"):
        load_buffer(path)


def test_a_member_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path / "ckpt")
    (path / "config.json").unlink()
    (path / "config.json").mkdir()
    with pytest.raises(CorruptCheckpointError, match="not a regular file") as caught:
        load_buffer(path)
    assert caught.value.path == path / "config.json"


# --------------------------------------------------------------------------- HDF5 features
def rewrite_payload(path: Path, build: Callable[[h5py.File, Path], None]) -> None:
    """Replace buffer.hdf5 by what ``build`` writes, and re-seal the manifest for it."""
    payload = path / "buffer.hdf5"
    payload.unlink()
    with h5py.File(payload, "w") as h5:
        build(h5, path.parent)
    data = payload.read_bytes()

    def point_at(manifest: dict[str, Any]) -> None:
        import hashlib

        block = manifest["files"]["buffer.hdf5"]["block_bytes"]
        manifest["files"]["buffer.hdf5"]["size"] = len(data)
        manifest["files"]["buffer.hdf5"]["sha256_blocks"] = [
            hashlib.sha256(data[i : i + block]).hexdigest() for i in range(0, len(data), block)
        ]

    reseal(path, point_at)


def external_storage(h5: h5py.File, outside: Path) -> None:
    (outside / "passwd").write_bytes(SECRET)
    h5.create_dataset("x", shape=(4, 2), dtype="<f4", external=[(str(outside / "passwd"), 0, 32)])


def external_link(h5: h5py.File, outside: Path) -> None:
    with h5py.File(outside / "other.h5", "w") as other:
        other["x"] = np.zeros((4, 2), dtype=np.float32)
    h5["x"] = h5py.ExternalLink(str(outside / "other.h5"), "/x")


def soft_link(h5: h5py.File, outside: Path) -> None:
    h5["hidden/y"] = np.zeros((4, 2), dtype=np.float32)
    h5["x"] = h5py.SoftLink("/hidden/y")


def virtual_dataset(h5: h5py.File, outside: Path) -> None:
    with h5py.File(outside / "other.h5", "w") as other:
        other["x"] = np.full((4, 2), 7, dtype=np.float32)
    layout = h5py.VirtualLayout(shape=(4, 2), dtype="<f4")
    layout[:] = h5py.VirtualSource(str(outside / "other.h5"), "x", shape=(4, 2))
    h5.create_virtual_dataset("x", layout)


def references(h5: h5py.File, outside: Path) -> None:
    h5["target"] = np.zeros(3)
    refs = h5.create_dataset("x", shape=(4, 2), dtype=h5py.ref_dtype)
    refs[0, 0] = h5["target"].ref


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (external_storage, "external files"),
        (external_link, "external link"),
        (soft_link, "soft link"),
        (virtual_dataset, "virtual dataset"),
        (references, "object references"),
    ],
)
def test_a_payload_reaching_outside_its_file_is_refused(
    tmp_path: Path, build: Callable[[h5py.File, Path], None], match: str
) -> None:
    path = saved(tmp_path / "ckpt")
    rewrite_payload(path, build)
    with pytest.raises(CorruptCheckpointError, match=match) as caught:
        load_buffer(path)
    assert caught.value.path == path / "buffer.hdf5"
    assert "secret" not in str(caught.value)


def test_a_bfm_zero_checkpoint_with_external_storage_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path / "ckpt")
    rewrite_payload(path, external_storage)
    for name in ("manifest.json", "state.json"):
        (path / name).unlink()
    config = json.loads((path / "config.json").read_text())
    config["__target__"] = "humanoidverse.agents.buffers.transition.DictBuffer"
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CorruptCheckpointError, match="external files"):
        load_buffer(path)


def test_a_dataset_whose_dtype_differs_from_the_manifest_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path / "ckpt")
    rewrite_payload(path, lambda h5, _: h5.create_dataset("x", data=np.zeros((4, 2), np.int32)))
    with pytest.raises(CorruptCheckpointError, match="dtype int32, expected float32"):
        load_buffer(path)


# --------------------------------------------------------------------------- episode files
def episode_file(path: Path, build: Callable[[h5py.Group, Path], None]) -> Path:
    with h5py.File(path, "w") as h5:
        h5.attrs["num_episodes"] = 1
        group = h5.create_group("ep_0")
        group["motion_id"] = np.zeros(4, dtype=np.int64)
        build(group, path.parent)
    return path


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (external_storage, "external files"),
        (external_link, "external link"),
        (virtual_dataset, "virtual dataset"),
        (references, "object references"),
    ],
)
def test_an_episode_file_reaching_outside_itself_is_refused_naming_it(
    tmp_path: Path, build: Callable[[Any, Path], None], match: str
) -> None:
    file = episode_file(tmp_path / "walk.h5", build)
    with pytest.raises(CorruptFileError, match=match) as caught:
        load_episode_based_h5(file)
    assert caught.value.path == file


def test_an_episode_file_whose_groups_link_back_to_an_ancestor_is_refused(
    tmp_path: Path,
) -> None:
    def cycle(group: h5py.Group, _: Path) -> None:
        group["observation/back"] = group

    file = episode_file(tmp_path / "walk.h5", cycle)
    with pytest.raises(CorruptFileError, match="/ep_0/observation/back is /ep_0 reached a second"):
        load_episode_based_h5(file)


def test_an_episode_file_nesting_groups_40_levels_deep_is_refused(tmp_path: Path) -> None:
    def deep(group: h5py.Group, _: Path) -> None:
        group["/".join(["g"] * 40) + "/x"] = np.zeros(4)

    file = episode_file(tmp_path / "walk.h5", deep)
    with pytest.raises(CorruptFileError, match="nest deeper"):
        load_episode_based_h5(file)


def linked_twice_into_the_next(group: h5py.Group, _: Path, levels: int = 20) -> None:
    """``levels`` nested groups, each reached from its parent by two hard links: 27 KB of
    file, 2**levels paths to walk, no cycle (the depth limit never fires)."""
    parent = group.create_group("observation")
    for _level in range(levels):
        child = parent.create_group("a")
        parent["b"] = child
        parent = child
    parent["state"] = np.zeros(4, dtype=np.float32)


def same_dataset_twice(group: h5py.Group, _: Path) -> None:
    group["observation"] = np.zeros(4, dtype=np.float32)
    group["action"] = group["observation"]


@pytest.mark.parametrize(
    "build", [linked_twice_into_the_next, same_dataset_twice], ids=["groups", "dataset"]
)
def test_an_episode_file_reaching_one_object_twice_is_refused_naming_it(
    tmp_path: Path, build: Callable[[h5py.Group, Path], None]
) -> None:
    file = episode_file(tmp_path / "walk.h5", build)
    with pytest.raises(CorruptFileError, match="reached a second time") as caught:
        load_episode_based_h5(file)
    assert caught.value.path == file


def test_two_episodes_that_are_one_group_are_refused_naming_the_file(tmp_path: Path) -> None:
    def second_name(group: h5py.Group, _: Path) -> None:
        group.file["ep_1"] = group
        group.file.attrs["num_episodes"] = 2

    file = episode_file(tmp_path / "walk.h5", second_name)
    with pytest.raises(CorruptFileError, match="reached a second time") as caught:
        load_episode_based_h5(file)
    assert caught.value.path == file


# ------------------------------------------------------------------- chunks that outsize data
def chunked(where: h5py.Group, name: str, chunk_rows: int, rows: int = 4) -> None:
    """A float32 ``[rows, 2]`` dataset stored in one gzip chunk of ``chunk_rows`` rows (a
    resizable dataset may declare chunks longer than its rows)."""
    dataset = where.create_dataset(
        name, shape=(rows, 2), maxshape=(None, 2), chunks=(chunk_rows, 2), dtype="<f4",
        compression="gzip",
    )
    dataset[:] = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)


# A chunk of 32 MiB holding 32 bytes: reading it would allocate the whole chunk.
HUGE_CHUNK_ROWS = 2 * CHUNK_ALLOWANCE // 8

CHECKPOINT_READERS: dict[str, Callable[[Path], Any]] = {
    "load_buffer": load_buffer,
    "load_buffer leaves": lambda path: load_buffer(path, leaves=["x"]),
    "read_leaf": lambda path: read_leaf(path, "x"),
    "summarize_checkpoint": summarize_checkpoint,
}


@pytest.mark.parametrize("read", CHECKPOINT_READERS.values(), ids=list(CHECKPOINT_READERS))
def test_a_payload_dataset_in_a_chunk_far_larger_than_its_rows_is_refused_before_reading(
    tmp_path: Path, read: Callable[[Path], Any]
) -> None:
    path = saved(tmp_path / "ckpt")
    rewrite_payload(path, lambda h5, _: chunked(h5, "x", HUGE_CHUNK_ROWS))
    with pytest.raises(CorruptCheckpointError, match="chunk") as caught:
        read(path)
    assert caught.value.path == path / "buffer.hdf5"
    assert "/x" in str(caught.value)


def test_a_lone_hdf5_file_in_a_chunk_far_larger_than_its_rows_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "rows.hdf5"
    with h5py.File(file, "w") as h5:
        chunked(h5, "x", HUGE_CHUNK_ROWS)
    with pytest.raises(CorruptFileError, match="chunk") as caught:
        DictBuffer(capacity=8).load_hdf5(file)
    assert caught.value.path == file


def test_an_episode_dataset_in_a_chunk_far_larger_than_its_rows_is_refused(
    tmp_path: Path,
) -> None:
    def huge_chunk(group: h5py.Group, _: Path) -> None:
        chunked(group, "observation", HUGE_CHUNK_ROWS)

    file = episode_file(tmp_path / "walk.h5", huge_chunk)
    with pytest.raises(CorruptFileError, match="chunk") as caught:
        load_episode_based_h5(file)
    assert caught.value.path == file
    assert "ep_0/observation" in str(caught.value)


@pytest.mark.parametrize("rows", [4, CHUNK_ALLOWANCE // 8 + 1])
def test_a_chunk_as_large_as_the_allowance_or_the_data_itself_loads(
    tmp_path: Path, rows: int
) -> None:
    # Up to the allowance (a resizable dataset keeps room for rows to come), or no larger
    # than the data it holds, however large that is.
    chunk_rows = CHUNK_ALLOWANCE // 8 if rows == 4 else rows

    def chunk(group: h5py.Group, _: Path) -> None:
        del group["motion_id"]
        chunked(group, "observation", chunk_rows, rows)
        group["motion_id"] = np.zeros(rows, dtype=np.int64)

    file = episode_file(tmp_path / "walk.h5", chunk)
    (episode,) = load_episode_based_h5(file)
    assert episode["observation"].shape == (rows, 2)


def test_a_chunk_one_row_over_the_allowance_is_refused(tmp_path: Path) -> None:
    def chunk(group: h5py.Group, _: Path) -> None:
        chunked(group, "observation", CHUNK_ALLOWANCE // 8 + 1)

    file = episode_file(tmp_path / "walk.h5", chunk)
    with pytest.raises(CorruptFileError, match="chunk"):
        load_episode_based_h5(file)


@pytest.mark.parametrize("content", [b"", b"not hdf5 at all", b"\x89HDF\r\n\x1a\n" + b"\0" * 8])
def test_a_file_that_is_not_hdf5_is_a_corrupt_file_naming_it(
    tmp_path: Path, content: bytes
) -> None:
    file = tmp_path / "walk.h5"
    file.write_bytes(content)
    with pytest.raises(CorruptFileError, match="not a readable HDF5 file") as caught:
        load_episode_based_h5(file)
    assert caught.value.path == file


def test_an_episode_path_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "walk.h5")
    with pytest.raises(CorruptFileError, match="not a regular file"):
        load_episode_based_h5(tmp_path / "walk.h5")


def test_a_big_endian_episode_file_loads_in_native_order(tmp_path: Path) -> None:
    values = np.arange(6, dtype=">f8").reshape(3, 2)

    def big_endian(group: h5py.Group, _: Path) -> None:
        del group["motion_id"]
        group.create_dataset("observation", data=values)
        group.create_dataset("motion_id", data=np.zeros(3, dtype=">i8"))

    file = episode_file(tmp_path / "walk.h5", big_endian)
    (episode,) = load_episode_based_h5(file)
    assert episode["observation"].dtype == np.dtype("=f8")
    assert np.array_equal(episode["observation"], values)
    save_episodes(tmp_path / "copy.h5", [episode])

"""A checkpoint directory opened once: files come from the directory opened, never by path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.snapshot import CheckpointSnapshot


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_bytes(b"old")
    return tmp_path / "ckpt"


def test_files_come_from_the_directory_opened_even_after_the_path_is_swapped(
    directory: Path,
) -> None:
    with CheckpointSnapshot(directory) as snapshot:
        directory.rename(directory.with_name("previous"))
        directory.mkdir()
        (directory / "config.json").write_bytes(b"new")
        assert snapshot.read("config.json") == b"old"
        assert snapshot.swapped()


def test_a_snapshot_of_an_unchanged_path_is_not_swapped(directory: Path) -> None:
    with CheckpointSnapshot(directory) as snapshot:
        assert not snapshot.swapped()


def test_a_removed_path_counts_as_swapped(directory: Path) -> None:
    with CheckpointSnapshot(directory) as snapshot:
        (directory / "config.json").unlink()
        directory.rmdir()
        assert snapshot.swapped()


def test_a_file_opened_before_it_is_deleted_stays_readable(directory: Path) -> None:
    with CheckpointSnapshot(directory) as snapshot:
        fd = snapshot.open("config.json")
    (directory / "config.json").unlink()
    try:
        assert os.pread(fd, 10, 0) == b"old"
    finally:
        os.close(fd)


@pytest.mark.parametrize("name", ["", ".", "..", "../config.json", "/etc/passwd", "a/b"])
def test_names_other_than_plain_file_names_are_refused(directory: Path, name: str) -> None:
    with CheckpointSnapshot(directory) as snapshot, pytest.raises(
        CorruptCheckpointError, match="not a plain name"
    ):
        snapshot.read(name)


def test_a_missing_file_is_reported_with_the_given_problem(directory: Path) -> None:
    with CheckpointSnapshot(directory) as snapshot, pytest.raises(
        CorruptCheckpointError, match="listed but absent"
    ) as caught:
        snapshot.read("state.json", missing="listed but absent")
    assert caught.value.path == directory / "state.json"


def test_a_path_that_is_not_a_directory_raises_file_not_found(directory: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no checkpoint directory"):
        CheckpointSnapshot(directory / "config.json")
    with pytest.raises(FileNotFoundError, match="no checkpoint directory"):
        CheckpointSnapshot(directory / "absent")


def test_a_link_to_a_checkpoint_directory_is_followed(directory: Path) -> None:
    (directory.parent / "latest").symlink_to(directory)
    with CheckpointSnapshot(directory.parent / "latest") as snapshot:
        assert snapshot.read("config.json") == b"old"

"""RLinf buffer directories as wholes: links or copies into a checkpoint, what may be replaced,
which files are orphans."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

import bufcore.persist.rlinf.directory as directory_module
from bufcore.persist.rlinf.directory import link_or_copy, orphans, replaceable


def test_a_file_is_hard_linked_where_the_file_system_allows(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"data")
    link_or_copy(tmp_path / "a", tmp_path / "b")
    assert os.stat(tmp_path / "a").st_ino == os.stat(tmp_path / "b").st_ino


@pytest.mark.parametrize("code", [errno.EXDEV, errno.EPERM, errno.EMLINK])
def test_a_file_is_copied_where_the_file_system_cannot_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(directory_module.os, "link", refuse)
    (tmp_path / "a").write_bytes(b"data")
    link_or_copy(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b").read_bytes() == b"data"
    assert os.stat(tmp_path / "a").st_ino != os.stat(tmp_path / "b").st_ino


def test_only_a_buffer_directory_may_be_replaced(tmp_path: Path) -> None:
    for name in ("metadata.json", "trajectory_index.json", "trajectory_0_w.pt",
                 ".trajectory_1_w.pt.staging-1-ab"):
        (tmp_path / name).write_bytes(b"")
    assert replaceable(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    assert not replaceable(tmp_path)


def test_orphans_are_unnamed_trajectory_files_and_dead_writers_staging(tmp_path: Path) -> None:
    live = f".trajectory_2_w.pt.staging-{os.getpid()}-c"  # this process: a live writer
    for name in ("trajectory_0_w.pt", "trajectory_1_w.pt", "other.pt", "metadata.json",
                 ".metadata.json.staging-999999999-ab", live):
        (tmp_path / name).write_bytes(b"")
    found = [path.name for path in orphans(tmp_path, ["trajectory_0_w.pt"])]
    assert found == [".metadata.json.staging-999999999-ab", "trajectory_1_w.pt"]

"""Atomic publish: a file or directory appears whole or not at all, and leaves no staging."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from bufcore.persist import atomic
from bufcore.persist.atomic import (
    move_aside,
    publish_directory,
    publish_file,
    remove_stale_staging,
)


class Refused(Exception):
    """Raised by a writer halfway."""


def write_text(text: str) -> Callable[[Path], None]:
    def write(staging: Path) -> None:
        staging.write_text(text)

    return write


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_publish_file_creates_the_file_with_the_umask_mode(tmp_path: Path) -> None:
    publish_file(tmp_path / "f.txt", write_text("new"))
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "f.txt").read_text() == "new"
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_publish_file_replaces_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old")
    publish_file(tmp_path / "f.txt", write_text("new"))
    assert (tmp_path / "f.txt").read_text() == "new"


def test_a_failing_writer_leaves_the_old_file_and_no_staging(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("old")

    def failing(staging: Path) -> None:
        staging.write_text("half")
        raise Refused

    with pytest.raises(Refused):
        publish_file(tmp_path / "f.txt", failing)
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]
    assert (tmp_path / "f.txt").read_text() == "old"


def test_publish_file_into_a_missing_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        publish_file(tmp_path / "absent" / "f.txt", write_text("x"))


def test_publish_directory_swaps_the_new_directory_in_and_removes_the_old(tmp_path: Path) -> None:
    target = tmp_path / "ckpt"
    publish_directory(target, lambda d: (d / "a").write_text("1"), replaceable=lambda p: True)
    publish_directory(target, lambda d: (d / "b").write_text("2"), replaceable=lambda p: True)
    assert [p.name for p in target.iterdir()] == ["b"]
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_publish_directory_creates_missing_parents(tmp_path: Path) -> None:
    target = tmp_path / "run" / "checkpoint" / "buffers" / "train"
    publish_directory(target, lambda d: (d / "a").write_text("1"), replaceable=lambda p: True)
    assert (target / "a").read_text() == "1"


def test_publish_directory_refuses_what_it_may_not_replace_and_touches_nothing(
    tmp_path: Path,
) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="refusing to replace"):
        publish_directory(target, lambda d: None, replaceable=lambda p: False)
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


def test_publish_directory_refuses_a_file_at_the_path(tmp_path: Path) -> None:
    (tmp_path / "ckpt").write_text("a file")
    with pytest.raises(FileExistsError):
        publish_directory(tmp_path / "ckpt", lambda d: None, replaceable=lambda p: True)


def test_staging_of_dead_writers_is_removed_and_of_live_ones_kept(tmp_path: Path) -> None:
    dead = tmp_path / f".ckpt.staging-{dead_pid()}-abc"
    dead.mkdir()
    dead_file = tmp_path / f".f.txt.staging-{dead_pid()}-abc"
    dead_file.write_text("x")
    alive = tmp_path / f".ckpt.staging-{os.getppid()}-abc"
    alive.mkdir()
    other = tmp_path / f".other.staging-{dead_pid()}-abc"
    other.mkdir()
    remove_stale_staging(tmp_path, "ckpt")
    remove_stale_staging(tmp_path, "f.txt")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, other.name])


def competitor_publishes_first(
    monkeypatch: pytest.MonkeyPatch, target: Path, *, swaps: bool = True
) -> None:
    """Another writer publishes ``target`` just before this one's first rename onto it.

    That is the window two savers of one path race in: both saw no directory there, and one
    renamed first. With ``swaps=False`` the system is one without ``renameat2`` exchange.
    """
    real_rename = os.rename
    done = []

    def rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if Path(dst) == target and not done:
            done.append(True)
            other = target.with_name("competitor")
            other.mkdir()
            (other / "theirs").write_text("0")
            real_rename(other, target)
        real_rename(src, dst)

    monkeypatch.setattr(atomic.os, "rename", rename)
    if not swaps:
        monkeypatch.setattr(atomic, "exchange", lambda a, b: False)


@pytest.mark.parametrize("swaps", [True, False], ids=["exchange", "move-aside"])
def test_a_directory_published_by_another_writer_just_before_the_rename_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swaps: bool
) -> None:
    target = tmp_path / "ckpt"
    competitor_publishes_first(monkeypatch, target, swaps=swaps)
    publish_directory(target, lambda d: (d / "ours").write_text("1"), replaceable=lambda p: True)
    assert [p.name for p in target.iterdir()] == ["ours"]
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_a_directory_another_writer_published_meanwhile_is_kept_when_not_replaceable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "ckpt"
    competitor_publishes_first(monkeypatch, target)
    with pytest.warns(RuntimeWarning, match=r"it is kept at .*ckpt\.kept-"):
        publish_directory(
            target,
            lambda d: (d / "ours").write_text("1"),
            replaceable=lambda p: not (p / "theirs").exists(),
        )
    assert [p.name for p in target.iterdir()] == ["ours"]
    (kept,) = tmp_path.glob("ckpt.kept-*")
    assert [p.name for p in kept.iterdir()] == ["theirs"]


def test_a_destination_moved_away_before_the_swap_is_published_into_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "ckpt"
    publish_directory(target, lambda d: (d / "old").write_text("0"), replaceable=lambda p: True)
    real_exchange = atomic.exchange

    def exchange(a: Path, b: Path) -> bool:
        shutil.rmtree(b)  # another writer moved it aside and deleted it just now
        return real_exchange(a, b)

    monkeypatch.setattr(atomic, "exchange", exchange)
    publish_directory(target, lambda d: (d / "new").write_text("1"), replaceable=lambda p: True)
    assert [p.name for p in target.iterdir()] == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_an_error_checking_the_replaced_directory_never_swaps_it_back_into_place(
    tmp_path: Path,
) -> None:
    target = tmp_path / "ckpt"
    publish_directory(target, lambda d: (d / "old").write_text("0"), replaceable=lambda p: True)
    calls = []

    def replaceable(path: Path) -> bool:
        calls.append(path)
        if len(calls) > 1:  # the check of the directory just swapped out
            raise FileNotFoundError(2, "vanished while checked", str(path))
        return True

    with pytest.raises(FileNotFoundError, match="vanished while checked"):
        publish_directory(target, lambda d: (d / "new").write_text("1"), replaceable=replaceable)
    assert [p.name for p in target.iterdir()] == ["new"]


def test_move_aside_renames_to_the_suffixed_name(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes").write_text("mine")
    aside = move_aside(tmp_path / "run", "old")
    assert aside == tmp_path / "run.old"
    assert not (tmp_path / "run").exists()
    assert (aside / "notes").read_text() == "mine"


def test_move_aside_takes_the_next_free_name_and_never_replaces_one(tmp_path: Path) -> None:
    for name in ("run", "run.old", "run.old-2"):
        (tmp_path / name).mkdir()
    (tmp_path / "run.old-2" / "keep").write_text("theirs")
    (tmp_path / "run.old").rmdir()
    (tmp_path / "run.old").write_text("a file")
    assert move_aside(tmp_path / "run", "old") == tmp_path / "run.old-3"
    assert (tmp_path / "run.old").read_text() == "a file"
    assert (tmp_path / "run.old-2" / "keep").read_text() == "theirs"


def test_move_aside_of_nothing_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing"):
        move_aside(tmp_path / "missing", "old")


@pytest.mark.parametrize(("sync_parent", "directory_synced"), [(True, True), (False, False)])
def test_publish_file_fsyncs_the_parent_directory_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync_parent: bool, directory_synced: bool
) -> None:
    synced: list[tuple[Path, bool]] = []
    real = atomic.fsync_path

    def recording(path: Path, *, directory: bool = False) -> None:
        synced.append((path, directory))
        real(path, directory=directory)

    monkeypatch.setattr(atomic, "fsync_path", recording)
    atomic.publish_file(tmp_path / "f", lambda staging: staging.write_bytes(b"x"),
                        sync_parent=sync_parent)
    assert (tmp_path / "f").read_bytes() == b"x"
    expected = [False, True] if directory_synced else [False]  # the staging file, the parent
    assert [directory for _, directory in synced] == expected

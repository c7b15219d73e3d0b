"""Saving with ``replace=False``: a new checkpoint is created, nothing is ever replaced, even
what another saver puts at the path while this one writes (checked atomically with the
rename, with ``RENAME_NOREPLACE`` or, where the system lacks it, an ``mkdir`` claim)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bufcore import DictBuffer
from bufcore.persist import atomic
from bufcore.persist.atomic import publish_directory
from bufcore.persist.checkpoint import write as checkpoint_write


@pytest.fixture(params=["renameat2", "mkdir-claim"])
def rename_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test with the kernel's no-replace rename and with the fallback without it."""
    if request.param == "mkdir-claim":
        monkeypatch.setattr(atomic, "rename_new", lambda a, b: False)
    return str(request.param)


def small(capacity: int, first: int = 0) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=1)
    buffer.extend({"x": list(range(first, first + capacity))})
    return buffer


def stored(path: Path) -> list[int]:
    return DictBuffer.load(path).get_full_buffer()["x"].tolist()


def during_write(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """Make ``act`` run once, after the next save's files are written and before they are
    published (saves inside ``act`` write normally)."""
    write_files = checkpoint_write._write_files

    def write_then_act(*args: object, **kwargs: object) -> None:
        write_files(*args, **kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(checkpoint_write, "_write_files", write_files)
        act()

    monkeypatch.setattr(checkpoint_write, "_write_files", write_then_act)


@pytest.mark.parametrize("capacity", [1, 2, 7])
def test_a_create_only_save_creates_a_loadable_checkpoint(
    tmp_path: Path, rename_kind: str, capacity: int
) -> None:
    small(capacity).save(tmp_path / "v1", replace=False)
    assert stored(tmp_path / "v1") == list(range(capacity))
    assert [p.name for p in tmp_path.iterdir()] == ["v1"]


@pytest.mark.parametrize("existing", ["checkpoint", "empty directory", "file", "dangling link"])
def test_a_create_only_save_refuses_anything_already_at_the_path(
    tmp_path: Path, rename_kind: str, existing: str
) -> None:
    target = tmp_path / "v1"
    if existing == "checkpoint":
        small(2).save(target)
    elif existing == "empty directory":
        target.mkdir()
    elif existing == "file":
        target.write_text("keep")
    else:
        target.symlink_to(tmp_path / "nowhere")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(FileExistsError, match=str(target)):
        small(2, first=10).save(target, replace=False)
    assert sorted(os.listdir(tmp_path)) == before
    if existing == "checkpoint":
        assert stored(target) == [0, 1]


@pytest.mark.parametrize("capacity", [1, 3])
def test_a_checkpoint_saved_at_the_path_while_writing_survives_a_create_only_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rename_kind: str, capacity: int
) -> None:
    target = tmp_path / "v1"
    other = small(capacity, first=100)
    # The other saver publishes between this save's check and its rename.
    during_write(monkeypatch, lambda: other.save(target))
    with pytest.raises(FileExistsError, match=str(target)):
        small(capacity).save(target, replace=False)
    assert stored(target) == list(range(100, 100 + capacity))
    assert [p.name for p in tmp_path.iterdir()] == ["v1"]


def test_an_empty_directory_created_while_writing_is_not_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rename_kind: str
) -> None:
    target = tmp_path / "v1"
    during_write(monkeypatch, target.mkdir)
    with pytest.raises(FileExistsError, match=str(target)):
        small(2).save(target, replace=False)
    assert target.is_dir() and not any(target.iterdir())
    assert [p.name for p in tmp_path.iterdir()] == ["v1"]


def test_two_create_only_savers_of_one_path_keep_the_first_and_refuse_the_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rename_kind: str
) -> None:
    target = tmp_path / "v1"
    first = small(2, first=1)
    during_write(monkeypatch, lambda: first.save(target, replace=False))
    with pytest.raises(FileExistsError):
        small(2, first=50).save(target, replace=False)
    assert stored(target) == [1, 2]


def test_publish_directory_with_replace_false_leaves_no_staging_after_a_refusal(
    tmp_path: Path, rename_kind: str
) -> None:
    target = tmp_path / "d"

    def write(staging: Path) -> None:
        (staging / "ours").write_text("1")
        (target / "theirs").mkdir(parents=True)  # someone else's directory appears

    with pytest.raises(FileExistsError, match="replace=False"):
        publish_directory(target, write, replaceable=lambda p: True, replace=False)
    assert [p.name for p in tmp_path.iterdir()] == ["d"]
    assert [p.name for p in target.iterdir()] == ["theirs"]



def test_the_no_replace_rename_refuses_an_existing_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(FileExistsError):
        atomic.rename_new(tmp_path / "a", tmp_path / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


@pytest.mark.parametrize("replace", ["no", "False", None, 0, 1])
def test_a_replace_that_is_not_a_bool_is_a_type_error_and_the_checkpoint_stays(
    tmp_path: Path, replace: object
) -> None:
    # A truthy string such as "no" must not silently replace a checkpoint.
    target = tmp_path / "ckpt"
    small(2).save(target)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    with pytest.raises(TypeError, match=r"replace: expected a bool, got"):
        small(2, first=10).save(target, replace=replace)  # type: ignore[arg-type]
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


@pytest.mark.parametrize("replace", ["no", None])
def test_publish_directory_refuses_a_replace_that_is_not_a_bool_before_writing(
    tmp_path: Path, replace: object
) -> None:
    written: list[Path] = []
    with pytest.raises(TypeError, match=r"replace: expected a bool, got"):
        publish_directory(
            tmp_path / "new",
            written.append,
            replaceable=lambda p: True,
            replace=replace,  # type: ignore[arg-type]
        )
    assert written == []
    assert list(tmp_path.iterdir()) == []

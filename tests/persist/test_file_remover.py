"""The file remover of DI-engine's meta-data mode: one thread, drained by close()."""

from __future__ import annotations

from pathlib import Path

import pytest

from bufcore.persist.file_remover import FileRemover


def files(folder: Path, count: int) -> list[Path]:
    paths = [folder / f"f{i}" for i in range(count)]
    for path in paths:
        path.write_bytes(b"x")
    return paths


def test_a_started_remover_deletes_in_the_background(tmp_path: Path) -> None:
    remover = FileRemover()
    remover.start()
    for path in files(tmp_path, 3):
        remover.add(path)
    remover.flush()
    assert list(tmp_path.iterdir()) == [] and remover.running
    remover.close()
    assert not remover.running


def test_close_deletes_what_is_queued_without_a_thread(tmp_path: Path) -> None:
    remover = FileRemover()
    for path in files(tmp_path, 2):
        remover.add(str(path))
    assert remover.pending == 2
    remover.close()
    assert list(tmp_path.iterdir()) == [] and remover.pending == 0


def test_a_file_already_gone_counts_as_deleted(tmp_path: Path) -> None:
    remover = FileRemover()
    remover.add(tmp_path / "never-written")
    remover.close()


def test_a_failed_deletion_is_raised_by_close(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    remover = FileRemover()
    remover.start()
    remover.add(tmp_path / "folder")
    with pytest.raises(OSError, match="deleting a used data file"):
        remover.close()
    assert not remover.running


def test_a_remover_starts_again_after_close(tmp_path: Path) -> None:
    remover = FileRemover()
    remover.start()
    remover.close()
    remover.start()
    (path,) = files(tmp_path, 1)
    remover.add(path)
    remover.flush()
    assert not path.exists()
    remover.close()


@pytest.mark.parametrize(("path", "error"), [(3, TypeError), ("", ValueError)])
def test_a_path_that_is_no_path_is_refused(path: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="data_id"):
        FileRemover().add(path)  # type: ignore[arg-type]

"""BackingFile: the claim on a path, the file's life, its crash story and the out-of-core hooks."""

from __future__ import annotations

import errno
import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import bufcore
from bufcore import BackingFile, DictBuffer
from bufcore.persist import backing as backing_module
from bufcore.persist.backing import HEADER_BYTES, MAGIC, is_backing_file

ROOT = Path(__file__).resolve().parents[2]


def header(path: Path) -> dict[str, object]:
    data = path.read_bytes()[:HEADER_BYTES]
    assert data.startswith(MAGIC)
    fields: dict[str, object] = json.loads(data[len(MAGIC) :].split(b"\n", 1)[0])
    return fields


def leftovers(directory: Path) -> list[str]:
    """Names in ``directory`` other than the ones a test made itself (temporary files)."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".new"))


def killed_writer(path: Path) -> None:
    """Run a process that fills a file-backed buffer at ``path`` and is killed (SIGKILL)."""
    script = textwrap.dedent(
        f"""
        import os, signal, torch
        from bufcore import BackingFile, DictBuffer
        buffer = DictBuffer(capacity=64, backing=BackingFile({str(path)!r}))
        buffer.extend({{"obs": torch.full((48, 3), 7.0)}})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, check=False)
    assert done.returncode == -signal.SIGKILL


# ------------------------------------------------------------------------------ the claim
def test_a_new_backing_file_claims_its_path_with_a_header_naming_this_process(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    assert path.stat().st_size == HEADER_BYTES
    assert header(path)["pid"] == os.getpid()
    assert is_backing_file(path)
    backing.close()


def test_a_path_in_use_by_a_live_buffer_is_refused_naming_its_pid(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    first = BackingFile(path)
    with pytest.raises(FileExistsError, match=f"in use by a buffer of process {os.getpid()}"):
        BackingFile(path)
    assert not first.closed and path.exists()
    first.close()


def test_a_relative_path_is_kept_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    backing = BackingFile("ring.bin")
    assert backing.path == tmp_path / "ring.bin"
    backing.close()


def test_a_file_bufcore_did_not_make_is_refused_and_left_byte_identical(tmp_path: Path) -> None:
    path = tmp_path / "buffer.hdf5"
    path.write_bytes(b"someone's data" * 1000)
    with pytest.raises(FileExistsError, match="did not make"):
        BackingFile(path)
    assert path.read_bytes() == b"someone's data" * 1000
    assert leftovers(tmp_path) == []


def test_an_empty_file_is_refused_as_one_bufcore_did_not_make(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    path.touch()
    with pytest.raises(FileExistsError, match="did not make"):
        BackingFile(path)
    assert path.stat().st_size == 0


def test_a_directory_is_refused_with_is_a_directory_error(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match="is a directory"):
        BackingFile(tmp_path)


def test_a_symbolic_link_is_refused_even_to_a_stale_backing_file(tmp_path: Path) -> None:
    target = tmp_path / "ring.bin"
    killed_writer(target)
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    with pytest.raises(FileExistsError, match="symbolic link"):
        BackingFile(link)
    assert link.is_symlink() and target.stat().st_size > HEADER_BYTES


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    with pytest.raises(FileExistsError, match="not a regular file"):
        BackingFile(path)


def test_a_missing_directory_is_a_file_not_found_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        BackingFile(tmp_path / "nowhere" / "ring.bin")


def test_a_parent_that_is_a_file_is_a_not_a_directory_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        BackingFile(tmp_path / "file" / "ring.bin")


@pytest.mark.parametrize(
    ("path", "kwargs", "error", "match"),
    [
        ("", {}, ValueError, "empty"),
        (3, {}, TypeError, "expected a path"),
        ("ring.bin", {"out_of_core": "yes"}, TypeError, "out_of_core: expected a bool"),
    ],
)
def test_a_malformed_argument_is_refused_before_anything_is_created(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: object,
    kwargs: dict[str, object],
    error: type[Exception],
    match: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match):
        BackingFile(path, **kwargs)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------- the crash story
def test_a_killed_process_leaves_its_backing_file_marked_as_one(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    killed_writer(path)
    assert is_backing_file(path)
    assert header(path)["rows"] == 64
    assert header(path)["pid"] != os.getpid()


def test_a_killed_process_backing_file_is_not_loaded_as_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    killed_writer(path)
    with pytest.raises(FileNotFoundError, match="backing file of a file-backed buffer"):
        bufcore.load_buffer(path)


def test_bufcore_inspect_refuses_a_killed_process_backing_file_with_exit_1(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ring.bin"
    killed_writer(path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "bufcore.cli", "inspect", str(path)],
        env=env, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 1
    assert "not a directory" in done.stderr


def test_a_killed_process_backing_file_is_taken_over_and_its_buffer_starts_empty(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ring.bin"
    killed_writer(path)
    backing = BackingFile(path)
    assert path.stat().st_size == HEADER_BYTES  # the old rows are gone, never read
    assert header(path)["pid"] == os.getpid()
    buffer = DictBuffer(capacity=64, backing=backing)
    assert len(buffer) == 0
    buffer.extend({"obs": torch.ones(2, 3)})
    assert buffer.get_full_buffer()["obs"].tolist() == [[1.0] * 3] * 2


# ------------------------------------------------------------------------------- its life
def test_close_removes_the_file_and_closing_twice_does_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    backing.close()
    backing.close()
    assert backing.closed and not path.exists()


def test_views_of_the_rows_stay_readable_after_close(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    rows = backing.allocate(4, 16).matrix
    rows[2] = 9
    backing.close()
    assert not path.exists()
    assert rows[2].tolist() == [9] * 16


def test_a_closed_backing_file_allocates_nothing(tmp_path: Path) -> None:
    backing = BackingFile(tmp_path / "ring.bin")
    backing.close()
    with pytest.raises(ValueError, match="closed"):
        backing.allocate(4, 16)


def test_garbage_collection_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    buffer = DictBuffer(capacity=8, backing=BackingFile(path))
    buffer.extend({"obs": torch.ones(2, 3)})
    assert path.exists()
    del buffer
    gc.collect()
    assert not path.exists()


def test_the_interpreter_exit_removes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    script = (
        "import torch\nfrom bufcore import BackingFile, DictBuffer\n"
        f"b = DictBuffer(capacity=8, backing=BackingFile({str(path)!r}))\n"
        "b.extend({'obs': torch.ones(2, 3)})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True)
    assert not path.exists()


def test_a_forked_child_that_closes_it_leaves_the_parents_file(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    pid = os.fork()
    if pid == 0:  # the child: a DataLoader worker, say
        backing.close()
        os._exit(0)
    os.waitpid(pid, 0)
    assert path.exists() and not backing.closed
    backing.close()


def test_an_allocation_sizes_the_file_and_the_header_records_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    rows = backing.allocate(10, 48).matrix
    assert rows.shape == (10, 48) and rows.dtype == torch.uint8 and int(rows.sum()) == 0
    assert path.stat().st_size == HEADER_BYTES + 480
    assert (header(path)["rows"], header(path)["row_bytes"]) == (10, 48)
    backing.close()


def test_rows_written_through_the_mapping_are_in_the_file_after_the_header(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    rows = backing.allocate(3, 16).matrix
    rows[1] = torch.arange(16, dtype=torch.uint8)
    assert path.read_bytes()[HEADER_BYTES + 16 : HEADER_BYTES + 32] == bytes(range(16))
    backing.close()


def test_a_second_allocation_leaves_the_first_matrix_readable(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    first = backing.allocate(4, 16).matrix
    first.fill_(3)
    second = backing.allocate(8, 32).matrix
    assert int(first.sum()) == 3 * 64 and int(second.sum()) == 0
    assert path.stat().st_size == HEADER_BYTES + 256
    assert leftovers(tmp_path) == []
    backing.close()


def test_an_allocation_of_no_bytes_maps_nothing(tmp_path: Path) -> None:
    backing = BackingFile(tmp_path / "ring.bin")
    rows = backing.allocate(5, 0).matrix
    assert rows.shape == (5, 0)
    backing.close()


def test_a_file_that_cannot_be_reserved_raises_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)

    def full_disk(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full_disk)
    with pytest.raises(OSError, match=r"cannot reserve 1,600 bytes \(100 rows of 16 bytes\)"):
        backing.allocate(100, 16)
    assert path.stat().st_size == HEADER_BYTES and leftovers(tmp_path) == []
    monkeypatch.undo()
    assert backing.allocate(100, 16).matrix.shape == (100, 16)  # still usable
    backing.close()


def test_a_path_replaced_by_someone_else_is_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "ring.bin"
    backing = BackingFile(path)
    path.unlink()
    path.write_text("another file")
    with pytest.raises(FileExistsError, match="no longer holds"):
        backing.allocate(4, 16)
    assert path.read_text() == "another file" and leftovers(tmp_path) == []
    backing.close()
    assert path.read_text() == "another file"  # close removes only its own file


# ------------------------------------------------------------------------------ out of core
def test_out_of_core_is_chosen_by_size_unless_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backing_module, "_physical_memory", lambda: 1000)
    small, large = BackingFile(tmp_path / "a"), BackingFile(tmp_path / "b")
    forced = BackingFile(tmp_path / "c", out_of_core=False)
    small.allocate(10, 50)  # 500 bytes: half the memory
    large.allocate(10, 51)
    forced.allocate(10, 51)
    assert (small.out_of_core, large.out_of_core, forced.out_of_core) == (False, True, False)
    for backing in (small, large, forced):
        backing.close()

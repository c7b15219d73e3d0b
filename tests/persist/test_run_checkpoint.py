"""save_run_checkpoint: buffers plus run state, published as one directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bufcore import DictBuffer, ZBuffer, load_buffer
from bufcore.errors import CorruptCheckpointError
from bufcore.persist.run_checkpoint import (
    RUN_FORMAT,
    earlier_checkpoints,
    keep_run_checkpoint,
    kept_name,
    read_run_state,
    replaceable_run_checkpoint,
    save_run_checkpoint,
)


def buffers() -> dict[str, DictBuffer | ZBuffer]:
    train = DictBuffer(capacity=3, seed=0)
    train.extend({"x": [[1.0], [2.0]]})
    z = ZBuffer(4, 2, seed=0)
    z.add([[1.0, 2.0]])
    return {"train": train, "z": z}


def save(path: Path, step: int) -> None:
    save_run_checkpoint(
        path, buffers={n: b.save for n, b in buffers().items()}, state={"step": step}
    )


def test_a_saved_run_checkpoint_holds_every_buffer_and_the_state(tmp_path: Path) -> None:
    save(tmp_path / "checkpoint", 5)
    assert len(load_buffer(tmp_path / "checkpoint" / "buffers" / "train")) == 2
    assert len(load_buffer(tmp_path / "checkpoint" / "buffers" / "z")) == 1
    state = read_run_state(tmp_path / "checkpoint")
    assert state == {"format": RUN_FORMAT, "version": 1, "step": 5}


def test_a_second_save_replaces_the_first_whole(tmp_path: Path) -> None:
    save(tmp_path / "checkpoint", 5)
    save(tmp_path / "checkpoint", 9)
    assert read_run_state(tmp_path / "checkpoint")["step"] == 9
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_a_directory_with_other_files_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "checkpoint"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a run checkpoint directory"):
        save(target, 1)
    assert [p.name for p in target.iterdir()] == ["notes.txt"]


def test_a_run_checkpoint_whose_buffer_gained_a_file_is_not_replaceable(tmp_path: Path) -> None:
    save(tmp_path / "checkpoint", 1)
    assert replaceable_run_checkpoint(tmp_path / "checkpoint")
    (tmp_path / "checkpoint" / "buffers" / "z" / "extra").write_text("x")
    assert not replaceable_run_checkpoint(tmp_path / "checkpoint")


@pytest.mark.parametrize(
    ("state", "problem"),
    [({"format": "x"}, "format"), ({"bad": float("nan")}, "not plain JSON")],
)
def test_a_state_that_cannot_be_written_is_refused_before_writing(
    tmp_path: Path, state: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        save_run_checkpoint(tmp_path / "checkpoint", buffers={}, state=state)
    assert list(tmp_path.iterdir()) == []


def test_a_buffer_name_that_is_not_a_plain_directory_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'\.\.'"):
        save_run_checkpoint(tmp_path / "checkpoint", buffers={"..": lambda p: None}, state={})


def test_run_state_of_another_format_is_a_corrupt_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"format": "other", "version": 1}')
    with pytest.raises(CorruptCheckpointError, match="'format'"):
        read_run_state(tmp_path)


def test_a_kept_checkpoint_links_the_files_and_survives_the_next_save(tmp_path: Path) -> None:
    save(tmp_path / "checkpoint", 5)
    keep_run_checkpoint(tmp_path / "checkpoint", tmp_path / "checkpoints" / kept_name(5))
    kept = tmp_path / "checkpoints" / "step-000005"
    payload = Path("buffers", "train", "buffer.hdf5")
    assert (kept / payload).stat().st_ino == (tmp_path / "checkpoint" / payload).stat().st_ino
    save(tmp_path / "checkpoint", 9)
    assert read_run_state(kept)["step"] == 5
    assert read_run_state(tmp_path / "checkpoint")["step"] == 9
    assert len(load_buffer(kept / "buffers" / "train")) == 2


def test_a_kept_checkpoint_is_copied_where_the_file_system_has_no_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(tmp_path / "checkpoint", 5)

    def no_links(source: str, destination: str) -> None:
        raise PermissionError(1, "Operation not permitted", source)

    monkeypatch.setattr(os, "link", no_links)
    keep_run_checkpoint(tmp_path / "checkpoint", tmp_path / "kept")
    payload = Path("buffers", "train", "buffer.hdf5")
    assert (tmp_path / "kept" / payload).stat().st_ino != (
        tmp_path / "checkpoint" / payload
    ).stat().st_ino
    assert read_run_state(tmp_path / "kept")["step"] == 5
    assert len(load_buffer(tmp_path / "kept" / "buffers" / "train")) == 2


def test_keeping_a_checkpoint_never_replaces_what_is_at_the_destination(tmp_path: Path) -> None:
    save(tmp_path / "checkpoint", 5)
    save(tmp_path / "kept", 1)
    with pytest.raises(FileExistsError, match="replace=False"):
        keep_run_checkpoint(tmp_path / "checkpoint", tmp_path / "kept")
    assert read_run_state(tmp_path / "kept")["step"] == 1


@pytest.mark.parametrize("what", ["missing", "no run.json", "other files"])
def test_keeping_what_is_not_a_run_checkpoint_is_refused(tmp_path: Path, what: str) -> None:
    source = tmp_path / "checkpoint"
    if what != "missing":
        save(source, 5)
        if what == "no run.json":
            (source / "run.json").unlink()
        else:
            (source / "notes.txt").write_text("mine")
    error = FileExistsError if what == "other files" else FileNotFoundError
    with pytest.raises(error, match="checkpoint"):
        keep_run_checkpoint(source, tmp_path / "kept")
    assert not (tmp_path / "kept").exists()


def test_earlier_checkpoints_are_listed_by_step_from_their_names_alone(tmp_path: Path) -> None:
    history = tmp_path / "checkpoints"
    for name in ("step-000450", "step-000012", "step-1000000", "step-12", "notes", ".step-000001"):
        (history / name).mkdir(parents=True)
    (history / "step-000020").write_text("a file")
    (history / "step-000030").symlink_to(history / "step-000450")
    assert earlier_checkpoints(tmp_path) == [
        (12, history / "step-000012"),
        (450, history / "step-000450"),
        (1_000_000, history / "step-1000000"),
    ]


@pytest.mark.parametrize("how", ["missing", "a file", "a link"])
def test_a_run_without_a_checkpoints_directory_has_no_earlier_checkpoints(
    tmp_path: Path, how: str
) -> None:
    if how == "a file":
        (tmp_path / "checkpoints").write_text("x")
    elif how == "a link":
        (tmp_path / "elsewhere" / "step-000001").mkdir(parents=True)
        (tmp_path / "checkpoints").symlink_to(tmp_path / "elsewhere")
    assert earlier_checkpoints(tmp_path) == []


@pytest.mark.parametrize("step", [-1, 1.5, True])
def test_a_kept_name_needs_a_step_that_is_an_int_from_zero(step: object) -> None:
    with pytest.raises((TypeError, ValueError), match="step"):
        kept_name(step)  # type: ignore[arg-type]

"""save_run_checkpoint: buffers plus run state, published as one directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from bufcore import DictBuffer, ZBuffer, load_buffer
from bufcore.errors import CorruptCheckpointError
from bufcore.persist.run_checkpoint import (
    RUN_FORMAT,
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

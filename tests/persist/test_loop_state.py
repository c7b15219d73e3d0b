"""A loop's own state in a run checkpoint (``loop/rank_<r>.hdf5``), and cutting a log back to a
prefix of whole lines."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bufcore.persist.jsonl import keep_prefix
from bufcore.persist.loop_state import EncodedLoopState, read_loop_state
from bufcore.persist.run_checkpoint import replaceable_run_checkpoint, save_run_checkpoint


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int64,
                                   torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 4)])
def test_a_tensor_of_each_dtype_and_shape_reads_back_equal(
    tmp_path: Path, dtype: torch.dtype, shape: tuple[int, ...]
) -> None:
    tensor = (torch.arange(int(torch.tensor(shape).prod()) if shape else 1) % 3).to(dtype)
    tensor = tensor.reshape(shape)
    save_run_checkpoint(tmp_path / "c", buffers={}, state={}, loop={0: {"t": [tensor]}})
    back = read_loop_state(tmp_path / "c" / "loop", "rank_0.hdf5")["t"][0]
    assert back.dtype == dtype and back.shape == tensor.shape and torch.equal(back, tensor)


@pytest.mark.parametrize("state, problem", [
    ({"x": float("nan")}, "not finite"),
    ({"x": torch.zeros(2, dtype=torch.complex64)}, "cannot be saved"),
    ({"x": {1: 2}}, "not a usable name"),
    ({"x": {"__tensor__": "0"}}, "not a usable name"),
])
def test_a_state_a_file_cannot_hold_is_refused_naming_where(
    state: dict[str, object], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem) as caught:
        EncodedLoopState(state)
    assert "state['x']" in str(caught.value)


def test_a_value_that_is_not_plain_data_is_a_type_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"state\['x'\]: expected plain data"):
        save_run_checkpoint(tmp_path / "c", buffers={}, state={}, loop={0: {"x": object()}})
    assert not (tmp_path / "c").exists()


def test_a_run_checkpoint_with_loop_states_can_be_replaced_by_the_next_save(
    tmp_path: Path,
) -> None:
    save_run_checkpoint(tmp_path / "c", buffers={}, state={"step": 1}, loop={0: {}, 1: {}})
    assert replaceable_run_checkpoint(tmp_path / "c")
    save_run_checkpoint(tmp_path / "c", buffers={}, state={"step": 2}, loop={0: {}})
    assert sorted(p.name for p in (tmp_path / "c" / "loop").iterdir()) == ["rank_0.hdf5"]


def test_a_loop_folder_holding_anything_else_is_not_replaced(tmp_path: Path) -> None:
    save_run_checkpoint(tmp_path / "c", buffers={}, state={}, loop={0: {}})
    (tmp_path / "c" / "loop" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        save_run_checkpoint(tmp_path / "c", buffers={}, state={}, loop={0: {}})
    assert (tmp_path / "c" / "loop" / "notes.txt").read_text() == "mine"


def test_keep_prefix_replaces_the_file_by_its_first_lines(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"a\nbb\nccc")
    inode = log.stat().st_ino
    keep_prefix(log, 5)
    assert log.read_bytes() == b"a\nbb\n" and log.stat().st_ino != inode


@pytest.mark.parametrize("end", [-1, 1, 3, 99])
def test_keep_prefix_refuses_an_end_that_is_not_a_line_end(tmp_path: Path, end: int) -> None:
    log = tmp_path / "log"
    log.write_bytes(b"a\nbb\nccc")
    with pytest.raises(ValueError, match="whole line"):
        keep_prefix(log, end)
    assert log.read_bytes() == b"a\nbb\nccc"

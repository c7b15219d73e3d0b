"""Checkpoints written by an earlier bufcore load with today's code: same rows, same stream.

The fixtures (tests/fixtures/checkpoints_format2/) were written by bufcore 0.1.0 before the
package moved to its layered layout; ``expected.json`` holds what that version read back and
sampled next.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import (
    DictBuffer,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    ZBuffer,
    load_buffer,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "checkpoints_format2"
EXPECTED: dict[str, Any] = json.loads((FIXTURES / "expected.json").read_text())


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The fixtures copied, so that a test can never change them."""
    shutil.copytree(FIXTURES, tmp_path / "ckpt")
    return tmp_path / "ckpt"


def test_an_old_dict_buffer_loads_with_its_rows_and_continues_its_stream(copy: Path) -> None:
    buffer = load_buffer(copy / "dict")
    expected = EXPECTED["dict"]
    assert type(buffer) is DictBuffer
    assert (buffer.cursor, buffer.is_full) == (expected["cursor"], expected["is_full"])
    full = buffer.get_full_buffer()
    assert full["observation"]["state"].tolist() == expected["state"]
    assert full["action"].dtype == torch.bfloat16
    assert buffer.sample(5)["observation"]["deep"]["x"].flatten().tolist() == expected[
        "next_sample_x"
    ]


def test_an_old_z_buffer_loads_and_continues_its_stream(copy: Path) -> None:
    buffer = load_buffer(copy / "z")
    assert type(buffer) is ZBuffer
    assert buffer.cursor == EXPECTED["z"]["cursor"]
    assert buffer.sample(4).tolist() == EXPECTED["z"]["next_sample"]


def test_an_old_online_buffer_loads_its_trajectories_and_continues_its_stream(
    copy: Path,
) -> None:
    buffer = load_buffer(copy / "online")
    assert type(buffer) is TrajectoryDictBufferMultiDim
    assert (buffer.cursor, buffer.end_key, buffer.weighting) == (
        EXPECTED["online"]["cursor"],
        ("flags", "truncated"),
        "window",
    )
    assert buffer.sample(8)["obs"].flatten().tolist() == EXPECTED["online"]["next_sample"]


def test_an_old_expert_buffer_loads_its_priorities_and_continues_its_stream(copy: Path) -> None:
    buffer = load_buffer(copy / "expert")
    expected = EXPECTED["expert"]
    assert type(buffer) is TrajectoryDictBuffer
    assert buffer.priorities.tolist() == expected["priorities"]
    assert buffer.motion_ids == expected["motion_ids"]
    assert buffer.sample(6)["observation"][:, 0].tolist() == expected["next_sample"]


def test_an_old_checkpoint_saved_again_is_byte_identical(copy: Path, tmp_path: Path) -> None:
    for name in ("dict", "z", "online", "expert"):
        load_buffer(copy / name).save(tmp_path / name)
        for file in ("buffer.hdf5", "config.json"):
            assert (tmp_path / name / file).read_bytes() == (FIXTURES / name / file).read_bytes()

"""The persist-engine row: its simple alternative is a correct checkpoint reader and writer, and
its parent gathers one rate per process (no timings asserted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import persist_engine
from bench.persist_engine import IMPLEMENTATIONS, OPS, leaf_views
from bufcore.errors import CorruptCheckpointError


def _matrix(rows: int) -> np.ndarray:
    return persist_engine.filled_matrix(rows)


@pytest.mark.parametrize("rows", [1, 5000])
@pytest.mark.parametrize(
    ("save", "load"),
    [
        (persist_engine.engine_save, persist_engine.simple_load),
        (persist_engine.simple_save, persist_engine.engine_load),
    ],
)
def test_each_implementation_reads_what_the_other_wrote_row_for_row(
    tmp_path: Path, rows: int, save: object, load: object
) -> None:
    matrix = _matrix(rows)
    save(tmp_path / "ckpt", leaf_views(matrix))  # type: ignore[operator]
    out = np.zeros_like(matrix)
    load(tmp_path / "ckpt", leaf_views(out))  # type: ignore[operator]
    width = sum(view.numpy()[:1].nbytes for view in leaf_views(matrix).values())
    assert np.array_equal(out[:, :width], matrix[:, :width])


def test_the_simple_load_refuses_a_flipped_row_byte(tmp_path: Path) -> None:
    persist_engine.simple_save(tmp_path / "ckpt", leaf_views(_matrix(3000)))
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    data = bytearray(payload.read_bytes())
    data[-100] ^= 1
    payload.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match=r"buffer\.hdf5"):
        persist_engine.simple_load(tmp_path / "ckpt", leaf_views(np.zeros_like(_matrix(3000))))


@pytest.mark.slow
def test_a_run_measures_every_op_and_implementation_once_per_round_in_fresh_processes(
    tmp_path: Path,
) -> None:
    results = persist_engine.run((2000,), 2, tmp_path)
    assert set(results.rates) == {(2000, op, impl) for op in OPS for impl in IMPLEMENTATIONS}
    assert all(len(rates) == 2 and min(rates) > 0 for rates in results.rates.values())
    assert "| 2,000 | save |" in persist_engine.render(results)
    assert list(tmp_path.iterdir()) == []

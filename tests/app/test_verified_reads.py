"""What the pages read from a checkpoint is verified, and the Sampling lab reads only the index.

The lazy pages read single leaves with ``read_leaf`` and the lab loads ``leaves=[]``; both hash
the manifest blocks they touch, so a byte flipped on disk is an error naming buffer.hdf5.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import app.loaders
from tests.app.conftest import Dashboard


def _flip_first_end_flag(buffer_dir: Path) -> None:
    """Set the first byte of the train buffer's end-flag dataset (a real flip on disk)."""
    import h5py

    payload = buffer_dir / "buffer.hdf5"
    with h5py.File(payload, "r") as file:
        offset = file["truncated"].id.get_offset()
    with payload.open("r+b") as handle:
        handle.seek(offset)
        old = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([old[0] ^ 1]))


@pytest.mark.parametrize("page", ["fifo", "trajectories", "sampling_lab"])
def test_a_flipped_end_flag_on_disk_is_an_error_naming_buffer_hdf5(
    dashboard: Dashboard, run_copy: Path, page: str
) -> None:
    _flip_first_end_flag(run_copy / "checkpoint/buffers/train")
    at = dashboard(page, run_copy, query={"buffer": "train"})
    assert not at.exception
    assert any("buffer.hdf5" in error.value for error in at.error)


def test_the_sampling_lab_loads_only_the_index_of_a_buffer(
    dashboard: Dashboard, run_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    real = app.loaders.load_buffer

    def spy(path: object, **kwargs: object) -> object:
        calls.append(kwargs.get("leaves"))
        return real(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(app.loaders, "load_buffer", spy)
    at = dashboard("sampling_lab", run_copy, query={"buffer": "train"})
    assert not at.exception
    assert calls == [[]]

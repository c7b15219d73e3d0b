"""Memory held by the disk buffer is O(index + cache), whatever the trajectories on disk."""

from __future__ import annotations

import gc
import tracemalloc
import warnings
from pathlib import Path

import pytest
import torch

import bufcore.persist.rlinf.store as store_module
from bufcore import Trajectory, TrajectoryReplayBuffer


def big(number: int) -> Trajectory:
    """About 64 KB of rows: 8 steps of 4 envs with a 2 KB observation."""
    return Trajectory(
        rewards=torch.full((8, 4), float(number)),
        curr_obs={"state": torch.full((8, 4, 512), float(number))},
    )


def live_tensor_bytes() -> int:
    """Bytes of every distinct tensor storage alive in the process."""
    gc.collect()
    storages = {}
    with warnings.catch_warnings():  # isinstance on torch's deprecated module proxies warns
        warnings.simplefilter("ignore")
        tensors = [item for item in gc.get_objects() if isinstance(item, torch.Tensor)]
    for tensor in tensors:
        if tensor.device.type == "cpu" and tensor.layout == torch.strided and not tensor.is_nested:
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def filled(path: Path, count: int) -> TrajectoryReplayBuffer:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(path), cache_size=2,
                                sample_window_size=0)
    for number in range(count):
        rb.add_trajectories([big(number)])
    rb.flush()
    rb.sample(64)
    return rb


def test_tensor_memory_held_is_the_cache_whatever_the_number_of_trajectories(
    tmp_path: Path,
) -> None:
    held = {}
    for count in (5, 40):
        baseline = live_tensor_bytes()
        rb = filled(tmp_path / str(count), count)
        held[count] = live_tensor_bytes() - baseline
        cache_bytes = rb._cache.nbytes  # type: ignore[union-attr]
        assert cache_bytes <= held[count] <= cache_bytes + (64 << 10)
        del rb
    # 35 more trajectories (2.3 MB more on disk) and no more memory than a few index tensors.
    assert abs(held[40] - held[5]) < 16 << 10


def test_the_index_takes_well_under_a_kilobyte_per_trajectory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the buffer keeps does not depend on the disk: skip the writes to keep this fast.
    monkeypatch.setattr(store_module, "publish_trajectory", lambda *args, **options: None)
    monkeypatch.setattr(store_module, "publish_index", lambda *args: None)
    monkeypatch.setattr(store_module, "fsync_path", lambda *args: None)
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path), enable_cache=False)
    small = Trajectory(rewards=torch.zeros(2, 2), model_weights_id="step_1")
    rb.add_trajectories([small])
    rb.flush()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(20):
            rb.add_trajectories([small] * 100)
        rb.flush()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert grown / 2000 < 1024

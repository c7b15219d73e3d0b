"""The nccl path: the same helpers, statistics, rounds, streams and run log on a CUDA device.

One rank (world size 1; nccl refuses two ranks on one GPU) joins an nccl group on ``cuda:0``
and runs every check of tests/distributed/worker.py with its tensors on the GPU; what it saw
must equal one process on the CPU. Without CUDA (or a torch built without nccl) it is skipped,
saying so: run it on a GPU machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tests.distributed.expected import assert_td_ema_matches, one_process_draws, one_process_round
from tests.distributed.launch import launch

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device: the nccl path runs on a GPU"
    ),
    pytest.mark.skipif(
        not (dist.is_available() and dist.is_nccl_available()),
        reason="needs a torch built with nccl",
    ),
]


def test_one_nccl_rank_on_cuda_sees_what_one_process_sees(tmp_path: Path) -> None:
    (seen,) = launch(1, tmp_path, backend="nccl", device="cuda:0")
    helpers = seen["helpers"]
    assert (helpers["is_initialized"], helpers["rank"], helpers["world_size"]) == (True, 0, 1)
    assert helpers["int_sum"] == [1, 0] and helpers["float_sum"] == [0.1, 1e-3]
    assert helpers["sum_device"] == "cuda:0" and helpers["cpu_sum"] == [0.0]
    assert helpers["gathered"][0]["x"][1] == "" and helpers["shard"] == [0, 10]
    assert_td_ema_matches(seen["td_ema"], 1)
    expected = one_process_round()
    assert seen["curriculum"]["round"] == expected["round"]
    assert seen["curriculum"]["priorities"] == pytest.approx(expected["priorities"])
    assert seen["curriculum"]["missing"]["type"] == "ValueError"
    assert seen["streams"] == {"rank": 0, "draws": one_process_draws("cuda:0")}
    assert seen["run_log"]["writes"] is True
    assert seen["run_log"]["records"][0]["ranks"] == {"occupancy": [10], "sampled": [4]}

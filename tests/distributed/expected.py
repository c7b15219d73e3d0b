"""What one process sees over all ranks' data: the reference the process-group tests compare
every rank with (the gloo groups and the nccl path alike)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bufcore import Curriculum, DictBuffer, TDStatsEMA, TrajectoryDictBuffer
from tests.distributed.worker import (
    MOTIONS,
    SEED,
    TD_BATCHES,
    emd_of,
    expert_episodes,
    td_batch,
    transition_rows,
)

TOLERANCE = 1e-6


def td_ema_over_all_ranks(world: int) -> dict[str, Any]:
    """One process's TD-EMA over each batch of every rank, concatenated (the worker's options)."""
    ema = TDStatsEMA("cpu", momentum=0.2, warmup_steps=2)
    batches = []
    for batch in range(TD_BATCHES):
        parts = [td_batch(rank, batch) for rank in range(world)]
        td = torch.cat([t.flatten() for t, _ in parts])[None]
        mask = torch.cat([m.flatten() for _, m in parts])[None]
        seen = ema.update(td, mask)
        batches.append({name: float(value) for name, value in seen._asdict().items()})
    return {"state": ema.state_dict(), "batches": batches}


def assert_td_ema_matches(seen: dict[str, Any], world: int) -> None:
    expected = td_ema_over_all_ranks(world)
    for got, want in zip(seen["batches"], expected["batches"], strict=True):
        assert got == pytest.approx(want, rel=TOLERANCE, abs=TOLERANCE)
    assert seen["state"] == pytest.approx(expected["state"], rel=TOLERANCE, abs=TOLERANCE)


def one_process_round() -> dict[str, Any]:
    """The curriculum round one process applies with every motion's EMD."""
    buffer = TrajectoryDictBuffer(expert_episodes(), output_key_tp1=[])
    record = Curriculum(buffer, mode="bin").apply({m: emd_of(m) for m in MOTIONS}, step=7)
    return {
        "round": {
            "step": record.step,
            "emd": [list(item) for item in record.emd.items()],
            "priority": [list(item) for item in record.priority.items()],
        },
        "priorities": buffer.priorities.tolist(),
    }


def one_process_draws(device: str = "cpu") -> list[int]:
    """What a single process's buffer with the workers' seed draws on ``device``."""
    buffer = DictBuffer(capacity=40, seed=SEED, device=device)
    buffer.extend(transition_rows())
    return buffer.sample_index(32).rows.tolist()  # type: ignore[no-any-return]

"""One rank of a real process group, started by :mod:`tests.distributed.launch`.

``python worker.py BACKEND DEVICE RANK WORLD STORE WORKDIR`` joins the group (a FileStore at
``STORE``; gloo binds to the loopback interface only), runs every check of :func:`run` on its
share of the data, and writes what it saw to ``WORKDIR/rank_<RANK>.json``. The data each rank
holds is made by the plain functions below, which the tests call too to compute what one
process would have seen over all ranks' data.
"""

from __future__ import annotations

import datetime
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from bufcore import Curriculum, DictBuffer, TDStatsEMA, TrajectoryDictBuffer, distributed
from bufcore.runs.runlog import RunLogger

COLLECTIVE_TIMEOUT_S = 60
MOTIONS = [10, 11, 12, 13, 14, 15, 16]
SEED = 11
STEPS = 3


# ------------------------------------------------------------------------ each rank's data
def td_batch(rank: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s TD errors and mask of batch ``batch``: ``[2, 3 + 4 * rank + batch]``
    tokens (uneven across ranks), some masked, one NaN inside the mask; rank 1 has no valid
    token in batch 1."""
    generator = torch.Generator().manual_seed(1000 * rank + batch)
    width = 3 + 4 * rank + batch
    td = torch.randn(2, width, generator=generator, dtype=torch.float32) * (1 + rank) + batch
    mask = torch.rand(2, width, generator=generator) < 0.8
    td[0, 0], mask[0, 0] = math.nan, True
    if rank == 1 and batch == 1:
        mask[:] = False
    return td, mask


TD_BATCHES = 4


def emd_of(motion: int) -> float:
    """The EMD every rank measures for ``motion`` (spread over the "bin" mode's bins)."""
    return 0.3 + 0.27 * (motion - MOTIONS[0])


def expert_episodes() -> list[dict[str, torch.Tensor]]:
    return [
        {"observation": torch.arange(6.0)[:, None] + 10 * m, "motion_id": torch.full((6,), m)}
        for m in MOTIONS
    ]


def occupancy(rank: int) -> int:
    """Rows rank ``rank`` puts in its transition buffer (uneven across ranks)."""
    return 10 + 5 * rank


def transition_rows() -> dict[str, torch.Tensor]:
    return {"obs": torch.arange(40.0)[:, None]}


# ------------------------------------------------------------------------------ the checks
def caught(call: Any) -> dict[str, str] | None:
    """``{"type", "message"}`` of what ``call()`` raised, or None."""
    try:
        call()
    except Exception as err:  # recorded for the test to judge
        return {"type": type(err).__name__, "message": str(err)}
    return None


def check_helpers(rank: int, world: int, device: torch.device) -> dict[str, Any]:
    ints = torch.tensor([rank + 1, 10 * rank], dtype=torch.int64, device=device)
    floats = torch.tensor([0.1 * (rank + 1), 1e-3], dtype=torch.float64, device=device)
    return {
        "is_initialized": distributed.is_initialized(),
        "rank": distributed.rank(),
        "world_size": distributed.world_size(),
        "int_sum": distributed.all_reduce_sum(ints).tolist(),
        "float_sum": distributed.all_reduce_sum(floats).tolist(),
        "cpu_sum": distributed.all_reduce_sum(torch.tensor([float(rank)])).tolist(),
        "sum_device": str(distributed.all_reduce_sum(floats).device),
        "gathered": distributed.all_gather_json({"rank": rank, "x": [math.nan, "é" * rank]}),
        "shard": list(distributed.shard_bounds(10)),
        "bad_json": caught(
            lambda: distributed.all_gather_json(torch.zeros(1) if rank == world - 1 else 1)
        ),
    }


def check_td_ema(rank: int, device: torch.device) -> dict[str, Any]:
    ema = TDStatsEMA(device, momentum=0.2, warmup_steps=2)
    batches = []
    for batch in range(TD_BATCHES):
        td, mask = td_batch(rank, batch)
        seen = ema.update(td.to(device), mask.to(device))
        batches.append({name: float(value) for name, value in seen._asdict().items()})
    return {"state": ema.state_dict(), "batches": batches}


def check_curriculum(rank: int, world: int, device: torch.device) -> dict[str, Any]:
    buffer = TrajectoryDictBuffer(expert_episodes(), output_key_tp1=[], device=device)
    curriculum = Curriculum(buffer, mode="bin")
    start, end = distributed.shard_bounds(len(MOTIONS))
    share = {m: emd_of(m) for m in MOTIONS[start:end]}
    round_ = curriculum.apply_gathered(share, step=7)
    result: dict[str, Any] = {
        "share": sorted(share),
        "round": {"step": round_.step, "emd": list(round_.emd.items()),
                  "priority": list(round_.priority.items())},
        "priorities": buffer.priorities.tolist(),
    }
    # A motion evaluated twice: rank 0's first motion again on the last rank (needs two).
    twice = {**share, MOTIONS[0]: 1.0} if rank == world - 1 else share
    result["twice"] = (
        caught(lambda: curriculum.apply_gathered(twice, step=8)) if world > 1 else None
    )
    # A motion evaluated nowhere: the last rank drops its share.
    result["missing"] = caught(
        lambda: curriculum.apply_gathered({} if rank == world - 1 else share, step=8)
    )
    # A bad share on the last rank alone.
    bad = {**share, MOTIONS[-1]: math.nan} if rank == world - 1 else share
    result["bad_share"] = caught(lambda: curriculum.apply_gathered(bad, step=8))
    result["rounds_after_errors"] = len(curriculum.history)
    result["priorities_after_errors"] = buffer.priorities.tolist()
    return result


def check_streams(device: torch.device) -> dict[str, Any]:
    buffer = DictBuffer(capacity=40, seed=SEED, device=device)  # rank=None: the group's rank
    buffer.extend(transition_rows())
    return {"rank": buffer.rank, "draws": buffer.sample_index(32).rows.tolist()}


def check_run_log(rank: int, world: int, run_dir: Path, device: torch.device) -> dict[str, Any]:
    buffer = DictBuffer(capacity=40, seed=SEED, device=device)
    buffer.extend({"obs": torch.arange(float(occupancy(rank)))[:, None]})
    clock = iter(float(t) for t in range(100))
    records = []
    with RunLogger(run_dir, clock=lambda: next(clock)) as log:
        writes = log.writes
        for step in range(STEPS):
            sampled = 4 * (step + 1) * (rank + 1)
            figures = {"occupancy": len(buffer), "sampled": torch.tensor(sampled)}
            records.append(log.log("train", step, {"loss": 0.5 * rank + step}, per_rank=figures))
        records.append(log.log("eval", STEPS, {"emd": 1.0 + rank}))
        other_keys = {"occupancy": 1} if rank == world - 1 else {"occupancy": 1, "sampled": 2}
        mismatch = (
            caught(lambda: log.log("train", 9, {}, per_rank=other_keys)) if world > 1 else None
        )
        bad = {"occupancy": [1, 2] if rank == world - 1 else 1}
        bad_figure = caught(lambda: log.log("train", 9, {}, per_rank=bad))
    return {
        "writes": writes,
        "records": records,
        "mismatch": mismatch,
        "bad_figure": bad_figure,
    }


def run(rank: int, world: int, workdir: Path, device: torch.device) -> dict[str, Any]:
    return {
        "helpers": check_helpers(rank, world, device),
        "td_ema": check_td_ema(rank, device),
        "curriculum": check_curriculum(rank, world, device),
        "streams": check_streams(device),
        "run_log": check_run_log(rank, world, workdir / "run", device),
    }


def main(argv: list[str]) -> None:
    backend, device_name, rank_text, world_text, store, workdir = argv
    rank, world = int(rank_text), int(world_text)
    device = torch.device(device_name)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend,
        store=dist.FileStore(store, world),
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )
    try:
        result = run(rank, world, Path(workdir), device)
    finally:
        dist.destroy_process_group()
    Path(workdir, f"rank_{rank}.json").write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])

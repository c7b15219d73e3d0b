"""One rank of a real process group saving or loading a run checkpoint across ranks, started by
:mod:`tests.distributed.launch` (``python rank_worker.py BACKEND DEVICE RANK WORLD STORE WORKDIR
PHASE CHECKPOINT...``).

- ``save``: each rank fills its own buffers (uneven rows: :func:`rows_of`), saves them as the run
  checkpoint ``CHECKPOINT``, loads them back, then tries a second save in which rank 1's buffer
  fails to save (the first checkpoint must stay).
- ``load``: each rank tries to load every ``CHECKPOINT`` given and records what it got or what
  it raised.

What each rank saw goes to ``WORKDIR/rank_<RANK>.json``.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from bufcore import DictBuffer, TrajectoryDictBuffer, load_run_buffers, save_run_buffers
from bufcore.persist.run_checkpoint import save_rank_checkpoint

COLLECTIVE_TIMEOUT_S = 60
WORKER_PATH = Path(__file__).resolve()
SEED = 5


def rows_of(rank: int) -> list[float]:
    """The transition rows rank ``rank`` holds: ``3 + 2 * rank`` values ``100 * rank + i``."""
    return [100.0 * rank + i for i in range(3 + 2 * rank)]


def expert() -> TrajectoryDictBuffer:
    episodes = [{"observation": torch.arange(6.0)[:, None] + 10 * m,
                 "motion_id": torch.full((6,), m)} for m in range(3)]
    return TrajectoryDictBuffer(episodes, output_key_tp1=[], seed=SEED)


def caught(call: Any) -> dict[str, str] | None:
    try:
        call()
    except Exception as err:  # recorded for the test to judge
        return {"type": type(err).__name__, "message": str(err)}
    return None


def loaded(path: Path) -> dict[str, Any]:
    buffers = load_run_buffers(path)
    train = buffers["train"]
    return {"train": train.get_full_buffer()["x"][:, 0].tolist(), "rank": train.rank,
            "draws": train.sample_index(8).rows.tolist(),
            "expert": buffers["expert"].motion_ids}


def save(rank: int, checkpoint: Path) -> dict[str, Any]:
    train = DictBuffer(capacity=16, seed=SEED)  # rank=None: the group's rank
    train.extend({"x": torch.tensor(rows_of(rank))[:, None]})
    save_run_buffers(checkpoint, {"train": train, "expert": expert()}, state={"step": 1},
                     replicated=["expert"])
    draws = train.sample_index(8).rows.tolist()  # what the loaded buffer must draw next

    def broken(path: Path) -> None:
        raise OSError(f"disk full on rank {rank}")

    torn = caught(lambda: save_rank_checkpoint(
        checkpoint, buffers={"train": broken if rank == 1 else train.save,
                             "expert": expert().save},
        state={"step": 2}, replicated=["expert"]))
    return {"loaded": loaded(checkpoint), "draws_after_save": draws, "torn": torn}


def load(checkpoints: list[Path]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for path in checkpoints:
        error = None
        got = None
        try:
            got = loaded(path)
        except Exception as err:  # recorded for the test to judge
            error = {"type": type(err).__name__, "message": str(err)}
        results[path.name] = {"loaded": got, "error": error}
    return results


def main(argv: list[str]) -> None:
    backend, _device, rank_text, world_text, store, workdir, phase, *paths = argv
    rank, world = int(rank_text), int(world_text)
    dist.init_process_group(
        backend, store=dist.FileStore(store, world), rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S),
    )
    try:
        checkpoints = [Path(p) for p in paths]
        result = save(rank, checkpoints[0]) if phase == "save" else load(checkpoints)
    finally:
        dist.destroy_process_group()
    Path(workdir, f"rank_{rank}.json").write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])

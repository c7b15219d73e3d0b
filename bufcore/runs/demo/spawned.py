"""One spawned rank of ``bufcore demo --nproc N``: ``python -m bufcore.runs.demo.spawned RUN
RANK WORLD STORE JOB`` joins the gloo group meeting at the file STORE and runs the demo loop as
that rank: a new run when JOB is its options as JSON, or its part of the run continued from
RUN's checkpoint when JOB is ``resume`` (:func:`bufcore.runs.demo.ranks.spawn_ranks` starts
these)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bufcore import distributed
from bufcore.runs.demo.loop import run_rank
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.demo.ranks import COLLECTIVE_TIMEOUT_S, RESUME_JOB
from bufcore.runs.demo.resume import resume_rank


def main(argv: list[str]) -> None:
    """Join the group, run (or resume) this rank of the demo, leave the group."""
    run, rank, world, store, job = argv
    distributed.join_file_group(store, rank=int(rank), world_size=int(world),
                                timeout_s=COLLECTIVE_TIMEOUT_S)
    try:
        if job == RESUME_JOB:
            resume_rank(Path(run))
        else:
            run_rank(Path(run), DemoOptions(**json.loads(job)))
    except BaseException:
        distributed.leave_group()
        raise
    distributed.leave_group(together=True)


if __name__ == "__main__":
    main(sys.argv[1:])

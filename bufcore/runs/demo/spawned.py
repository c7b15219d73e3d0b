"""One spawned rank of ``bufcore demo --nproc N``: ``python -m bufcore.runs.demo.spawned RUN
RANK WORLD STORE OPTIONS_JSON`` joins the gloo group meeting at the file STORE and runs the demo
loop as that rank (:func:`bufcore.runs.demo.ranks.run_demo_ranks` starts these)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bufcore import distributed
from bufcore.runs.demo.loop import run_rank
from bufcore.runs.demo.options import DemoOptions
from bufcore.runs.demo.ranks import COLLECTIVE_TIMEOUT_S


def main(argv: list[str]) -> None:
    """Join the group, run this rank of the demo, leave the group."""
    run, rank, world, store, options_json = argv
    options = DemoOptions(**json.loads(options_json))
    distributed.join_file_group(store, rank=int(rank), world_size=int(world),
                                timeout_s=COLLECTIVE_TIMEOUT_S)
    try:
        run_rank(Path(run), options)
    finally:
        distributed.leave_group()


if __name__ == "__main__":
    main(sys.argv[1:])

"""The demo run with ``--prioritized`` (TD-prioritized windows in the online buffer), and the
demo without it, unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from bufcore.runs.demo import run_demo
from tests.fixtures.demo_digests import run_digests
from tests.support import TINY_DEMO

DIGESTS = Path(__file__).parents[1] / "fixtures" / "demo_digests.json"


def test_without_the_flag_the_run_writes_what_it_wrote_before_prioritized_replay(
    tmp_path: Path,
) -> None:
    run_demo(tmp_path / "run", TINY_DEMO)
    expected = json.loads(DIGESTS.read_text())
    got = run_digests(tmp_path / "run")
    assert got["records"] == expected["records"]
    assert got["files"] == expected["files"]

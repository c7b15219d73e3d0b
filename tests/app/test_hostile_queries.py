"""Hostile links: query parameters with garbage values (negative, huge, not numbers, names that
do not exist, path traversal) must never raise on any page."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.conftest import PAGES, Dashboard

NUMERIC_KEYS = (
    "lab_batch", "lab_seed", "lab_seq", "lab_draws", "z_points", "td_beta", "td_min_weight",
    "td_max_weight", "td_smooth", "td_step", "cur_min", "cur_max", "cur_scale", "traj_seq",
    "live_every", "m_smooth",
)
NAME_KEYS = (
    "run", "buffer", "lab_weighting", "lab_reprioritized", "lab_pin", "z_colour", "cur_mode",
    "cur_sort", "traj_online", "traj_expert", "live_on", "cmp_a", "cmp_b", "cmp_a_online",
    "cmp_a_expert", "cmp_b_online", "cmp_b_expert", "m_runs", "m_metrics", "m_x", "m_log",
)


def every_key(numeric: str, name: str) -> dict[str, str]:
    return {**dict.fromkeys(NUMERIC_KEYS, numeric), **dict.fromkeys(NAME_KEYS, name)}


GARBAGE = {
    "negative numbers": every_key("-5", "-5"),
    "huge numbers": every_key(str(2**70), "x" * 5000),
    "zero": every_key("0", "0"),
    "words": every_key("abc", "no such name"),
    "nan": every_key("nan", "nan"),
    "infinity": every_key("inf", "../../../etc/passwd"),
    "empty values": every_key("", ""),
}


@pytest.mark.parametrize("garbage", GARBAGE)
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_with_garbage_query_parameters(
    dashboard: Dashboard, demo_run: Path, page: str, garbage: str
) -> None:
    at = dashboard(page, demo_run, query=GARBAGE[garbage])
    assert not at.exception
    assert at.title[0].value

"""Hostile metrics logs: records of the right kind whose fields are missing, of the wrong
length or type; every page must still render and say what it skipped, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from bufcore import RunLogger, read_metrics
from tests.app.conftest import PAGES, Dashboard

Record = dict[str, Any]


def rewrite_records(run: Path, kind: str, change: Callable[[Record], Record]) -> None:
    """Replace every record of ``kind`` in the run's log by ``change(record)``."""
    log = run / "metrics.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    out = [change(r) if r.get("kind") == kind else r for r in records]
    log.write_text("".join(json.dumps(r) + "\n" for r in out))


def messages(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.info, *at.error, *at.warning])


def test_live_names_the_log_when_the_latest_eval_record_has_emd_of_another_length(
    dashboard: Dashboard, run_copy: Path
) -> None:
    rewrite_records(run_copy, "eval", lambda r: {**r, "emd": r["emd"][:-1]})
    at = dashboard("live", run_copy)
    assert not at.exception
    assert str(run_copy / "metrics.jsonl") in messages(at)


@pytest.mark.parametrize("emd", [["x", "y", "z"], [{"a": 1}] * 3, "not a list"])
def test_live_names_the_log_when_the_latest_eval_record_has_emd_values_that_are_no_numbers(
    dashboard: Dashboard, run_copy: Path, emd: Any
) -> None:
    rewrite_records(run_copy, "eval", lambda r: {**r, "motion_ids": [0, 1, 2], "emd": emd})
    at = dashboard("live", run_copy)
    assert not at.exception
    assert str(run_copy / "metrics.jsonl") in messages(at)


def _drop_td(record: Record) -> Record:
    return {k: v for k, v in record.items() if not k.startswith("td/")}


# Records of the right kind with fields missing, mistyped or out of range.
LOG_DAMAGE: dict[str, tuple[str, Callable[[Record], Record]]] = {
    "train records without td keys": ("train", _drop_td),
    "train records with td values that are strings": (
        "train", lambda r: {k: "x" if k.startswith("td/") else v for k, v in r.items()}),
    "train records with NaN and huge values": (
        "train", lambda r: {k: float("nan") if k.startswith("td/") else 1e308 if isinstance(
            v, float) else v for k, v in r.items()}),
    "buffer records without train": ("buffer", lambda r: {k: v for k, v in r.items()
                                                          if k != "train"}),
    "buffer records whose train fields are strings": (
        "buffer", lambda r: {**r, "train": {k: "x" for k in r["train"]}}),
    "eval records with emd one short": ("eval", lambda r: {**r, "emd": r["emd"][:-1]}),
    "eval records with empty lists": (
        "eval", lambda r: {**r, "emd": [], "priority": [], "motion_ids": []}),
    "eval records with repeated motion ids": (
        "eval", lambda r: {**r, "motion_ids": [0] * len(r["emd"])}),
}


@pytest.mark.parametrize("damage", LOG_DAMAGE)
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_a_log_whose_records_have_damaged_fields(
    dashboard: Dashboard, run_copy: Path, page: str, damage: str
) -> None:
    kind, change = LOG_DAMAGE[damage]
    rewrite_records(run_copy, kind, change)
    at = dashboard(page, run_copy)
    assert not at.exception
    assert at.title[0].value


@pytest.mark.parametrize("page", ["live", "td_ema", "fifo", "overview"])
def test_a_log_that_is_a_link_out_of_the_run_is_refused_not_followed(
    dashboard: Dashboard, run_copy: Path, tmp_path: Path, page: str
) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes((run_copy / "metrics.jsonl").read_bytes())
    (run_copy / "metrics.jsonl").unlink()
    (run_copy / "metrics.jsonl").symlink_to(outside)
    at = dashboard(page, run_copy)
    assert not at.exception
    assert "symbolic link" in messages(at) + "\n".join(t.value for t in at.text)


@pytest.mark.parametrize("raw", [b"\xff\xfe\n\x80\x81\n", b"not json\n[1, 2]\n"])
def test_live_lists_the_skipped_lines_of_a_log_with_no_valid_record(
    dashboard: Dashboard, run_copy: Path, raw: bytes
) -> None:
    (run_copy / "metrics.jsonl").write_bytes(raw)
    at = dashboard("live", run_copy)
    assert not at.exception
    assert any("log lines skipped" in e.label for e in at.expander)


def test_read_metrics_refuses_a_log_that_is_a_symbolic_link_naming_it(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_text('{"step": 0, "time": 0.0, "kind": "run"}\n')
    (tmp_path / "metrics.jsonl").symlink_to(target)
    with pytest.raises(ValueError, match=r"metrics\.jsonl is a symbolic link"):
        read_metrics(tmp_path / "metrics.jsonl", 0)


def _every_number(value: Any, number: float) -> Any:
    """``value`` with every number in it replaced by ``number``."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return number
    if isinstance(value, list):
        return [_every_number(item, number) for item in value]
    if isinstance(value, dict):
        return {key: _every_number(item, number) for key, item in value.items()}
    return value


# Valid JSON no 64-bit type holds: an int (read back as a float) and a float past every int.
@pytest.mark.parametrize("number", [2**70, 1.2e21], ids=["int 2**70", "float 1.2e21"])
@pytest.mark.parametrize("kind", ["train", "buffer", "eval"])
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_a_log_whose_numbers_exceed_64_bits(
    dashboard: Dashboard, run_copy: Path, page: str, kind: str, number: float
) -> None:
    own = ("step", "time", "kind")
    rewrite_records(
        run_copy, kind, lambda r: {k: v if k in own else _every_number(v, number)
                                   for k, v in r.items()}
    )
    at = dashboard(page, run_copy)
    assert not at.exception
    assert at.title[0].value


def _close_off_a_torn_line(run: Path) -> None:
    with (run / "metrics.jsonl").open("a") as log:
        log.write('{"step": 9999, "ti')
    with RunLogger(run, fresh=False):
        pass  # a resumed run closes the torn line off with a newline


def _blank_last_line(run: Path) -> None:
    with (run / "metrics.jsonl").open("a") as log:
        log.write("\n")


def _torn_last_line(run: Path) -> None:
    with (run / "metrics.jsonl").open("a") as log:
        log.write('{"step": 9999, "ti')  # its writer was killed mid-line


@pytest.mark.parametrize(
    "damage", [_close_off_a_torn_line, _blank_last_line, _torn_last_line],
    ids=["closed-off torn line", "blank line", "torn line"],
)
def test_the_overview_lists_a_skipped_last_log_line_and_shows_no_error(
    dashboard: Dashboard, run_copy: Path, damage: Callable[[Path], None]
) -> None:
    damage(run_copy)
    at = dashboard("overview", run_copy)
    assert not at.exception
    assert [e.value for e in at.error] == []
    assert any(e.label == "1 log lines skipped" for e in at.expander)

"""The Overview's tables, built from summaries without Streamlit."""

from __future__ import annotations

from pathlib import Path

from app.overview import buffer_rows, latest_records, scalar_items, spec_rows
from app.run_data import BufferEntry, MetricsLog, read_log, read_source


def test_buffer_rows_give_ring_position_and_sizes(demo_run: Path) -> None:
    data = read_source(demo_run, roots=(demo_run,))
    train = next(row for row in buffer_rows(data.buffers) if row["buffer"] == "train")
    summary = data.buffer("train").summary  # type: ignore[union-attr]
    assert summary is not None
    assert (train["capacity"], train["length"], train["cursor"], train["full"]) == (
        summary.capacity, summary.length, summary.cursor, summary.full
    )
    assert train["rows"] == f"[time, {summary.env_count} envs]"


def test_an_unreadable_buffer_becomes_a_row_with_its_error(tmp_path: Path) -> None:
    rows = buffer_rows((BufferEntry("z", tmp_path, None, "z/config.json: bad"),))
    assert rows == [{"buffer": "z", "kind": "unreadable", "error": "z/config.json: bad"}]


def test_spec_rows_list_every_leaf(demo_run: Path) -> None:
    summary = read_source(demo_run, roots=(demo_run,)).buffer("z").summary  # type: ignore[union-attr]
    assert summary is not None
    assert [row["key path"] for row in spec_rows(summary)] == ["['z']"]


def test_latest_records_keep_the_last_of_each_kind_in_a_fixed_order() -> None:
    records = tuple(
        {"step": step, "time": 0.0, "kind": kind}
        for step, kind in [(1, "eval"), (2, "train"), (3, "train"), (4, "run")]
    )
    latest = latest_records(MetricsLog(records, (), 0))
    assert list(latest) == ["train", "eval"] and latest["train"]["step"] == 3


def test_scalar_items_flatten_nested_numbers_and_drop_text_and_time() -> None:
    record = {"step": 5, "time": 1.5, "kind": "buffer", "train": {"len": 3, "full": False},
              "loss": 0.1234567891}
    assert scalar_items(record) == [
        ("step", "5"), ("train/len", "3"), ("train/full", "False"), ("loss", "0.123457")
    ]


def test_read_log_reads_every_record_of_the_demo_run(demo_run: Path) -> None:
    log = read_log(demo_run / "metrics.jsonl")
    assert log.records[0]["kind"] == "run" and not log.problems
    assert log.offset == (demo_run / "metrics.jsonl").stat().st_size


def test_read_log_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_log(tmp_path / "metrics.jsonl") == MetricsLog((), (), 0)


def test_reprioritized_versions_are_listed_with_the_runs_buffers(run_copy: Path) -> None:
    import shutil

    expert = run_copy / "checkpoint" / "buffers" / "expert"
    shutil.copytree(expert, run_copy / "reprioritized" / "expert-exp-1")
    names = [entry.name for entry in read_source(run_copy, roots=(run_copy,)).buffers]
    assert names == ["expert", "train", "z", "reprioritized/expert-exp-1"]
    from_checkpoint = read_source(run_copy / "checkpoint", roots=(run_copy,))
    assert [e.name for e in from_checkpoint.buffers][-1] == "reprioritized/expert-exp-1"

"""RunLogger writes metrics.jsonl records; read_metrics tails them back."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bufcore.persist.jsonl import MAX_LINE_BYTES
from bufcore.runs.records import MAX_DEPTH, MAX_VECTOR
from bufcore.runs.runlog import METRICS_FILE, RunLogger, read_metrics

NAN, INF = math.nan, math.inf


@pytest.fixture
def logger(tmp_path: Path) -> Iterator[RunLogger]:
    with RunLogger(tmp_path / "run", clock=lambda: 12.5) as run_logger:
        yield run_logger


def strict_lines(path: Path) -> list[dict[str, Any]]:
    """The file's records as a strict JSON reader sees them (no NaN/Infinity tokens)."""

    def refuse(token: str) -> None:
        raise ValueError(f"{token} in the file")

    return [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]


def same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN (compared through Python's JSON text)."""
    return json.dumps(a) == json.dumps(b)


def read_all(path: Path) -> list[dict[str, Any]]:
    problems: list[str] = []
    records, _ = read_metrics(path, problems=problems)
    assert problems == []
    return records


# ------------------------------------------------------------------------------- writing
def test_log_writes_one_line_of_step_time_kind_then_the_metrics_in_order(
    logger: RunLogger,
) -> None:
    logger.log("train", 3, {"zeta": 1, "alpha": {"b": 2, "a": 3}})
    assert logger.path.read_text() == (
        '{"step": 3, "time": 12.5, "kind": "train", "zeta": 1, "alpha": {"b": 2, "a": 3}}\n'
    )


def test_log_returns_the_record_as_written(logger: RunLogger) -> None:
    written = logger.log("eval", 0, {"loss": NAN, "steps": (1, 2)})
    assert written == strict_lines(logger.path)[0]


def test_each_record_is_in_the_file_when_log_returns(logger: RunLogger) -> None:
    for step in range(3):
        logger.log("train", step, {"loss": 0.5})
        assert [r["step"] for r in strict_lines(logger.path)] == list(range(step + 1))


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (None, None),
        (True, True),
        (-(2**63), -(2**63)),
        (2**64 - 1, 2**64 - 1),
        (0.25, 0.25),
        ("text", "text"),
        ({}, {}),
        ({"a": [1, {"b": "c"}]}, {"a": [1, {"b": "c"}]}),
        ((1, 2.5), [1, 2.5]),
        (np.float32(0.5), 0.5),
        (np.int8(-3), -3),
        (np.uint64(2**64 - 1), 2**64 - 1),
        (np.longdouble(1.5), 1.5),
        (np.array([0.5, -2.0], dtype=np.longdouble), [0.5, -2.0]),
        (np.bool_(True), True),
        (np.array(7), 7),
        (np.array([1, 2], dtype=np.int16), [1, 2]),
        (torch.tensor(1.5), 1.5),
        (torch.tensor(True), True),
        (torch.tensor([1.0, 2.0], dtype=torch.bfloat16), [1.0, 2.0]),
        (torch.tensor([1.0], requires_grad=True), [1.0]),
        (torch.zeros(0), []),
        (torch.arange(MAX_VECTOR), list(range(MAX_VECTOR))),
    ],
    ids=repr,
)
def test_supported_values_are_written_as_json(
    logger: RunLogger, value: Any, written: Any
) -> None:
    logger.log("train", 0, {"v": value})
    assert strict_lines(logger.path)[0]["v"] == written


@pytest.mark.parametrize(
    ("metrics", "written", "flags"),
    [
        ({"loss": NAN}, {"loss": None}, {"/loss": "nan"}),
        ({"a": {"b": INF}}, {"a": {"b": None}}, {"/a/b": "inf"}),
        ({"emd": [0.0, 1.0, 2.0, -INF]}, {"emd": [0.0, 1.0, 2.0, None]}, {"/emd/3": "-inf"}),
        ({"t": torch.tensor([NAN, 1.0])}, {"t": [None, 1.0]}, {"/t/0": "nan"}),
        ({"n": np.float16("inf")}, {"n": None}, {"/n": "inf"}),
        ({"n": np.longdouble("-inf")}, {"n": None}, {"/n": "-inf"}),
        ({"x": [[NAN]]}, {"x": [[None]]}, {"/x/0/0": "nan"}),
    ],
    ids=repr,
)
def test_non_finite_floats_are_written_as_null_and_named_in_nonfinite(
    logger: RunLogger, metrics: dict[str, Any], written: dict[str, Any], flags: dict[str, str]
) -> None:
    logger.log("train", 0, metrics)
    record = strict_lines(logger.path)[0]
    assert {k: v for k, v in record.items() if k not in ("step", "time", "kind")} == {
        **written,
        "nonfinite": flags,
    }


def test_a_longdouble_beyond_float64_is_logged_as_inf_without_a_warning(
    logger: RunLogger,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logger.log("train", 0, {"n": np.longdouble("1e4000"), "a": np.array(
            [np.longdouble("-1e4000"), 1.0])})
    record = strict_lines(logger.path)[0]
    assert (record["n"], record["a"]) == (None, [None, 1.0])
    assert record["nonfinite"] == {"/n": "inf", "/a/0": "-inf"}


def test_nonfinite_paths_escape_tilde_and_slash_as_json_pointers(logger: RunLogger) -> None:
    logger.log("train", 0, {"a/b": {"~c": [0.0, NAN]}, "a": {"b": {"~c": NAN}}, "": NAN})
    assert strict_lines(logger.path)[0]["nonfinite"] == {
        "/a~1b/~0c/1": "nan",
        "/a/b/~0c": "nan",
        "/": "nan",
    }


class Unsupported:
    def __repr__(self) -> str:
        return "Unsupported()"  # a stable test id (the default names a memory address)


def self_containing() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["again"] = loop
    return loop


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


REFUSED: list[tuple[str, Any, Any, type[Exception], str]] = [
    # kind, step, metrics, error, what the message says
    ("train", 0, {"a": {"b": Unsupported()}}, TypeError, r"metrics\['a'\]\['b'\].*Unsupported"),
    ("train", 0, {"a": [1, {2}]}, TypeError, r"metrics\['a'\]\[1\].*set"),
    ("train", 0, {"c": 1j}, TypeError, r"metrics\['c'\].*complex"),
    ("train", 0, {"b": b"bytes"}, TypeError, r"metrics\['b'\].*bytes"),
    ("train", 0, {"s": np.array(["x"])}, TypeError, r"metrics\['s'\].*dtype <U1"),
    ("train", 0, {"z": torch.zeros(2, dtype=torch.complex64)}, TypeError, r"metrics\['z'\]"),
    ("train", 0, {"m": torch.zeros(2, device="meta")}, TypeError, r"metrics\['m'\].*meta"),
    ("train", 0, {"a": {3: 1}}, TypeError, r"metrics\['a'\]: keys must be str, got 3"),
    ("train", 0, {4: 1}, TypeError, r"metrics: keys must be str, got 4"),
    ("train", 0, [("a", 1)], TypeError, "metrics: expected a mapping, got list"),
    ("train", 0, {"big": 2**64}, ValueError, r"metrics\['big'\]: expected an int in"),
    ("train", 0, {"big": -(2**63) - 1}, ValueError, r"metrics\['big'\]: expected an int in"),
    ("train", 0, {"m": np.zeros((2, 2))}, ValueError, r"metrics\['m'\].*shape \[2, 2\]"),
    ("train", 0, {"v": torch.zeros(MAX_VECTOR + 1)}, ValueError, rf"shape \[{MAX_VECTOR + 1}\]"),
    ("train", 0, {"loop": self_containing()}, ValueError, r"\['again'\].*nested more than"),
    ("train", 0, {"deep": nested(MAX_DEPTH)}, ValueError, "nested more than"),
    ("train", 0, {"s": "x" * MAX_LINE_BYTES}, ValueError, "longer than readers accept"),
    ("train", 0, {"step": 1}, ValueError, r"metrics\['step'\]: the record's own field"),
    ("train", 0, {"time": 1}, ValueError, r"metrics\['time'\]: the record's own field"),
    ("train", 0, {"kind": 1}, ValueError, r"metrics\['kind'\]: the record's own field"),
    ("train", 0, {"nonfinite": 1}, ValueError, r"metrics\['nonfinite'\]: the record's own"),
    ("", 0, {}, ValueError, "kind: expected an identifier"),
    ("1st", 0, {}, ValueError, "kind: expected an identifier"),
    ("eval round", 0, {}, ValueError, "kind: expected an identifier"),
    (3, 0, {}, TypeError, "kind: expected a str, got int"),
    ("train", -1, {}, ValueError, r"step: expected an int in \[0, .*got -1"),
    ("train", 2**63, {}, ValueError, r"step: expected an int in \[0, "),
    ("train", 1.0, {}, TypeError, "step: expected an int, got 1.0"),
    ("train", True, {}, TypeError, "step: expected an int, got True"),
]


@pytest.mark.parametrize(("kind", "step", "metrics", "error", "message"), REFUSED, ids=repr)
def test_a_refused_record_raises_naming_the_problem_and_leaves_the_file_as_it_was(
    logger: RunLogger, kind: Any, step: Any, metrics: Any, error: type[Exception], message: str
) -> None:
    logger.log("train", 0, {"kept": 1})
    before = logger.path.read_bytes()
    with pytest.raises(error, match=message):
        logger.log(kind, step, {"first": 1.0, **metrics} if isinstance(metrics, dict) else metrics)
    assert logger.path.read_bytes() == before


def test_nesting_up_to_the_limit_is_written(logger: RunLogger) -> None:
    logger.log("train", 0, {"deep": nested(MAX_DEPTH - 1)})
    assert strict_lines(logger.path)[0]["deep"] == nested(MAX_DEPTH - 1)


@pytest.mark.parametrize("now", [NAN, INF, "noon"])
def test_a_clock_that_gives_no_finite_number_is_refused_and_nothing_is_written(
    tmp_path: Path, now: Any
) -> None:
    with RunLogger(tmp_path, clock=lambda: now) as run_logger:
        with pytest.raises((TypeError, ValueError), match="time: expected a"):
            run_logger.log("train", 0, {})
        assert run_logger.path.read_bytes() == b""


def test_time_comes_from_the_clock_at_each_log(tmp_path: Path) -> None:
    times = iter([1.0, 2.5])
    with RunLogger(tmp_path, clock=lambda: next(times)) as run_logger:
        run_logger.log("train", 0, {})
        run_logger.log("train", 1, {})
    assert [r["time"] for r in strict_lines(tmp_path / METRICS_FILE)] == [1.0, 2.5]


def test_a_fresh_logger_replaces_the_previous_runs_file(tmp_path: Path) -> None:
    with RunLogger(tmp_path) as first:
        first.log("train", 0, {"run": 1})
    with RunLogger(tmp_path) as second:
        second.log("train", 0, {"run": 2})
    assert [r["run"] for r in strict_lines(tmp_path / METRICS_FILE)] == [2]


def test_a_logger_that_is_not_fresh_appends_to_the_previous_runs_file(tmp_path: Path) -> None:
    with RunLogger(tmp_path) as first:
        first.log("train", 0, {"run": 1})
    with RunLogger(tmp_path, fresh=False) as resumed:
        resumed.log("train", 1, {"run": 2})
    assert [r["run"] for r in strict_lines(tmp_path / METRICS_FILE)] == [1, 2]


def test_the_logger_creates_the_run_directory(tmp_path: Path) -> None:
    with RunLogger(tmp_path / "a" / "run") as run_logger:
        assert run_logger.path == tmp_path / "a" / "run" / METRICS_FILE
    assert (tmp_path / "a" / "run" / METRICS_FILE).is_file()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"run_dir": 3}, "run_dir: expected a path"),
        ({"clock": 3.0}, "clock: expected a callable"),
        ({"fresh": "yes"}, "fresh: expected a bool"),
    ],
)
def test_bad_constructor_arguments_raise_typeerror_and_create_nothing(
    tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        RunLogger(**{"run_dir": tmp_path / "run", **arguments})
    assert list(tmp_path.iterdir()) == []


def test_logging_after_close_is_refused_and_close_is_idempotent(logger: RunLogger) -> None:
    logger.close()
    logger.close()
    with pytest.raises(ValueError, match="closed"):
        logger.log("train", 0, {})


def test_leaving_the_with_block_closes_the_logger(tmp_path: Path) -> None:
    with RunLogger(tmp_path) as run_logger:
        pass
    assert repr(run_logger).endswith("closed)")
    with pytest.raises(ValueError, match="closed"):
        run_logger.log("train", 0, {})


# ------------------------------------------------------------------------ per-rank figures
# Real groups of 2 and 3 ranks: tests/distributed/test_process_groups.py.
def test_a_lone_process_writes_its_per_rank_figures_as_lists_of_one(logger: RunLogger) -> None:
    figures = {"occupancy": torch.tensor(7), "sampled": np.int64(64), "ratio": 0.5, "no": None}
    record = logger.log("train", 1, {"loss": 2.0}, per_rank=figures)
    assert record == {
        "step": 1, "time": 12.5, "kind": "train", "loss": 2.0,
        "ranks": {"occupancy": [7], "sampled": [64], "ratio": [0.5], "no": [None]},
    }
    assert strict_lines(logger.path) == [record]


def test_a_non_finite_per_rank_figure_is_named_like_any_other(logger: RunLogger) -> None:
    record = logger.log("train", 0, {}, per_rank={"loss": NAN})
    assert record["nonfinite"] == {"/ranks/loss/0": "nan"}


def test_a_lone_process_logger_is_the_one_that_writes(logger: RunLogger) -> None:
    assert logger.writes and "writes nothing" not in repr(logger)


@pytest.mark.parametrize(
    ("metrics", "per_rank", "error", "match"),
    [
        ({}, [1], TypeError, "per_rank: expected a mapping"),
        ({}, {1: 2}, TypeError, "per_rank: keys must be str"),
        ({}, {"x": [1, 2]}, TypeError, r"per_rank\['x'\]: expected one number, got list"),
        ({}, {"x": torch.ones(2)}, TypeError, r"per_rank\['x'\]: expected one number, got 2"),
        ({}, {"x": "a"}, TypeError, r"per_rank\['x'\]: expected one number, got str"),
        ({}, {"x": 2**64}, ValueError, r"per_rank\['x'\]"),
        ({"ranks": 1}, {"x": 1}, ValueError, r"metrics\['ranks'\]: holds the per-rank figures"),
        ({"step": 1}, {"x": 1}, ValueError, r"metrics\['step'\]"),
    ],
)
def test_malformed_per_rank_figures_are_refused_and_nothing_is_written(
    logger: RunLogger, metrics: dict[str, Any], per_rank: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        logger.log("train", 0, metrics, per_rank=per_rank)
    assert logger.path.read_text() == ""


def test_per_rank_figures_after_close_are_refused(tmp_path: Path) -> None:
    with RunLogger(tmp_path) as run_logger:
        pass
    with pytest.raises(ValueError, match="closed"):
        run_logger.log("train", 0, {}, per_rank={"x": 1})


# ------------------------------------------------------------------------------- reading
@pytest.mark.parametrize(
    "metrics",
    [
        {"loss": NAN, "lr": 1e-3},
        {"a/b": {"~c": [0.0, -INF, {"d": INF}]}},
        {"emd": [NAN, NAN], "": NAN},
        {"nested": {"empty": {}, "list": [], "text": "null"}},
    ],
    ids=repr,
)
def test_records_read_back_as_logged_with_non_finite_values_in_place(
    logger: RunLogger, metrics: dict[str, Any]
) -> None:
    logger.log("train", 7, metrics)
    assert same(read_all(logger.path), [{"step": 7, "time": 12.5, "kind": "train", **metrics}])


def test_read_metrics_from_the_returned_offset_gives_only_the_new_records(
    logger: RunLogger,
) -> None:
    logger.log("train", 0, {})
    first, offset = read_metrics(logger.path)
    logger.log("train", 1, {})
    logger.log("train", 2, {})
    second, end = read_metrics(logger.path, offset)
    assert ([r["step"] for r in first], [r["step"] for r in second]) == ([0], [1, 2])
    assert end == logger.path.stat().st_size
    assert read_metrics(logger.path, end) == ([], end)


def test_a_half_written_last_line_waits_for_the_next_call(logger: RunLogger) -> None:
    logger.log("train", 0, {})
    whole = logger.path.read_bytes()
    line = b'{"step": 1, "time": 0, "kind": "train"}\n'
    with logger.path.open("ab") as file:
        file.write(line[:10])
        file.flush()
        records, offset = read_metrics(logger.path)
        assert ([r["step"] for r in records], offset) == ([0], len(whole))
        file.write(line[10:])
    records, offset = read_metrics(logger.path, offset)
    assert [r["step"] for r in records] == [1]


def test_a_torn_last_line_is_described_once_the_reader_has_read_all_before_it(
    tmp_path: Path,
) -> None:
    with RunLogger(tmp_path) as logger:
        logger.log("train", 0, {})
    path = tmp_path / METRICS_FILE
    with path.open("ab") as file:
        file.write(b'{"step": 1, "ti')  # a writer killed mid-line: no RunLogger has it open
    problems: list[str] = []
    records, offset = read_metrics(path, problems=problems)
    assert ([r["step"] for r in records], problems) == ([0], [])
    assert read_metrics(path, offset, problems=problems) == ([], offset)
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}: byte {offset}: torn: ")


def test_a_log_that_is_one_torn_line_names_line_1(tmp_path: Path) -> None:
    (tmp_path / METRICS_FILE).write_bytes(b'{"step": 1, "ti')
    problems: list[str] = []
    assert read_metrics(tmp_path / METRICS_FILE, problems=problems) == ([], 0)
    assert [p.split(": torn: ")[0] for p in problems] == [
        f"{tmp_path / METRICS_FILE}: byte 0 (line 1)"
    ]


def test_a_last_line_still_being_written_by_an_open_logger_is_not_torn(
    logger: RunLogger,
) -> None:
    logger.log("train", 0, {})
    with logger.path.open("ab") as file:
        file.write(b'{"step": 1, "ti')
    problems: list[str] = []
    _, offset = read_metrics(logger.path, problems=problems)
    assert read_metrics(logger.path, offset, problems=problems) == ([], offset)
    assert problems == []


def test_a_new_run_gives_no_records_and_offset_0_then_its_own_records(tmp_path: Path) -> None:
    with RunLogger(tmp_path) as first:
        for step in range(3):
            first.log("train", step, {})
    _, offset = read_metrics(tmp_path / METRICS_FILE)
    with RunLogger(tmp_path) as second:
        second.log("eval", 0, {})
    assert read_metrics(tmp_path / METRICS_FILE, offset) == ([], 0)
    records, _ = read_metrics(tmp_path / METRICS_FILE, 0)
    assert [r["kind"] for r in records] == ["eval"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (str(2**64), float(2**64)),
        (str(-(2**63) - 1), float(-(2**63) - 1)),
        ("1" + "0" * 400, INF),
        ("-" + "9" * 5000, -INF),
    ],
    ids=["2**64", "-2**63-1", "1e400", "5000 digits"],
)
def test_an_int_beyond_the_64_bit_range_reads_back_as_the_nearest_float(
    tmp_path: Path, text: str, value: float
) -> None:
    line = f'{{"step": 1, "time": 0, "kind": "t", "x": {text}, "v": [1, {text}]}}\n'
    (tmp_path / METRICS_FILE).write_text(line)
    (record,) = read_all(tmp_path / METRICS_FILE)
    assert (record["x"], record["v"]) == (value, [1, value])
    assert type(record["x"]) is float


@pytest.mark.parametrize("value", [-(2**63), 2**63 - 1, 2**64 - 1], ids=repr)
def test_ints_in_the_64_bit_range_the_logger_writes_read_back_as_ints(
    logger: RunLogger, value: int
) -> None:
    logger.log("train", 0, {"x": value})
    (record,) = read_all(logger.path)
    assert type(record["x"]) is int and record["x"] == value


def test_a_missing_file_gives_no_records_and_offset_0(tmp_path: Path) -> None:
    assert read_metrics(tmp_path / METRICS_FILE) == ([], 0)


BAD_LINES = [
    (b'{"step": 1, "ti', "not valid JSON"),
    (b"", "not valid JSON"),
    (b'{"step": 1, "time": NaN, "kind": "train"}', "NaN is not JSON"),
    (b'{"step": 1, "time": 0, "kind": "train", "x": -Infinity}', "-Infinity is not JSON"),
    (b'{"step": 1, "time": 1e999, "kind": "train"}', "time: expected a finite number"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b'{"time": 0, "kind": "train"}', "missing 'step'"),
    (b'{"step": 1}', "missing 'time', 'kind'"),
    (b'{"step": -1, "time": 0, "kind": "train"}', "step: expected an int in [0, "),
    (b'{"step": true, "time": 0, "kind": "train"}', "step: expected an int"),
    (b'{"step": 1.0, "time": 0, "kind": "train"}', "step: expected an int"),
    (b'{"step": 1, "time": "0", "kind": "train"}', "time: expected a number"),
    (b'{"step": 1, "time": 0, "kind": 3}', "kind: expected a str"),
    (b'{"step": 1, "time": 0, "kind": "a b"}', "kind: expected an identifier"),
    (b'{"step": 1, "time": 0, "kind": "t", "nonfinite": [1]}', "nonfinite: expected an object"),
    (b'{"step": 1, "time": 0, "kind": "t", "x": null, "nonfinite": {"/x": "NaN"}}', "expected"),
    (b'{"step": 1, "time": 0, "kind": "t", "nonfinite": {"/x": "nan"}}', "does not lead"),
    (b'{"step": 1, "time": 0, "kind": "t", "x": 1, "nonfinite": {"/x": "nan"}}', "does not lead"),
    (b'{"step": 1, "time": 0, "kind": "t", "nonfinite": {"/step": "nan"}}', "does not lead"),
    (b'{"step": 1, "time": 0, "kind": "t", "x": [null], "nonfinite": {"/x/01": "nan"}}', "lead"),
    (b'{"step": 1, "time": 0, "kind": "t", "x": [null], "nonfinite": {"/x/1": "nan"}}', "lead"),
    (b'{"step": 1, "time": 0, "kind": "t", "x": null, "nonfinite": {"x": "nan"}}', "Pointer"),
    (b'{"step": 1, "time": 0, "kind": "\xff"}', "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"step": ' + b"9" * 5000 + b', "time": 0, "kind": "t"}', "step: expected an int"),
    (b'{"step": ' + str(2**63).encode() + b', "time": 0, "kind": "t"}', "step: expected an int"),
]


@pytest.mark.parametrize(("bad", "why"), BAD_LINES, ids=repr)
def test_an_invalid_line_in_the_middle_is_skipped_and_described(
    logger: RunLogger, bad: bytes, why: str
) -> None:
    logger.log("train", 0, {})
    start = logger.path.stat().st_size
    with logger.path.open("ab") as file:
        file.write(bad + b"\n")
    logger.log("train", 2, {})
    problems: list[str] = []
    records, offset = read_metrics(logger.path, problems=problems)
    assert [r["step"] for r in records] == [0, 2]
    assert offset == logger.path.stat().st_size
    assert len(problems) == 1
    assert problems[0].startswith(f"{logger.path}: byte {start} (line 2): ")
    assert why in problems[0]


def test_a_problem_found_from_a_later_offset_names_the_byte_but_no_line_number(
    logger: RunLogger,
) -> None:
    logger.log("train", 0, {})
    _, offset = read_metrics(logger.path)
    with logger.path.open("ab") as file:
        file.write(b"torn\n")
    problems: list[str] = []
    read_metrics(logger.path, offset, problems=problems)
    assert len(problems) == 1
    assert problems[0].startswith(f"{logger.path}: byte {offset}: not valid JSON")


def test_without_a_problems_list_an_invalid_line_is_a_runtime_warning(logger: RunLogger) -> None:
    with logger.path.open("ab") as file:
        file.write(b"torn\n")
    logger.log("train", 1, {})
    with pytest.warns(RuntimeWarning, match=r"byte 0 \(line 1\): not valid JSON"):
        records, _ = read_metrics(logger.path)
    assert [r["step"] for r in records] == [1]


def test_a_line_longer_than_the_limit_is_skipped_as_a_problem(logger: RunLogger) -> None:
    with logger.path.open("ab") as file:
        file.write(b"x" * (MAX_LINE_BYTES + 1) + b"\n")
    logger.log("train", 1, {})
    problems: list[str] = []
    # The long line uses up the first call's budget; the record comes with the next call.
    first, offset = read_metrics(logger.path, problems=problems)
    second, _ = read_metrics(logger.path, offset, problems=problems)
    assert ([r["step"] for r in first], [r["step"] for r in second]) == ([], [1])
    assert problems == [
        f"{logger.path}: byte 0 (line 1): longer than {MAX_LINE_BYTES} bytes; skipped"
    ]


def test_one_call_reads_about_8_mib_and_the_next_call_goes_on(logger: RunLogger) -> None:
    for step in range(10):
        logger.log("train", step, {"pad": "x" * 2**20})
    first, offset = read_metrics(logger.path)
    second, end = read_metrics(logger.path, offset)
    assert 0 < len(first) < 10
    assert [r["step"] for r in first + second] == list(range(10))
    assert end == logger.path.stat().st_size


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"path": 3}, TypeError, "path: expected a path"),
        ({"offset": -1}, ValueError, "offset: expected an int >= 0, got -1"),
        ({"offset": 1.5}, TypeError, "offset: expected an int, got 1.5"),
        ({"problems": ()}, TypeError, "problems: expected a list or None, got tuple"),
    ],
)
def test_bad_read_metrics_arguments_raise_naming_the_argument(
    logger: RunLogger, arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        read_metrics(**{"path": logger.path, **arguments})


def test_read_metrics_refuses_a_path_that_is_not_a_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a regular file"):
        read_metrics(tmp_path)

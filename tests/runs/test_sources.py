"""``bufcore inspect``, run as a user runs it (a subprocess): output, exit codes, bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import bufcore
from bufcore.curriculum.history import Round, history_to_state
from bufcore.curriculum.priorities import PriorityOptions
from bufcore.inspect import human_bytes, inspect_path
from tests.support import reseal, rewrite_file


def bufcore_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bufcore.cli", *args], capture_output=True, text=True, timeout=120
    )


def inspect_json(path: Path, *args: str) -> dict[str, Any]:
    result = bufcore_cli("inspect", str(path), "--json", *args)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def train_buffer(path: Path, rows: int = 7) -> None:
    buffer = bufcore.DictBuffer(capacity=5, seed=0)
    buffer.extend({"observation": {"state": np.ones((rows, 3), np.float32)},
                   "action": np.zeros((rows, 2), np.float32)})
    buffer.save(path)


def expert_buffer(path: Path) -> None:
    episodes = [{"observation": np.zeros((3, 2), np.float32), "motion_id": np.full(3, i)}
                for i in range(2)]
    bufcore.TrajectoryDictBuffer(episodes, seed=0).save(path)


def run_dir(root: Path, *, metrics: bool = True, checkpoint: bool = True) -> Path:
    root.mkdir()
    if metrics:
        (root / "metrics.jsonl").write_text(
            "".join(json.dumps({"step": s, "time": 0.0, "kind": "train"}) + "\n"
                    for s in (10, 20, 30))
        )
    if checkpoint:
        buffers = root / "checkpoint" / "buffers"
        train_buffer(buffers / "train")
        expert_buffer(buffers / "expert")
        bufcore.ZBuffer(4, 3, seed=0).save(buffers / "z")
        history = [Round(step=30, emd={0: 1.0, 1: 3.0}, priority={0: 1.0, 1: 2.0})]
        run = {"format": "bufcore-run-checkpoint", "version": 1, "step": 30, "round": 1,
               "seed": 0, "options": {}, "agent": {},
               "curriculum": history_to_state(PriorityOptions(), history),
               "td_ema": {"ema_mean": 0.1, "ema_std": 0.2, "step_count": 3, "momentum": 0.9,
                          "warmup_steps": 2, "nonfinite_count": 0}}
        (root / "checkpoint" / "run.json").write_text(json.dumps(run))
    return root


def bfm_work_dir(root: Path) -> Path:
    path = root / "checkpoint" / "buffers" / "train"
    path.mkdir(parents=True)
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        h5.create_dataset("observation-state", data=np.ones((4, 5), np.float32))
    (path / "config.json").write_text(json.dumps(
        {"capacity": 4, "device": "cpu", "nested_key_separator": "-", "_idx": 0, "_is_full": True,
         "__target__": "humanoidverse.agents.buffers.transition.DictBuffer"}))
    (root / "checkpoint" / "model.pt").write_bytes(b"weights inspect ignores")
    return root


# ------------------------------------------------------------------------------ output
def test_a_buffer_checkpoint_prints_its_ring_and_an_aligned_spec_table(tmp_path: Path) -> None:
    train_buffer(tmp_path / "train")
    result = bufcore_cli("inspect", str(tmp_path / "train"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("buffer train: DictBuffer (bufcore v2; rows not verified")
    assert "5 of capacity 5, cursor 2, full yes, device cpu" in result.stdout
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("key path"))
    table = lines[header : header + 3]
    assert table[1].split() == ["['observation']['state']", "float32", "[3]", "12", "60", "B"]
    assert len({line.index("dtype") for line in table[:1]}) == 1
    assert table[1].index("float32") == table[2].index("float32") == table[0].index("dtype")


def test_json_output_gives_the_summary_fields(tmp_path: Path) -> None:
    train_buffer(tmp_path / "train")
    data = inspect_json(tmp_path / "train")
    (buffer,) = data["buffers"]
    assert data["kind"] == "buffer checkpoint"
    assert {k: buffer[k] for k in ("name", "kind", "capacity", "length", "cursor", "full")} == {
        "name": "train", "kind": "DictBuffer", "capacity": 5, "length": 5, "cursor": 2,
        "full": True,
    }
    assert buffer["spec"][0]["key_path"] == ["observation", "state"]


def test_a_run_directory_shows_its_log_run_state_and_every_buffer(tmp_path: Path) -> None:
    data = inspect_json(run_dir(tmp_path / "run"))
    assert data["kind"] == "run directory"
    assert [b["name"] for b in data["buffers"]] == ["expert", "train", "z"]
    assert (data["metrics"]["records"], data["metrics"]["last"]["step"]) == (3, 30)
    assert data["run"]["curriculum"]["rounds"] == 1
    assert data["run"]["curriculum"]["last_mean_emd"] == 2.0
    assert data["run"]["td_ema"]["step_count"] == 3
    assert data["buffers"][0]["priorities"]["count"] == 2


def test_a_run_directory_prints_curriculum_and_td_ema_lines(tmp_path: Path) -> None:
    result = bufcore_cli("inspect", str(run_dir(tmp_path / "run")))
    assert result.returncode == 0, result.stderr
    assert "metrics: 3 records" in result.stdout
    assert "curriculum: 1 rounds (last at step 30, mean EMD 2)" in result.stdout
    assert "td-ema: mean 0.1, std 0.2, 3 steps" in result.stdout
    assert "buffer expert: TrajectoryDictBuffer" in result.stdout


def test_a_run_checkpoint_directory_itself_is_inspected(tmp_path: Path) -> None:
    data = inspect_json(run_dir(tmp_path / "run") / "checkpoint")
    assert data["kind"] == "run checkpoint"
    assert len(data["buffers"]) == 3 and data["metrics"] is None


def test_a_run_with_only_a_log_shows_the_log(tmp_path: Path) -> None:
    result = bufcore_cli("inspect", str(run_dir(tmp_path / "run", checkpoint=False)))
    assert result.returncode == 0, result.stderr
    assert "metrics: 3 records" in result.stdout
    assert "buffers: none" in result.stdout


def test_a_bfm_zero_work_directory_is_inspected_ignoring_other_files(tmp_path: Path) -> None:
    data = inspect_json(bfm_work_dir(tmp_path / "work"))
    assert data["kind"] == "BFM-Zero work directory"
    (buffer,) = data["buffers"]
    assert (buffer["format"], buffer["length"], buffer["full"]) == ("BFM-Zero", 4, True)


# BFM-Zero's work directory as its training script writes it (see make_bfm_zero_workdir.py).
BFM_ZERO = Path(__file__).resolve().parents[1] / "fixtures" / "bfm_zero_workdir"


@pytest.mark.parametrize(
    ("where", "kind"), [("", "BFM-Zero work directory"), ("checkpoint", "run checkpoint")]
)
def test_a_bfm_zero_work_directory_and_its_checkpoint_inspect_with_exit_0(
    where: str, kind: str
) -> None:
    data = inspect_json(BFM_ZERO / where)
    assert data["kind"] == kind
    (buffer,) = data["buffers"]
    assert (buffer["name"], buffer["kind"], buffer["format"]) == (
        "train", "TrajectoryDictBufferMultiDim", "BFM-Zero"
    )
    assert (buffer["length"], buffer["env_count"]) == (30, 4)


def test_a_bfm_zero_checkpoint_reports_the_env_step_of_its_train_status() -> None:
    result = bufcore_cli("inspect", str(BFM_ZERO))
    assert result.returncode == 0, result.stderr
    assert "train_status.json: saved at env step 120 (BFM-Zero)" in result.stdout
    assert inspect_json(BFM_ZERO)["train_status"]["time"] == 120


def test_a_damaged_train_status_is_one_error_line_naming_it(tmp_path: Path) -> None:
    shutil.copytree(BFM_ZERO, tmp_path / "work")
    (tmp_path / "work" / "checkpoint" / "train_status.json").write_text('{"time": -3}')
    assert_one_line_error(bufcore_cli("inspect", str(tmp_path / "work")), "train_status.json")


def test_verify_marks_intact_checkpoints_verified(tmp_path: Path) -> None:
    train_buffer(tmp_path / "train")
    assert inspect_json(tmp_path / "train", "--verify")["buffers"][0]["verified"] is True


# ---------------------------------------------------------------------------- bad input
def assert_one_line_error(result: subprocess.CompletedProcess[str], names: str) -> None:
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bufcore inspect: error: ")
    assert names in lines[0]


def damaged_rows(tmp_path: Path) -> Path:
    train_buffer(tmp_path / "train")
    payload = tmp_path / "train" / "buffer.hdf5"
    with h5py.File(payload, "r") as h5:
        offset = h5["action"].id.get_offset()
    data = bytearray(payload.read_bytes())
    data[offset] ^= 0xFF
    payload.write_bytes(bytes(data))
    return tmp_path / "train"


def test_damaged_rows_inspect_without_verify(tmp_path: Path) -> None:
    result = bufcore_cli("inspect", str(damaged_rows(tmp_path)))
    assert result.returncode == 0, result.stderr


def test_verify_reports_damaged_rows_in_one_line_naming_buffer_hdf5(tmp_path: Path) -> None:
    result = bufcore_cli("inspect", str(damaged_rows(tmp_path)), "--verify")
    assert_one_line_error(result, "buffer.hdf5: sha256 of block 0")


def make_bad(kind: str, tmp_path: Path) -> tuple[Path, str]:
    """A bad PATH of ``kind`` and what its error line must name."""
    if kind == "missing":
        return tmp_path / "nothing", "nothing: no such file or directory"
    if kind == "file":
        (tmp_path / "notes.txt").write_text("hello")
        return tmp_path / "notes.txt", "notes.txt: not a directory"
    if kind == "empty":
        (tmp_path / "empty").mkdir()
        return tmp_path / "empty", "empty: expected a buffer checkpoint"
    if kind == "random":
        (tmp_path / "random" / "sub").mkdir(parents=True)
        (tmp_path / "random" / "data.csv").write_text("a,b\n")
        return tmp_path / "random", "random: expected a buffer checkpoint"
    if kind == "corrupt config":
        train_buffer(tmp_path / "train")
        (tmp_path / "train" / "config.json").write_text("{oops")
        return tmp_path / "train", "config.json"
    if kind == "truncated payload":
        train_buffer(tmp_path / "train")
        payload = tmp_path / "train" / "buffer.hdf5"
        payload.write_bytes(payload.read_bytes()[:1500])
        return tmp_path / "train", "buffer.hdf5"
    if kind == "foreign run.json":
        run = run_dir(tmp_path / "run")
        (run / "checkpoint" / "run.json").write_text(json.dumps({"format": "other"}))
        return run, "run.json: run['format']: expected 'bufcore-run-checkpoint'"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    ["missing", "file", "empty", "random", "corrupt config", "truncated payload",
     "foreign run.json"],
)
def test_bad_input_is_one_error_line_naming_the_file_and_exit_1(tmp_path: Path, kind: str) -> None:
    path, names = make_bad(kind, tmp_path)
    assert_one_line_error(bufcore_cli("inspect", str(path)), names)


@pytest.mark.parametrize("sealed", [True, False], ids=["bufcore", "BFM-Zero, no manifest"])
@pytest.mark.parametrize("where", ["buffer", "run"])
def test_an_unknown_target_is_one_error_line_naming_it_and_exit_1(
    tmp_path: Path, sealed: bool, where: str
) -> None:
    run = run_dir(tmp_path / "run")
    buffer = run / "checkpoint" / "buffers" / "train"
    config = json.loads((buffer / "config.json").read_text())
    config["__target__"] = "os.system"
    if sealed:
        rewrite_file(buffer, "config.json", json.dumps(config).encode())
        reseal(buffer, lambda manifest: manifest.update(target="os.system"))
    else:
        for name in ("manifest.json", "state.json"):
            (buffer / name).unlink()
        (buffer / "config.json").write_text(json.dumps(config))
    result = bufcore_cli("inspect", str(buffer if where == "buffer" else run))
    assert_one_line_error(result, "config.json: unknown __target__ 'os.system'")


def _torn_and_closed_off(log: Path) -> None:
    with log.open("a") as file:
        file.write('{"step": 40, "ti')  # a writer killed mid-line
    with bufcore.RunLogger(log.parent, fresh=False):
        pass  # the resumed run closes the torn line off


def _blank_line(log: Path) -> None:
    with log.open("a") as file:
        file.write("\n")


def _torn(log: Path) -> None:
    with log.open("a") as file:
        file.write('{"step": 40, "ti')


@pytest.mark.parametrize(
    "damage", [_torn_and_closed_off, _blank_line, _torn], ids=["closed-off torn", "blank", "torn"]
)
def test_a_log_line_read_metrics_skips_is_listed_as_skipped_with_exit_0(
    tmp_path: Path, damage: Any
) -> None:
    run = run_dir(tmp_path / "run", checkpoint=False)
    damage(run / "metrics.jsonl")
    result = bufcore_cli("inspect", str(run))
    assert (result.returncode, result.stderr) == (0, "")
    assert "metrics: 3 records, 1 line skipped" in result.stdout
    assert f"{run / 'metrics.jsonl'}: byte 129" in result.stdout


def _strict(text: str) -> Any:
    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_inspect_json_is_strict_json_when_the_last_log_record_holds_nan(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with bufcore.RunLogger(run) as logger:
        logger.log("train", 1, {"loss": float("nan"), "emd": [1.0, float("-inf")]})
    result = bufcore_cli("inspect", str(run), "--json")
    assert result.returncode == 0, result.stderr
    last = _strict(result.stdout)["metrics"]["last"]
    assert (last["loss"], last["emd"]) == (None, [1.0, None])


def test_inspect_json_is_strict_json_when_the_last_log_line_holds_a_nan_token(
    tmp_path: Path,
) -> None:
    run = run_dir(tmp_path / "run", checkpoint=False)
    with (run / "metrics.jsonl").open("a") as log:
        log.write('{"step": 40, "time": 0.0, "kind": "train", "loss": NaN}\n')
    result = bufcore_cli("inspect", str(run), "--json")
    assert result.returncode == 0, result.stderr
    metrics = _strict(result.stdout)["metrics"]
    assert (metrics["last"]["step"], metrics["skipped"]) == (30, 1)


def test_inspect_json_is_strict_json_when_a_hand_edited_run_json_holds_nan(
    tmp_path: Path,
) -> None:
    run = run_dir(tmp_path / "run", metrics=False)
    state = run / "checkpoint" / "run.json"
    state.write_text(state.read_text().replace('"options": {}', '"options": {"lr": NaN}'))
    result = bufcore_cli("inspect", str(run), "--json")
    assert result.returncode == 0, result.stderr
    assert _strict(result.stdout)["run"]["options"] == {"lr": None}


def test_inspect_without_a_path_is_a_usage_error_with_exit_2() -> None:
    result = bufcore_cli("inspect")
    assert result.returncode == 2
    assert "bufcore inspect: error: the following arguments are required: PATH" in result.stderr


@pytest.mark.parametrize("command", [[], ["inspect"]])
def test_help_shows_an_example(command: list[str]) -> None:
    result = bufcore_cli(*command, "--help")
    assert result.returncode == 0
    assert "\nexamples:\n  bufcore " in result.stdout
    assert "  bufcore inspect " in result.stdout


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"), (5 << 20, "5 MiB"),
     (3 << 40, "3 TiB"), (5000 << 40, "5e+03 TiB")],
)
def test_human_bytes_uses_binary_units(count: int, text: str) -> None:
    assert human_bytes(count) == text


@pytest.mark.parametrize("verify", ["no", None, 1])
def test_inspect_path_refuses_a_verify_that_is_not_a_bool_naming_verify(
    tmp_path: Path, verify: object
) -> None:
    buffer = bufcore.DictBuffer(capacity=2, seed=0)
    buffer.extend({"x": [1, 2]})
    buffer.save(tmp_path / "ckpt")
    with pytest.raises(TypeError, match=r"verify: expected a bool, got"):
        inspect_path(tmp_path / "ckpt", verify=verify)  # type: ignore[arg-type]

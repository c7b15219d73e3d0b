"""The demo training run: it learns, the curriculum works, and what it writes loads back."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from bufcore import TrajectoryDictBuffer, TrajectoryDictBufferMultiDim, ZBuffer, load_buffer
from bufcore.persist.run_checkpoint import earlier_checkpoints, read_run_state
from bufcore.runs.demo import DemoOptions, DemoResult, run_demo
from bufcore.runs.demo.progress import Progress
from tests.support import TINY_DEMO

# Small enough to run in a couple of seconds, big enough for the agent to learn.
SMALL = DemoOptions(steps=400, motions=8, envs=16, capacity=200, eval_every=100, max_length=120)
TINY = TINY_DEMO


def records(run: Path) -> list[dict[str, Any]]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def without_time(run: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "time"} for r in records(run)]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return run_demo(tmp_path_factory.mktemp("demo") / "run", SMALL)


def test_mean_emd_falls_from_the_first_to_the_last_round(small_run: DemoResult) -> None:
    assert len(small_run.mean_emd) == 4
    assert small_run.mean_emd[-1] < small_run.mean_emd[0]


def test_at_the_end_motions_with_higher_emd_are_sampled_more(small_run: DemoResult) -> None:
    emd, probability = small_run.last_emd, small_run.last_priority
    motions = sorted(emd, key=emd.__getitem__)
    assert [probability[m] for m in motions] == sorted(probability[m] for m in motions)
    assert probability[motions[-1]] > 1.5 * probability[motions[0]]


def test_the_log_holds_every_record_kind_in_step_order(small_run: DemoResult) -> None:
    logged = records(small_run.run_dir)
    assert logged[0]["kind"] == "run"
    assert logged[0]["options"]["steps"] == SMALL.steps
    kinds = {r["kind"] for r in logged}
    assert kinds == {"run", "train", "buffer", "eval", "checkpoint", "end"}
    steps = [r["step"] for r in logged]
    assert steps == sorted(steps)


def test_the_log_states_its_plan_first_and_its_end_last(small_run: DemoResult) -> None:
    logged = records(small_run.run_dir)
    assert logged[0]["total_steps"] == SMALL.steps
    assert logged[-1]["kind"] == "end" and logged[-1]["step"] == SMALL.steps
    assert logged[-1]["status"] == "finished"
    assert [r["kind"] for r in logged].count("end") == 1


def test_each_update_logs_the_quantiles_of_its_normalised_td_errors(
    small_run: DemoResult,
) -> None:
    trains = [r for r in records(small_run.run_dir) if r["kind"] == "train"]
    for record in trains:
        quantiles = record["td/norm_quantiles"]
        assert len(quantiles) == 201 and quantiles == sorted(quantiles)


def test_each_eval_record_matches_the_curriculum_round(small_run: DemoResult) -> None:
    evals = [r for r in records(small_run.run_dir) if r["kind"] == "eval"]
    assert [r["round"] for r in evals] == [1, 2, 3, 4]
    assert [r["mean_emd"] for r in evals] == pytest.approx(small_run.mean_emd)
    last = evals[-1]
    assert dict(zip(last["motion_ids"], last["emd"], strict=True)) == small_run.last_emd
    assert sum(last["probability"]) == pytest.approx(1.0, abs=1e-5)


def test_the_run_checkpoint_buffers_load_through_load_buffer(small_run: DemoResult) -> None:
    buffers = small_run.run_dir / "checkpoint" / "buffers"
    train, expert, z = (load_buffer(buffers / name) for name in ("train", "expert", "z"))
    assert isinstance(train, TrajectoryDictBufferMultiDim) and train.n_dim == 2
    assert train.is_full  # 400 steps into 200 time rows: the ring wrapped
    assert isinstance(expert, TrajectoryDictBuffer) and len(expert.motion_ids) == SMALL.motions
    assert isinstance(z, ZBuffer) and len(z) > 0
    batch = train.sample(SMALL.batch_size)
    assert batch["z"].shape == (SMALL.batch_size, SMALL.z_dim)
    assert batch["next"]["observation"]["state"].shape == (SMALL.batch_size, SMALL.dim)


def test_the_saved_expert_priorities_are_the_last_rounds(small_run: DemoResult) -> None:
    expert = load_buffer(small_run.run_dir / "checkpoint" / "buffers" / "expert")
    saved = dict(zip(expert.motion_ids, expert.priorities.tolist(), strict=True))
    assert saved == pytest.approx(small_run.last_priority)


def test_run_state_holds_curriculum_history_and_td_ema(small_run: DemoResult) -> None:
    state = read_run_state(small_run.run_dir / "checkpoint")
    assert state["step"] == SMALL.steps and state["round"] == 4
    assert len(state["curriculum"]["rounds"]) == 4
    assert state["td_ema"]["step_count"] > 0
    assert state["options"] == SMALL.to_json()


def test_the_same_seed_writes_the_same_log_except_for_time(tmp_path: Path) -> None:
    run_demo(tmp_path / "a", TINY)
    run_demo(tmp_path / "b", TINY)
    assert without_time(tmp_path / "a") == without_time(tmp_path / "b")


def test_another_seed_writes_another_log(tmp_path: Path) -> None:
    run_demo(tmp_path / "a", TINY)
    run_demo(tmp_path / "b", DemoOptions(**{**TINY.to_json(), "seed": 1}))
    assert without_time(tmp_path / "a") != without_time(tmp_path / "b")


def test_a_second_run_into_the_same_directory_replaces_the_first(tmp_path: Path) -> None:
    run_demo(tmp_path / "run", DemoOptions(**{**TINY.to_json(), "seed": 1}))
    run_demo(tmp_path / "run", TINY)
    run_demo(tmp_path / "fresh", TINY)
    assert without_time(tmp_path / "run") == without_time(tmp_path / "fresh")


def test_a_directory_with_other_files_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"notes\.txt"):
        run_demo(tmp_path, TINY)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_live_pacing_sleeps_so_the_run_lasts_the_given_time(tmp_path: Path) -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    options = DemoOptions(**{**TINY.to_json(), "live_seconds": 6.0})
    run_demo(tmp_path / "run", options, clock=lambda: now[0], sleep=sleep)
    assert now[0] == pytest.approx(6.0)
    assert len(slept) == TINY.steps


def test_live_records_carry_the_paced_clock(tmp_path: Path) -> None:
    now = [100.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    options = DemoOptions(**{**TINY.to_json(), "live_seconds": 6.0})
    run_demo(tmp_path / "run", options, clock=lambda: now[0], sleep=sleep)
    times = [r["time"] for r in records(tmp_path / "run")]
    # The last step's records are written before its pause, the end record after it.
    assert times[0] == 100.0 and times[-2] == pytest.approx(100.0 + 6.0 * 59 / 60)
    assert times[-1] == pytest.approx(106.0)


@pytest.mark.parametrize(
    ("change", "argument"),
    [
        ({"steps": 0}, "steps"),
        ({"batch_size": 100}, "batch_size"),
        ({"min_length": 8}, "min_length"),
        ({"max_length": 20, "min_length": 30}, "max_length"),
        ({"mix": 1.5}, "mix"),
        ({"mode": "cubic"}, "mode"),
        ({"max_weight": 0.01}, "max_weight"),
    ],
)
def test_invalid_options_are_refused_naming_the_option(
    change: dict[str, object], argument: str
) -> None:
    with pytest.raises(ValueError, match=argument):
        DemoOptions(**change)  # type: ignore[arg-type]


def test_progress_off_a_terminal_prints_the_start_and_a_line_per_tenth() -> None:
    stream = io.StringIO()
    progress = Progress(50, stream=stream, clock=lambda: 0.0)
    for step in range(1, 51):
        progress.update(step, "status")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11
    assert lines[-1].startswith("[" + "#" * 30 + "] 50/50 steps")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_redraws_one_line_at_most_ten_times_a_second() -> None:
    stream, now = _Terminal(), [0.0]
    progress = Progress(100, stream=stream, clock=lambda: now[0])
    for step in range(1, 101):
        now[0] += 0.01
        progress.update(step, "status")
    progress.close()
    text = stream.getvalue()
    assert text.count("\r") == 11  # the first step, every 0.1 s, and the last
    assert text.endswith("100/100 steps,   1.0 s, status\n")


def test_the_run_does_not_depend_on_the_global_torch_seed(tmp_path: Path) -> None:
    torch.manual_seed(1)
    run_demo(tmp_path / "a", TINY)
    torch.manual_seed(2)
    run_demo(tmp_path / "b", TINY)
    assert without_time(tmp_path / "a") == without_time(tmp_path / "b")


def test_buffer_records_follow_the_ring_as_it_fills_and_wraps(small_run: DemoResult) -> None:
    buffers = [r for r in records(small_run.run_dir) if r["kind"] == "buffer"]
    capacity = SMALL.capacity
    for record in buffers:
        step, train = record["step"], record["train"]
        assert train["len"] == min(step, capacity)
        assert train["cursor"] == step % capacity
        assert train["full"] == (step >= capacity)
        assert train["wraps"] == step // capacity
        assert train["transitions"] == train["len"] * SMALL.envs
        assert 0 < train["samplable_trajectories"] <= train["trajectories"]
    assert buffers[-1]["step"] == SMALL.steps


def test_the_last_step_logs_a_buffer_record_off_the_buffer_interval(tmp_path: Path) -> None:
    run_demo(tmp_path / "run", TINY)  # 60 steps: buffer records every 25, and at 60
    steps = [r["step"] for r in records(tmp_path / "run") if r["kind"] == "buffer"]
    assert steps == [25, 50, 60]


def test_each_eval_record_reports_the_entropy_and_effective_size_of_its_probabilities(
    small_run: DemoResult,
) -> None:
    for record in (r for r in records(small_run.run_dir) if r["kind"] == "eval"):
        p = torch.tensor(record["probability"], dtype=torch.float64)
        assert record["entropy"] == pytest.approx(float(-(p * p.log()).sum()))
        assert record["effective_motions"] == pytest.approx(float(1 / p.pow(2).sum()))


def test_the_last_buffer_record_matches_the_saved_buffers(small_run: DemoResult) -> None:
    last = [r for r in records(small_run.run_dir) if r["kind"] == "buffer"][-1]
    buffers = small_run.run_dir / "checkpoint" / "buffers"
    train, z = load_buffer(buffers / "train"), load_buffer(buffers / "z")
    assert last["step"] == SMALL.steps
    assert {k: last["train"][k] for k in ("len", "capacity", "cursor", "full")} == {
        "len": len(train), "capacity": train.capacity, "cursor": train.cursor,
        "full": train.is_full,
    }
    assert last["z"] == {"len": len(z), "capacity": z.capacity, "full": z.is_full}


@pytest.mark.parametrize("capacity", [1, 2, 7, 8])
def test_a_capacity_that_holds_no_window_and_its_next_frame_is_refused_naming_capacity(
    capacity: int,
) -> None:
    # seq_length 8: sampling needs episodes of 9 rows, which a capacity of 8 never holds.
    with pytest.raises(ValueError, match=r"capacity: expected an int >= 9,"):
        DemoOptions(capacity=capacity)


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1, 2**70])
def test_a_seed_no_generator_takes_is_refused_naming_seed(seed: int) -> None:
    with pytest.raises(ValueError, match=r"seed: expected an int in \["):
        DemoOptions(seed=seed)


def test_options_whose_buffer_exceeds_the_machines_memory_are_refused_before_writing(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match=r"envs x capacity: .* more than this machine's"):
        run_demo(tmp_path / "run", DemoOptions(envs=10**9))
    assert not (tmp_path / "run").exists()


def _previous_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run_demo(run, TINY)
    return run


def _snapshot(run: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(run)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(run.rglob("*"))
    }


@pytest.mark.parametrize(
    "plant",
    [
        "checkpoint/notes.txt",
        "checkpoint/buffers/mine/notes.txt",
        "motions/notes.txt",
    ],
)
def test_a_previous_run_holding_user_files_is_refused_before_anything_is_written(
    tmp_path: Path, plant: str
) -> None:
    run = _previous_run(tmp_path)
    (run / plant).parent.mkdir(parents=True, exist_ok=True)
    (run / plant).write_text("mine")
    before = _snapshot(run)
    with pytest.raises(FileExistsError, match=plant.split("/")[0]):
        run_demo(run, DemoOptions(**{**TINY.to_json(), "seed": 1}))
    assert _snapshot(run) == before


@pytest.mark.parametrize("content", [b"my notes\n", b"{\"kind\": \"eval\"}\n", b"\x00\xff"])
def test_a_metrics_file_that_is_not_a_demo_log_is_refused_before_anything_is_written(
    tmp_path: Path, content: bytes
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(content)
    with pytest.raises(FileExistsError, match=r"metrics\.jsonl"):
        run_demo(run, TINY)
    assert _snapshot(run) == {"metrics.jsonl": content}


def test_a_metrics_link_to_a_user_file_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("user data\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").symlink_to(mine)
    with pytest.raises(FileExistsError, match=r"metrics\.jsonl"):
        run_demo(run, TINY)
    assert mine.read_text() == "user data\n"
    assert [p.name for p in run.iterdir()] == ["metrics.jsonl"]


@pytest.mark.parametrize("entry", ["metrics.jsonl", "motions", "checkpoint"])
def test_an_entry_of_the_wrong_type_is_refused_before_anything_is_written(
    tmp_path: Path, entry: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    if entry == "metrics.jsonl":
        (run / entry).mkdir()
    else:
        (run / entry).write_text("mine")
    before = _snapshot(run)
    with pytest.raises(FileExistsError, match=entry):
        run_demo(run, TINY)
    assert _snapshot(run) == before


def test_a_dangling_out_link_is_refused_naming_its_target(tmp_path: Path) -> None:
    (tmp_path / "run").symlink_to(tmp_path / "missing")
    with pytest.raises(FileExistsError, match="missing"):
        run_demo(tmp_path / "run", TINY)
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_progress_closed_twice_on_a_terminal_ends_its_line_once() -> None:
    # The command closes it after an error or Ctrl-C too, also when run_demo already did.
    stream = _Terminal()
    progress = Progress(10, stream=stream, clock=lambda: 0.0)
    progress.update(10, "status")
    progress.close()
    progress.close()
    assert stream.getvalue().count("\n") == 1


class _ThreadsSeen(Progress):
    def __init__(self) -> None:
        super().__init__(TINY.steps, stream=io.StringIO())
        self.threads: set[int] = set()

    def update(self, done: int, status: str) -> None:
        self.threads.add(torch.get_num_threads())


def test_the_run_computes_on_one_torch_thread_and_restores_the_count_after(
    tmp_path: Path,
) -> None:
    # Records must not depend on the machine's core count (threaded reductions round apart).
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = _ThreadsSeen()
        run_demo(tmp_path / "run", TINY, progress=seen)
        assert seen.threads == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_each_update_adds_the_expert_z_and_as_many_random_z_to_the_z_buffer(
    small_run: DemoResult,
) -> None:
    first = next(r for r in records(small_run.run_dir) if r["kind"] == "buffer")
    windows = SMALL.batch_size // SMALL.seq_length
    updates = sum(
        1 for step in range(1, first["step"] + 1)
        if step % SMALL.update_every == 0 and step > SMALL.seq_length
    )
    assert first["z"]["len"] == min(2 * windows * updates, SMALL.z_capacity)


def test_run_state_holds_the_agent_weights(small_run: DemoResult) -> None:
    agent = read_run_state(small_run.run_dir / "checkpoint")["agent"]
    z_dim, dim = SMALL.z_dim, SMALL.dim
    assert torch.tensor(agent["backward_map"]).shape == (SMALL.seq_length * dim, z_dim)
    assert torch.tensor(agent["policy"]["weight"]).shape == (z_dim + dim + 1, dim)
    assert torch.tensor(agent["value"]["weight"]).shape == (2 * dim + z_dim + 1,)
    assert torch.tensor(agent["policy"]["weight"]).abs().sum() > 0  # it learned something


def checkpoint_steps(run: Path) -> list[int]:
    return [r["step"] for r in records(run) if r["kind"] == "checkpoint"]


def test_the_first_checkpoint_follows_the_first_update_then_one_per_round(
    tmp_path: Path,
) -> None:
    # seq_length 8 and update_every 4 (the defaults): the first update is at step 12, which a
    # default --live run (1500 steps in 300 s) reaches 2.4 s after it starts.
    run_demo(tmp_path / "run", TINY)
    assert checkpoint_steps(tmp_path / "run") == [12, 30, 60]


@pytest.mark.parametrize(("eval_every", "expected"), [(12, [12, 24, 36]), (5, [5, 10, 15])])
def test_a_round_at_or_before_the_first_update_is_the_early_checkpoint_and_saves_once(
    tmp_path: Path, eval_every: int, expected: list[int]
) -> None:
    options = DemoOptions(**{**TINY.to_json(), "steps": expected[-1], "eval_every": eval_every})
    run_demo(tmp_path / "run", options)
    assert checkpoint_steps(tmp_path / "run") == expected


def test_checkpoint_every_spaces_the_rounds_that_checkpoint(tmp_path: Path) -> None:
    options = DemoOptions(**{**TINY.to_json(), "steps": 90, "eval_every": 15,
                             "checkpoint_every": 2})
    run_demo(tmp_path / "run", options)
    assert checkpoint_steps(tmp_path / "run") == [12, 30, 60, 90]


def test_each_replaced_checkpoint_is_kept_under_checkpoints_by_its_step(tmp_path: Path) -> None:
    run_demo(tmp_path / "run", TINY)
    kept = earlier_checkpoints(tmp_path / "run")
    assert [step for step, _ in kept] == [12, 30]
    for step, path in kept:
        assert read_run_state(path)["step"] == step
        assert len(load_buffer(path / "buffers" / "train")) == min(step, TINY.capacity)
    assert read_run_state(tmp_path / "run" / "checkpoint")["step"] == TINY.steps


def test_a_run_into_a_previous_demo_run_keeps_none_of_its_checkpoints(tmp_path: Path) -> None:
    run_demo(tmp_path / "run", TINY)
    run_demo(tmp_path / "run", DemoOptions(**{**TINY.to_json(), "steps": 20}))
    assert [step for step, _ in earlier_checkpoints(tmp_path / "run")] == [12]

"""TrajectoryReplayBuffer: RLinf's API and sampling, and the reference bugs it does not have."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from bufcore import Trajectory, TrajectoryReplayBuffer
from bufcore.tree import LeafSpec
from tests.buffers.rlinf.rlinf_data import assert_consistent, sampled_ids, trajectory
from tests.support import DEVICES

MODES = ["memory", "disk"]


def buffer(mode: str, tmp_path: Path, **options: object) -> TrajectoryReplayBuffer:
    if mode == "disk":
        options = {"auto_save": True, "auto_save_path": str(tmp_path / "auto"), **options}
    return TrajectoryReplayBuffer(**options)  # type: ignore[arg-type]


def test_the_constructor_has_rlinfs_parameters_and_defaults() -> None:
    parameters = inspect.signature(TrajectoryReplayBuffer).parameters
    positional = {
        name: p.default for name, p in parameters.items() if p.kind == p.POSITIONAL_OR_KEYWORD
    }
    assert positional == {
        "seed": 1234, "enable_cache": True, "cache_size": 5, "sample_window_size": 100,
        "auto_save": False, "auto_save_path": "", "trajectory_format": "pt",
    }


def test_trajectory_has_rlinfs_fields() -> None:
    names = list(inspect.signature(Trajectory).parameters)
    assert names[:2] == ["max_episode_length", "model_weights_id"]
    assert {"actions", "intervene_flags", "rewards", "terminations", "truncations", "dones",
            "prev_logprobs", "prev_values", "forward_inputs", "curr_obs", "next_obs"} <= set(names)


@pytest.mark.parametrize("mode", MODES)
def test_each_added_trajectory_gets_the_next_id_and_counts_its_rows(
    mode: str, tmp_path: Path
) -> None:
    rb = buffer(mode, tmp_path)
    rb.add_trajectories([trajectory(0, 3, 2), trajectory(1, 4, 5)])
    assert (len(rb), rb.size, rb.total_samples) == (2, 2, 26)
    assert rb.get_stats() == {"num_trajectories": 2, "total_samples": 26, "cache_size": 2}
    assert (rb.is_ready(2), rb.is_ready(3)) == (True, False)
    # On a thread of its own: a session-scoped browser fixture keeps an event loop running on
    # the main thread for the rest of a whole-suite run.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, rb.is_ready_async(2)).result() is True


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("count", [1, 7, 500])
def test_sample_returns_exactly_n_rows_even_beyond_the_windows_rows(
    mode: str, count: int, tmp_path: Path
) -> None:
    rb = buffer(mode, tmp_path)
    rb.add_trajectories([trajectory(0, 2, 2)])  # 4 rows: RLinf would return 4 for 500
    batch = rb.sample(count)
    assert batch["rewards"].shape == (count,)
    assert batch["curr_obs"]["state"].shape == (count, 3)
    assert_consistent(batch)


def test_sample_keys_follow_rlinfs_flattening_order(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer()
    rb.add_trajectories([trajectory(0)])
    assert list(rb.sample(2)) == ["actions", "rewards", "dones", "prev_logprobs", "curr_obs",
                                  "next_obs"]


@pytest.mark.parametrize("mode", MODES)
def test_samples_come_only_from_the_newest_window_of_trajectories(
    mode: str, tmp_path: Path
) -> None:
    rb = buffer(mode, tmp_path, sample_window_size=2, cache_size=1)
    rb.add_trajectories([trajectory(i) for i in range(5)])
    assert set(sampled_ids(rb.sample(400))) == {3, 4}


@pytest.mark.parametrize("mode", MODES)
def test_a_window_of_zero_samples_every_trajectory(mode: str, tmp_path: Path) -> None:
    rb = buffer(mode, tmp_path, sample_window_size=0, cache_size=2)
    rb.add_trajectories([trajectory(i) for i in range(6)])
    rb.add_trajectories([trajectory(6)])
    assert set(sampled_ids(rb.sample(2000))) == set(range(7))


def test_trajectories_are_drawn_in_proportion_to_their_rows(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(sample_window_size=0, seed=5)
    rb.add_trajectories([trajectory(0, 1, 1), trajectory(1, 3, 1), trajectory(2, 2, 3)])  # 1, 3, 6
    counts = Counter(sampled_ids(rb.sample(100_000)))
    frequency = [counts[i] / 100_000 for i in range(3)]
    assert frequency == pytest.approx([0.1, 0.3, 0.6], abs=0.01)  # std ~0.0015


def test_sampling_empty_is_rlinfs_runtime_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="Cannot sample from an empty buffer"):
        TrajectoryReplayBuffer().sample(3)


@pytest.mark.parametrize(("count", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError)])
def test_sample_needs_a_positive_int(count: object, error: type[Exception]) -> None:
    rb = TrajectoryReplayBuffer()
    rb.add_trajectories([trajectory(0)])
    with pytest.raises(error, match="num_chunks"):
        rb.sample(count)  # type: ignore[arg-type]


def test_the_same_seed_gives_the_same_samples_and_the_global_rngs_are_untouched() -> None:
    np.random.seed(7)
    expected_numpy = np.random.get_state()[1].copy()
    batches = []
    for _ in range(2):
        rb = TrajectoryReplayBuffer(seed=99)
        rb.add_trajectories([trajectory(i) for i in range(3)])
        batches.append(rb.sample(50)["rewards"])
    assert torch.equal(*batches)
    assert np.array_equal(np.random.get_state()[1], expected_numpy)


def test_seed_none_draws_a_seed_that_is_recorded(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(seed=None, auto_save=True, auto_save_path=str(tmp_path))
    rb.add_trajectories([trajectory(0)])
    first = rb.sample(20)["rewards"]
    rb.flush()
    assert isinstance(rb.seed, int)
    assert json.loads((tmp_path / "metadata.json").read_text())["seed"] == rb.seed
    again = TrajectoryReplayBuffer(seed=rb.seed)
    again.add_trajectories([trajectory(0)])
    assert torch.equal(again.sample(20)["rewards"], first)


def test_enable_cache_false_works_without_auto_save() -> None:
    rb = TrajectoryReplayBuffer(enable_cache=False, sample_window_size=3)
    rb.add_trajectories([trajectory(i) for i in range(4)])
    assert set(sampled_ids(rb.sample(300))) == {1, 2, 3}


def test_enable_cache_false_with_auto_save_reads_every_row_from_disk(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(enable_cache=False, auto_save=True, auto_save_path=str(tmp_path))
    rb.add_trajectories([trajectory(i) for i in range(3)])
    batch = rb.sample(200)
    assert rb.get_stats()["cache_size"] == 0
    assert set(sampled_ids(batch)) == {0, 1, 2}
    assert_consistent(batch)


def test_a_small_cache_mixes_cached_and_disk_rows_in_one_sample(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(cache_size=2, auto_save=True, auto_save_path=str(tmp_path))
    rb.add_trajectories([trajectory(i, 4, 3) for i in range(6)])
    batch = rb.sample(3000)
    assert set(sampled_ids(batch)) == set(range(6))
    assert_consistent(batch)
    rows = {int(v) % 1000 for v in batch["rewards"].tolist()}
    assert rows == set(range(12))


def test_memory_mode_holds_the_newest_window_and_forgets_older_trajectories() -> None:
    rb = TrajectoryReplayBuffer(sample_window_size=2)
    for number in range(5):
        rb.add_trajectories([trajectory(number, 2, 2)])
    assert (len(rb), rb.total_samples) == (2, 8)
    assert set(sampled_ids(rb.sample(200))) == {3, 4}


@pytest.mark.parametrize("mode", MODES)
def test_clear_cache_then_more_adds_work(mode: str, tmp_path: Path) -> None:
    rb = buffer(mode, tmp_path, cache_size=2)
    rb.add_trajectories([trajectory(0), trajectory(1)])
    rb.clear_cache()
    rb.add_trajectories([trajectory(2)])
    assert rb.get_stats()["cache_size"] == 1
    expected = {2} if mode == "memory" else {0, 1, 2}  # without auto_save the cache is the data
    assert set(sampled_ids(rb.sample(300))) == expected


def test_clear_keeps_counting_ids_and_removes_the_files(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    rb.add_trajectories([trajectory(0), trajectory(1)])
    rb.clear()
    assert (len(rb), rb.total_samples) == (0, 0)
    rb.add_trajectories([trajectory(2)])
    rb.flush()
    index = json.loads((tmp_path / "trajectory_index.json").read_text())
    assert index["trajectory_id_list"] == [2]
    assert sorted(p.name for p in tmp_path.glob("trajectory_*.pt")) == ["trajectory_2_w.pt"]
    assert set(sampled_ids(rb.sample(50))) == {2}


def test_spec_is_a_read_only_mapping_of_the_row_leaves() -> None:
    rb = TrajectoryReplayBuffer()
    assert rb.spec is None
    rb.add_trajectories([trajectory(0)])
    spec = rb.spec
    assert spec is not None
    assert spec[("curr_obs", "state")] == LeafSpec((3,), torch.float32)
    assert spec[("dones",)] == LeafSpec((), torch.bool)
    with pytest.raises(TypeError):
        spec[("x",)] = LeafSpec((), torch.bool)  # type: ignore[index]


def test_a_trajectory_with_other_leaves_is_refused_and_nothing_is_added() -> None:
    rb = TrajectoryReplayBuffer()
    rb.add_trajectories([trajectory(0)])
    other = trajectory(2)
    other.curr_obs["extra"] = torch.zeros(3, 2)
    with pytest.raises(ValueError, match=r"trajectories\[1\]: its rows .* differ from the buff"):
        rb.add_trajectories([trajectory(1), other])
    assert (len(rb), rb.total_samples) == (1, 6)


def test_a_bad_trajectory_late_in_a_list_adds_nothing(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    bad = trajectory(1)
    bad.actions = torch.zeros(5, 2, 2)
    with pytest.raises(ValueError, match=r"trajectories\[1\]\.actions: expected 3 steps"):
        rb.add_trajectories([trajectory(0), bad])
    rb.flush()
    assert (len(rb), list(tmp_path.iterdir())) == (0, [])


def test_trajectories_without_rows_are_skipped_like_rlinf() -> None:
    rb = TrajectoryReplayBuffer()
    rb.add_trajectories([Trajectory(actions=torch.zeros(2, 2)), trajectory(5)])
    rb.add_trajectories([])
    assert len(rb) == 1


@pytest.mark.parametrize("given", [trajectory(0), "trajectories", {"a": 1}])
def test_add_trajectories_needs_a_list(given: object) -> None:
    with pytest.raises(TypeError, match="expected a list of Trajectory"):
        TrajectoryReplayBuffer().add_trajectories(given)  # type: ignore[arg-type]


def test_a_weights_id_that_makes_no_file_name_is_refused() -> None:
    with pytest.raises(ValueError, match="model_weights_id"):
        TrajectoryReplayBuffer().add_trajectories([trajectory(0, weights="../x")])


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"cache_size": -1}, ValueError, "cache_size"),
        ({"sample_window_size": -2}, ValueError, "sample_window_size"),
        ({"trajectory_format": "npz"}, ValueError, "trajectory_format"),
        ({"enable_cache": "yes"}, TypeError, "enable_cache"),
        ({"seed": 1.5}, TypeError, "seed"),
        ({"auto_save": True}, ValueError, "auto_save_path: required"),
    ],
)
def test_constructor_arguments_are_checked(
    options: dict[str, object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        TrajectoryReplayBuffer(**options)  # type: ignore[arg-type]


def test_an_auto_save_path_holding_another_buffer_is_never_written_over(tmp_path: Path) -> None:
    first = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    first.add_trajectories([trajectory(0)])
    first.close()
    second = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    with pytest.raises(FileExistsError, match="already holds a buffer directory"):
        second.add_trajectories([trajectory(1)])
    second.load_checkpoint(tmp_path)
    second.add_trajectories([trajectory(1)])
    second.flush()
    index = json.loads((tmp_path / "trajectory_index.json").read_text())
    assert index["trajectory_id_list"] == [0, 1]


def test_files_are_rlinfs_torch_dicts_read_with_weights_only(tmp_path: Path) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    rb.add_trajectories([trajectory(4, weights="v2")])
    rb.close()
    data = torch.load(tmp_path / "trajectory_0_v2.pt", weights_only=True)
    assert set(data) == {"max_episode_length", "model_weights_id", "actions", "rewards", "dones",
                         "prev_logprobs", "forward_inputs", "curr_obs", "next_obs"}
    assert data["dones"].shape == (4, 2)  # as given, epoch row included
    assert json.loads((tmp_path / "metadata.json").read_text()) == {
        "trajectory_format": "pt", "size": 1, "total_samples": 6, "trajectory_counter": 1,
        "seed": 1234}


@pytest.mark.parametrize("cache_size", [0, 5])
def test_changing_the_callers_tensors_after_add_changes_neither_its_file_nor_its_samples(
    cache_size: int, tmp_path: Path
) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path), cache_size=cache_size)
    gate = threading.Event()
    rb.add_trajectories([trajectory(0)])
    rb._store._writer.submit(gate.wait)  # type: ignore[union-attr]  # hold the writer back
    given = trajectory(2)
    rb.add_trajectories([given])
    for tensor in (given.actions, given.rewards, given.prev_logprobs, given.curr_obs["state"],
                   given.next_obs["state"]):
        tensor.add_(7)
    given.dones.logical_not_()
    gate.set()
    rb.flush()
    data = torch.load(tmp_path / "trajectory_1_w.pt", weights_only=True)
    expected = trajectory(2)
    assert torch.equal(data["rewards"], expected.rewards)
    assert torch.equal(data["curr_obs"]["state"], expected.curr_obs["state"])
    assert torch.equal(data["dones"], expected.dones)
    rb.clear_cache()  # rows from the file too, not only the cache
    batch = rb.sample(200)
    assert set(sampled_ids(batch)) == {0, 2}
    assert_consistent(batch)


def test_a_view_of_a_larger_tensor_is_saved_without_the_rest_of_its_storage(
    tmp_path: Path,
) -> None:
    rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path))
    given = trajectory(1)
    wide = torch.rand(3, 2, 10_000)
    given.curr_obs["extra"] = wide[:, :, :1]
    rb.add_trajectories([given])
    rb.close()
    path = tmp_path / "trajectory_0_w.pt"
    assert path.stat().st_size < wide.nbytes // 10
    data = torch.load(path, weights_only=True)
    assert torch.equal(data["curr_obs"]["extra"], wide[:, :, :1])


def test_a_process_ending_without_close_leaves_every_queued_trajectory_on_disk(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    script = (
        "import sys; from bufcore import TrajectoryReplayBuffer;"
        "from tests.buffers.rlinf.rlinf_data import trajectory;"
        "rb = TrajectoryReplayBuffer(auto_save=True, auto_save_path=sys.argv[1]);"
        "[rb.add_trajectories([trajectory(i, 40, 20)]) for i in range(30)]"
    )
    root = Path(__file__).parents[3]
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, cwd=root)
    loaded = TrajectoryReplayBuffer(cache_size=0, sample_window_size=0)
    loaded.load_checkpoint(tmp_path)
    assert len(loaded) == 30
    assert set(sampled_ids(loaded.sample(5000))) == set(range(30))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
def test_trajectories_on_any_device_are_stored_and_sampled_on_the_cpu(
    mode: str, device: str, tmp_path: Path
) -> None:
    rb = buffer(mode, tmp_path, enable_cache=False)
    original = trajectory(3)
    on_device = Trajectory(**{
        name: value.to(device) if isinstance(value, torch.Tensor) else value
        for name, value in vars(original).items()
    })
    on_device.curr_obs = {"state": original.curr_obs["state"].to(device)}
    on_device.next_obs = {"state": original.next_obs["state"].to(device)}
    rb.add_trajectories([on_device])
    batch = rb.sample(40)
    assert batch["rewards"].device == torch.device("cpu")
    assert_consistent(batch)

"""TrajectoryDictBuffer: the read-only expert buffer (REFERENCE §2)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bufcore.buffers.base import load_buffer
from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.errors import CorruptCheckpointError
from tests.buffers.test_base import expert_buffer, rewrite

DRAWS = 40_000


def within(observed: int, probability: float, draws: int) -> bool:
    mean = draws * probability
    sigma = (draws * probability * (1 - probability)) ** 0.5
    return abs(observed - mean) <= 5 * sigma + 1e-9


# ------------------------------------------------------------------------ expert helpers
def episode(first: int, length: int, motion: int, **extra: Any) -> dict[str, Any]:
    """Rows whose observation is their global row number (``first + i``)."""
    rows = np.arange(first, first + length)
    return {
        "observation": {"state": rows[:, None].astype(np.float32)},
        "motion_id": np.full((length, 1), motion),
        **extra,
    }


def expert(lengths: list[int], **options: Any) -> TrajectoryDictBuffer:
    firsts = np.cumsum([0, *lengths[:-1]])
    episodes = [
        episode(int(f), n, 10 + i) for i, (f, n) in enumerate(zip(firsts, lengths, strict=True))
    ]
    return TrajectoryDictBuffer(episodes, seed=0, **options)


def windows(batch: dict[str, Any], seq: int, key: str = "observation") -> torch.Tensor:
    return batch[key]["state"].view(-1, seq)


# -------------------------------------------------------------- expert: construction
def test_episodes_of_lengths_5_3_10_give_the_reference_index() -> None:
    buffer = expert([5, 3, 10])
    assert buffer.start_idx.tolist() == [[0], [5], [8]]
    assert buffer.stop_idx.tolist() == [[4], [7], [17]]
    assert buffer.lengths.tolist() == [5, 3, 10]
    assert torch.allclose(buffer.priorities, torch.full((3,), 1 / 3))
    assert len(buffer) == buffer.capacity == 18
    assert buffer.motion_ids == [10, 11, 12]


def test_a_missing_end_key_is_added_as_a_column_true_on_each_last_row() -> None:
    storage = expert([2, 3]).storage
    assert storage["done"][:, 0].tolist() == [False, True, False, False, True]


def test_an_end_column_not_true_on_its_last_row_does_not_wrap_into_the_first_episode() -> None:
    done = np.array([[0], [1], [0], [0]], dtype=bool)
    buffer = TrajectoryDictBuffer([episode(0, 4, 7, done=done)], seed=0)
    assert buffer.start_idx.tolist() == [[0], [2]]
    assert buffer.lengths.tolist() == [2, 2]
    assert buffer.motion_ids == [7, 7]


def test_a_nested_tuple_end_key_is_read_at_its_depth() -> None:
    flags = {"done": np.array([[0], [0], [1]], dtype=bool)}
    episodes = [episode(0, 3, 0, info=flags), episode(3, 3, 1, info=flags)]
    buffer = TrajectoryDictBuffer(episodes, end_key=("info", "done"), seed=0)
    assert buffer.lengths.tolist() == [3, 3]
    assert "done" not in buffer.storage


@pytest.mark.parametrize("option", ["output_key_t", "output_key_tp1"])
def test_an_output_key_the_episodes_lack_is_refused_at_construction(option: str) -> None:
    with pytest.raises(KeyError, match=option):
        expert([3, 4], **{option: ["action"]})


def test_no_episodes_are_refused() -> None:
    with pytest.raises(ValueError, match="episodes: expected a non-empty list"):
        TrajectoryDictBuffer([])


def test_an_episode_without_motion_id_is_refused() -> None:
    bad = episode(0, 3, 0)
    del bad["motion_id"]
    with pytest.raises(ValueError, match=r"episodes\[0\]: motion_id_key \['motion_id'\]"):
        TrajectoryDictBuffer([bad])


def test_episodes_with_different_keys_are_refused() -> None:
    with pytest.raises(ValueError, match=r"episodes\[1\]: keys"):
        TrajectoryDictBuffer([episode(0, 3, 0), episode(3, 3, 1, extra=np.zeros((3, 1)))])


# ------------------------------------------------------------------- expert: sampling
def test_samples_are_slice_major_windows_inside_one_episode_with_next_rows() -> None:
    buffer = expert([5, 3, 10], seq_length=2)
    batch = buffer.sample(64)
    rows = windows(batch, 2)
    assert batch["observation"]["state"].shape == (64, 1)
    assert torch.equal(rows[:, 1], rows[:, 0] + 1)
    assert torch.equal(windows(batch["next"], 2), rows + 1)
    episode_of = torch.bucketize(rows, torch.tensor([4.5, 7.5]))
    assert torch.equal(torch.bucketize(rows + 1, torch.tensor([4.5, 7.5])), episode_of)


def test_the_last_valid_window_is_reachable() -> None:
    buffer = expert([6], seq_length=4)
    starts = set(windows(buffer.sample(400), 4)[:, 0].tolist())
    assert starts == {0.0, 1.0}


def test_without_next_an_episode_exactly_one_window_long_is_the_only_window() -> None:
    buffer = expert([5, 2], seq_length=5, output_key_tp1=[])
    batch = buffer.sample(50)
    assert "next" not in batch
    assert set(map(tuple, windows(batch, 5).tolist())) == {(0.0, 1.0, 2.0, 3.0, 4.0)}


@pytest.mark.parametrize(
    ("batch_size", "message"),
    [(2, "must be bigger than the sequence length"), (10, "must be divisible")],
)
def test_the_reference_batch_size_checks_apply(batch_size: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expert([5, 3], seq_length=4).sample(batch_size)


def test_no_episode_long_enough_raises_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"length >= 5 to sample 2 slices.*lengths 2\.\.3"):
        expert([2, 3]).sample(8, seq_length=4)


def test_priorities_one_three_zero_sample_episodes_in_ratio_one_to_three() -> None:
    buffer = expert([4, 4, 4], seq_length=1)
    buffer.update_priorities(torch.tensor([1.0, 3.0, 0.0]), torch.arange(3))
    rows = buffer.sample(DRAWS)["observation"]["state"][:, 0]
    counts = torch.bucketize(rows, torch.tensor([3.5, 7.5])).bincount(minlength=3)
    assert within(int(counts[0]), 0.25, DRAWS)
    assert within(int(counts[1]), 0.75, DRAWS)
    assert int(counts[2]) == 0


def test_window_weighting_makes_every_valid_window_equally_likely() -> None:
    buffer = expert([3, 9], seq_length=2, weighting="window")
    starts = Counter(windows(buffer.sample(2 * DRAWS), 2)[:, 0].tolist())
    valid = [0.0, *[float(t) for t in range(3, 10)]]
    assert sorted(starts) == valid
    assert all(within(starts[t], 1 / len(valid), DRAWS) for t in valid)


# ----------------------------------------------------------------- expert: priorities
def test_a_partial_update_changes_the_given_entries_and_renormalises() -> None:
    buffer = expert([3, 3, 3, 3])
    buffer.update_priorities([2.0], [1])
    expected = torch.tensor([0.25, 2.0, 0.25, 0.25]) / 2.75
    assert torch.allclose(buffer.priorities, expected)


def test_a_repeated_index_takes_its_last_value() -> None:
    buffer = expert([3, 3])
    buffer.update_priorities([5.0, 1.0], [0, 0])
    assert torch.allclose(buffer.priorities, torch.tensor([1 / 1.5, 0.5 / 1.5]))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([float("nan"), 1.0], "finite values >= 0"),
        ([float("inf"), 1.0], "finite values >= 0"),
        ([-1.0, 1.0], "finite values >= 0"),
        ([0.0, 0.0], "every priority zero"),
        ([1.0], "one value per index"),
    ],
)
def test_bad_priorities_are_refused_and_change_nothing(values: list[float], message: str) -> None:
    buffer = expert([3, 3])
    before = buffer.priorities.clone()
    with pytest.raises(ValueError, match=message):
        buffer.update_priorities(values, [0, 1])
    assert torch.equal(buffer.priorities, before)


def test_an_update_leaving_no_mass_on_long_enough_trajectories_is_refused() -> None:
    buffer = expert([1, 5], seq_length=2)
    with pytest.raises(ValueError, match="zero mass to every trajectory with length >= 3"):
        buffer.update_priorities([1.0, 0.0], [0, 1])


def test_an_index_outside_the_trajectories_is_refused() -> None:
    with pytest.raises(IndexError, match=r"idxs: expected indices in \[0, 2\)"):
        expert([3, 3]).update_priorities([1.0], [2])


# ---------------------------------------------------------------- expert: persistence
def test_the_expert_buffer_round_trips_priorities_motion_ids_and_its_sample_stream(
    tmp_path: Path,
) -> None:
    buffer = expert([4, 6, 5], seq_length=2, weighting="window")
    buffer.update_priorities([1.0, 0.0, 2.0], [0, 1, 2])
    buffer.save(tmp_path / "expert")
    loaded = load_buffer(tmp_path / "expert")
    assert isinstance(loaded, TrajectoryDictBuffer)
    assert torch.equal(loaded.priorities, buffer.priorities)
    assert loaded.motion_ids == buffer.motion_ids
    assert loaded.weighting == "window"
    assert torch.equal(
        loaded.sample(16)["observation"]["state"], buffer.sample(16)["observation"]["state"]
    )




# ------------------------------------------- expert: priorities as they will be stored
@pytest.mark.parametrize(
    "values",
    [
        torch.tensor([1e308, 1e308, 1e308], dtype=torch.float64),
        np.array([1e308, 1e308, 1e308]),
        [1e308, 1e308, 1e308],
    ],
    ids=["torch-float64", "numpy-float64", "python-floats"],
)
def test_priorities_above_float32_max_are_refused_as_such_and_change_nothing(values: Any) -> None:
    buffer = expert([3, 3, 3])
    before = buffer.priorities.clone()
    with pytest.raises(ValueError, match=r"priorities\[0\]: 1e\+308 exceeds float32 max"):
        buffer.update_priorities(values, [0, 1, 2])
    assert torch.equal(buffer.priorities, before)


def test_a_positive_priority_that_rounds_to_zero_in_float32_is_refused() -> None:
    buffer = expert([3, 3])
    before = buffer.priorities.clone()
    with pytest.raises(ValueError, match=r"priorities\[0\]: 1e-300 is positive but rounds to 0"):
        buffer.update_priorities(torch.tensor([1e-300, 1.0], dtype=torch.float64), [0, 1])
    assert torch.equal(buffer.priorities, before)


def test_an_update_whose_only_samplable_priority_normalises_to_float32_zero_is_refused() -> None:
    # Only trajectory 0 is long enough for a window of 2 (+ next); 1e-40 / 3e38 is 0 in float32.
    buffer = expert([5, 1], seq_length=2)
    before = buffer.priorities.clone()
    with pytest.raises(ValueError, match=r"store the priority of trajectories \[0\] as 0"):
        buffer.update_priorities([1e-40, 3e38], [0, 1])
    assert torch.equal(buffer.priorities, before)
    assert buffer.sample(2)["observation"]["state"].shape == (2, 1)


@pytest.mark.parametrize(
    "empty",
    [[], np.array([], dtype=np.float64), torch.empty(0)],
    ids=["list", "numpy", "torch"],
)
def test_an_empty_update_changes_nothing(empty: Any) -> None:
    buffer = expert([3, 3])
    buffer.update_priorities([3.0], [0])
    before = buffer.priorities.clone()
    buffer.update_priorities(empty, empty)
    assert torch.equal(buffer.priorities, before)


@pytest.mark.parametrize(
    "idxs",
    [
        np.array([1], dtype=np.uint64),
        torch.tensor([1], dtype=torch.uint64),
        np.array([1], dtype=np.uint8),
    ],
    ids=["numpy-uint64", "torch-uint64", "numpy-uint8"],
)
def test_unsigned_indices_update_like_int64(idxs: Any) -> None:
    buffer, twin = expert([3, 3]), expert([3, 3])
    buffer.update_priorities([3.0], idxs)
    twin.update_priorities([3.0], [1])
    assert torch.equal(buffer.priorities, twin.priorities)


def test_a_uint64_index_past_int64_max_is_refused_quoting_its_value() -> None:
    buffer = expert([3, 3])
    before = buffer.priorities.clone()
    with pytest.raises(IndexError, match=r"got 18446744073709551615 at position 0"):
        buffer.update_priorities([1.0], np.array([2**64 - 1], dtype=np.uint64))
    assert torch.equal(buffer.priorities, before)


@pytest.mark.parametrize(
    "values",
    [torch.tensor([1 + 2j, 1.0]), np.array([1 + 2j, 1.0]), [True, False]],
    ids=["torch-complex", "numpy-complex", "bools"],
)
def test_complex_or_bool_priorities_are_refused_and_change_nothing(values: Any) -> None:
    buffer = expert([3, 3])
    before = buffer.priorities.clone()
    with pytest.raises(TypeError, match="priorities: expected real numbers"):
        buffer.update_priorities(values, [0, 1])
    assert torch.equal(buffer.priorities, before)


@pytest.mark.parametrize(
    ("saved", "match"),
    [
        ([1e300, 0.5, 0.5], r"exceeds float32 max"),
        ([1e-300, 0.5, 0.5], r"rounds to 0 in float32"),
    ],
)
def test_saved_priorities_outside_float32_are_a_corrupt_state(
    tmp_path: Path, saved: list[float], match: str
) -> None:
    path = expert_buffer(tmp_path / "expert")
    rewrite(path, "state.json", {"priorities": saved})
    with pytest.raises(CorruptCheckpointError, match=match):
        load_buffer(path)


# ------------------------------------------------ expert: failed calls draw nothing
@pytest.mark.parametrize("weighting", ["trajectory", "window"])
@pytest.mark.parametrize("lengths", [[2], [2, 2], [3, 1, 2]])
def test_a_sample_with_no_window_long_enough_leaves_the_generator_unchanged(
    weighting: str, lengths: list[int]
) -> None:
    buffer = expert(lengths, weighting=weighting)
    twin = expert(lengths, weighting=weighting)
    before = buffer._generator.get_state()
    with pytest.raises(ValueError, match="No trajectories with length"):
        buffer.sample(4, seq_length=4)
    assert torch.equal(buffer._generator.get_state(), before)
    state = buffer.sample(2)["observation"]["state"]
    assert torch.equal(state, twin.sample(2)["observation"]["state"])


# ------------------------------------------------------ expert: integer arguments
def test_numpy_integers_are_accepted_for_every_integer_argument() -> None:
    buffer = TrajectoryDictBuffer(
        [episode(0, 6, 10)], seq_length=np.int32(2), seed=np.uint64(3)
    )
    twin = TrajectoryDictBuffer([episode(0, 6, 10)], seq_length=2, seed=3)
    assert torch.equal(
        buffer.sample(np.int64(4), seq_length=np.int16(2))["observation"]["state"],
        twin.sample(4, seq_length=2)["observation"]["state"],
    )


@pytest.mark.parametrize("argument", ["seq_length", "seed"])
def test_a_bool_is_refused_for_an_integer_argument_of_the_constructor(argument: str) -> None:
    with pytest.raises(TypeError, match=argument):
        TrajectoryDictBuffer([episode(0, 6, 10)], **{argument: True})


@pytest.mark.parametrize("argument", ["batch_size", "seq_length"])
def test_a_bool_is_refused_for_an_integer_argument_of_sample(argument: str) -> None:
    buffer = expert([4])
    before = buffer._generator.get_state()
    with pytest.raises(TypeError, match=argument):
        buffer.sample(**{"batch_size": 2, argument: np.bool_(True)})
    assert torch.equal(buffer._generator.get_state(), before)


def test_an_unusable_device_is_refused_at_construction_naming_it() -> None:
    device = f"cuda:{torch.cuda.device_count() + 7}"
    with pytest.raises(ValueError, match=rf"device: device '{device}' is not usable"):
        TrajectoryDictBuffer([episode(0, 6, 10)], device=device)


@pytest.mark.parametrize("order", [">", "<"])
def test_priorities_are_read_in_either_byte_order(order: str) -> None:
    buffer, twin = expert([3, 3]), expert([3, 3])
    buffer.update_priorities(np.array([3.0, 1.0], dtype=f"{order}f8"), [0, 1])
    twin.update_priorities([3.0, 1.0], [0, 1])
    assert torch.equal(buffer.priorities, twin.priorities)


def test_priorities_that_require_grad_are_stored_without_a_graph() -> None:
    buffer = expert([3, 3])
    buffer.update_priorities(torch.tensor([3.0, 1.0], requires_grad=True), [0, 1])
    assert not buffer.priorities.requires_grad

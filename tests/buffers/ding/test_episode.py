"""EpisodeReplayBuffer: whole episodes in, episodes or fixed-length chunks out."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from bufcore import EpisodeReplayBuffer

P_VALUE = 1e-6


def episode(number: int, length: int) -> list[dict[str, Any]]:
    return [{"ep": number, "t": t, "obs": torch.tensor([float(t)])} for t in range(length)]


def buffer_of(lengths: list[int], size: int | None = None, **options: Any) -> EpisodeReplayBuffer:
    buffer = EpisodeReplayBuffer(replay_buffer_size=size or len(lengths), seed=0, **options)
    buffer.push([episode(number, length) for number, length in enumerate(lengths)], 0)
    return buffer


def test_each_pushed_episode_is_one_item() -> None:
    buffer = buffer_of([3, 1, 4])
    assert buffer.count() == 3 and buffer.episode_len == [3, 1, 4]


def test_sample_returns_whole_episodes() -> None:
    batch = buffer_of([3, 1, 4]).sample(3, 0)
    assert batch is not None
    assert sorted(len(ep) for ep in batch) == [1, 3, 4]
    assert all(len({t["ep"] for t in ep}) == 1 for ep in batch)


@pytest.mark.parametrize("length", [1, 2, 3])
def test_chunks_have_the_asked_length_and_consecutive_steps_of_one_episode(length: int) -> None:
    chunks = buffer_of([3, 5, 7]).sample_chunks(50, length, 0)
    assert chunks is not None and len(chunks) == 50
    for chunk in chunks:
        assert len(chunk) == length
        assert len({t["ep"] for t in chunk}) == 1
        assert [t["t"] for t in chunk] == list(range(chunk[0]["t"], chunk[0]["t"] + length))


def test_an_episode_shorter_than_the_chunk_is_never_chosen() -> None:
    chunks = buffer_of([2, 6, 1]).sample_chunks(200, 3, 0)
    assert chunks is not None and {chunk[0]["ep"] for chunk in chunks} == {1}


def test_the_last_chunk_of_an_episode_can_be_drawn() -> None:
    chunks = buffer_of([4]).sample_chunks(200, 3, 0)
    assert chunks is not None and {chunk[0]["t"] for chunk in chunks} == {0, 1}


def test_no_episode_long_enough_refuses_with_none() -> None:
    buffer = buffer_of([2, 3])
    assert buffer.sample_chunks(1, 4, 0) is None
    assert "longest has 3" in buffer.stats()["last_refusal"]


def test_an_empty_buffer_refuses_chunks_with_none() -> None:
    assert EpisodeReplayBuffer(replay_buffer_size=2).sample_chunks(1, 1, 0) is None


def test_zero_chunks_gives_an_empty_list() -> None:
    assert buffer_of([2]).sample_chunks(0, 5, 0) == []


def test_every_valid_chunk_is_equally_likely_by_default() -> None:
    # Lengths 3 and 6 with chunks of 2: 2 + 5 starts, each 1/7.
    chunks = buffer_of([3, 6]).sample_chunks(70_000, 2, 0)
    assert chunks is not None
    keys = [(chunk[0]["ep"], chunk[0]["t"]) for chunk in chunks]
    starts = [(0, 0), (0, 1), *((1, t) for t in range(5))]
    counts = np.array([keys.count(start) for start in starts])
    assert chisquare(counts).pvalue > P_VALUE


def test_trajectory_weighting_picks_long_enough_episodes_equally() -> None:
    chunks = buffer_of([3, 9]).sample_chunks(20_000, 2, 0, weighting="trajectory")
    assert chunks is not None
    counts = np.bincount([chunk[0]["ep"] for chunk in chunks], minlength=2)
    assert chisquare(counts).pvalue > P_VALUE


def test_overwritten_episodes_are_gone_from_the_chunks() -> None:
    buffer = buffer_of([4, 4], size=2)
    buffer.push([episode(7, 4)], 0)
    chunks = buffer.sample_chunks(100, 2, 0)
    assert chunks is not None and {chunk[0]["ep"] for chunk in chunks} == {1, 7}


def test_chunks_count_a_use_of_their_episode() -> None:
    buffer = buffer_of([5])
    buffer.sample_chunks(3, 2, 0)
    assert buffer.stats()["use_max"] == 3


def test_chunks_with_deepcopy_are_copies() -> None:
    buffer = buffer_of([3], deepcopy=True)
    first, second = buffer.sample_chunks(1, 3, 0), buffer.sample_chunks(1, 3, 0)
    assert first is not None and second is not None
    assert first[0][0] is not second[0][0] and first[0][0]["obs"] is not second[0][0]["obs"]


def test_a_single_episode_must_be_wrapped_in_a_list() -> None:
    buffer = EpisodeReplayBuffer(replay_buffer_size=2)
    with pytest.raises(TypeError, match=r"push one episode as \[episode\]"):
        buffer.push(episode(0, 3), 0)
    assert buffer.count() == 0


@pytest.mark.parametrize(
    ("data", "error"),
    [([[]], ValueError), ([[1, 2]], TypeError), ({"a": 1}, TypeError), ([3], TypeError)],
)
def test_a_bad_episode_push_raises_and_stores_nothing(data: Any, error: type[Exception]) -> None:
    buffer = buffer_of([2], size=3)
    with pytest.raises(error, match="data"):
        buffer.push(data, 0)
    assert buffer.count() == 1


def test_packed_storage_is_refused() -> None:
    with pytest.raises(ValueError, match="storage"):
        EpisodeReplayBuffer(storage="packed")


def test_meta_data_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="enable_track_used_data"):
        EpisodeReplayBuffer(enable_track_used_data=True)


@pytest.mark.parametrize(
    ("size", "length", "weighting", "error"),
    [(1, 0, "window", ValueError), (1, 2.0, "window", TypeError), (1, 2, "uniform", ValueError)],
)
def test_bad_chunk_arguments_are_refused_naming_them(
    size: int, length: Any, weighting: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match=r"chunk_length|weighting"):
        buffer_of([3]).sample_chunks(size, length, 0, weighting=weighting)

"""Expert episodes laid end to end: one spec for all, each copied once, each ending a trajectory."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from bufcore.buffers.episode_rows import EpisodeRows
from bufcore.storage.ring import RingStorage

CPU = torch.device("cpu")


def rows(episodes: list[dict[str, Any]]) -> EpisodeRows:
    return EpisodeRows(episodes, end_path=("done",), motion_path=("motion_id",))


def episode(length: int, motion: int, width: int = 2, dtype: Any = np.float32) -> dict[str, Any]:
    return {
        "observation": np.full((length, width), motion, dtype=dtype),
        "motion_id": np.full(length, motion),
    }


def test_episodes_are_laid_end_to_end_each_ending_on_its_last_row() -> None:
    source = rows([episode(2, 7), episode(3, 8)])
    storage = RingStorage(source.count, device=CPU)
    storage.restore(source, cursor=0, is_full=True)
    assert storage.views[("motion_id",)].tolist() == [7, 7, 8, 8, 8]
    assert storage.views[("done",)][:, 0].tolist() == [False, True, False, False, True]


def test_the_first_episode_fixes_the_dtype_and_later_ones_are_cast_when_values_fit() -> None:
    source = rows([episode(2, 1), episode(2, 2, dtype=np.float64)])
    assert source.spec[("observation",)].dtype == torch.float32
    storage = RingStorage(source.count, device=CPU)
    storage.restore(source, cursor=0, is_full=True)
    assert storage.views[("observation",)][:, 0].tolist() == [1.0, 1.0, 2.0, 2.0]


def test_a_float_motion_id_after_integer_ones_is_refused_naming_the_episode_and_key() -> None:
    second = {**episode(2, 2), "motion_id": np.full(2, 2.0)}
    with pytest.raises(
        TypeError, match=r"^episodes\[1\]\['motion_id'\]: dtype float64 cannot be cast safely"
    ):
        rows([episode(2, 1), second])


def test_values_that_do_not_fit_the_first_episodes_dtype_are_refused_naming_the_file() -> None:
    first = {**episode(2, 1), "act": np.zeros((2, 1), np.int8)}
    second = {**episode(2, 2), "act": np.array([[0], [300]])}
    with pytest.raises(ValueError, match=r"^b\.h5: ep_0\['act'\]: values in \[0, 300\] .* int8"):
        EpisodeRows(
            [first, second],
            end_path=("done",),
            motion_path=("motion_id",),
            names=["a.h5: ep_0", "b.h5: ep_0"],
        )


@pytest.mark.parametrize("end_shape", [(), (1,)])
def test_an_episode_without_end_flags_takes_the_end_column_of_the_others(
    end_shape: tuple[int, ...],
) -> None:
    given = {**episode(2, 1), "done": np.zeros((2, *end_shape), bool)}
    source = rows([episode(3, 0), given, episode(1, 2)])
    assert source.spec[("done",)].shape == end_shape
    storage = RingStorage(source.count, device=CPU)
    storage.restore(source, cursor=0, is_full=True)
    flags = storage.views[("done",)].reshape(-1).tolist()
    assert flags == [False, False, True, False, True, True]


def test_big_endian_episodes_are_stored_with_their_values() -> None:
    second = {**episode(1, 4), "motion_id": np.full(1, 4, ">i8")}
    source = rows([episode(2, 3, dtype=">f4"), second])
    storage = RingStorage(source.count, device=CPU)
    storage.restore(source, cursor=0, is_full=True)
    assert storage.views[("observation",)][:, 0].tolist() == [3.0, 3.0, 4.0]
    assert storage.views[("motion_id",)].tolist() == [3, 3, 4]


def test_a_trailing_shape_that_differs_names_the_episode_and_key() -> None:
    with pytest.raises(
        ValueError, match=r"episodes\[1\]\['observation'\]: expected trailing shape \[2\]"
    ):
        rows([episode(2, 1), episode(2, 2, width=3)])


def test_end_columns_of_different_shapes_are_refused_naming_the_episode() -> None:
    first = {**episode(2, 1), "done": np.zeros(2, bool)}
    second = {**episode(2, 2), "done": np.zeros((2, 1), bool)}
    with pytest.raises(ValueError, match=r"episodes\[1\]\['done'\]: expected trailing shape \[\]"):
        rows([first, second])


def test_a_leaf_that_cannot_be_stored_names_the_episode_and_key() -> None:
    bad = {**episode(2, 1), "extra": torch.zeros(2, dtype=torch.complex64)}
    with pytest.raises(TypeError, match=r"episodes\[0\]\['extra'\]: dtype complex64"):
        rows([bad])


def test_the_callers_end_column_is_not_modified() -> None:
    done = np.zeros((3, 1), bool)
    source = rows([{**episode(3, 1), "done": done}])
    storage = RingStorage(source.count, device=CPU)
    storage.restore(source, cursor=0, is_full=True)
    assert not done.any()
    assert storage.views[("done",)][-1, 0].item() is True


def test_given_names_label_every_error() -> None:
    with pytest.raises(ValueError, match=r"b\.h5: ep_0\['observation'\]: expected trailing"):
        EpisodeRows(
            [episode(2, 1), episode(2, 2, width=3)],
            end_path=("done",),
            motion_path=("motion_id",),
            names=["a.h5: ep_0", "b.h5: ep_0"],
        )


@pytest.mark.parametrize(("episodes", "error"), [({"a": 1}, TypeError), ("ab", TypeError),
                                                 ([], ValueError)])
def test_episodes_must_be_a_non_empty_list(episodes: Any, error: type) -> None:
    with pytest.raises(error, match="episodes: expected"):
        rows(episodes)


@pytest.mark.parametrize("block", [1, 2, 3, 4, 9])
def test_episodes_read_in_blocks_of_rows_equal_a_whole_read(block: int) -> None:
    source = rows([episode(3, 0), episode(1, 1), episode(4, 2)])

    def empty() -> dict[Any, torch.Tensor]:
        return {
            path: torch.full((source.count, *leaf.shape), 7).to(leaf.dtype)
            for path, leaf in source.spec.items()
        }

    whole, blocks = empty(), empty()
    source.read_into(whole)
    for start in range(0, source.count, block):
        source.read_into({p: d[start : start + block] for p, d in blocks.items()}, start=start)
    for path in whole:
        assert torch.equal(whole[path], blocks[path]), path
    assert np.flatnonzero(whole[("done",)].numpy()[:, 0]).tolist() == [2, 3, 7]

"""Episode-based HDF5 files and motion lists (DESIGN §3 "Episode files", REFERENCE §5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

from bufcore.persist.episodes import (
    load_episode_based_h5,
    read_motion_list,
    save_episodes,
    write_motion_list,
)


def episode(length: int, motion: int = 0) -> dict[str, Any]:
    steps = np.arange(length)
    return {
        "observation": {
            "state": np.stack([steps, steps + 0.5], 1).astype(np.float32),
            "privileged": {"height": (steps * 2.0)[:, None]},
        },
        "action": torch.arange(length * 3, dtype=torch.float32).reshape(length, 3),
        "motion_id": np.full(length, motion, dtype=np.int64),
        "truncated": steps == length - 1,
        "count": torch.arange(length, dtype=torch.int32),
    }


def assert_same_episode(loaded: dict[str, Any], written: dict[str, Any]) -> None:
    assert loaded.keys() == written.keys()
    for key, value in written.items():
        if isinstance(value, dict):
            assert_same_episode(loaded[key], value)
        else:
            expected = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
            assert isinstance(loaded[key], np.ndarray)
            assert loaded[key].dtype == expected.dtype, key
            np.testing.assert_array_equal(loaded[key], expected)


def write_raw(path: Path, episodes: list[dict[str, Any]], num_episodes: Any = None) -> Path:
    """Write a file with plain h5py, the way humenv files are laid out (or not)."""
    with h5py.File(path, "w") as h5:
        if num_episodes is not None:
            h5.attrs["num_episodes"] = num_episodes
        for i, ep in enumerate(episodes):
            group = h5.create_group(f"ep_{i}")
            for key, value in ep.items():
                group[key] = value
    return path


# --------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("lengths", [[1], [1, 3], [4, 2, 7], [5, 1, 1, 9]])
def test_saved_episodes_load_back_equal(tmp_path: Path, lengths: list[int]) -> None:
    episodes = [episode(n, motion=i) for i, n in enumerate(lengths)]
    save_episodes(tmp_path / "motions.h5", episodes)
    loaded = load_episode_based_h5(tmp_path / "motions.h5")
    assert len(loaded) == len(episodes)
    for got, written in zip(loaded, episodes, strict=True):
        assert_same_episode(got, written)


def test_saved_file_has_the_humenv_layout(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3), episode(5)])
    with h5py.File(tmp_path / "m.h5", "r") as h5:
        assert h5.attrs["num_episodes"] == 2
        assert sorted(h5.keys()) == ["ep_0", "ep_1"]
        assert isinstance(h5["ep_1/observation"], h5py.Group)
        assert h5["ep_1/observation/privileged/height"].shape == (5, 1)
        assert h5["ep_0/truncated"].dtype == np.bool_


def test_more_than_ten_episodes_load_in_numeric_order(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [episode(n) for n in range(1, 13)])
    loaded = load_episode_based_h5(tmp_path / "m.h5")
    assert [len(ep["motion_id"]) for ep in loaded] == list(range(1, 13))


def test_list_leaves_are_stored_as_bufcore_converts_them(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [{"a": [1, 2], "b": [[0.5], [1.5]], "c": [True, False]}])
    (loaded,) = load_episode_based_h5(tmp_path / "m.h5")
    assert (loaded["a"].dtype, loaded["b"].dtype, loaded["c"].dtype) == (
        np.int64,
        np.float32,
        np.bool_,
    )
    assert loaded["b"].tolist() == [[0.5], [1.5]]


def test_saving_over_an_existing_file_replaces_it(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3), episode(4)])
    save_episodes(tmp_path / "m.h5", [episode(6)])
    (loaded,) = load_episode_based_h5(tmp_path / "m.h5")
    assert len(loaded["motion_id"]) == 6


def test_saving_leaves_no_temporary_file(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3)])
    assert [p.name for p in tmp_path.iterdir()] == ["m.h5"]


def test_a_failure_while_writing_keeps_the_old_file_and_removes_the_temporary_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3)])

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(h5py.Group, "create_dataset", broken)
    with pytest.raises(OSError, match="disk full"):
        save_episodes(tmp_path / "m.h5", [episode(8)])
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["m.h5"]
    (loaded,) = load_episode_based_h5(tmp_path / "m.h5")
    assert len(loaded["motion_id"]) == 3


# ------------------------------------------------------------------------- keys filter
def test_keys_selects_top_level_keys_with_their_nested_leaves(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3), episode(2)])
    loaded = load_episode_based_h5(tmp_path / "m.h5", keys=["observation", "motion_id"])
    assert [sorted(ep) for ep in loaded] == [["motion_id", "observation"]] * 2
    assert loaded[1]["observation"]["privileged"]["height"].shape == (2, 1)


def test_keys_ignores_inconsistencies_in_keys_not_selected(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "m.h5",
        [{"a": np.zeros(2), "b": np.zeros(5)}, {"a": np.zeros(3)}],
        num_episodes=2,
    )
    assert [len(ep["a"]) for ep in load_episode_based_h5(path, keys=["a"])] == [2, 3]


def test_an_unknown_key_raises_naming_the_file_and_key(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3)])
    with pytest.raises(KeyError, match=r"m\.h5: unknown key 'reward'"):
        load_episode_based_h5(tmp_path / "m.h5", keys=["reward"])


@pytest.mark.parametrize(
    ("keys", "error", "match"),
    [
        ("observation", TypeError, "keys: expected a list of str"),
        ([1], TypeError, "keys: expected a list of str"),
        ([], ValueError, "keys: expected at least one key"),
        (["action", "action"], ValueError, "keys: each key may appear once"),
    ],
)
def test_malformed_keys_are_rejected(
    tmp_path: Path, keys: Any, error: type[Exception], match: str
) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3)])
    with pytest.raises(error, match=match):
        load_episode_based_h5(tmp_path / "m.h5", keys=keys)


# ------------------------------------------------------------------- reading foreign files
def test_a_plain_humenv_file_loads(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "walk.h5",
        [{"observation": np.ones((4, 2)), "motion_id": np.zeros(4, np.int64)}] * 2,
        num_episodes=np.int64(2),
    )
    loaded = load_episode_based_h5(path)
    assert [ep["observation"].shape for ep in loaded] == [(4, 2), (4, 2)]


def test_string_datasets_load_as_str_and_skip_the_length_check(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "m.h5",
        [{"qpos": np.zeros((5, 2)), "file_name": "walk.h5", "tags": np.array([b"a", b"bc"])}],
        num_episodes=1,
    )
    (loaded,) = load_episode_based_h5(path)
    assert loaded["file_name"] == "walk.h5"
    assert isinstance(loaded["file_name"], str)
    assert loaded["tags"].tolist() == ["a", "bc"]
    assert loaded["tags"].dtype.kind == "U"


def test_a_scalar_dataset_loads_without_a_length_check(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "m.h5", [{"qpos": np.zeros((5, 2)), "fps": 30}], num_episodes=1)
    (loaded,) = load_episode_based_h5(path)
    assert loaded["fps"].shape == () and int(loaded["fps"]) == 30


def test_zero_episodes_load_as_an_empty_list(tmp_path: Path) -> None:
    assert load_episode_based_h5(write_raw(tmp_path / "m.h5", [], num_episodes=0)) == []


def test_groups_beyond_num_episodes_are_ignored(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "m.h5", [{"a": np.zeros(2)}, {"a": np.zeros(3)}], num_episodes=1)
    assert [len(ep["a"]) for ep in load_episode_based_h5(path)] == [2]


# --------------------------------------------------------------------- loading errors
def test_a_missing_num_episodes_attribute_raises(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "m.h5", [{"a": np.zeros(2)}])
    with pytest.raises(ValueError, match=r"m\.h5: missing the 'num_episodes' attribute"):
        load_episode_based_h5(path)


@pytest.mark.parametrize("value", [-1, 1.5, "2"])
def test_a_malformed_num_episodes_attribute_raises(tmp_path: Path, value: Any) -> None:
    path = write_raw(tmp_path / "m.h5", [{"a": np.zeros(2)}], num_episodes=value)
    with pytest.raises(ValueError, match=r"m\.h5: attribute 'num_episodes': expected an int"):
        load_episode_based_h5(path)


def test_a_missing_episode_group_raises_naming_it(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "m.h5", [{"a": np.zeros(2)}, {"a": np.zeros(2)}], num_episodes=3)
    with pytest.raises(ValueError, match=r"m\.h5: num_episodes is 3 but group ep_2 is missing"):
        load_episode_based_h5(path)


def test_an_episode_that_is_a_dataset_raises(tmp_path: Path) -> None:
    path = tmp_path / "m.h5"
    with h5py.File(path, "w") as h5:
        h5.attrs["num_episodes"] = 1
        h5["ep_0"] = np.zeros(3)
    with pytest.raises(ValueError, match=r"m\.h5: ep_0 must be a group"):
        load_episode_based_h5(path)


def test_an_episode_lacking_a_nested_key_raises_naming_file_episode_and_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "walk.h5"
    save_episodes(path, [episode(2)] * 4)
    with h5py.File(path, "a") as h5:
        del h5["ep_3/observation/state"]
    with pytest.raises(ValueError, match=r"walk\.h5: ep_3 lacks key \['observation'\]\['state'\]"):
        load_episode_based_h5(path)


def test_an_episode_with_an_extra_key_raises(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "m.h5", [{"a": np.zeros(2)}, {"a": np.zeros(2), "b": np.zeros(2)}], 2
    )
    with pytest.raises(ValueError, match=r"m\.h5: ep_1 has key \['b'\], which ep_0 lacks"):
        load_episode_based_h5(path)


def test_a_selected_key_missing_from_a_later_episode_raises(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "m.h5", [{"a": np.zeros(2)}, {"b": np.zeros(2)}], 2)
    with pytest.raises(ValueError, match=r"m\.h5: ep_1 lacks key \['a'\]"):
        load_episode_based_h5(path, keys=["a"])


def test_leaves_of_different_lengths_raise_naming_the_episode(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "m.h5",
        [{"a": np.zeros(2), "b": np.zeros(2)}, {"a": np.zeros(3), "b": np.zeros(4)}],
        2,
    )
    with pytest.raises(ValueError, match=r"m\.h5: ep_1 has leaves of different lengths"):
        load_episode_based_h5(path)


def test_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.h5"):
        load_episode_based_h5(tmp_path / "nope.h5")


# ---------------------------------------------------------------------- saving errors
BAD_EPISODES = [
    ([], ValueError, r"episodes: expected at least one episode"),
    ({"a": np.zeros(2)}, TypeError, r"episodes: expected a sequence of episode dicts"),
    ([{"a": np.zeros(2)}, [1, 2]], TypeError, r"episodes\[1\]: expected a mapping"),
    ([{}], ValueError, r"episodes\[0\]: an episode needs at least one key"),
    ([{"a": np.zeros(2), "o": {}}], ValueError, r"episodes\[0\]\['o'\]: empty mapping"),
    ([{"a": np.zeros(2), 3: np.zeros(2)}], TypeError, r"episodes\[0\]: keys must be str"),
    ([{"name": np.array(["x", "y"])}], TypeError, r"episodes\[0\]\['name'\]: expected a numeric"),
    ([{"name": "walk"}], TypeError, r"episodes\[0\]\['name'\]"),
    ([{"r": np.float32(1.0)}], ValueError, r"episodes\[0\]\['r'\]: expected a leading time"),
    ([{"r": np.array(1.0)}], ValueError, r"episodes\[0\]\['r'\]: expected a leading time axis"),
    ([{"r": 1.0}], ValueError, r"episodes\[0\]\['r'\]: expected a leading time axis"),
    ([{"r": np.zeros((0, 3))}], ValueError, r"episodes\[0\]\['r'\]: expected at least one time"),
    (
        [{"a": np.zeros(2)}, {"a": np.zeros(3), "o": {"s": np.zeros(4)}}],
        ValueError,
        r"episodes\[1\]: leaves of one episode must share the time axis.*\['o'\]\['s'\] has 4",
    ),
    (
        [episode(2), {k: v for k, v in episode(3).items() if k != "observation"}],
        ValueError,
        r"episodes\[1\] lacks key \['observation'\]\['state'\]",
    ),
    (
        [{"a": np.zeros(2)}, {"a": np.zeros(2), "b": np.zeros(2)}],
        ValueError,
        r"episodes\[1\] has key \['b'\]",
    ),
    ([{"a/b": np.zeros(2)}], ValueError, r"episodes\[0\]\['a/b'\]: key 'a/b' cannot name"),
    ([{".": np.zeros(2)}], ValueError, r"cannot name an HDF5"),
    ([{"a": torch.zeros(2, dtype=torch.bfloat16)}], TypeError, r"episodes\[0\]\['a'\]: torch"),
    ([{"a": torch.zeros(2, dtype=torch.complex64)}], TypeError, r"episodes\[0\]\['a'\]: torch"),
]


@pytest.mark.parametrize(("episodes", "error", "match"), BAD_EPISODES)
def test_invalid_episodes_raise_before_any_file_is_written(
    tmp_path: Path, episodes: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        save_episodes(tmp_path / "m.h5", episodes)
    assert list(tmp_path.iterdir()) == []


def test_invalid_episodes_leave_an_existing_file_untouched(tmp_path: Path) -> None:
    save_episodes(tmp_path / "m.h5", [episode(3)])
    before = (tmp_path / "m.h5").read_bytes()
    with pytest.raises(ValueError, match="lacks key"):
        save_episodes(tmp_path / "m.h5", [episode(2), {"action": np.zeros((2, 3))}])
    assert (tmp_path / "m.h5").read_bytes() == before


# ------------------------------------------------------------------------ motion lists
def make_files(root: Path, *names: str) -> list[Path]:
    paths = []
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        paths.append(path)
    return paths


def test_motion_list_skips_comments_and_blanks_and_removes_spaces(tmp_path: Path) -> None:
    root = tmp_path / "motions"
    walk, run, jump = make_files(root, "walk.h5", "sub/run.h5", "sub/jump.h5")
    (elsewhere,) = make_files(tmp_path / "other", "spin.h5")
    listing = tmp_path / "list.txt"
    listing.write_text(
        f"# expert motions\n\nwalk.h5\n   sub/run.h5   \n\t\nsub / jump.h5\n  # indented comment\n"
        f"{elsewhere}\n",
        encoding="utf-8",
    )
    assert read_motion_list(listing, root) == [walk, run, jump, elsewhere]


def test_motion_list_resolves_relative_entries_against_a_relative_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_files(tmp_path / "data", "walk.h5")
    (tmp_path / "list.txt").write_text("walk.h5\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert read_motion_list("list.txt", "data") == [Path("data/walk.h5")]


def test_motion_list_with_only_comments_is_empty(tmp_path: Path) -> None:
    (tmp_path / "list.txt").write_text("# nothing yet\n\n", encoding="utf-8")
    assert read_motion_list(tmp_path / "list.txt", tmp_path) == []


def test_a_missing_listed_file_raises_naming_list_line_and_resolved_path(tmp_path: Path) -> None:
    make_files(tmp_path, "walk.h5")
    listing = tmp_path / "list.txt"
    listing.write_text("# header\nwalk.h5\nrun.h5\nfly.h5\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError) as info:
        read_motion_list(listing, tmp_path)
    message = str(info.value)
    assert f"{listing}: line 3: motion file {tmp_path / 'run.h5'} does not exist" in message
    assert "1 more" in message


def test_a_listed_directory_is_not_a_motion_file(tmp_path: Path) -> None:
    (tmp_path / "walk.h5").mkdir()
    (tmp_path / "list.txt").write_text("walk.h5\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="line 1"):
        read_motion_list(tmp_path / "list.txt", tmp_path)


def test_a_missing_motion_list_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"list\.txt"):
        read_motion_list(tmp_path / "list.txt", tmp_path)


def test_a_written_motion_list_reads_back_in_order(tmp_path: Path) -> None:
    for name in ("b.h5", "a.h5"):
        save_episodes(tmp_path / name, [{"x": np.zeros((2, 1))}])
    write_motion_list(tmp_path / "motions.txt", ["b.h5", "a.h5"])
    assert read_motion_list(tmp_path / "motions.txt", tmp_path) == [
        tmp_path / "b.h5",
        tmp_path / "a.h5",
    ]


@pytest.mark.parametrize("entry", ["", "# note", "has space.h5", "two\nlines.h5"])
def test_a_motion_list_entry_the_reader_would_misread_is_refused(
    tmp_path: Path, entry: str
) -> None:
    with pytest.raises(ValueError, match=r"entries\[1\]"):
        write_motion_list(tmp_path / "motions.txt", ["ok.h5", entry])
    assert not (tmp_path / "motions.txt").exists()

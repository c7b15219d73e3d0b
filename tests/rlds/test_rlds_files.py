"""RLDS episodes read from TFDS-laid-out TFRecord directories: shapes and dtypes from
``features.json`` (or inferred), SequenceExamples, and damaged files and declarations refused;
then read back through conversion and push."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bufcore import (
    CorruptFileError,
    DictBuffer,
    convert_rlds_to_trajectories,
    push_rlds_to_buffer,
    read_rlds_episodes,
)
from tests.rlds.tfds_writer import (
    example,
    features_json,
    flat_keys,
    frame,
    sequence_example,
    tfds_example,
    write_dataset,
)


def steps(length: int, *, offset: float = 0.0, terminal: bool = True) -> dict[str, Any]:
    """One episode's stacked steps, with a nested observation and an image-like uint8 leaf."""
    time = np.arange(length)
    return {
        "observation": {
            "state": (offset + time[:, None] * np.ones(3)).astype(np.float32),
            "pixels": np.full((length, 2, 2), 7, dtype=np.uint8),
        },
        "action": np.stack([time, -time], axis=1).astype(np.float32),
        "reward": time.astype(np.float32),
        "discount": np.ones(length, dtype=np.float32),
        "is_first": time == 0,
        "is_last": time == length - 1,
        "is_terminal": (time == length - 1) & terminal,
    }


EPISODES = [steps(3), steps(1, offset=10), steps(4, offset=20, terminal=False)]


def assert_same_steps(read: dict[str, Any], written: dict[str, Any]) -> None:
    for key, value in written.items():
        if isinstance(value, dict):
            assert_same_steps(read[key], value)
        else:
            assert read[key].dtype == value.dtype, key
            np.testing.assert_array_equal(read[key], value)


def test_a_tfds_directory_reads_back_as_its_episodes_in_shard_order(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES, shards=2)
    episodes = list(read_rlds_episodes(tmp_path))
    assert len(episodes) == 3
    for read, written in zip(episodes, EPISODES, strict=True):
        assert_same_steps(read["steps"], written)


def test_without_features_json_shapes_and_dtypes_are_inferred(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES, declare=False)
    first = next(iter(read_rlds_episodes(tmp_path)))["steps"]
    assert first["observation"]["state"].shape == (3, 3)
    assert first["observation"]["pixels"].shape == (3, 4)  # [T, k]: the 2x2 is not known
    assert first["observation"]["pixels"].dtype == np.int64
    assert first["reward"].shape == (3,) and first["reward"].dtype == np.float32
    assert first["is_first"].dtype == np.bool_


def test_a_directory_read_converts_as_the_same_episodes_in_memory(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES)
    from_files = list(convert_rlds_to_trajectories(read_rlds_episodes(tmp_path)))
    in_memory = list(convert_rlds_to_trajectories([{"steps": s} for s in EPISODES]))
    assert len(from_files) == len(in_memory) == 8
    for a, b in zip(from_files, in_memory, strict=True):
        torch.testing.assert_close(a, b)


def test_a_directory_pushes_into_a_dict_buffer(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES)
    buffer = DictBuffer(capacity=16)
    assert push_rlds_to_buffer(read_rlds_episodes(tmp_path), buffer) == 8
    rows = buffer.get_full_buffer()
    assert rows["step_type"].tolist() == [0, 1, 2, 2, 0, 1, 1, 2]
    assert rows["next_step_type"].tolist() == [1, 2, 0, 2, 1, 1, 2, 0]
    assert rows["discount"].tolist() == [1, 1, 0, 0, 1, 1, 1, 1]
    assert rows["observation"]["pixels"].shape == (8, 2, 2)


def test_a_split_reads_only_its_own_files(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES[:1], shards=1, split="train")
    write_dataset(tmp_path, EPISODES[1:], shards=1, split="test")
    assert len(list(read_rlds_episodes(tmp_path, split="train"))) == 1
    assert len(list(read_rlds_episodes(tmp_path, split="test"))) == 2
    assert len(list(read_rlds_episodes(tmp_path))) == 3


def test_one_tfrecord_file_can_be_read_alone(tmp_path: Path) -> None:
    files = write_dataset(tmp_path, EPISODES, shards=2)
    assert len(list(read_rlds_episodes(files[1]))) == 1


def test_episode_metadata_is_read_beside_the_steps(tmp_path: Path) -> None:
    path = tmp_path / "meta.tfrecord"
    path.write_bytes(frame(tfds_example(EPISODES[1], {"file_path": b"/raw/0.h5", "id": 5})))
    episode = next(iter(read_rlds_episodes(path)))
    assert episode["episode_metadata"]["file_path"] == b"/raw/0.h5"
    assert episode["episode_metadata"]["id"] == 5


def test_byte_step_features_come_back_as_object_arrays_of_bytes(tmp_path: Path) -> None:
    path = tmp_path / "text.tfrecord"
    flat = flat_keys(steps(2), "steps")
    flat["steps/language_instruction"] = [b"pick", b"place"]
    path.write_bytes(frame(example(flat)))
    read = next(iter(read_rlds_episodes(path)))["steps"]
    assert read["language_instruction"].tolist() == [b"pick", b"place"]
    # Extra step features are left alone by the conversion.
    assert len(list(convert_rlds_to_trajectories([{"steps": read}]))) == 2


def test_a_sequence_example_reads_as_one_value_list_per_step(tmp_path: Path) -> None:
    path = tmp_path / "sequence.tfrecord"
    lists = {
        "steps/observation": [np.float32([t, t]) for t in range(3)],
        "steps/action": [np.float32([t]) for t in range(3)],
        "steps/reward": [np.float32([1]) for _ in range(3)],
        "steps/discount": [np.float32([1]) for _ in range(3)],
        "steps/is_first": [[1], [0], [0]],
        "steps/is_last": [[0], [0], [1]],
        "steps/is_terminal": [[0], [0], [1]],
    }
    path.write_bytes(frame(sequence_example({"episode_id": [4]}, lists)))
    episode = next(iter(read_rlds_episodes(path)))
    assert episode["steps"]["observation"].shape == (3, 2)
    assert episode["steps"]["is_last"].tolist() == [False, False, True]
    assert episode["episode_id"] == 4
    types = [t["step_type"].item() for t in convert_rlds_to_trajectories([episode])]
    assert types == [0, 1, 2]


def test_a_declared_unknown_dimension_is_inferred(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES)
    declared = json.loads((tmp_path / "features.json").read_text())
    state = declared["featuresDict"]["features"]["steps"]["sequence"]["feature"][
        "featuresDict"]["features"]["observation"]["featuresDict"]["features"]["state"]
    state["tensor"]["shape"]["dimensions"] = ["-1"]
    (tmp_path / "features.json").write_text(json.dumps(declared))
    first = next(iter(read_rlds_episodes(tmp_path)))
    assert first["steps"]["observation"]["state"].shape == (3, 3)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: s.__setitem__("reward", s["reward"][:2]),
         "steps/reward: 2 values do not fit"),
        (lambda s: s.__setitem__("is_first", np.int64([2, 0, 0])),
         r"steps/is_first: values in \[0, 2\] do not fit declared bool"),
        (lambda s: s.__setitem__("action", np.int64([[1, 2]] * 3)),
         "steps/action: declared float32, but stored as int64 values"),
    ],
)
def test_values_that_do_not_fit_their_declaration_are_a_corrupt_record(
    tmp_path: Path, edit: Any, problem: str
) -> None:
    declared = steps(3)
    (tmp_path / "features.json").write_text(json.dumps(features_json(declared)))
    stored = steps(3)
    edit(stored)
    (tmp_path / "x-train.tfrecord").write_bytes(frame(tfds_example(stored)))
    with pytest.raises(CorruptFileError, match=f"record at byte 0: {problem}"):
        list(read_rlds_episodes(tmp_path))


def test_a_damaged_record_is_a_corrupt_file_naming_its_offset(tmp_path: Path) -> None:
    files = write_dataset(tmp_path, EPISODES[:2], shards=1)
    data = bytearray(files[0].read_bytes())
    data[-10] ^= 0xFF
    files[0].write_bytes(bytes(data))
    episodes = read_rlds_episodes(tmp_path)
    assert next(episodes)["steps"]["reward"].tolist() == [0, 1, 2]
    with pytest.raises(CorruptFileError, match="data's checksum does not match"):
        next(episodes)


def test_a_record_that_is_not_an_example_is_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(frame(b"\x0b\x01\x02"))
    with pytest.raises(CorruptFileError, match="record at byte 0: Example: field 1 has wire "
                       "type 3"):
        list(read_rlds_episodes(path))


def test_a_malformed_features_json_is_a_corrupt_file(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES)
    (tmp_path / "features.json").write_text('{"featuresDict": {"features": {"steps": 3}}}')
    with pytest.raises(CorruptFileError, match=r"features\.json: a malformed declaration"):
        read_rlds_episodes(tmp_path)


def test_features_json_that_is_not_json_is_a_corrupt_file(tmp_path: Path) -> None:
    write_dataset(tmp_path, EPISODES)
    (tmp_path / "features.json").write_text("{not json")
    with pytest.raises(CorruptFileError, match="not valid JSON"):
        read_rlds_episodes(tmp_path)


def test_a_directory_without_tfrecord_files_is_refused_at_the_call(tmp_path: Path) -> None:
    (tmp_path / "dataset_info.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="no TFRecord files"):
        read_rlds_episodes(tmp_path)


def test_a_missing_path_is_refused_at_the_call(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such TFRecord file or directory"):
        read_rlds_episodes(tmp_path / "absent")


def test_an_episode_level_sequence_feature_keeps_all_its_values(tmp_path: Path) -> None:
    declared = features_json(EPISODES[1])
    declared["featuresDict"]["features"]["waypoints"] = {
        "sequence": {"feature": {"tensor": {"shape": {"dimensions": ["2"]}, "dtype": "float32"}},
                     "length": "-1"},
    }
    (tmp_path / "features.json").write_text(json.dumps(declared))
    flat = flat_keys(EPISODES[1], "steps")
    flat["waypoints"] = np.float32([1, 2, 3, 4, 5, 6])  # three waypoints of 2
    (tmp_path / "x-train.tfrecord").write_bytes(frame(example(flat)))
    episode = next(iter(read_rlds_episodes(tmp_path)))
    assert episode["waypoints"].tolist() == [1, 2, 3, 4, 5, 6]

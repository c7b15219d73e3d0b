"""RLinf's directory layout: file names, the two JSON files (RLinf's keys), strict parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bufcore.errors import CorruptCheckpointError
from bufcore.persist.rlinf.layout import (
    IndexEntry,
    Metadata,
    index_bytes,
    is_trajectory_file_name,
    metadata_bytes,
    parse_index,
    parse_metadata,
    trajectory_file_name,
)

WHERE = Path("/d/trajectory_index.json")
ENTRY = IndexEntry(3, 8, 5, (4, 2, 7), "step_10")


def index_of(*entries: dict[str, Any], order: list[int] | None = None) -> bytes:
    table = {str(e["trajectory_id"]): e for e in entries}
    ids = order if order is not None else [e["trajectory_id"] for e in entries]
    return json.dumps({"trajectory_index": table, "trajectory_id_list": ids}).encode()


def entry(trajectory_id: int = 0, **change: Any) -> dict[str, Any]:
    fields = {"num_samples": 6, "trajectory_id": trajectory_id, "max_episode_length": 3,
              "shape": [3, 2], "model_weights_id": "w"}
    return {**fields, **change}


@pytest.mark.parametrize(
    ("weights", "fmt", "name"),
    [("", "pt", "trajectory_3_.pt"), ("step_1", "pkl", "trajectory_3_step_1.pkl"),
     ("a..b", "pt", "trajectory_3_a..b.pt")],
)
def test_file_names_are_rlinfs(weights: str, fmt: str, name: str) -> None:
    assert trajectory_file_name(3, weights, fmt) == name  # type: ignore[arg-type]
    assert is_trajectory_file_name(name)


@pytest.mark.parametrize("weights", ["../x", "a/b", "a\0b", "x" * 300])
def test_a_weights_id_that_makes_no_plain_file_name_is_refused(weights: str) -> None:
    with pytest.raises(ValueError, match="model_weights_id"):
        trajectory_file_name(0, weights, "pt")


def test_the_index_has_rlinfs_keys_in_rlinfs_order() -> None:
    document = json.loads(index_bytes([ENTRY]))
    assert list(document) == ["trajectory_index", "trajectory_id_list"]
    assert document["trajectory_id_list"] == [3]
    assert document["trajectory_index"]["3"] == {
        "num_samples": 8, "trajectory_id": 3, "max_episode_length": 5, "shape": [4, 2, 7],
        "model_weights_id": "step_10",
    }
    assert list(document["trajectory_index"]["3"]) == [
        "num_samples", "trajectory_id", "max_episode_length", "shape", "model_weights_id"]


def test_the_metadata_has_rlinfs_keys() -> None:
    document = json.loads(metadata_bytes(Metadata("pt", 1, 8, 4, 1234)))
    assert document == {"trajectory_format": "pt", "size": 1, "total_samples": 8,
                        "trajectory_counter": 4, "seed": 1234}


def test_an_index_reads_back() -> None:
    assert parse_index(index_bytes([ENTRY]), WHERE, "pt") == [ENTRY]


def test_the_id_list_gives_the_order() -> None:
    raw = index_of(entry(0), entry(1), order=[1, 0])
    assert [e.trajectory_id for e in parse_index(raw, WHERE, "pt")] == [1, 0]


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (index_of(entry(0, num_samples=5)), r"num_samples'\]: expected shape\[0\] \* shape\[1\]"),
        (index_of(entry(0, shape=[6])), "expected \\[T, B, ...\\]"),
        (index_of(entry(0), order=[0, 0]), "id 0 is listed twice"),
        (index_of(entry(0), order=[0, 1]), "id 1 has no entry"),
        (index_of(entry(0), entry(1), order=[0]), "leaves out indexed ids such as \\[1\\]"),
        (json.dumps({"trajectory_index": {"5": entry(4)}, "trajectory_id_list": [4]}).encode(),
         "holds trajectory_id 4"),
        (index_of(entry(0, model_weights_id="../../etc/x")), "contains '/'"),
        (index_of(entry(0, max_episode_length="3")), "expected an int"),
        (b"[1, 2]", "expected a JSON object"),
        (b"{not json", "not valid JSON"),
        (json.dumps({"trajectory_id_list": []}).encode(), "missing key 'trajectory_index'"),
    ],
)
def test_a_malformed_index_is_a_corrupt_file_naming_it(raw: bytes, match: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=match) as caught:
        parse_index(raw, WHERE, "pt")
    assert caught.value.path == WHERE


def test_metadata_defaults_are_rlinfs() -> None:
    assert parse_metadata(b"{}", WHERE) == Metadata("pt", 0, 0, 0, None)


@pytest.mark.parametrize(
    ("document", "match"),
    [({"trajectory_format": "npz"}, "expected one of \\['pt', 'pkl'\\]"),
     ({"size": -1}, "expected an int >= 0"), ({"seed": "x"}, "expected an int")],
)
def test_malformed_metadata_is_a_corrupt_file(document: dict[str, Any], match: str) -> None:
    with pytest.raises(CorruptCheckpointError, match=match):
        parse_metadata(json.dumps(document).encode(), WHERE)

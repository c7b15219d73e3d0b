"""Meta-data mode (seed 003): items name a data_id file, which goes when the item leaves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bufcore import AdvancedReplayBuffer, NaiveReplayBuffer


def meta_items(folder: Path, numbers: range, **extra: Any) -> list[dict[str, Any]]:
    """Items whose data_id files exist."""
    items = []
    for number in numbers:
        path = folder / f"data_{number}.pt"
        path.write_bytes(b"full data")
        items.append({"data_id": str(path), "i": number, **extra})
    return items


def present(folder: Path) -> list[int]:
    return sorted(int(p.stem.split("_")[1]) for p in folder.glob("data_*.pt"))


@pytest.mark.parametrize("cls", [NaiveReplayBuffer, AdvancedReplayBuffer])
@pytest.mark.parametrize("size", [1, 2, 3])
def test_files_of_overwritten_items_go_and_live_ones_stay(
    tmp_path: Path, cls: type[Any], size: int
) -> None:
    buffer = cls(replay_buffer_size=size, seed=0, enable_track_used_data=True)
    buffer.start()
    buffer.push(meta_items(tmp_path, range(size + 2)), 0)
    buffer._remover.flush()
    assert present(tmp_path) == list(range(2, size + 2))
    buffer.push(meta_items(tmp_path, range(10, 11)), 0)
    buffer._remover.flush()
    assert present(tmp_path) == [*range(3, size + 2), 10]
    buffer.close()


def test_close_drains_the_queue_without_a_started_thread(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=2, enable_track_used_data=True)
    buffer.push(meta_items(tmp_path, range(3)), 0)
    assert present(tmp_path) == [0, 1, 2]  # queued, nothing deleted yet
    buffer.close()
    assert present(tmp_path) == []  # close clears the buffer too, as DI-engine's does


@pytest.mark.parametrize("cls", [NaiveReplayBuffer, AdvancedReplayBuffer])
def test_close_drains_the_queue_of_a_started_thread(tmp_path: Path, cls: type[Any]) -> None:
    buffer = cls(replay_buffer_size=2, seed=0, enable_track_used_data=True)
    buffer.start()
    buffer.push(meta_items(tmp_path, range(5)), 0)
    buffer.close()  # no flush: close waits for the thread to delete every queued file
    assert present(tmp_path) == []


def test_clear_deletes_the_files_of_every_item(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=3, enable_track_used_data=True)
    buffer.start()
    buffer.push(meta_items(tmp_path, range(2)), 0)
    buffer.clear()
    buffer._remover.flush()
    assert present(tmp_path) == []
    buffer.close()


def test_stale_items_lose_their_files_at_once(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=3, seed=0, max_staleness=2,
                                  enable_track_used_data=True)
    items = meta_items(tmp_path, range(3))
    for item in items:
        item["collect_iter"] = item["i"]
    buffer.push(items, 0)
    buffer.sample(1, 3)  # staleness 3, 2, 1: items 0 and 1 go
    buffer._remover.flush()
    assert present(tmp_path) == [2]


def test_a_used_up_item_keeps_its_file_until_its_slot_is_overwritten(tmp_path: Path) -> None:
    buffer = AdvancedReplayBuffer(replay_buffer_size=2, seed=0, max_use=1,
                                  enable_track_used_data=True)
    buffer.push(meta_items(tmp_path, range(2)), 0)
    assert buffer.sample(1, 0) is not None and buffer.sample(1, 0) is not None
    assert buffer.count() == 0
    buffer._remover.flush()
    assert present(tmp_path) == [0, 1]  # the learner may still read the batch's files
    assert buffer.sample(1, 0) is None
    buffer.push(meta_items(tmp_path, range(5, 6)), 0)
    buffer._remover.flush()
    assert present(tmp_path) == [1, 5]


def test_without_meta_data_mode_no_file_is_touched(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=1)
    buffer.push(meta_items(tmp_path, range(3)), 0)
    buffer.close()
    assert present(tmp_path) == [0, 1, 2]


def test_an_item_without_data_id_is_refused_in_meta_data_mode(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=2, enable_track_used_data=True)
    with pytest.raises(ValueError, match=r"data\[1\]: meta-data mode"):
        buffer.push([*meta_items(tmp_path, range(1)), {"i": 5}], 0)
    assert buffer.count() == 0


def test_a_data_id_that_is_not_a_path_is_refused(tmp_path: Path) -> None:
    buffer = NaiveReplayBuffer(replay_buffer_size=2, enable_track_used_data=True)
    with pytest.raises(TypeError, match=r"data\[0\]\['data_id'\]"):
        buffer.push({"data_id": 3}, 0)


def test_a_loaded_meta_data_buffer_deletes_the_files_of_items_it_overwrites(
    tmp_path: Path,
) -> None:
    (tmp_path / "files").mkdir()
    buffer = NaiveReplayBuffer(replay_buffer_size=2, enable_track_used_data=True)
    buffer.push(meta_items(tmp_path / "files", range(2)), 0)
    buffer.save(tmp_path / "ckpt")
    loaded = NaiveReplayBuffer.load(tmp_path / "ckpt")
    loaded.push(meta_items(tmp_path / "files", range(7, 8)), 0)
    loaded._remover.flush()
    assert present(tmp_path / "files") == [1, 7]

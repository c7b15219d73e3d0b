"""What a save may replace: only a checkpoint (bufcore's or BFM-Zero's) or an empty directory;
and a symbolic link at the path is written through, leaving nothing behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bufcore import DictBuffer
from bufcore.persist.atomic import publish_directory, publish_file
from bufcore.persist.checkpoint.format import replaceable_checkpoint
from tests.support import reseal


def small(capacity: int = 3, n: int = 2, first: int = 0) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=1)
    buffer.extend({"x": list(range(first, first + n))})
    return buffer


def stored(path: Path) -> list[int]:
    return DictBuffer.load(path).get_full_buffer()["x"].tolist()


def tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under ``path`` with its content (None for directories)."""
    return {
        str(p.relative_to(path)): None if p.is_dir() else p.read_bytes()
        for p in sorted(path.rglob("*"))
    }


@pytest.mark.parametrize("name", ["config.json", "manifest.json"])
def test_an_experiment_directory_holding_a_config_json_is_refused_and_left_untouched(
    tmp_path: Path, name: str
) -> None:
    experiment = tmp_path / "experiment"
    (experiment / "logs").mkdir(parents=True)
    (experiment / name).write_text('{"lr": 0.001}')
    (experiment / "logs" / "train.log").write_text("step 1")
    (experiment / "notes.md").write_text("keep me")
    before = tree(experiment)
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small().save(experiment)
    assert tree(experiment) == before
    assert [p.name for p in tmp_path.iterdir()] == ["experiment"]


def test_a_checkpoint_with_a_user_file_added_is_refused_and_left_untouched(
    tmp_path: Path,
) -> None:
    small().save(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "README.txt").write_text("what this run was")
    before = tree(tmp_path / "ckpt")
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small(first=10).save(tmp_path / "ckpt")
    assert tree(tmp_path / "ckpt") == before


def test_a_directory_whose_manifest_checksum_fails_is_refused(tmp_path: Path) -> None:
    small().save(tmp_path / "ckpt")
    manifest = tmp_path / "ckpt" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"rows": 2', '"rows": 3'))
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small(first=10).save(tmp_path / "ckpt")


def test_a_manifest_listing_fewer_files_than_the_directory_holds_is_refused(
    tmp_path: Path,
) -> None:
    small().save(tmp_path / "ckpt")
    reseal(tmp_path / "ckpt", lambda manifest: manifest["files"].pop("state.json"))
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small(first=10).save(tmp_path / "ckpt")


def test_a_bufcore_checkpoint_is_replaced(tmp_path: Path) -> None:
    small().save(tmp_path / "ckpt")
    small(first=10).save(tmp_path / "ckpt")
    assert stored(tmp_path / "ckpt") == [10, 11]


def test_an_empty_directory_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    small().save(tmp_path / "ckpt")
    assert stored(tmp_path / "ckpt") == [0, 1]


def bfm_zero_directory(path: Path) -> None:
    """Exactly what BFM-Zero's save writes: config.json and buffer.hdf5."""
    small().save(path)
    for name in ("manifest.json", "state.json"):
        (path / name).unlink()
    config = json.loads((path / "config.json").read_text())
    config["__target__"] = "humanoidverse.agents.buffers.transition.DictBuffer"
    (path / "config.json").write_text(json.dumps(config))


def test_a_bfm_zero_buffer_directory_is_replaced(tmp_path: Path) -> None:
    bfm_zero_directory(tmp_path / "ckpt")
    small(first=10).save(tmp_path / "ckpt")
    assert stored(tmp_path / "ckpt") == [10, 11]


@pytest.mark.parametrize("extra", ["notes.txt", "eval"])
def test_a_bfm_zero_directory_with_anything_more_is_refused(tmp_path: Path, extra: str) -> None:
    bfm_zero_directory(tmp_path / "ckpt")
    if extra == "eval":
        (tmp_path / "ckpt" / extra).mkdir()
    else:
        (tmp_path / "ckpt" / extra).write_text("keep me")
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small(first=10).save(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / extra).exists()


def test_a_config_json_without_a_target_is_not_a_bfm_zero_directory(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text('{"capacity": 3}')
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small().save(tmp_path / "run")
    assert (tmp_path / "run" / "config.json").read_text() == '{"capacity": 3}'


# ------------------------------------------------------------------------ symbolic links
def test_saving_through_a_link_replaces_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    small().save(tmp_path / "ckpt_100")
    (tmp_path / "latest").symlink_to("ckpt_100")
    small(first=10).save(tmp_path / "latest")
    assert (tmp_path / "latest").is_symlink()
    assert os.readlink(tmp_path / "latest") == "ckpt_100"
    assert stored(tmp_path / "ckpt_100") == [10, 11]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt_100", "latest"]


def test_saving_through_a_dangling_link_creates_its_target(tmp_path: Path) -> None:
    (tmp_path / "latest").symlink_to("ckpt_200")
    small().save(tmp_path / "latest")
    assert stored(tmp_path / "ckpt_200") == [0, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt_200", "latest"]


def test_saving_through_a_link_to_a_directory_that_is_not_a_checkpoint_is_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "config.json").write_text("{}")
    (tmp_path / "latest").symlink_to("experiment")
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small().save(tmp_path / "latest")
    assert [p.name for p in (tmp_path / "experiment").iterdir()] == ["config.json"]


def test_saving_through_a_link_loop_is_refused_and_leaves_the_links(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(FileExistsError, match="symbolic link loop"):
        small().save(tmp_path / "a")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    assert os.readlink(tmp_path / "a") == "b"


def test_publishing_a_file_through_a_link_writes_its_target(tmp_path: Path) -> None:
    (tmp_path / "motions_v1.h5").write_text("old")
    (tmp_path / "motions.h5").symlink_to("motions_v1.h5")
    publish_file(tmp_path / "motions.h5", lambda staging: staging.write_text("new"))
    assert (tmp_path / "motions.h5").is_symlink()
    assert (tmp_path / "motions_v1.h5").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["motions.h5", "motions_v1.h5"]


def test_publishing_a_file_over_a_directory_is_refused_before_writing(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    calls: list[Path] = []
    with pytest.raises(IsADirectoryError, match="is a directory"):
        publish_file(tmp_path / "out", calls.append)
    assert calls == []
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_config_json_with_a_target_but_no_payload_is_refused(tmp_path: Path) -> None:
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "config.json").write_text('{"__target__": "my.Trainer", "lr": 0.001}')
    with pytest.raises(FileExistsError, match="not a checkpoint directory"):
        small().save(tmp_path / "exp")
    assert json.loads((tmp_path / "exp" / "config.json").read_text())["__target__"] == "my.Trainer"


def test_a_file_added_to_the_old_checkpoint_during_a_save_is_kept_with_a_warning(
    tmp_path: Path,
) -> None:
    small().save(tmp_path / "ckpt")

    def user_adds_a_note(staging: Path) -> None:
        (tmp_path / "ckpt" / "NOTES.txt").write_text("keep me")  # while the save writes
        staging.joinpath("data").write_text("new")

    with pytest.warns(RuntimeWarning, match=r"it is kept at .*ckpt\.kept-"):
        publish_directory(tmp_path / "ckpt", user_adds_a_note, replaceable=replaceable_checkpoint)
    (kept,) = tmp_path.glob("ckpt.kept-*")
    assert (kept / "NOTES.txt").read_text() == "keep me"
    assert (tmp_path / "ckpt" / "data").read_text() == "new"


def test_a_link_whose_target_the_kernel_cannot_reach_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "d").symlink_to("nosuch/../tgt")
    with pytest.raises(FileNotFoundError, match="whose directory does not exist"):
        small().save(tmp_path / "d")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_saving_through_a_chain_of_links_replaces_the_last_target(tmp_path: Path) -> None:
    small().save(tmp_path / "ckpt_1")
    (tmp_path / "previous").symlink_to("ckpt_1")
    (tmp_path / "latest").symlink_to("previous")
    small(first=10).save(tmp_path / "latest")
    assert stored(tmp_path / "ckpt_1") == [10, 11]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt_1", "latest", "previous"]

"""The ``bufcore`` command, run as a user runs it: in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def bufcore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bufcore.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_demo_fills_saves_and_reloads_a_buffer_in_the_given_directory(tmp_path: Path) -> None:
    result = bufcore("demo", "--dir", str(tmp_path), "--capacity", "500", "--seed", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("created DictBuffer(capacity=500")
    assert "contents identical after reload: True" in result.stdout
    assert "same stream True" in result.stdout
    saved = tmp_path / "buffers" / "train"
    assert sorted(p.name for p in saved.iterdir()) == [
        "buffer.hdf5", "config.json", "manifest.json", "state.json"
    ]


def test_demo_without_a_directory_leaves_nothing_behind_in_the_working_directory(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bufcore.cli", "demo", "--capacity", "50"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_no_command_prints_usage_and_exits_2() -> None:
    result = bufcore()
    assert result.returncode == 2
    assert "usage: bufcore" in result.stderr


@pytest.mark.parametrize("capacity", ["lots", "0", "-3"])
def test_a_bad_capacity_names_the_option_and_exits_2(capacity: str) -> None:
    result = bufcore("demo", "--capacity", capacity)
    assert result.returncode == 2
    assert "--capacity" in result.stderr


def test_a_bad_capacity_says_what_was_expected() -> None:
    result = bufcore("demo", "--capacity", "0")
    assert "argument --capacity: expected an int >= 1, got '0'" in result.stderr

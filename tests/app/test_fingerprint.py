"""Cache keys change exactly when a file under the path changes."""

from __future__ import annotations

from pathlib import Path

from app.fingerprint import fingerprint


def test_fingerprint_changes_when_a_file_grows(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("1")
    before = fingerprint(tmp_path)
    (tmp_path / "a").write_text("12")
    assert fingerprint(tmp_path) != before


def test_fingerprint_is_stable_when_nothing_changes(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_text("x")
    assert fingerprint(tmp_path) == fingerprint(tmp_path)


def test_skipped_names_do_not_change_the_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text("1\n")
    before = fingerprint(tmp_path, skip=("metrics.jsonl",))
    (tmp_path / "metrics.jsonl").write_text("1\n2\n")
    assert fingerprint(tmp_path, skip=("metrics.jsonl",)) == before


def test_a_missing_path_has_an_empty_fingerprint(tmp_path: Path) -> None:
    assert fingerprint(tmp_path / "gone") == ()

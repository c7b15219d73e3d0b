"""The dashboard's entry script runs the server's tensor work on one intra-op thread.

Streamlit runs each script run (and fragment rerun) on a thread of its own; torch gives a
thread that starts tensor work the count last set, so the check reads it from a new thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.app.conftest import Dashboard


@pytest.fixture
def restored_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_the_entry_script_leaves_torch_on_one_intra_op_thread(
    restored_threads: None, dashboard: Dashboard, demo_run: Path
) -> None:
    torch.set_num_threads(2)
    at = dashboard("overview", demo_run)
    assert not at.exception
    seen: list[int] = []
    reader = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    reader.start()
    reader.join()
    assert seen == [1]

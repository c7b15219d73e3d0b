"""Helpers shared by the stats tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch


@contextmanager
def host_reads_forbidden(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every way a tensor's value reaches Python raises (on CUDA each would be a sync)."""

    def forbidden(*_: Any, **__: Any) -> Any:
        raise AssertionError("a tensor value was read on the host")

    names = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")
    with monkeypatch.context() as patch:
        for name in names:
            patch.setattr(torch.Tensor, name, forbidden)
        yield

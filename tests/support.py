"""Helpers shared by test modules."""

from __future__ import annotations

import pytest
import torch

# CUDA cases run wherever a GPU is present (the device check machine); CPU runs everywhere.
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    ),
]

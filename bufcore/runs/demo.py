"""A short, self-explaining run: fill a DictBuffer, sample it, save it, reload it.

This stands in for the demo training run until that lands; it prints each step so a new user can
see the ring arithmetic, the checkpoint files and the resumed sample stream.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from bufcore.buffers.base import load_buffer
from bufcore.buffers.transition import DictBuffer

OBSERVATION = {"state": 67, "last_action": 29, "privileged_state": 217}


def _transitions(rng: np.random.Generator, n: int, first_id: int) -> dict[str, object]:
    return {
        "observation": {
            k: rng.standard_normal((n, d), dtype=np.float32) for k, d in OBSERVATION.items()
        },
        "action": rng.uniform(-1, 1, (n, 29)).astype(np.float32),
        "reward": rng.standard_normal((n, 1), dtype=np.float32),
        "terminated": np.zeros((n, 1), dtype=bool),
        "step": np.arange(first_id, first_id + n, dtype=np.int64)[:, None],
    }


def run_demo(
    directory: Path | None = None,
    *,
    capacity: int = 1000,
    seed: int = 0,
    echo: Callable[[str], None] = print,
) -> None:
    """Fill, sample, save and reload a buffer, printing what happens at each step."""
    rng = np.random.default_rng(seed)
    buffer = DictBuffer(capacity=capacity, seed=seed)
    echo(f"created {buffer!r}")
    written = 0
    for batch_size in (300, 300, 300, 300):
        buffer.extend(_transitions(rng, batch_size, written))
        written += batch_size
        echo(
            f"extend {batch_size:4d} rows -> len {len(buffer):4d}, cursor {buffer.cursor:4d}, "
            f"full {buffer.is_full}"
        )
    oldest = int(buffer.get_full_buffer()["step"][0, 0])
    echo(f"wrote {written} rows into capacity {capacity}: the oldest kept row is step {oldest}")
    batch = buffer.sample(4)
    echo(
        f"sample(4) steps {batch['step'].flatten().tolist()}, "
        f"state {tuple(batch['observation']['state'].shape)}"
    )
    with tempfile.TemporaryDirectory() as scratch:
        path = (directory or Path(scratch)) / "buffers" / "train"
        buffer.save(path)
        files = ", ".join(f"{p.name} ({p.stat().st_size:,} B)" for p in sorted(path.iterdir()))
        echo(f"saved to {path}: {files}")
        reloaded = load_buffer(path)
        echo(f"reloaded {reloaded!r}")
        same = torch.equal(reloaded.get_full_buffer()["step"], buffer.get_full_buffer()["step"])
        echo(f"contents identical after reload: {same}")
        a, b = buffer.sample(4)["step"], reloaded.sample(4)["step"]
        echo(
            f"next sample from original {a.flatten().tolist()} and reloaded "
            f"{b.flatten().tolist()}: same stream {torch.equal(a, b)}"
        )

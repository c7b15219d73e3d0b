"""Synthetic expert motions for the demo run: smooth trajectories of varied length and difficulty.

A motion is ``[T, dim]`` float32 frames: per dimension, a sum of a few sinusoids. Difficulty
``d`` in ``[0, 1]`` raises the frequencies (and so how much a short window of frames varies),
which makes the motion harder to track for the demo's agent: its policy sees the future only
through a low-dimensional ``z`` (:mod:`bufcore.runs.demo.agent`), which keeps less of a fast
window than of a slow one. Lengths are spread over ``[min_length, max_length]`` independently of
difficulty, so the curriculum has both short and long hard motions to find.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# Harmonics per dimension: enough for shapes that are not a single sine.
_HARMONICS = 3
# Puts the trained agent's EMDs (about 0.4 to 1.8) inside BFM-Zero's default clamp [0.5, 2].
_SCALE = 3.0


@dataclass(frozen=True)
class Motion:
    """One expert motion.

    Attributes:
        motion_id: Its id in the expert buffer and the curriculum.
        difficulty: In ``[0, 1]``; higher means faster, harder to track.
        frames: ``[T, dim]`` float32 states.
    """

    motion_id: int
    difficulty: float
    frames: torch.Tensor


def make_motions(
    count: int,
    *,
    dim: int,
    min_length: int,
    max_length: int,
    generator: torch.Generator,
) -> list[Motion]:
    """``count`` motions with evenly spread difficulty, in shuffled order.

    Args:
        count: Number of motions (ids ``0 .. count - 1``).
        dim: State dimension.
        min_length: Fewest frames of a motion.
        max_length: Most frames of a motion.
        generator: Source of every random choice (the demo is deterministic per seed).
    """
    difficulty = torch.linspace(0.0, 1.0, count, dtype=torch.float64)
    difficulty = difficulty[torch.randperm(count, generator=generator)]
    lengths = torch.randint(min_length, max_length + 1, (count,), generator=generator)
    motions = []
    for motion_id in range(count):
        d = float(difficulty[motion_id])
        frames = _frames(int(lengths[motion_id]), dim, d, generator)
        motions.append(Motion(motion_id, d, frames))
    return motions


def _frames(length: int, dim: int, difficulty: float, generator: torch.Generator) -> torch.Tensor:
    """Sum of ``_HARMONICS`` sinusoids per dimension, unit-ish amplitude."""
    t = torch.arange(length, dtype=torch.float64)[:, None, None]
    # Cycles per frame of the first harmonic: ~200 frames per cycle (easy) to ~25 (hard).
    base = 0.005 + 0.035 * difficulty
    shape = (1, dim, _HARMONICS)
    freq = base * (0.6 + 0.8 * torch.rand(shape, generator=generator, dtype=torch.float64))
    freq = freq * torch.arange(1, _HARMONICS + 1, dtype=torch.float64)
    phase = 2 * math.pi * torch.rand(shape, generator=generator, dtype=torch.float64)
    amplitude = torch.rand(shape, generator=generator, dtype=torch.float64)
    amplitude = amplitude / torch.arange(1, _HARMONICS + 1, dtype=torch.float64)
    frames = (amplitude * torch.sin(2 * math.pi * freq * t + phase)).sum(dim=2)
    # A fast, small tremor that grows with difficulty: the part of a motion a short z keeps
    # least of.
    tremor_freq = 0.15 + 0.1 * torch.rand(1, dim, generator=generator, dtype=torch.float64)
    tremor_phase = 2 * math.pi * torch.rand(1, dim, generator=generator, dtype=torch.float64)
    frames += 0.3 * difficulty * torch.sin(2 * math.pi * tremor_freq * t[:, :, 0] + tremor_phase)
    return (_SCALE * frames).to(torch.float32)

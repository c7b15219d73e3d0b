"""What a vectorised rollout writes: ``[time, env]`` end flags and the batches that carry them.

Each of ``E`` envs runs episodes of random length (uniform in ``[min_length, max_length]``
steps; BFM-Zero's humanoid episodes are cut by falls or a time limit) from a random phase, so
episode ends are spread over time and envs as in a real run rather than aligned. Following
BFM-Zero's online layout (REFERENCE §4.2), the row whose ``truncated`` flag is True is the final
observation of its episode; a fraction of those ends also carry ``terminated`` (a fall rather
than the time limit). ``truncated`` is the buffers' end key.

A :class:`FlagStream` holds the flags of a whole run, time first: the first ``fill`` rows fill a
buffer (more than its capacity, so its ring has wrapped, the steady state of a long run), the
rest are the one-step extends of the timed loops, cycled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.workload import Nested, make_batch

MIN_LENGTH = 50
MAX_LENGTH = 500
TERMINATED_FRACTION = 0.3


def episode_ends(
    rows: int,
    envs: int,
    generator: torch.Generator,
    min_length: int = MIN_LENGTH,
    max_length: int = MAX_LENGTH,
) -> torch.Tensor:
    """Bool ``[rows, envs]``: True on the last row of each episode of each env."""
    episodes = rows // min_length + 2  # enough episodes to cover `rows` in every env
    lengths = torch.randint(min_length, max_length + 1, (episodes, envs), generator=generator)
    # A random phase: each env is somewhere inside its first episode at row 0.
    phase = (torch.rand(envs, generator=generator) * lengths[0]).long()
    last_rows = torch.cumsum(lengths, 0) - phase - 1
    inside = (last_rows >= 0) & (last_rows < rows)
    env = torch.arange(envs).expand_as(last_rows)
    ends = torch.zeros(rows, envs, dtype=torch.bool)
    ends[last_rows[inside], env[inside]] = True
    return ends


@dataclass(frozen=True)
class FlagStream:
    """End flags of one run: ``fill`` rows to fill a buffer, then the steady-state steps.

    Attributes:
        truncated: Bool ``[fill + steady, E]``, the end key.
        terminated: Bool ``[fill + steady, E]``, a subset of ``truncated``.
        fill: Rows written before timing.
    """

    truncated: torch.Tensor
    terminated: torch.Tensor
    fill: int

    @property
    def envs(self) -> int:
        return int(self.truncated.shape[1])

    @property
    def steady(self) -> int:
        """Distinct one-step extends; the timed loops cycle through them."""
        return int(self.truncated.shape[0]) - self.fill

    def fill_chunks(self, rows: int) -> list[slice]:
        """Consecutive time slices of at most ``rows`` rows covering the fill."""
        return [slice(s, min(s + rows, self.fill)) for s in range(0, self.fill, rows)]

    def step(self, i: int) -> slice:
        """The time slice ``[1 row]`` of steady-state step ``i`` (cycled)."""
        row = self.fill + i % self.steady
        return slice(row, row + 1)


def flag_stream(capacity: int, envs: int, steady: int, seed: int = 0) -> FlagStream:
    """A stream that fills a ``capacity``-row ring past its wrap, then ``steady`` more steps.

    The fill writes ``capacity + capacity // 4`` rows, so the ring has wrapped and its cursor
    sits away from row 0, as in a long run.
    """
    generator = torch.Generator().manual_seed(seed)
    fill = capacity + capacity // 4
    truncated = episode_ends(fill + steady, envs, generator)
    fell = torch.rand(truncated.shape, generator=generator) < TERMINATED_FRACTION
    return FlagStream(truncated=truncated, terminated=truncated & fell, fill=fill)


def rollout_pool(batches: int, steps: int, envs: int, seed: int = 1) -> list[Nested]:
    """``batches`` payloads of ``[steps, envs, ...]`` rows (BFM-Zero's leaves, random values).

    The flag leaves are placeholders: :func:`with_flags` puts the stream's flags in. The pool is
    cycled by every fill, so its size bounds the memory the sources take, not the buffer's.
    """
    generator = torch.Generator().manual_seed(seed)
    return [_reshape(make_batch(steps * envs, generator), steps, envs) for _ in range(batches)]


def _reshape(batch: Nested, steps: int, envs: int) -> Nested:
    return {
        key: _reshape(value, steps, envs)
        if isinstance(value, dict)
        else value.view(steps, envs, *value.shape[1:])
        for key, value in batch.items()
    }


def with_flags(payload: Nested, stream: FlagStream, rows: slice) -> Nested:
    """``payload`` (first ``rows`` time steps) with the stream's flags of ``rows``.

    Flags are ``[n, E, 1]`` bool, as BFM-Zero writes them; nested dicts are shallow-copied and
    the payload tensors shared (views), so this costs no copy of the rows.
    """
    steps = rows.stop - rows.start
    batch = _first_steps(payload, steps)
    batch["truncated"] = stream.truncated[rows].unsqueeze(-1)
    batch["terminated"] = stream.terminated[rows].unsqueeze(-1)
    return batch


def _first_steps(batch: Nested, steps: int) -> Nested:
    return {
        key: _first_steps(value, steps) if isinstance(value, dict) else value[:steps]
        for key, value in batch.items()
    }

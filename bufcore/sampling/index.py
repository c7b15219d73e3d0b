"""Where a sample landed: the storage rows it gathered, as :class:`SampleIndex`.

Every buffer that samples asks its sampler (:mod:`bufcore.sampling.samplers`) for an index
first and then gathers the storage at it; its ``sample_index`` returns that index instead of the
data, drawn exactly as ``sample`` draws it. Rows are flat physical storage rows,
``time * env_count + env`` (:mod:`bufcore.storage.ring`); ``time`` and ``env`` are derived from
them on demand, so a sample that only gathers pays for neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bufcore.checks import check_int


@dataclass(frozen=True)
class SampleIndex:
    """The rows one sample gathered, in output order.

    Attributes:
        rows: ``[batch]`` flat physical storage rows (``time * env_count + env``); for a
            trajectory buffer the window rows (its ``next`` rows are the rows one time step
            later: ``(rows + env_count) % (capacity * env_count)``).
        env_count: Env columns per time row of the storage (1 for ``[time]`` rows).
        trajectory: For trajectory buffers, ``[windows]``: the position in the buffer's
            ``trajectories()`` table of the trajectory each window was drawn from; None for
            buffers without trajectories.
        weights: Per-draw importance weights, for samplers that draw unevenly and correct for
            it (prioritized replay): float32 ``[batch]``, one per row (a window's weight on
            each of its rows); None when every draw weighs the same.
        writes: For buffers with a prioritized sampler, ``[batch]`` int64: how many times each
            row's storage row had been written when it was drawn, so that
            ``update_priority`` can skip rows overwritten since; None otherwise.

    Raises:
        TypeError: ``env_count`` is not an int.
        ValueError: ``env_count < 1``.
    """

    rows: torch.Tensor
    env_count: int = 1
    trajectory: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    writes: torch.Tensor | None = None

    def __post_init__(self) -> None:
        # time and env divide by it: a sampler written by hand must not get 0 past here.
        check_int(self.env_count, "env_count", minimum=1)

    @classmethod
    def of_rows(
        cls, rows: torch.Tensor, env_count: int, trajectory: torch.Tensor | None = None
    ) -> SampleIndex:
        """The index of flat ``rows`` of a storage with ``env_count`` envs per time row."""
        return cls(rows=rows, env_count=env_count, trajectory=trajectory)

    @property
    def time(self) -> torch.Tensor:
        """``[batch]`` physical time row of each output row."""
        return self.rows // self.env_count

    @property
    def env(self) -> torch.Tensor:
        """``[batch]`` env column of each output row (zeros for ``[time]`` storage)."""
        return self.rows % self.env_count

    def to(self, device: torch.device) -> SampleIndex:
        """The same index with every tensor on ``device``."""

        def moved(tensor: torch.Tensor | None) -> torch.Tensor | None:
            return None if tensor is None else tensor.to(device)

        return SampleIndex(
            self.rows.to(device),
            self.env_count,
            moved(self.trajectory),
            moved(self.weights),
            moved(self.writes),
        )

"""Where a sample landed: the storage rows it gathered, as :class:`SampleIndex`.

Every buffer that samples draws an index first and then gathers the storage at it; its
``sample_index`` returns that index instead of the data, drawn exactly as ``sample`` draws it.
Rows are flat physical storage rows, ``time * env_count + env`` (:mod:`bufcore.storage.ring`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SampleIndex:
    """The rows one sample gathered, in output order.

    Attributes:
        rows: ``[batch]`` flat physical storage rows (``time * env_count + env``); for a
            trajectory buffer the window rows (its ``next`` rows are the rows one time step
            later: ``(rows + env_count) % (capacity * env_count)``).
        time: ``[batch]`` physical time row of each output row.
        env: ``[batch]`` env column of each output row (zeros for ``[time]`` storage).
        trajectory: For trajectory buffers, ``[windows]``: the position in the buffer's
            ``trajectories()`` table of the trajectory each window was drawn from; None for
            buffers without trajectories.
    """

    rows: torch.Tensor
    time: torch.Tensor
    env: torch.Tensor
    trajectory: torch.Tensor | None = None

    @classmethod
    def of_rows(
        cls, rows: torch.Tensor, env_count: int, trajectory: torch.Tensor | None = None
    ) -> SampleIndex:
        """The index of flat ``rows`` of a storage with ``env_count`` envs per time row."""
        return cls(rows=rows, time=rows // env_count, env=rows % env_count, trajectory=trajectory)

    def to(self, device: torch.device) -> SampleIndex:
        """The same index with every tensor on ``device``."""
        trajectory = None if self.trajectory is None else self.trajectory.to(device)
        return SampleIndex(
            self.rows.to(device), self.time.to(device), self.env.to(device), trajectory
        )

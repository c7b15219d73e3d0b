"""The ``replay`` record of an online buffer whose windows a prioritized sampler draws.

A training loop that samples a :class:`~bufcore.TrajectoryDictBufferMultiDim` built with
``sampler=PrioritizedSampler(...)`` hands each batch's ``"_index"`` to a :class:`ReplayTally`
and logs :meth:`ReplayTally.record` once per interval (the demo's ``--prioritized`` does, every
25 env steps)::

    tally = ReplayTally(buffer)
    batch = buffer.sample(1024)
    tally.add(batch["_index"])
    log.log("replay", step, tally.record())

The record uses the key names the DI-engine buffers' ``stats()`` write (``buffer``, ``count``,
``capacity``, ``sample_count``, ``sample_calls``, ``beta``, ``max_priority``, ``priority_min``
... ``priority_max``; counts are transitions, rows times envs), adds the importance-weight
quantiles of :meth:`bufcore.sampling.prioritized.PrioritizedSampler.stats`, and says which
trajectories the windows drawn since the previous record came from (README "Run logs").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from bufcore.buffers.online import TrajectoryDictBufferMultiDim
from bufcore.checks import check_int
from bufcore.fields import Field
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.windows import ring_row_positions

REPLAY_KIND = "replay"
# How many of the most drawn trajectories a record lists.
TOP_TRAJECTORIES = 5


class ReplayTally:
    """Counts the draws from one prioritized online buffer, for its ``replay`` records.

    Args:
        buffer: The buffer (its sampler must be a ``PrioritizedSampler``).
        top: How many of the most drawn trajectories a record lists.

    Raises:
        TypeError: ``buffer`` is not a ``TrajectoryDictBufferMultiDim`` drawing with a
            ``PrioritizedSampler``, or ``top`` is not an int.
        ValueError: ``top`` below 1.
    """

    def __init__(
        self, buffer: TrajectoryDictBufferMultiDim, *, top: int = TOP_TRAJECTORIES
    ) -> None:
        if not isinstance(buffer, TrajectoryDictBufferMultiDim) or not isinstance(
            buffer.sampler, PrioritizedSampler
        ):
            raise TypeError(
                "buffer: expected a TrajectoryDictBufferMultiDim built with "
                f"sampler=PrioritizedSampler(...), got {buffer!r:.120}"
            )
        self._buffer = buffer
        self._sampler: PrioritizedSampler = buffer.sampler
        self._top = check_int(top, "top", minimum=1)
        self._rows = 0
        self._calls = 0
        # (env, first absolute time) of a trajectory -> [windows drawn, its length then].
        self._drawn: dict[tuple[int, int], list[int]] = {}

    def state_dict(self) -> dict[str, Any]:
        """The counts so far, as plain data (a resumed run's records continue them):
        ``sample_count``, ``sample_calls`` and ``drawn``, ``[env, start, windows, length]``
        per trajectory drawn since the last record."""
        return {"sample_count": self._rows, "sample_calls": self._calls,
                "drawn": [[*key, *entry] for key, entry in self._drawn.items()]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue the counts of a :meth:`state_dict`; nothing changes unless all is valid.

        Raises:
            StateError: a count is missing or not an int >= 0, or ``drawn`` is not a list of
                four such ints each.
        """
        root = Field(state, "state", part="state")
        rows = root.key("sample_count").integer(minimum=0)
        calls = root.key("sample_calls").integer(minimum=0)
        drawn = {}
        for entry in root.key("drawn").items():
            if len(entry.items()) != 4:
                raise entry.error(
                    f"expected [env, start, windows, length], got {entry.value!r:.80}")
            env, start, windows, length = (v.integer(minimum=0) for v in entry.items())
            drawn[(env, start)] = [windows, length]
        self._rows, self._calls, self._drawn = rows, calls, drawn

    def add(self, index: SampleIndex | torch.Tensor, seq_length: int | None = None) -> None:
        """Count one sample: its rows, and the trajectory each of its windows lies in.

        Call it right after the sample, before the buffer is written again: the trajectories
        are looked up in the buffer's table as it stands.

        Args:
            index: The batch's ``"_index"`` (or the ``SampleIndex`` of ``sample_index``).
            seq_length: The sample's window length; None for the buffer's.

        Raises:
            TypeError: ``index`` is neither, or ``seq_length`` not an int.
            ValueError: the rows are not whole windows of ``seq_length``, or the buffer holds
                no rows.
        """
        rows = _rows(index)
        seq = self._buffer.seq_length if seq_length is None else check_int(
            seq_length, "seq_length", minimum=1
        )
        if len(rows) % seq:
            raise ValueError(
                f"index: expected whole windows of {seq} rows, got {len(rows)} rows"
            )
        held = len(self._buffer)
        if held == 0:
            raise ValueError("index: the buffer holds no rows, so nothing was drawn from it")
        table = self._buffer.trajectories()
        position = ring_row_positions(
            table, rows[::seq].to(table.stop.device), capacity=self._buffer.capacity,
            env_count=self._buffer.size() // held,
        )
        counts = torch.bincount(position.cpu())
        drawn = torch.nonzero(counts).flatten()
        on = table.stop.device
        columns = (table.env, table.start, table.lengths)
        env, start, length = (column[drawn.to(on)].tolist() for column in columns)
        for key, count, rows_long in zip(
            zip(env, start, strict=True), counts[drawn].tolist(), length, strict=True
        ):
            entry = self._drawn.setdefault(key, [0, 0])
            entry[0] += count
            entry[1] = rows_long
        self._rows += len(rows)
        self._calls += 1

    def record(self) -> dict[str, Any]:
        """The ``replay`` record now, after which the trajectory counts start afresh.

        Returns:
            ``buffer`` (the class name), ``count`` and ``capacity`` (transitions held and
            when full), ``sample_count`` and ``sample_calls`` (rows and samples counted so
            far), then :meth:`PrioritizedSampler.stats` (``beta``, ``max_priority``,
            ``priority_min/q25/median/q75/max``, ``is_weight_min/median/max``), then for the
            windows counted since the previous record: ``windows_drawn``,
            ``trajectories_drawn`` (how many trajectories they came from), ``top_share`` (the
            share of those windows from the ``top`` most drawn trajectories; None without
            windows) and ``top_trajectories`` (those, most drawn first: ``env``, ``start``
            (absolute time of its first row), ``length`` (rows, when last drawn), ``windows``
            and ``share``).
        """
        buffer = self._buffer
        held = len(buffer)
        envs = buffer.size() // held if held else 0
        windows = sum(entry[0] for entry in self._drawn.values())
        ranked = sorted(self._drawn.items(), key=lambda item: (-item[1][0], item[0]))
        top = ranked[: self._top]
        record: dict[str, Any] = {
            "buffer": type(buffer).__name__,
            "count": buffer.size(),
            "capacity": buffer.capacity * envs,
            "sample_count": self._rows,
            "sample_calls": self._calls,
            **self._sampler.stats(),
            "windows_drawn": windows,
            "trajectories_drawn": len(self._drawn),
            "top_share": sum(entry[0] for _, entry in top) / windows if windows else None,
            "top_trajectories": [
                {"env": env, "start": start, "length": length, "windows": count,
                 "share": count / windows}
                for (env, start), (count, length) in top
            ],
        }
        self._drawn = {}
        return record


def _rows(index: SampleIndex | torch.Tensor) -> torch.Tensor:
    """The flat rows of a ``SampleIndex`` or a batch's ``"_index"``.

    Raises:
        TypeError: neither.
        ValueError: an ``"_index"`` that is not ``[n, 2]``.
    """
    if isinstance(index, SampleIndex):
        return index.rows
    if not isinstance(index, torch.Tensor):
        raise TypeError(
            f"index: expected a batch's _index tensor or a SampleIndex, got "
            f"{type(index).__name__}"
        )
    if index.ndim != 2 or index.shape[1] != 2:
        raise ValueError(
            f"index: expected a batch's _index ([n, 2] rows and write counts), got shape "
            f"{list(index.shape)}"
        )
    return index[:, 0]


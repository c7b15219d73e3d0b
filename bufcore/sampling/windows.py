"""Window sampling from a table of trajectories (DESIGN §2 decision 3).

Data model: a :class:`TrajectoryTable` lists trajectories as ``(env, start, stop)`` with inclusive
times in one monotone frame (absolute time for the online ring, physical rows for the expert
buffer). A window of ``seq_length`` rows that also reads the row after each one (``next``, offset
1) needs ``need = seq_length + offset`` rows of one trajectory, so a trajectory of length ``L``
has ``L - need + 1`` valid starts, all of which can be drawn (the reference's ``get_idxs`` never
draws the last one and, with offset 0, lets windows start before their trajectory).

Weightings:

- ``"trajectory"`` (the reference's): pick an eligible trajectory (``L >= need``) uniformly or in
  proportion to its priority, then a uniform start among its valid starts.
- ``"window"``: every valid window equally likely (with priorities: in proportion to its
  trajectory's priority).

:func:`draw_from_table` draws exactly from those distributions with one categorical draw over the
table (O(trajectories)). :func:`sample_window_starts` first tries cheap rejection proposals from
the source (uniform trajectories, or uniform rows; O(draws)), which is exact: a proposal is
accepted iff it is eligible, and accepted i.i.d. proposals have the target distribution. Draws
still missing after a few rounds (rare unless most trajectories are shorter than ``need``) come
from :func:`draw_from_table`, also exact.

Host syncs on CUDA: each rejection round reads the number of accepted proposals on the host
(usually one round per sample), and :func:`draw_from_table` reads whether any weight is
positive. On CPU these cost nothing.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from bufcore.checks import check_choice
from bufcore.rng import undone_on_error

Weighting = Literal["trajectory", "window"]
WEIGHTINGS: tuple[Weighting, ...] = ("trajectory", "window")


@dataclass(frozen=True)
class TrajectoryTable:
    """Trajectories as parallel int64 vectors ``[n]``: env, first and last time (inclusive)."""

    env: torch.Tensor
    start: torch.Tensor
    stop: torch.Tensor

    @property
    def lengths(self) -> torch.Tensor:
        return self.stop - self.start + 1


class TrajectorySource(Protocol):
    """Where trajectories come from (:class:`bufcore.sampling.boundaries.OnlineBoundaries`)."""

    def table(self) -> TrajectoryTable: ...

    def propose_trajectories(self, count: int, generator: torch.Generator) -> TrajectoryTable: ...

    def propose_rows(
        self, count: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...


class RowSpans(Protocol):
    """Where each stored row sits in its trajectory
    (:class:`bufcore.sampling.boundaries.OnlineBoundaries`): what a sampler that draws windows
    through their rows needs (the prioritized sampler)."""

    def table(self) -> TrajectoryTable: ...

    def row_spans(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Absolute time of each flat row, and the first and last absolute time of its
        trajectory (inclusive)."""
        ...


def check_weighting(weighting: object) -> Weighting:
    """``weighting`` if it is ``"trajectory"`` or ``"window"``.

    Raises:
        ValueError: any other value.
    """
    return check_choice(weighting, "weighting", WEIGHTINGS)


def window_counts(table: TrajectoryTable, need: int) -> torch.Tensor:
    """Valid window starts per trajectory: ``max(0, L - need + 1)``."""
    return start_counts(table.lengths, need)


def start_counts(lengths: torch.Tensor, need: int) -> torch.Tensor:
    """Valid window starts for trajectories of ``lengths`` rows: ``max(0, L - need + 1)``."""
    return torch.clamp_min(lengths - need + 1, 0)


def window_weights(
    lengths: torch.Tensor,
    *,
    need: int,
    weighting: Weighting,
    priorities: torch.Tensor | None = None,
) -> torch.Tensor:
    """The unnormalised float64 weight with which a drawn window comes from each trajectory.

    ``"trajectory"``: ``p_i * [L_i >= need]``; ``"window"``: ``p_i * max(0, L_i - need + 1)``
    (``p_i = 1`` without priorities). This is the distribution :func:`draw_from_table` draws
    from, and the one the dashboard shows; dividing by the sum gives each trajectory's
    probability.

    Raises:
        ValueError: an unknown weighting, or priorities not one per trajectory.
    """
    weighting = check_weighting(weighting)
    starts = start_counts(lengths, need)
    weights = (starts > 0).to(torch.float64) if weighting == "trajectory" else starts.double()
    if priorities is not None:
        if priorities.shape != lengths.shape:
            raise ValueError(
                f"priorities: expected one per trajectory {list(lengths.shape)}, got "
                f"{list(priorities.shape)}"
            )
        weights = weights * priorities.to(device=weights.device, dtype=torch.float64)
    return weights


def draw_categorical(weights: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` indices drawn with replacement in proportion to non-negative ``weights``.

    A zero weight is never drawn: the draw is the first index whose cumulative weight exceeds a
    uniform value in ``[0, total)``.
    """
    cumulative = torch.cumsum(weights.to(torch.float64), 0)
    total = cumulative[-1]
    draw = torch.rand(count, dtype=torch.float64, generator=generator, device=weights.device)
    value = torch.minimum(draw * total, torch.nextafter(total, total.new_zeros(())))
    return torch.searchsorted(cumulative, value, right=True)


def _uniform_below(counts: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One uniform integer in ``[0, counts[i])`` per element with ``counts[i] >= 1``.

    ``floor(u * c)`` with a 53-bit ``u < 1`` never rounds up to ``c``. Elements with
    ``counts[i] < 1`` get a meaningless value (callers drop them).
    """
    draw = torch.rand(counts.shape, dtype=torch.float64, generator=generator, device=counts.device)
    return (draw * counts).long()


def draw_from_table(
    table: TrajectoryTable,
    *,
    count: int,
    need: int,
    weighting: Weighting,
    generator: torch.Generator,
    priorities: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` window starts ``(time, env)`` drawn exactly (see the module docstring).

    Args:
        table: The trajectories.
        count: Windows to draw.
        need: Rows a window reads (``seq_length + offset``).
        weighting: ``"trajectory"`` or ``"window"``.
        generator: Source of randomness (on the table's device).
        priorities: Optional non-negative weight per trajectory of the table.

    Raises:
        ValueError: no trajectory has ``need`` rows (the message gives the length range), or
            every long enough trajectory has priority zero.
    """
    starts = window_counts(table, need)
    eligible = starts > 0
    weights = window_weights(table.lengths, need=need, weighting=weighting, priorities=priorities)
    if not bool((weights > 0).any()):
        if not bool(eligible.any()):
            raise ValueError(no_eligible_message(table, need, count))
        raise ValueError(f"cannot sample: every trajectory with length >= {need} has priority zero")
    chosen = draw_categorical(weights, count, generator)
    offset = _uniform_below(starts[chosen], generator)
    return table.start[chosen] + offset, table.env[chosen]


def table_position(table: TrajectoryTable, time: torch.Tensor, env: torch.Tensor) -> torch.Tensor:
    """The position in ``table`` of the trajectory holding each ``(time, env)``.

    The table is sorted by env, then time (as every table here is), and each queried time lies
    inside a trajectory of its env (a drawn window start does), so a search over the key
    ``env * span + (start - first)`` finds it; ``span`` is the table's time range, so keys never
    collide and stay within ``E * span`` (the ring's rows), far from overflowing int64.
    """
    if len(table.start) == 0:
        return torch.zeros_like(time)
    first = table.start.min()
    span = table.stop.max() - first + 1
    keys = table.env * span + (table.start - first)
    return torch.searchsorted(keys, env * span + (time - first), right=True) - 1


def ring_row_positions(
    table: TrajectoryTable, rows: torch.Tensor, *, capacity: int, env_count: int
) -> torch.Tensor:
    """The position in ``table`` of the trajectory holding each flat physical row
    (``time * env_count + env``) of an online ring of ``capacity`` time rows.

    ``table`` is the ring's (absolute times, as ``trajectories()`` gives it when the rows were
    drawn) and each row is held: the newest row ends a trajectory, so the table's last
    ``stop`` is the newest absolute time, and a held row at physical time ``p`` has the
    absolute time within ``capacity`` of it that is ``p`` modulo ``capacity``.
    """
    if len(table.stop) == 0:
        return torch.zeros_like(rows)
    newest = table.stop.max()
    time = newest - torch.remainder(newest - rows // env_count, capacity)
    return table_position(table, time, rows % env_count)


def no_eligible_message(table: TrajectoryTable, need: int, count: int) -> str:
    """The error for a table without a trajectory of ``need`` rows."""
    if len(table.env) == 0:
        return f"No trajectories stored; need length >= {need} to sample {count} slices."
    lengths = table.lengths
    return (
        f"No trajectories with length >= {need} to sample {count} slices: the "
        f"{len(lengths)} stored trajectories have lengths {int(lengths.min())}.."
        f"{int(lengths.max())}; use a shorter seq_length or store longer episodes."
    )


def sample_window_starts(
    source: TrajectorySource,
    *,
    count: int,
    need: int,
    weighting: Weighting,
    generator: torch.Generator,
    rounds: int = 3,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` window starts ``(time, env)`` with uniform priorities, by rejection first.

    Each round draws proposals sized by the acceptance rate seen so far and keeps the first
    accepted ones still needed (accepted proposals are i.i.d. from the target, whatever decides
    how many there are). After ``rounds`` rounds the rest come from :func:`draw_from_table`.

    Raises:
        ValueError: no trajectory of the source has ``need`` rows. The generator is then as it
            was before the call: the rejection rounds drew before that could be known, so
            their draws are undone (a failed sample must not shift the stream).
    """
    with undone_on_error(generator, argument="count"):
        return _rejection_starts(
            source,
            count=count,
            need=need,
            weighting=weighting,
            generator=generator,
            rounds=rounds,
        )


def _rejection_starts(
    source: TrajectorySource,
    *,
    count: int,
    need: int,
    weighting: Weighting,
    generator: torch.Generator,
    rounds: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    starts: list[torch.Tensor] = []
    envs: list[torch.Tensor] = []
    remaining = count
    proposals = count + count // 4 + 8
    for _ in range(rounds):
        if weighting == "trajectory":
            proposed = source.propose_trajectories(proposals, generator)
            counts = proposed.stop - proposed.start - (need - 2)  # valid starts: L - need + 1
            accepted = (counts > 0).nonzero().squeeze(1)
            take = accepted[:remaining]
            # Offsets for every proposal in one draw; the rejected ones are dropped below.
            first = proposed.start + _uniform_below(counts, generator)
            starts.append(first.index_select(0, take))
            envs.append(proposed.env.index_select(0, take))
        else:
            time, env, stop = source.propose_rows(proposals, generator)
            accepted = (stop - time >= need - 1).nonzero().squeeze(1)
            take = accepted[:remaining]
            starts.append(time.index_select(0, take))
            envs.append(env.index_select(0, take))
        remaining -= len(take)
        if remaining == 0:
            break
        rate = max(len(accepted) / proposals, 1 / 16)
        proposals = int(remaining / rate * 1.25) + 8
    if remaining:
        more_start, more_env = draw_from_table(
            source.table(), count=remaining, need=need, weighting=weighting, generator=generator
        )
        starts.append(more_start)
        envs.append(more_env)
    if len(starts) == 1:
        return starts[0], envs[0]
    return torch.cat(starts), torch.cat(envs)


def window_index(
    start: torch.Tensor, env: torch.Tensor, *, length: int, capacity: int, env_count: int
) -> torch.Tensor:
    """Flat storage rows ``time % capacity * env_count + env`` of windows, slice-major ``[n*L]``.

    Rows ``[i * length, (i + 1) * length)`` are window ``i``: times ``start[i] + j``.
    """
    # time % capacity * E + env == (time * E + env) % (capacity * E), since 0 <= env < E.
    first = torch.add(env, start, alpha=env_count)
    rows = first[:, None] + _strides(length, env_count, start.device)
    return (rows % (capacity * env_count)).reshape(-1)


@functools.lru_cache(maxsize=64)
def _strides(length: int, env_count: int, device: torch.device) -> torch.Tensor:
    """``[0, E, 2E, ...]``: the flat offsets of a window's rows from its first (cached)."""
    return torch.arange(length, device=device) * env_count

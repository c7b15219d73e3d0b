"""Episode boundaries over ``[time]`` or ``[time, env]`` end flags.

Data model: a *trajectory* is a maximal run of rows of one env column that ends at a row whose end
flag is True. Two more rules make the ring safe to slice (REFERENCE §3.1, pytorch/rl #1969):

- the newest written row always ends a trajectory (the write cursor is an implicit truncation), so
  no trajectory runs from the newest into the oldest data;
- at capacity, the oldest surviving row always starts one (the rows before it are gone).

Two implementations of the same semantics live here:

- :func:`find_start_stop_traj` scans a whole flag matrix at once, with the reference's signature
  and output layout. The static expert buffer uses it once; tests use it as the model.
- :class:`OnlineBoundaries` maintains the trajectories of a ring incrementally. An ``extend`` of
  one time step costs a handful of vectorised ops over the ``E`` env columns, never a rescan of
  ``[T, E]`` (the reference recomputes everything before each sample, about 9 ms at
  ``[5000, 1024]``).

The incremental scheme works in *absolute* time (row ``tau`` of the ring's history lives at
physical row ``tau % capacity``) with per-env trajectory ids. Within one env, trajectories are
created in time order and die (are overwritten) in the same order, so each env's live ids form a
contiguous range ``[head[e], tail[e])`` of at most ``capacity`` ids. Per-trajectory tables
``[E, capacity]`` indexed by ``(env, id % capacity)`` hold the absolute start and stop time;
``row_tid[t, e]`` maps a row to its id. A long episode in one env never blocks the id ranges of
the others, which is the failure mode of one global dense id range. A trajectory's surviving part
is ``[max(start, oldest), stop]``; the open trajectory of an env has ``stop = newest``.
"""

from __future__ import annotations

import torch

from bufcore.sampling import TrajectoryTable


def find_start_stop_traj(
    end: torch.Tensor, at_capacity: bool = True, cursor: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Trajectories of a ring from its end flags, by a full scan (REFERENCE §3.1 semantics).

    Not at capacity, the last row ends a trajectory in every column (the episodes in progress end
    at the newest row). At capacity, row ``cursor`` (the newest written row; negative values count
    from the end, so ``-1`` is the last row) ends one in every column, a column without any end
    gets its last row as end, and the first trajectory of each column wraps around the ring: it
    starts after the column's last end.

    Args:
        end: Bool (or 0/1) flags ``[T]`` or ``[T, E]``, time first.
        at_capacity: Whether the ring is full (rows wrap around).
        cursor: The newest written row, only used at capacity.

    Returns:
        ``(start_idx, stop_idx, lengths)``: ``start_idx``/``stop_idx`` are ``[n, 1]`` (time) for
        ``[T]`` flags or ``[n, 2]`` (time, env) for ``[T, E]``, both inclusive, sorted by env then
        by stop time; ``lengths`` is ``[n]`` (rows per trajectory, counted around the ring).

    Raises:
        ValueError: ``end`` is not 1-D or 2-D, has no rows, or ``cursor`` is outside ``[-T, T)``.
        TypeError: ``cursor`` is not an int.
    """
    if end.ndim not in (1, 2):
        raise ValueError(f"end: expected flags [T] or [T, E], got shape {list(end.shape)}")
    rows = int(end.shape[0])
    if rows == 0 or end.numel() == 0:
        raise ValueError(f"end: expected at least one row and one column, got {list(end.shape)}")
    flags = (end != 0).reshape(rows, -1).clone()
    if not at_capacity:
        flags[-1] = True
    else:
        if cursor is not None:
            if isinstance(cursor, bool) or not isinstance(cursor, int):
                raise TypeError(f"cursor: expected an int, got {cursor!r}")
            if not -rows <= cursor < rows:
                raise ValueError(f"cursor: expected an int in [{-rows}, {rows}), got {cursor}")
            flags[cursor] = True
        flags[-1] |= ~flags.any(0)
    env, stop = flags.T.nonzero(as_tuple=True)
    first = torch.ones_like(env, dtype=torch.bool)
    first[1:] = env[1:] != env[:-1]
    last = torch.ones_like(first)
    last[:-1] = env[1:] != env[:-1]
    last_stop = torch.empty(flags.shape[1], dtype=torch.long, device=end.device)
    last_stop[env[last]] = stop[last]
    previous = torch.roll(stop, 1)
    start = torch.where(first, (last_stop[env] + 1) % rows, previous + 1)
    lengths = stop - start + 1
    lengths = torch.where(lengths <= 0, lengths + rows, lengths)
    if end.ndim == 1:
        return start[:, None], stop[:, None], lengths
    return torch.stack([start, env], 1), torch.stack([stop, env], 1), lengths


class OnlineBoundaries:
    """Trajectories of a ``[capacity, E]`` ring of end flags, updated as rows are written.

    See the module docstring for the data model. Layout details chosen for sampling speed (a
    torch op costs microseconds and a random read of a large table a cache miss, so a draw must
    take few of both): the per-trajectory table holds ``(start, stop)`` pairs side by side, with
    ``2 * capacity`` entries per env, entry ``id % capacity`` mirrored at ``+ capacity``, so the
    ``k``-th live trajectory of env ``e`` is at ``e * 2 * capacity + head[e] % capacity + k``
    without a modulo; each row also records the table entry of its trajectory and each physical
    time row its absolute time.

    Costs: ``extend`` of ``n`` rows is about 30 vectorised ops over ``n * E`` elements (on
    CUDA it syncs with the host to select the rows that start or end a trajectory, and to read
    the live count);
    :meth:`propose_trajectories` and :meth:`propose_rows` about 6 ops over the draws;
    :meth:`table` O(live trajectories + E).

    Args:
        capacity: Time rows of the ring.
        device: Where the tables live (the storage's device).

    Raises:
        ValueError: ``capacity < 1``.
    """

    env_count: int | None
    steps: int
    live: int
    _row_tid: torch.Tensor  # [capacity, E] trajectory id of each physical row
    _row_slot: torch.Tensor  # [capacity * E] table entry of each row's trajectory
    _row_time: torch.Tensor  # [capacity] absolute time of each physical time row
    _span: torch.Tensor  # [E * 2 * capacity, 2] absolute first and last time of a trajectory
    _head: torch.Tensor  # [E] id of the oldest live trajectory
    _tail: torch.Tensor  # [E] one past the newest id
    _open: torch.Tensor  # [E] whether the newest row's flag was False (its trajectory continues)
    _cumulative: torch.Tensor  # [E] live trajectories of envs 0..e
    _base: torch.Tensor  # [E] table entry of env e's oldest live trajectory minus its rank
    _env_base: torch.Tensor  # [E] first table entry of each env

    def __init__(self, capacity: int, *, device: torch.device) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: expected an int >= 1, got {capacity}")
        self.capacity = capacity
        self.device = device
        self._clear()

    def _clear(self) -> None:
        empty = torch.empty(0, dtype=torch.long, device=self.device)
        self.env_count = None
        self.steps = 0
        self.live = 0
        self._row_tid = self._row_slot = self._row_time = self._span = empty
        self._head = self._tail = self._cumulative = self._base = self._env_base = empty
        self._open = empty.bool()

    # ------------------------------------------------------------------ state
    def __len__(self) -> int:
        """Surviving time rows."""
        return min(self.steps, self.capacity)

    @property
    def oldest(self) -> int:
        """Absolute time of the oldest surviving row."""
        return max(0, self.steps - self.capacity)

    @property
    def newest(self) -> int:
        """Absolute time of the newest row (``-1`` before any write)."""
        return self.steps - 1

    def _allocate(self, env_count: int) -> None:
        cap, device = self.capacity, self.device
        self.env_count = env_count

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.long, device=device)

        self._row_tid = zeros(cap, env_count)
        self._row_slot = zeros(cap * env_count)
        self._row_time = zeros(cap)
        self._span = zeros(env_count * 2 * cap, 2)
        self._head = zeros(env_count)
        self._tail = zeros(env_count)
        self._open = torch.zeros(env_count, dtype=torch.bool, device=device)
        self._env_base = torch.arange(env_count, device=device) * (2 * cap)

    # ---------------------------------------------------------------- writing
    def extend(self, end: torch.Tensor) -> None:
        """Account for ``n`` new time rows written at the cursor, given their end flags.

        Args:
            end: Bool flags ``[n, E]`` of the new rows, oldest first (more than ``capacity``
                rows keep the last ``capacity``, as the storage does).

        Raises:
            ValueError: ``end`` is not 2-D or its env count differs from earlier rows.
        """
        if end.ndim != 2:
            raise ValueError(f"end: expected flags [n, E], got shape {list(end.shape)}")
        n, env_count = int(end.shape[0]), int(end.shape[1])
        if self.env_count is not None and env_count != self.env_count:
            raise ValueError(f"end: expected {self.env_count} envs (axis 1), got {env_count}")
        if n == 0:
            return
        if self.env_count is None:
            self._allocate(env_count)
        flags = end.to(device=self.device, dtype=torch.bool)
        cap = self.capacity
        first_time = self.steps
        begins_before = ~self._open
        if n > cap:
            # Only the last `capacity` rows survive; the first of them starts a trajectory.
            first_time += n - cap
            flags = flags[n - cap :]
            n = cap
            begins_before = torch.ones_like(begins_before)
        begins = torch.empty_like(flags)
        begins[0] = begins_before
        begins[1:] = flags[:-1]
        tid = (self._tail - 1) + torch.cumsum(begins, 0)
        slot = self._env_base + tid % cap
        times = torch.arange(first_time, first_time + n, device=self.device)
        row_times = times[:, None].expand(n, env_count)
        stops = flags.clone()
        stops[-1] = True
        for column, rows in ((0, begins), (1, stops)):
            entry, value = slot[rows], row_times[rows]
            table = self._span[:, column]
            table[entry] = value
            table[entry + cap] = value
        physical = times % cap
        self._row_tid[physical] = tid
        self._row_slot.view(cap, env_count)[physical] = slot
        self._row_time[physical] = times
        self.steps = first_time + n
        self._open = ~flags[-1]
        self._tail = tid[-1] + 1
        self._head = self._row_tid[self.oldest % cap]
        counts = self._tail - self._head
        self._cumulative = torch.cumsum(counts, 0)
        self._base = self._env_base + self._head % cap - (self._cumulative - counts)
        self.live = int(self._cumulative[-1])

    def rebuild(self, end: torch.Tensor, *, cursor: int, is_full: bool) -> None:
        """Recompute everything from a ring's physical end flags (after loading a checkpoint).

        Args:
            end: Bool flags ``[rows, E]`` in physical order (``rows`` = filled rows).
            cursor: The ring's write cursor.
            is_full: Whether the ring is full.
        """
        self._clear()
        if end.shape[0] == 0:
            return
        if is_full:
            # Absolute time `cursor` is the oldest row, at physical row `cursor`.
            self.steps = cursor
            end = torch.cat([end[cursor:], end[:cursor]])
        self.extend(end)

    # ---------------------------------------------------------------- reading
    def _trajectories(self, env: torch.Tensor, rank: torch.Tensor) -> TrajectoryTable:
        """Trajectories by env and global rank (position among all live ones)."""
        entry = self._base.index_select(0, env) + rank
        span = self._span.index_select(0, entry)
        return TrajectoryTable(
            env=env, start=torch.clamp_min(span[:, 0], self.oldest), stop=span[:, 1]
        )

    def table(self) -> TrajectoryTable:
        """Every live trajectory (surviving part, absolute times), sorted by env then time."""
        if self.env_count is None or self.live == 0:
            empty = torch.empty(0, dtype=torch.long, device=self.device)
            return TrajectoryTable(env=empty, start=empty, stop=empty)
        counts = self._tail - self._head
        envs = torch.arange(self.env_count, device=self.device)
        env = torch.repeat_interleave(envs, counts, output_size=self.live)
        return self._trajectories(env, torch.arange(self.live, device=self.device))

    def propose_trajectories(self, count: int, generator: torch.Generator) -> TrajectoryTable:
        """``count`` live trajectories drawn uniformly with replacement (eligible or not)."""
        rank = torch.randint(self.live, (count,), generator=generator, device=self.device)
        env = torch.searchsorted(self._cumulative, rank, right=True)
        return self._trajectories(env, rank)

    def propose_rows(
        self, count: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``count`` surviving rows drawn uniformly: absolute time, env, and trajectory stop."""
        env_count = self.env_count or 1
        # Surviving rows are the physical rows [0, len): all of them once the ring is full.
        row = torch.randint(
            len(self) * env_count, (count,), generator=generator, device=self.device
        )
        entry = self._row_slot.index_select(0, row)
        stop = self._span.index_select(0, entry)[:, 1]
        return self._row_time.index_select(0, row // env_count), row % env_count, stop

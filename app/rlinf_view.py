"""An RLinf buffer directory for the pages: its overview and health, the window and cache over
its trajectory ids, episode lengths inside trajectories, and the Sampling lab's draws.

An RLinf directory saves no window or cache size: they are options of the buffer that loads
it (RLinf's defaults: ``sample_window_size=100``, ``cache_size=5``). The pages take both from
the sidebar and mark, over the id list, what such a buffer samples from (the newest
``window`` trajectories whose files are there; a load leaves out the others) and caches (with
``auto_save``, the newest ``cache``; without it the buffer holds its window in memory).

Trajectory files are read one by one through :func:`bufcore.inspect.read_rlinf_trajectory`
(``weights_only``; never a ``pkl`` file), at most :data:`MAX_READ` per page. Draws go through
:func:`bufcore.inspect.draw_rlinf_chunks`, the disk buffer's own sampler. Everything here is
numpy in, plain data out, tested without Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from app.sampling_lab import Frequencies, chi_square
from bufcore.inspect import (
    ChunkIndex,
    RLinfIndex,
    RLinfSummary,
    RLinfTrajectory,
    draw_rlinf_chunks,
    format_key_path,
    human_bytes,
)

# Trajectory files one page reads at most, and by default.
MAX_READ = 200
DEFAULT_READ = 20
# Trajectory files named in a health message at most.
NAMED_FILES = 5
# What each id-list position is, for a buffer loading the directory (FIFO strip, tables).
ABSENT, OLDER, WINDOW, CACHED = "no file", "older than the window", "in the window", "cached"
STATES = (ABSENT, OLDER, WINDOW, CACHED)
PKL_NOTE = (
    "This directory stores its trajectories with pickle (`pkl` format). Reading a pickle file "
    "runs any code it holds, so the dashboard never opens them: everything from the index "
    "(ids, shapes, samples, window, cache) is shown, but nothing that needs rows."
)


def states(index: RLinfIndex, *, window: int, cache: int) -> np.ndarray:
    """One of :data:`STATES` per id-list position (object ``[n]``): a cached trajectory is in
    the window too when the cache is no larger than the window."""
    out = np.full(len(index.entries), OLDER, dtype=object)
    out[~index.present] = ABSENT
    out[index.positions(window)] = WINDOW
    if cache > 0:
        out[index.positions(cache)] = CACHED
    return out


def overview_items(summary: RLinfSummary, index: RLinfIndex, *, window: int, cache: int
                   ) -> list[tuple[str, str]]:
    """``(what, value)`` lines of the Overview: format, counts, shapes, bytes, window, cache."""
    steps = "none" if summary.steps is None else _range(summary.steps)
    envs = "none" if summary.envs is None else _range(summary.envs)
    weights = ", ".join(repr(w) for w in summary.weights_ids)
    if summary.weights_count > len(summary.weights_ids):
        weights += f", ... ({summary.weights_count} in all)"
    return [
        ("format", f"{summary.trajectory_format} ("
                   + ("torch.save, read with weights_only)" if summary.trajectory_format == "pt"
                      else "pickle: never opened by the dashboard)")),
        ("trajectories", f"{summary.trajectories:,} indexed, {summary.absent:,} without a file"),
        ("samples (rows)", f"{summary.samples:,} (T x B per trajectory)"),
        ("T (steps)", steps),
        ("B (envs)", envs),
        ("seed", "none recorded" if summary.seed is None else str(summary.seed)),
        ("next id", f"{summary.trajectory_counter:,} (metadata.json's trajectory_counter)"),
        ("files", f"{human_bytes(summary.file_bytes)} in the indexed files; "
                  f"{summary.orphans:,} files the index does not name"),
        ("model_weights_id", weights or "none"),
        ("window", span_text(index, index.positions(window), window)),
        ("cache", span_text(index, index.positions(cache) if cache else np.zeros(0, np.int64),
                            cache)),
    ]


def span_text(index: RLinfIndex, positions: np.ndarray, size: int) -> str:
    """``"100 (0: all): ids 20..119, 100 trajectories, 600 samples"`` for the positions a
    window (or cache) of ``size`` holds."""
    if len(positions) == 0:
        return f"{size}: nothing"
    ids = index.ids[positions]
    rows = int(index.samples[positions].sum())
    label = "all" if size == 0 else f"{size:,}"
    return (f"{label}: ids {int(ids[0])}..{int(ids[-1])}, {len(positions):,} trajectories, "
            f"{rows:,} samples")


def _range(bounds: tuple[int, int]) -> str:
    low, high = bounds
    return f"{low:,}" if low == high else f"{low:,}..{high:,}"


def rlinf_problems(summary: RLinfSummary, index: RLinfIndex) -> list[str]:
    """Why the directory is not whole, each with its reason: indexed trajectories without a
    file (named, the first few), metadata counts that disagree with the index."""
    problems = []
    if summary.absent:
        fmt = index.trajectory_format
        missing = [e.file_name(fmt) for e in index.entries if e.trajectory_id in index.absent]
        named = ", ".join(f"`{name}`" for name in missing[:NAMED_FILES])
        more = "" if len(missing) <= NAMED_FILES else f" and {len(missing) - NAMED_FILES} more"
        problems.append(
            f"The index names {summary.absent:,} trajectories whose file is absent ({named}"
            f"{more}): a load leaves them out, so windows and draws skip them. RLinf's own "
            "checkpoints write files only for cached (or last sampled) trajectories."
        )
    if (summary.trajectories, summary.samples) != summary.metadata_counts:
        size, total = summary.metadata_counts
        problems.append(
            f"metadata.json says {size:,} trajectories and {total:,} samples; the index holds "
            f"{summary.trajectories:,} and {summary.samples:,} (a crash between the two "
            "writes); loads count the index."
        )
    return problems


def leaf_rows(read: RLinfTrajectory) -> list[dict[str, str]]:
    """One table row per leaf of a trajectory's rows: key path, dtype, row shape."""
    return [{"key path": format_key_path(leaf.key_path), "dtype": leaf.dtype,
             "row shape": str(list(leaf.shape))} for leaf in read.leaves]


def index_rows(index: RLinfIndex, *, window: int, cache: int) -> list[dict[str, Any]]:
    """One table row per trajectory of the index: position, id, T, B, samples, weights id and
    what a loading buffer does with it."""
    state = states(index, window=window, cache=cache)
    return [
        {"position": i, "trajectory id": e.trajectory_id, "T": e.shape[0], "B": e.shape[1],
         "samples": e.num_samples, "model_weights_id": e.model_weights_id,
         "max_episode_length": e.max_episode_length, "status": state[i]}
        for i, e in enumerate(index.entries)
    ]


# ------------------------------------------------------------------------------ trajectories
def read_positions(count: int, last: int, total: int) -> np.ndarray:
    """The id-list positions a page reads: ``count`` (clamped to ``[1, MAX_READ]``) ending at
    ``last`` (clamped to the list), oldest first; empty for an empty index."""
    if total <= 0:
        return np.zeros(0, dtype=np.int64)
    last = min(max(last, 0), total - 1)
    count = min(max(count, 1), MAX_READ)
    return np.arange(max(0, last - count + 1), last + 1, dtype=np.int64)


@dataclass(frozen=True)
class Segments:
    """The episodes inside one trajectory, cut at its end flags, per env.

    Attributes:
        whole: Lengths of episodes that began and ended inside it (between two end flags).
        first: Lengths of the segments ended by an env's first flag: they began at step 0 or
            earlier (an episode may run across trajectories, as rollouts continue).
        running: Lengths of the segments after an env's last flag (still running at the end).
    """

    whole: np.ndarray
    first: np.ndarray
    running: np.ndarray


def episode_segments(ends: np.ndarray) -> Segments:
    """Cut ``ends`` (bool ``[T, B]``: step ``t`` of env ``b`` ends an episode) into episodes.

    Raises:
        ValueError: ``ends`` is not two-dimensional.
    """
    flags = np.asarray(ends, dtype=bool)
    if flags.ndim != 2:
        raise ValueError(f"ends: expected [T, B], got shape {list(flags.shape)}")
    steps = flags.shape[0]
    whole: list[np.ndarray] = []
    first: list[int] = []
    running: list[int] = []
    for env in range(flags.shape[1]):
        at = np.flatnonzero(flags[:, env])
        if len(at) == 0:
            running.append(steps)
            continue
        first.append(int(at[0]) + 1)
        whole.append(np.diff(at))
        if at[-1] < steps - 1:
            running.append(steps - 1 - int(at[-1]))
    return Segments(
        np.concatenate(whole).astype(np.int64) if whole else np.zeros(0, np.int64),
        np.array(first, dtype=np.int64), np.array(running, dtype=np.int64),
    )


def trajectory_row(position: int, read: RLinfTrajectory, state: str) -> dict[str, Any]:
    """The Trajectories table's row for one trajectory read."""
    row: dict[str, Any] = {
        "position": position, "trajectory id": read.trajectory_id, "T": read.steps,
        "B": read.envs, "samples": read.steps * read.envs, "status": state,
        "end flag": read.end_field or "none",
    }
    if read.ends is None:
        return {**row, "episodes ended": None, "whole episodes": None, "mean whole length": None,
                "longest segment": None, "envs still running": None}
    seg = episode_segments(read.ends)
    lengths = np.concatenate([seg.whole, seg.first, seg.running])
    return {
        **row,
        "episodes ended": int(read.ends.sum()),
        "whole episodes": len(seg.whole),
        "mean whole length": round(float(seg.whole.mean()), 2) if len(seg.whole) else None,
        "longest segment": int(lengths.max()) if len(lengths) else None,
        "envs still running": len(seg.running),
    }


def pooled_segments(reads: Sequence[RLinfTrajectory]) -> Segments:
    """Every read trajectory's segments together."""
    parts = [episode_segments(r.ends) for r in reads if r.ends is not None]
    if not parts:
        empty = np.zeros(0, np.int64)
        return Segments(empty, empty, empty)
    return Segments(*(np.concatenate([getattr(p, name) for p in parts])
                      for name in ("whole", "first", "running")))


# ------------------------------------------------------------------------------ sampling lab
def window_table(index: RLinfIndex, window: int) -> tuple[np.ndarray, np.ndarray]:
    """The window's trajectory ids and each one's expected share of draws (its rows over the
    window's: draws are uniform over rows, REFERENCE §9.4)."""
    positions = index.positions(window)
    samples = index.samples[positions].astype(np.float64)
    total = samples.sum()
    return index.ids[positions], samples / total if total > 0 else samples


def draw_many(index: RLinfIndex, *, window: int, count: int, seed: int, repeats: int
              ) -> list[ChunkIndex]:
    """``repeats`` draws of ``count`` rows from one generator seeded with ``seed``.

    Raises:
        ValueError: ``repeats < 1``, or what the sampler raises (no file there, ...).
    """
    if repeats < 1:
        raise ValueError(f"repeats: expected >= 1, got {repeats}")
    generator = torch.Generator().manual_seed(seed)
    return [draw_rlinf_chunks(index, window_size=window, count=count, generator=generator)
            for _ in range(repeats)]


def batch_columns(index: RLinfIndex, drawn: ChunkIndex) -> dict[str, np.ndarray]:
    """The draw as table columns, one per row drawn: ``trajectory_id``, ``row`` (flat
    ``t * B + b``), ``step`` (t), ``env`` (b) and ``model_weights_id``."""
    ids = drawn.trajectory_id.numpy()
    rows = drawn.row.numpy()
    envs = {e.trajectory_id: e.shape[1] for e in index.entries}
    weights = {e.trajectory_id: e.model_weights_id for e in index.entries}
    b = np.array([envs[int(i)] for i in ids], dtype=np.int64)
    return {
        "trajectory_id": ids, "row": rows, "step": rows // b, "env": rows % b,
        "model_weights_id": np.array([weights[int(i)] for i in ids], dtype=object),
    }


def frequencies(index: RLinfIndex, window: int, draws: Sequence[ChunkIndex]) -> Frequencies:
    """Drawn against expected share per trajectory of the window, with a chi-square test and
    the rows' coverage.

    Raises:
        ValueError: no draws.
    """
    if not draws:
        raise ValueError("draws: expected at least one drawn batch")
    ids, expected = window_table(index, window)
    where = {int(i): k for k, i in enumerate(ids)}
    drawn = torch.cat([d.trajectory_id for d in draws]).numpy()
    rows = torch.cat([d.row for d in draws]).numpy()
    observed = np.bincount([where[int(i)] for i in drawn], minlength=len(ids)).astype(np.float64)
    valid = int(index.samples[index.positions(window)].sum())
    hit = len(np.unique(drawn * (int(index.samples.max()) + 1) + rows))
    return Frequencies(
        "trajectory", ids, expected, observed, len(draws), len(drawn),
        chi_square(observed, expected), hit / valid if valid else 0.0, valid, hit,
    )


def snippet(path: str, *, window: int, count: int, seed: int, pickled: bool = False) -> str:
    """Python that reproduces the lab's draw with :class:`bufcore.TrajectoryReplayBuffer`: it
    loads the directory into memory (nothing is written into it) and defines ``batch`` (the
    rows) and ``index`` (their trajectory ids and rows). ``pickled``: the directory is in the
    ``pkl`` format, which loads only with ``allow_pickle=True`` (said in a comment)."""
    options = f"sample_window_size={window}"
    if pickled:
        options += ", allow_pickle=True"
    return "\n".join([
        "import torch",
        "from bufcore import TrajectoryReplayBuffer",
        "",
        f"path = {path!r}",
        "# auto_save=False: the buffer reads the window's files into memory and writes nothing.",
        *(["# pkl files run any code they hold when read: load only files you trust."]
          if pickled else []),
        f"buf = TrajectoryReplayBuffer({options})",
        "buf.load_checkpoint(path)",
        f"batch = buf.sample({count}, generator=torch.Generator().manual_seed({seed}))",
        "# Which trajectory and row each sampled row came from (the same draw):",
        f"index = buf.sample_index({count}, generator=torch.Generator().manual_seed({seed}))",
        "",
    ])


# ------------------------------------------------------------------------------ FIFO
def weights_rows(index: RLinfIndex, *, window: int) -> list[dict[str, Any]]:
    """One row per ``model_weights_id`` (the policy that collected a trajectory), in order of
    first use: trajectories in the index and in the window."""
    inside = {int(i) for i in index.ids[index.positions(window)]}
    rows: dict[str, dict[str, Any]] = {}
    for entry in index.entries:
        row = rows.setdefault(entry.model_weights_id, {
            "model_weights_id": entry.model_weights_id, "trajectories": 0, "in the window": 0,
            "first id": entry.trajectory_id})
        row["trajectories"] += 1
        row["in the window"] += entry.trajectory_id in inside
        row["last id"] = entry.trajectory_id
    return list(rows.values())


@dataclass(frozen=True)
class WindowHistory:
    """How the window moved as the trajectories were added, one point per add.

    Attributes:
        added: Trajectories added so far (1..n).
        oldest: The oldest id in the window then.
        newest: The newest id in the window then (the one just added).
    """

    added: np.ndarray
    oldest: np.ndarray
    newest: np.ndarray


def window_history(index: RLinfIndex, window: int) -> WindowHistory:
    """The window after each add of the id list, for the buffer that wrote the directory (its
    files were all there then): ids ``[k - window, k)`` of the list after ``k`` adds."""
    ids = index.ids
    added = np.arange(1, len(ids) + 1, dtype=np.int64)
    first = np.maximum(added - window, 0) if window else np.zeros_like(added)
    return WindowHistory(added, ids[first] if len(ids) else ids, ids[added - 1] if len(ids)
                         else ids)

"""What a path is (its source kind), every summary of it, and that inspection as text or JSON.

A path may be (checked in this order):

- a buffer checkpoint directory (``config.json`` naming a ``__target__`` beside
  ``buffer.hdf5``, maybe ``manifest.json`` and ``state.json``; bufcore's or BFM-Zero's own);
- a run checkpoint directory (``run.json`` and/or ``buffers/<name>/``; a checkpoint saved by
  N ranks holds ``buffers/<name>/rank_<r>/``, listed as buffers ``<name>/rank_<r>``);
- a run directory (``metrics.jsonl`` and/or ``checkpoint/``), or a BFM-Zero work directory
  (``checkpoint/buffers/<name>/`` beside BFM-Zero's own ``config.json`` files,
  ``train_status.json`` and ``model/``; other files ignored);
- an RLinf buffer directory (``metadata.json`` and ``trajectory_index.json``), summarized by
  :mod:`bufcore.runs.rlinf_summary` (only when it is none of the above).

Everything is read through :mod:`bufcore.runs.summary` and :mod:`bufcore.runs.run_summary` (no
rows are read, but for a prioritized sampler's priorities, 8 bytes a row, for their quantiles);
this module only looks at which entries exist (and whether a config.json names a buffer's
``__target__``). :func:`inspect_path` returns an :class:`Inspection` (what ``bufcore inspect``
shows); :func:`render` turns it into lines and :func:`to_json` into plain JSON-ready data.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bufcore.checks import check_bool
from bufcore.persist.checkpoint import CONFIG, MANIFEST, PAYLOAD, holds_buffer_config
from bufcore.persist.run_checkpoint import (
    BUFFERS,
    CHECKPOINT_DIR,
    METRICS_FILE,
    RUN_STATE,
    TRAIN_STATUS,
)
from bufcore.runs.rlinf_summary import (
    IdSpan,
    RLinfSummary,
    is_rlinf_directory,
    summarize_rlinf_directory,
)
from bufcore.runs.run_summary import (
    MetricsSummary,
    RunCheckpointSummary,
    TrainStatusSummary,
    summarize_metrics,
    summarize_run_checkpoint,
    summarize_train_status,
)
from bufcore.runs.summary import CheckpointSummary, summarize_checkpoint
from bufcore.tree import format_key_path

BUFFER_CHECKPOINT = "buffer checkpoint"
RUN_CHECKPOINT = "run checkpoint"
RUN_DIRECTORY = "run directory"
BFM_ZERO_WORKDIR = "BFM-Zero work directory"
RLINF_DIRECTORY = "RLinf buffer directory"
_WHAT = (
    "expected a buffer checkpoint (config.json), a run directory (metrics.jsonl or "
    "checkpoint/), a run checkpoint (run.json or buffers/), a BFM-Zero work directory "
    "(checkpoint/buffers/) or an RLinf buffer directory (metadata.json and "
    "trajectory_index.json)"
)


@dataclass(frozen=True)
class Inspection:
    """What :func:`inspect_path` found.

    Attributes:
        path: The path inspected.
        kind: ``"buffer checkpoint"``, ``"run checkpoint"``, ``"run directory"``,
            ``"BFM-Zero work directory"`` or ``"RLinf buffer directory"``.
        buffers: ``(name, summary)`` of each buffer checkpoint, by name (``train/rank_1``
            for a rank's buffer of a checkpoint saved by several ranks).
        run: run.json's summary, or None when there is none.
        metrics: metrics.jsonl's summary, or None when there is none.
        train_status: BFM-Zero's ``checkpoint/train_status.json`` (the env step it saved
            at), or None when there is none.
        rlinf: An RLinf buffer directory's summary (kind ``"RLinf buffer directory"``), or
            None.
    """

    path: Path
    kind: str
    buffers: tuple[tuple[str, CheckpointSummary], ...]
    run: RunCheckpointSummary | None = None
    metrics: MetricsSummary | None = None
    train_status: TrainStatusSummary | None = None
    rlinf: RLinfSummary | None = None


def inspect_path(path: str | os.PathLike[str], *, verify: bool = False) -> Inspection:
    """Find what ``path`` is and summarize it without reading any buffer's rows (but a
    prioritized sampler's saved priorities: see :func:`~bufcore.runs.summary.summarize_checkpoint`).

    Args:
        path: A buffer checkpoint, run checkpoint, run or BFM-Zero work directory.
        verify: Also hash every buffer.hdf5 against its manifest (reads them whole).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NotADirectoryError: ``path`` is not a directory.
        ValueError: ``path`` is none of the directories above (the message says what was
            expected).
        CorruptFileError: a file in it is missing, damaged or inconsistent (names the file;
            a :class:`~bufcore.errors.CorruptCheckpointError` for checkpoint files).
        TypeError: ``verify`` is not a bool (checked before anything is read).
    """
    verify = check_bool(verify, "verify")
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root}: no such file or directory")
    if not root.is_dir():
        raise NotADirectoryError(f"{root}: not a directory; {_WHAT}")
    kind = source_kind(root)
    if kind == RLINF_DIRECTORY:
        return Inspection(root, RLINF_DIRECTORY, (), rlinf=summarize_rlinf_directory(root))
    if kind is None:
        raise ValueError(f"{root}: {_WHAT}")
    if kind == BUFFER_CHECKPOINT:
        summary = summarize_checkpoint(root, verify=verify)
        return Inspection(root, kind, ((root.name, summary),))
    if kind == RUN_CHECKPOINT:
        buffers, run = _checkpoint(root, verify)
        return Inspection(root, kind, buffers, run, train_status=_train_status(root))
    checkpoint = root / CHECKPOINT_DIR
    has_checkpoint = checkpoint.is_dir() and _is_run_checkpoint(checkpoint)
    buffers, run = _checkpoint(checkpoint, verify) if has_checkpoint else ((), None)
    has_metrics = _exists(root / METRICS_FILE)
    return Inspection(
        root, kind, buffers, run, summarize_metrics(root) if has_metrics else None,
        _train_status(checkpoint) if has_checkpoint else None,
    )


def source_kind(path: Path) -> str | None:
    """What the directory ``path`` is, judged by its entry names (and, for a config.json
    beside a buffer.hdf5, whether that config names a ``__target__``; see
    :func:`is_buffer_checkpoint`).

    Returns:
        :data:`BUFFER_CHECKPOINT`, :data:`RUN_CHECKPOINT`, :data:`RUN_DIRECTORY`,
        :data:`BFM_ZERO_WORKDIR`, :data:`RLINF_DIRECTORY` (:func:`is_rlinf_directory`, when
        it is none of the others), or None when it is none of them (or not a directory).
    """
    if not path.is_dir():
        return None
    if is_buffer_checkpoint(path):
        return BUFFER_CHECKPOINT
    if _is_run_checkpoint(path):
        return RUN_CHECKPOINT
    checkpoint = path / CHECKPOINT_DIR
    has_checkpoint = checkpoint.is_dir() and _is_run_checkpoint(checkpoint)
    has_metrics = _exists(path / METRICS_FILE)
    if has_metrics or (has_checkpoint and _exists(checkpoint / RUN_STATE)):
        return RUN_DIRECTORY
    if has_checkpoint:
        return BFM_ZERO_WORKDIR
    return RLINF_DIRECTORY if is_rlinf_directory(path) else None


def is_buffer_checkpoint(path: Path) -> bool:
    """Whether the directory ``path`` is a buffer checkpoint, whole or damaged (DESIGN §3).

    A manifest.json makes it one (bufcore's). A config.json makes it one only beside a
    buffer.hdf5 and when it names a ``__target__`` (or cannot be read, which the loader then
    reports): BFM-Zero keeps its workspace config in the work directory and its agent config in
    ``checkpoint/``, beside ``buffers/``. A buffer.hdf5 without a config.json is a damaged one.
    Only config.json is ever opened, and only beside a buffer.hdf5.
    """
    if _exists(path / MANIFEST):
        return True
    has_payload = _exists(path / PAYLOAD)
    if not _exists(path / CONFIG):
        return has_payload
    return has_payload and holds_buffer_config(path)


def _exists(path: Path) -> bool:
    """Whether there is an entry at ``path`` (a dangling link counts: reading it says why)."""
    return path.is_symlink() or path.exists()


def _is_run_checkpoint(path: Path) -> bool:
    return _exists(path / RUN_STATE) or (path / BUFFERS).is_dir()


def _checkpoint(
    checkpoint: Path, verify: bool
) -> tuple[tuple[tuple[str, CheckpointSummary], ...], RunCheckpointSummary | None]:
    """The buffers under ``checkpoint/buffers/`` and run.json's summary."""
    run = summarize_run_checkpoint(checkpoint) if _exists(checkpoint / RUN_STATE) else None
    buffers = tuple(
        (buffer_name(checkpoint, folder), summarize_checkpoint(folder, verify=verify))
        for folder in buffer_dirs(checkpoint)
    )
    return buffers, run


def _train_status(checkpoint: Path) -> TrainStatusSummary | None:
    """BFM-Zero's train_status.json in ``checkpoint``, when there is one."""
    if not _exists(checkpoint / TRAIN_STATUS):
        return None
    return summarize_train_status(checkpoint)


def buffer_dirs(checkpoint: Path) -> list[Path]:
    """The buffer checkpoint directories under ``checkpoint/buffers/``, by name; a buffer
    saved by several ranks gives its ``rank_<r>/`` directories, in rank order."""
    folder = checkpoint / BUFFERS
    found: list[Path] = []
    for entry in sorted(_subdirs(folder), key=lambda entry: entry.name):
        ranks = _rank_dirs(entry)
        found.extend(ranks if ranks else [entry])
    return found


def buffer_name(checkpoint: Path, folder: Path) -> str:
    """How a buffer directory of :func:`buffer_dirs` is named: ``train``, or
    ``train/rank_1`` for one rank's buffer of a checkpoint saved by several ranks."""
    return folder.relative_to(checkpoint / BUFFERS).as_posix()


def split_rank(name: str) -> tuple[str, int | None]:
    """``"train/rank_1"`` -> ``("train", 1)``; a name without a rank -> ``(name, None)``."""
    base, _, last = name.rpartition("/")
    match = _RANK.fullmatch(last)
    return (base, int(match["rank"])) if base and match else (name, None)


_RANK = re.compile(r"rank_(?P<rank>0|[1-9][0-9]*)")


def _subdirs(folder: Path) -> list[Path]:
    # Hidden entries are a save's staging directories; files are not buffers.
    return [entry for entry in (folder.iterdir() if folder.is_dir() else ())
            if entry.is_dir() and not entry.name.startswith(".")]


def _rank_dirs(folder: Path) -> list[Path]:
    """``rank_<r>/`` directories, in rank order, when ``folder`` holds nothing else (and is
    no buffer checkpoint itself); else none."""
    if is_buffer_checkpoint(folder):
        return []
    entries = _subdirs(folder)
    if not entries or not all(_RANK.fullmatch(entry.name) for entry in entries):
        return []
    return sorted(entries, key=lambda entry: int(entry.name[len("rank_"):]))


def rank_occupancy(
    buffers: tuple[tuple[str, CheckpointSummary], ...],
) -> dict[str, list[tuple[int, int]]]:
    """Per-rank ``(length, capacity)`` of each buffer saved by several ranks, in rank order
    (buffer name without its rank -> one pair per rank); empty for a one-rank run."""
    table: dict[str, list[tuple[int, int]]] = {}
    for name, summary in buffers:
        base, rank = split_rank(name)
        if rank is not None:
            table.setdefault(base, []).append((summary.length, summary.capacity))
    return table


# ------------------------------------------------------------------------------ output
def human_bytes(count: int) -> str:
    """``1536`` -> ``"1.5 KiB"``: bytes in binary units, three significant figures at most."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{size:.3g} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def render(inspection: Inspection) -> list[str]:
    """The inspection as text lines: a header, then the run, its log and each buffer."""
    if inspection.kind == BUFFER_CHECKPOINT:
        return _buffer_lines(*inspection.buffers[0])
    if inspection.rlinf is not None:
        return _rlinf_lines(inspection.rlinf)
    lines = [f"{inspection.kind}: {inspection.path}"]
    if inspection.metrics is not None:
        lines += _metrics_lines(inspection.metrics)
    if inspection.run is not None:
        lines += _run_lines(inspection.run)
    else:
        lines.append("run.json: none")
    if inspection.train_status is not None:
        lines.append(
            f"train_status.json: saved at env step {inspection.train_status.time} (BFM-Zero)"
        )
    if not inspection.buffers:
        lines.append("buffers: none")
    lines += _rank_lines(inspection.buffers,
                         () if inspection.run is None else inspection.run.replicated)
    for name, summary in inspection.buffers:
        lines += ["", *_buffer_lines(name, summary)]
    return lines


def _rank_lines(
    buffers: tuple[tuple[str, CheckpointSummary], ...], replicated: tuple[str, ...]
) -> list[str]:
    """Rows held per rank, side by side, for a checkpoint saved by several ranks, and the
    distinct rows in all (one rank's of a buffer every rank holds alike)."""
    table = rank_occupancy(buffers)
    if not table:
        return []
    world = max(len(ranks) for ranks in table.values())
    width = max(len(name) for name in table)
    lines = [f"ranks: {world} (rows held / capacity, by rank)"]
    for name, ranks in table.items():
        cells = "  ".join(f"rank {r}: {length:,}/{capacity:,}"
                          for r, (length, capacity) in enumerate(ranks))
        if name in replicated:
            lines.append(f"  {name:<{width}}  {cells}  (replicated: {ranks[0][0]:,} in all)")
        else:
            lines.append(f"  {name:<{width}}  {cells}  (total {sum(n for n, _ in ranks):,})")
    return lines


def _metrics_lines(metrics: MetricsSummary) -> list[str]:
    line = f"metrics: {metrics.records} records, {human_bytes(metrics.size)}"
    if metrics.skipped:
        line = (f"metrics: {metrics.records} records, {metrics.skipped} "
                f"line{'s' if metrics.skipped > 1 else ''} skipped, {human_bytes(metrics.size)}")
    last = metrics.last
    if last is not None:
        line += f"; last: step {last['step']}, kind {last['kind']!r}"
    shown = [_field("skipped", problem) for problem in metrics.problems]
    if metrics.skipped > len(metrics.problems):
        shown.append(_field("", f"... and {metrics.skipped - len(metrics.problems)} more"))
    return [line, *shown]


def _run_lines(run: RunCheckpointSummary) -> list[str]:
    lines = [f"run: step {run.step}, round {run.round}, seed {run.seed}"]
    curriculum = run.curriculum
    if curriculum is None:
        lines.append("curriculum: none")
    else:
        last = (
            "no rounds yet"
            if curriculum.last_step is None
            else f"last at step {curriculum.last_step}, mean EMD {curriculum.last_mean_emd:.4g}"
        )
        lines.append(
            f"curriculum: {curriculum.rounds} rounds ({last}); mode {curriculum.mode}, "
            f"EMD clamp [{curriculum.min_val:g}, {curriculum.max_val:g}], "
            f"scale {curriculum.scale:g}"
        )
    td = run.td_ema
    if td is None:
        lines.append("td-ema: none")
    else:
        lines.append(
            f"td-ema: mean {td.ema_mean:.4g}, std {td.ema_std:.4g}, {td.step_count} steps "
            f"(warmup {td.warmup_steps}, momentum {td.momentum:g}), "
            f"{td.nonfinite_count} non-finite"
        )
    return lines


def _buffer_lines(name: str, s: CheckpointSummary) -> list[str]:
    envs = "" if s.env_count is None else f" x {s.env_count} envs"
    if s.verified:
        checked = "rows verified against the manifest"
    elif s.format == "BFM-Zero":
        checked = "no manifest to verify against"
    else:
        checked = "rows not verified: --verify hashes them"
    ring = "yes" if s.full else "no"
    episodes = s.ding is not None and s.ding.unit == "episode"
    lines = [
        f"buffer {name}: {s.kind} ({s.format}; {checked})",
        _field("path", str(s.path)),
        _field("target", s.target),
        _field(
            "rows",
            f"{s.length} transitions of episodes in {s.capacity} slots, cursor {s.cursor}, "
            f"full {ring}, device {s.device}" if episodes else
            f"{s.length} of capacity {s.capacity}{envs}, cursor {s.cursor}, full {ring}, "
            f"device {s.device}",
        ),
        _field(
            "size",
            f"{human_bytes(s.row_bytes)} per row, {human_bytes(s.row_bytes * s.length)} held"
            + ("" if episodes else f", {human_bytes(s.row_bytes * s.capacity)} when full"),
        ),
        *_spec_table(s),
    ]
    if s.ding is not None:
        c = s.ding.counters
        lines.append(
            _field(
                "di-engine",
                f"{s.ding.count} valid {s.ding.unit}s, {s.ding.storage} storage; pushed "
                f"{s.ding.push_count}, sampled {c['sampled']} in {c['sample_calls']} calls, "
                f"refused {c['refused_pushes']} pushes and {c['refused_samples']} samples, "
                f"removed {c['removed']}",
            )
        )
    p = s.priorities
    if p is not None:
        top = ", ".join(f"motion {motion} {value:.3g}" for motion, value in p.top)
        lines += [
            _field(
                "priorities",
                f"{p.count} motions, min {p.minimum:.3g}, max {p.maximum:.3g}, entropy "
                f"{p.entropy:.3g} nats (uniform {math.log(p.count):.3g}), effective size "
                f"{p.effective_size:.3g}",
            ),
            _field("highest", top),
        ]
    if s.sampler is not None:
        options = ", ".join(f"{key} {value}" for key, value in s.sampler.options.items())
        lines.append(
            _field(
                "sampler",
                f"{s.sampler.kind} ({options}); max priority {s.sampler.max_priority:.4g}, "
                f"{s.sampler.steps} draws, beta now {s.sampler.beta:.4g}",
            )
        )
        if s.sampler.stats is not None:
            lines.append(_field("", _sampler_stats(s.sampler.stats)))
    return lines


def _rlinf_lines(s: RLinfSummary) -> list[str]:
    def span(size: int, part: IdSpan | None) -> str:
        held = "nothing" if part is None else (
            f"ids {part.first}..{part.last}, {part.count} trajectories, {part.rows} samples")
        return f"{size} (RLinf's default; the loading buffer's option decides): {held}"

    weights = ", ".join(repr(w) for w in s.weights_ids)
    if s.weights_count > len(s.weights_ids):
        weights += f", ... {s.weights_count} in all"
    shapes = "none" if s.steps is None or s.envs is None else (
        f"T {s.steps[0]}..{s.steps[1]} x B {s.envs[0]}..{s.envs[1]}")
    lines = [
        f"{RLINF_DIRECTORY}: {s.path}",
        _field("format", f"{s.trajectory_format} (seed {s.seed}, next id {s.trajectory_counter})"),
        _field("index", f"{s.trajectories} trajectories, {s.samples} samples; {shapes}; "
                        f"{human_bytes(s.file_bytes)} of files"),
        _field("weights", weights or "none"),
        _field("window", span(s.window_size, s.window)),
        _field("cache", span(s.cache_size, s.cache)),
    ]
    if (s.trajectories, s.samples) != s.metadata_counts:
        size, total = s.metadata_counts
        lines.append(_field("metadata", f"says {size} trajectories, {total} samples; loads "
                                        "count the index"))
    if s.absent:
        lines.append(_field("absent", f"{s.absent} indexed trajectories have no file "
                                      "(loads leave them out)"))
    if s.orphans:
        lines.append(_field("orphans", f"{s.orphans} files the index does not name "
                                       "(remove_orphan_files() removes them)"))
    return lines


def _sampler_stats(stats: dict[str, float | None]) -> str:
    """The saved priorities' and importance weights' quantiles on one line."""
    if stats["priority_min"] is None:
        return "priorities: none held"

    def listed(prefix: str, names: tuple[str, ...]) -> str:
        return ", ".join(f"{name} {stats[f'{prefix}_{name}']:.3g}" for name in names)

    return (
        f"priorities {listed('priority', ('min', 'q25', 'median', 'q75', 'max'))}; "
        f"IS weights at beta now {listed('is_weight', ('min', 'median', 'max'))}"
    )


def _field(label: str, text: str) -> str:
    return f"  {label:<11}{text}"


def _spec_table(s: CheckpointSummary) -> list[str]:
    header = ("key path", "dtype", "row shape", "bytes/row", "total")
    rows = [
        (
            format_key_path(row.key_path),
            row.dtype,
            str(list(row.shape)),
            str(row.row_bytes),
            human_bytes(row.total_bytes),
        )
        for row in s.spec
    ]
    if not rows:
        return [_field("spec", "none (nothing written yet)")]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    right = (False, False, False, True, True)  # numbers align right

    def line(cells: tuple[str, ...]) -> str:
        parts = [
            cell.rjust(width) if align else cell.ljust(width)
            for cell, width, align in zip(cells, widths, right, strict=True)
        ]
        return "  " + "  ".join(parts).rstrip()

    return [line(header), *(line(r) for r in rows)]


def to_json(inspection: Inspection) -> dict[str, Any]:
    """The inspection as plain, strict JSON-ready data: paths as str, tuples as lists,
    ``buffers`` a list of summaries, each with its ``name``, and every non-finite float (a NaN
    a run logged, or one a hand-edited ``run.json`` holds) as None, since JSON has no NaN."""
    data: dict[str, Any] = _plain(dataclasses.asdict(inspection))
    data["buffers"] = [
        {"name": name, **_plain(dataclasses.asdict(summary))}
        for name, summary in inspection.buffers
    ]
    return data


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value

"""One source's contents for the pages: buffer summaries, run.json and the metrics log.

Unlike ``bufcore inspect``, which stops at the first damaged file, the dashboard shows what it
can: each part is read on its own and a part that cannot be read carries its error message
(naming the file) instead of a summary, so one corrupt buffer never hides the others. Nothing
here reads buffer rows: summaries read metadata only (:mod:`bufcore.inspect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.sources import OutsideRootsError, inside_roots
from app.text import literal
from bufcore import (
    DictBuffer,
    KeyPathError,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    ZBuffer,
    read_metrics,
)
from bufcore.inspect import (
    BFM_ZERO_WORKDIR,
    BUFFER_CHECKPOINT,
    CHECKPOINT_DIR,
    METRICS_FILE,
    RLINF_DIRECTORY,
    RUN_CHECKPOINT,
    RUN_STATE,
    TRAIN_STATUS,
    CheckpointSummary,
    MetricsSummary,
    RLinfSummary,
    RunCheckpointSummary,
    TrainStatusSummary,
    buffer_dirs,
    buffer_name,
    owning_run,
    source_kind,
    summarize_checkpoint,
    summarize_metrics,
    summarize_rlinf_directory,
    summarize_run_checkpoint,
    summarize_train_status,
)

# Buffer kinds as checkpoint summaries name them (the class names).
ONLINE = TrajectoryDictBufferMultiDim.__name__
EXPERT = TrajectoryDictBuffer.__name__
TRANSITIONS = DictBuffer.__name__
ZVECTORS = ZBuffer.__name__

# Source kinds whose directory holds no metrics.jsonl of its own: a run checkpoint (a run's log
# sits beside it, in the run directory) and a BFM-Zero work directory (BFM-Zero logs to CSV and
# W&B; one that gets a metrics.jsonl counts as a run directory).
LOGLESS_KINDS = (RUN_CHECKPOINT, BFM_ZERO_WORKDIR)
# Where the Curriculum page saves re-prioritized expert checkpoints, under the run directory;
# they are listed with the run's buffers as "reprioritized/<name>".
REPRIORITIZED_DIR = "reprioritized"
# What reading a damaged or unexpected file raises (CorruptFileError is a ValueError).
READ_ERRORS = (OSError, ValueError, KeyPathError, MemoryError)


@dataclass(frozen=True)
class BufferEntry:
    """One buffer checkpoint of a source.

    Attributes:
        name: Its directory name (``train``, ``expert``, ``z``, ...; ``train/rank_1`` for one
            rank's buffer of a run saved by several ranks).
        path: The directory.
        summary: What it holds, or None when it could not be read.
        error: Why it could not be read (names the file), or None.
    """

    name: str
    path: Path
    summary: CheckpointSummary | None
    error: str | None = None


@dataclass(frozen=True)
class SourceData:
    """Everything the Overview shows about one source.

    Attributes:
        path: The source directory.
        kind: What it is (see :func:`bufcore.inspect.source_kind`).
        buffers: Its buffers, by name.
        run: ``checkpoint/run.json``'s summary, or None.
        metrics: ``metrics.jsonl``'s summary, or None.
        has_log: Whether the source has a ``metrics.jsonl`` (even one whose summary failed).
        errors: Messages for the parts besides buffers that could not be read.
        train_status: BFM-Zero's ``checkpoint/train_status.json`` summary, or None.
        rlinf: An RLinf buffer directory's summary (kind ``RLINF_DIRECTORY``), or None (also
            when it cannot be read: ``errors`` says why).
    """

    path: Path
    kind: str
    buffers: tuple[BufferEntry, ...]
    run: RunCheckpointSummary | None
    metrics: MetricsSummary | None
    has_log: bool
    errors: tuple[str, ...]
    train_status: TrainStatusSummary | None = None
    rlinf: RLinfSummary | None = None

    def buffer(self, name: str) -> BufferEntry | None:
        """The buffer called ``name``, or None."""
        return next((entry for entry in self.buffers if entry.name == name), None)


def contents(data: SourceData) -> str:
    """What the source holds and lacks, in one paragraph for a page that cannot draw from it:
    each buffer with its kind (or why it is unusable), the log and run.json."""
    if data.kind == RLINF_DIRECTORY:
        what = ("an unreadable index" if data.rlinf is None else
                f"{data.rlinf.trajectories:,} trajectories ({data.rlinf.samples:,} samples)")
        return (f"`{data.path}` is an RLinf buffer directory holding {what}, and no bufcore "
                f"buffer checkpoint, {METRICS_FILE} or {CHECKPOINT_DIR}/{RUN_STATE}. The "
                "Overview, Trajectories, Sampling lab and FIFO pages show RLinf directories.")
    held = [
        f"buffer `{entry.name}` ({entry.summary.kind})" if entry.summary is not None
        else f"buffer `{entry.name}` (unusable: {literal(entry.error)})"
        for entry in data.buffers
    ] or ["no buffer checkpoint"]
    if data.kind != BUFFER_CHECKPOINT:
        held.append(f"{METRICS_FILE} ({data.metrics.records:,} records)"
                    if data.metrics is not None else
                    f"a damaged {METRICS_FILE}" if data.has_log else f"no {METRICS_FILE}")
        held.append(f"{CHECKPOINT_DIR}/{RUN_STATE} (step {data.run.step:,})"
                    if data.run is not None else f"no {CHECKPOINT_DIR}/{RUN_STATE}")
    text = f"`{data.path}` ({data.kind}) holds " + "; ".join(held) + "."
    if data.kind == BFM_ZERO_WORKDIR or data.train_status is not None:
        text += (
            " BFM-Zero checkpoints its train buffer (not its expert or z buffer) and logs to "
            f"train_log.txt and W&B; the log views read the {METRICS_FILE} that "
            "`bufcore.RunLogger` writes."
        )
    return text


def checkpoint_dir(path: Path) -> Path | None:
    """The run checkpoint directory of a source (itself for a run checkpoint), or None."""
    kind = source_kind(path)
    if kind == RUN_CHECKPOINT:
        return path
    if kind is None or kind in (BUFFER_CHECKPOINT, RLINF_DIRECTORY):
        return None
    return path / CHECKPOINT_DIR


def save_base(source: Path, kind: str) -> Path:
    """The run directory re-prioritized checkpoints go under: the source itself, or for a run
    checkpoint its parent (never inside ``checkpoint/``: a run's next save would refuse to
    replace a checkpoint directory holding anything else), or for a run's earlier checkpoint
    (``RUN/checkpoints/step-<step>``) the run."""
    if kind != RUN_CHECKPOINT:
        return source
    run = owning_run(source)
    return source.parent if run is None else run


def read_source(path: Path, *, roots: Sequence[Path]) -> SourceData:
    """Summarize the source at ``path`` part by part (never raises for a damaged part).

    Every part is read only where it resolves inside ``roots``: a ``checkpoint/``, buffer,
    ``run.json`` or ``reprioritized/`` that is a link out of them carries that error instead
    (:func:`~app.sources.inside_roots`), and nothing behind the link is read.

    Raises:
        ValueError: ``path`` is not a source at all (the message says what was expected).
        OutsideRootsError: ``path`` itself resolves outside ``roots``.
    """
    path = inside_roots(path, roots)
    kind = source_kind(path)
    if kind is None:
        raise ValueError(
            f"{path}: not a run directory, run checkpoint, buffer checkpoint, BFM-Zero work "
            "directory or RLinf buffer directory (expected metrics.jsonl, checkpoint/, "
            "run.json, buffers/, config.json, or metadata.json with trajectory_index.json)"
        )
    if kind == BUFFER_CHECKPOINT:
        return SourceData(path, kind, (_buffer(path, roots),), None, None, False, ())
    if kind == RLINF_DIRECTORY:
        return _rlinf(path)
    errors: list[str] = []
    checkpoint = checkpoint_dir(path)
    run = status = None
    buffers: tuple[BufferEntry, ...] = ()
    if checkpoint is not None and checkpoint.is_dir():
        buffers = tuple(_buffer(folder, roots, buffer_name(checkpoint, folder))
                        for folder in buffer_dirs(checkpoint))
        if (checkpoint / RUN_STATE).exists():
            try:
                inside_roots(checkpoint / RUN_STATE, roots)
                run = summarize_run_checkpoint(checkpoint)
            except READ_ERRORS as err:
                errors.append(str(err))
        if (checkpoint / TRAIN_STATUS).exists():
            try:
                inside_roots(checkpoint / TRAIN_STATUS, roots)
                status = summarize_train_status(checkpoint)
            except READ_ERRORS as err:
                errors.append(str(err))
    base = save_base(path, kind)
    saved = base / REPRIORITIZED_DIR
    versions: list[Path] = []
    # A run checkpoint opened on its own keeps its versions in the run directory above it,
    # which is outside the roots when the dashboard was started on the checkpoint: not shown.
    if _under(base, roots) and (saved.is_symlink() or saved.exists()):
        try:
            versions = _versions(inside_roots(saved, roots))
        except OutsideRootsError as err:
            errors.append(str(err))
    buffers += tuple(
        _buffer(saved / folder.name, roots, f"{REPRIORITIZED_DIR}/{folder.name}")
        for folder in versions
    )
    metrics = None
    has_log = (path / METRICS_FILE).exists()
    if has_log:
        try:
            metrics = summarize_metrics(path)
        except READ_ERRORS as err:
            errors.append(str(err))
    return SourceData(path, kind, buffers, run, metrics, has_log, tuple(errors), status)


def _rlinf(path: Path) -> SourceData:
    """An RLinf buffer directory's source data: its summary, or the reason it has none."""
    try:
        summary = summarize_rlinf_directory(path)
    except READ_ERRORS as err:
        return SourceData(path, RLINF_DIRECTORY, (), None, None, False, (str(err),))
    return SourceData(path, RLINF_DIRECTORY, (), None, None, False, (), rlinf=summary)


def _under(path: Path, roots: Sequence[Path]) -> bool:
    try:
        inside_roots(path, roots)
    except OutsideRootsError:
        return False
    return True


def _buffer(folder: Path, roots: Sequence[Path], name: str | None = None) -> BufferEntry:
    name = folder.name if name is None else name
    try:
        inside_roots(folder, roots)
        return BufferEntry(name, folder, summarize_checkpoint(folder))
    except READ_ERRORS as err:
        return BufferEntry(name, folder, None, str(err))


def _versions(folder: Path) -> list[Path]:
    """The checkpoint directories saved under ``folder``, by name (hidden staging left out)."""
    if not folder.is_dir():
        return []
    return sorted(
        (entry for entry in folder.iterdir() if entry.is_dir() and not entry.name.startswith(".")),
        key=lambda entry: entry.name,
    )


@dataclass(frozen=True)
class MetricsLog:
    """The valid records of a metrics log, read from the start.

    Attributes:
        records: Every valid record, in file order.
        problems: One message per line skipped (torn, not JSON, not a record), naming the
            file and byte offset.
        offset: Byte offset after the last complete line (where a live reader continues).
    """

    records: tuple[dict[str, Any], ...]
    problems: tuple[str, ...]
    offset: int

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """The records whose ``kind`` is ``kind``, in order."""
        return [record for record in self.records if record["kind"] == kind]


def read_log(path: Path) -> MetricsLog:
    """Every valid record of the ``metrics.jsonl`` at ``path`` (a missing file: none).

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: ``path`` is not a regular file.
    """
    records: list[dict[str, Any]] = []
    problems: list[str] = []
    offset = 0
    while True:
        batch, end = read_metrics(path, offset, problems=problems)
        if end < offset:  # replaced while reading: start over
            records, problems, offset = [], [], 0
            continue
        records += batch
        if end == offset:
            return MetricsLog(tuple(records), tuple(problems), offset)
        offset = end

"""What a run directory holds besides its buffers: ``checkpoint/run.json`` and ``metrics.jsonl``.

A run directory (DESIGN §3) holds ``metrics.jsonl`` (one JSON object per line, appended) and
``checkpoint/`` with ``buffers/<name>/`` (buffer checkpoints, :mod:`bufcore.persist.summary`) and
``run.json``::

    {"format": "bufcore-run-checkpoint", "version": 1, "step": 1000, "round": 3, "seed": 0,
     "options": {...}, "curriculum": Curriculum.state_dict(),
     "td_ema": {"ema_mean", "ema_std", "step_count", "momentum", "warmup_steps",
                "nonfinite_count"}, "agent": {...}}

:func:`summarize_run_checkpoint` checks run.json's format and version and the fields it reports
(the curriculum through :mod:`bufcore.curriculum.history`'s own parsers);
:func:`summarize_metrics` counts the log's lines and reads its last record only. Files are read
through :class:`~bufcore.persist.snapshot.CheckpointSnapshot`: only regular files, no symbolic
links, never blocking on a FIFO.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bufcore.curriculum.history import options_from_state, rounds_from_state
from bufcore.errors import CorruptCheckpointError, CorruptFileError, StateError
from bufcore.fields import Field
from bufcore.persist.run_checkpoint import METRICS_FILE, RUN_STATE, read_run_state
from bufcore.persist.snapshot import CheckpointSnapshot

_READ_BYTES = 1 << 20
# A metrics record longer than this is not one the run log writes.
_MAX_RECORD_BYTES = 16 << 20


@dataclass(frozen=True)
class CurriculumSummary:
    """The EMD curriculum saved in run.json.

    Attributes:
        mode: How EMDs become priorities (``"lin"``, ``"exp"`` or ``"bin"``).
        min_val: Lower EMD clamp.
        max_val: Upper EMD clamp.
        scale: Multiplier after clamping.
        rounds: Evaluation rounds recorded.
        last_step: Training step of the last round, or None without rounds.
        last_mean_emd: Mean EMD over the motions of the last round, or None.
    """

    mode: str
    min_val: float
    max_val: float
    scale: float
    rounds: int
    last_step: int | None
    last_mean_emd: float | None


@dataclass(frozen=True)
class TDEMASummary:
    """The TD-error EMA normaliser's state saved in run.json (field names as saved)."""

    ema_mean: float
    ema_std: float
    step_count: int
    momentum: float
    warmup_steps: int
    nonfinite_count: int


@dataclass(frozen=True)
class RunCheckpointSummary:
    """A run's ``checkpoint/run.json``.

    Attributes:
        path: The file.
        step: Training step of the checkpoint.
        round: Curriculum round of the checkpoint.
        seed: The run's seed (None when not recorded).
        options: The run's options as saved (plain JSON).
        curriculum: The curriculum, or None when not saved.
        td_ema: The TD-EMA state, or None when not saved.
    """

    path: Path
    step: int
    round: int
    seed: int | None
    options: dict[str, Any]
    curriculum: CurriculumSummary | None
    td_ema: TDEMASummary | None


@dataclass(frozen=True)
class MetricsSummary:
    """A run's ``metrics.jsonl``, read cheaply.

    Attributes:
        path: The file.
        size: Bytes.
        records: Complete lines (a line still being appended is not counted).
        last: The last complete record, or None when there is none.
    """

    path: Path
    size: int
    records: int
    last: dict[str, Any] | None


def summarize_run_checkpoint(checkpoint: str | os.PathLike[str]) -> RunCheckpointSummary:
    """Summarize ``run.json`` in the run checkpoint directory ``checkpoint``.

    Raises:
        FileNotFoundError: ``checkpoint`` is not a directory.
        CorruptCheckpointError: run.json is missing, not a regular file, not JSON, of another
            format or version, or a field it reports is malformed (names the file and field).
    """
    data = read_run_state(checkpoint)
    where = Path(checkpoint).absolute() / RUN_STATE
    try:
        return _run_summary(where, Field(data, "run", part="state"))
    except StateError as err:
        raise CorruptCheckpointError(where, str(err)) from err


def _run_summary(where: Path, run: Field) -> RunCheckpointSummary:
    options = run.optional("options", {})
    options.mapping()
    curriculum = run.optional("curriculum", None)
    td_ema = run.optional("td_ema", None)
    return RunCheckpointSummary(
        path=where,
        step=run.key("step").integer(minimum=0),
        round=run.key("round").integer(minimum=0),
        seed=run.optional("seed", None).validate(_seed),
        options=dict(options.value),
        curriculum=None if curriculum.value is None else _curriculum(curriculum),
        td_ema=None if td_ema.value is None else _td_ema(td_ema),
    )


def _seed(value: Any, where: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TypeError(f"{where}: expected an int or null, got {value!r:.80}")


def _curriculum(curriculum: Field) -> CurriculumSummary:
    """The curriculum state at ``curriculum``, parsed by the curriculum's own readers."""
    state = curriculum.mapping()
    try:
        options = options_from_state(state)
        rounds = rounds_from_state(state, _first_round_motions(state))
    except StateError as err:
        # Those readers name the key path from the state's root: say where that root sits.
        raise curriculum.error(str(err)) from err
    last = rounds[-1] if rounds else None
    return CurriculumSummary(
        mode=options.mode,
        min_val=options.min_val,
        max_val=options.max_val,
        scale=options.scale,
        rounds=len(rounds),
        last_step=None if last is None else last.step,
        last_mean_emd=None if last is None else math.fsum(last.emd.values()) / len(last.emd),
    )


def _first_round_motions(state: Any) -> set[int]:
    """The motion ids of the first round: every round must cover the same ones.

    Malformed ids are left to :func:`rounds_from_state`, which reports them with their path.
    """
    rounds = state.get("rounds")
    first = rounds[0] if isinstance(rounds, list) and rounds else None
    ids = first.get("motion_ids") if isinstance(first, dict) else None
    if isinstance(ids, list) and all(type(i) is int for i in ids):
        return set(ids)
    return set()


def _td_ema(td_ema: Field) -> TDEMASummary:
    return TDEMASummary(
        ema_mean=td_ema.key("ema_mean").real(),
        ema_std=td_ema.key("ema_std").real(minimum=0.0),
        step_count=td_ema.key("step_count").integer(minimum=0),
        momentum=td_ema.key("momentum").real(minimum=0.0),
        warmup_steps=td_ema.key("warmup_steps").integer(minimum=0),
        nonfinite_count=td_ema.key("nonfinite_count").integer(minimum=0),
    )


def summarize_metrics(run: str | os.PathLike[str]) -> MetricsSummary:
    """Count the records of ``metrics.jsonl`` in the run directory ``run`` and read the last.

    The file is read once in blocks to count its lines; only the last complete line is parsed.
    A last line without its newline is a record still being written, and is not counted.

    Raises:
        FileNotFoundError: ``run`` is not a directory.
        CorruptFileError: metrics.jsonl is missing, not a regular file, unreadable, or its last
            complete line is not a JSON object.
    """
    with CheckpointSnapshot(Path(run)) as snapshot:
        where = snapshot.path / METRICS_FILE
        fd = snapshot.open(METRICS_FILE, error=CorruptFileError)
    try:
        size, records, end = _count_lines(fd, where)
        last = _last_line(fd, where, end) if records else None
    finally:
        os.close(fd)
    if last is None:
        return MetricsSummary(where, size, records, None)
    try:
        record = json.loads(last.decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise CorruptFileError(where, f"line {records}: not valid JSON ({err})") from None
    if not isinstance(record, dict):
        raise CorruptFileError(
            where, f"line {records}: expected a JSON object, got {type(record).__name__}"
        )
    return MetricsSummary(where, size, records, record)


def _count_lines(fd: int, where: Path) -> tuple[int, int, int]:
    """``(bytes read, complete lines, offset just past the last newline)``."""
    offset = lines = end = 0
    try:
        while block := os.pread(fd, _READ_BYTES, offset):
            count = block.count(b"\n")
            if count:
                lines += count
                end = offset + block.rindex(b"\n") + 1
            offset += len(block)
    except OSError as err:
        raise CorruptFileError(where, f"reading failed ({err.strerror})") from None
    return offset, lines, end


def _last_line(fd: int, where: Path, end: int) -> bytes:
    """The line ending at byte ``end`` (its newline excluded), read backwards in blocks."""
    stop = end - 1  # the newline itself
    start = stop
    parts: list[bytes] = []
    try:
        while start > 0:
            size = min(_READ_BYTES, start)
            block = os.pread(fd, size, start - size)
            newline = block.rfind(b"\n")
            if newline >= 0:
                parts.append(block[newline + 1 :])
                break
            parts.append(block)
            start -= size
            if stop - start > _MAX_RECORD_BYTES:
                raise CorruptFileError(
                    where, f"the last record is longer than {_MAX_RECORD_BYTES} bytes"
                )
    except OSError as err:
        raise CorruptFileError(where, f"reading failed ({err.strerror})") from None
    return b"".join(reversed(parts))

"""The Overview page's tables and its health check: one row per buffer, one row per stored
leaf, latest metrics; what is damaged or unusable (with the reason) and what the run lacks.

Plain lists of dicts (one dict per table row, column name -> value), ready for
``st.dataframe``; numbers stay numbers so the table sorts them as numbers.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from typing import Any

from app.run_data import (
    EXPERT,
    ONLINE,
    TRANSITIONS,
    ZVECTORS,
    BufferEntry,
    MetricsLog,
    SourceData,
)
from app.text import literal
from bufcore.inspect import (
    BUFFER_CHECKPOINT,
    CHECKPOINT_DIR,
    CONFIG_FILE,
    METRICS_FILE,
    RUN_STATE,
    CheckpointSummary,
    format_key_path,
    human_bytes,
    split_rank,
)

# Record kinds whose latest values the Overview shows, in this order.
LATEST_KINDS = ("train", "buffer", "eval", "checkpoint")


def saved_at(entry: BufferEntry) -> str:
    """When the buffer's checkpoint was written (config.json's mtime, local time), or ``"?"``."""
    try:
        stamp = os.stat(entry.path / CONFIG_FILE).st_mtime
    except OSError:
        return "?"
    return dt.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")


def buffer_rows(
    entries: tuple[BufferEntry, ...], health: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """One row per buffer: kind, rows held, ring position, size, save time (or the error), and
    with ``health`` (buffer name -> what its check found) a health column."""
    rows: list[dict[str, Any]] = []
    for entry in entries:
        s = entry.summary
        if s is None:
            rows.append({"buffer": entry.name, "kind": "unreadable", "error": entry.error})
            continue
        rows.append(
            {
                "buffer": entry.name,
                "kind": s.kind,
                **({} if health is None else {"health": health.get(entry.name, "")}),
                "rows": "[time]" if s.env_count is None else f"[time, {s.env_count} envs]",
                "capacity": s.capacity,
                "length": s.length,
                "cursor": s.cursor,
                "full": s.full,
                "held": human_bytes(s.row_bytes * s.length),
                # An episode buffer's rows are its episodes' transitions, not its slots.
                "when full": "" if s.ding is not None and s.ding.unit == "episode"
                else human_bytes(s.row_bytes * s.capacity),
                "format": s.format,
                "saved": saved_at(entry),
                "error": "",
            }
        )
    return rows


def rank_rows(
    entries: tuple[BufferEntry, ...], replicated: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """For a run saved by several ranks: one row per buffer, how the ranks hold it, each
    rank's rows held (of its capacity) side by side, and the distinct rows in all: the sum
    over the ranks of a sharded buffer, one rank's of a ``replicated`` one (every rank holds
    the same rows); empty for a one-rank run."""
    table: dict[str, dict[str, Any]] = {}
    for entry in entries:
        base, rank = split_rank(entry.name)
        if rank is None:
            continue
        held = "replicated" if base in replicated else "sharded"
        row = table.setdefault(base, {"buffer": base, "held": held, "rows in all": 0})
        s = entry.summary
        row[f"rank {rank}"] = "unreadable" if s is None else f"{s.length:,} / {s.capacity:,}"
        if s is not None and (held == "sharded" or rank == 0):
            row["rows in all"] += s.length
    # The total last, after every rank's column.
    return [{**{k: v for k, v in row.items() if k != "rows in all"},
             "rows in all": row["rows in all"]} for row in table.values()]


# ------------------------------------------------------------------------------ health check
# Which pages draw from each kind of buffer, and from the log and run.json.
USED_BY = {
    ONLINE: "FIFO, Trajectories, Sampling lab",
    EXPERT: "Curriculum, Trajectories, Sampling lab, Compare",
    ZVECTORS: "FIFO, Z-buffer, Sampling lab",
    TRANSITIONS: "FIFO, Sampling lab",
}
LOG_VIEWS = "Live, TD-EMA, the Curriculum's rounds and FIFO's fill over training"
RUN_STATE_VIEWS = "the Curriculum's saved rounds and options, TD-EMA's run settings"


def verify_size(entry: BufferEntry) -> int | None:
    """Bytes of rows the health check hashes to verify this buffer, or None when there is
    nothing to verify (unreadable, or BFM-Zero's format, which has no manifest)."""
    summary = entry.summary
    if summary is None or summary.format == "BFM-Zero":
        return None
    return summary.row_bytes * summary.length


def verify_text(entry: BufferEntry, size: int) -> str:
    """``"`train` (9.16 MiB)"``: a buffer and the bytes verifying it reads."""
    return f"`{entry.name}` ({human_bytes(size)})"


def buffer_health(entry: BufferEntry, damage: str | None, *, verified: bool) -> str:
    """What the health check found for one buffer, in a few words.

    Args:
        entry: The buffer.
        damage: Why its rows fail verification against the manifest, or None.
        verified: Whether its rows were hashed against the manifest.
    """
    if entry.summary is None:
        return "unusable"
    if damage is not None:
        return "damaged: rows differ from the manifest"
    if entry.summary.format == "BFM-Zero":
        return "opens (BFM-Zero: no manifest to verify rows against)"
    return "ok: rows match the manifest" if verified else "opens; rows not verified yet"


def health_problems(data: SourceData, damage: Mapping[str, str]) -> list[str]:
    """Every reason the source is not whole, each naming the part and the file: buffers that
    cannot be used (unknown ``__target__``, damaged small files), rows that fail verification
    (``damage``: buffer name -> the verification error), run.json, train_status.json or the
    log unreadable."""
    problems = [
        f"Buffer `{entry.name}` cannot be used: {literal(entry.error)}"
        for entry in data.buffers if entry.error is not None
    ]
    problems += [
        f"Buffer `{name}` is damaged: {literal(reason)}" for name, reason in damage.items()
    ]
    return problems + list(data.errors)


def missing_parts(data: SourceData) -> list[str]:
    """What the source lacks and which views therefore have nothing to draw (empty for a
    lone buffer checkpoint, which is complete as it is)."""
    if data.kind == BUFFER_CHECKPOINT:
        return []
    missing = []
    if not data.buffers:
        missing.append("No buffer checkpoint (a run saves them at its first checkpoint): the "
                       "buffer views have nothing to draw.")
    if not data.has_log:
        missing.append(f"No {METRICS_FILE}: {LOG_VIEWS} have nothing to draw (they read the "
                       "log `bufcore.RunLogger` writes).")
    if data.run is None and not any(RUN_STATE in error for error in data.errors):
        missing.append(f"No {CHECKPOINT_DIR}/{RUN_STATE}: {RUN_STATE_VIEWS} are not available.")
    kinds = {entry.summary.kind for entry in data.buffers if entry.summary is not None}
    if data.buffers and EXPERT not in kinds:
        missing.append(f"No expert buffer ({EXPERT}): the Curriculum's priorities and "
                       "re-prioritizing need one.")
    if data.buffers and ZVECTORS not in kinds:
        missing.append(f"No z buffer ({ZVECTORS}): the Z-buffer page needs one.")
    return missing


def healthy_text(data: SourceData, health: Mapping[str, str]) -> str:
    """The one line saying a source with no problem is whole, and how far that was checked."""
    count = len(data.buffers)
    verified = sum(text.startswith("ok") for text in health.values())
    foreign = sum(text.startswith("opens (BFM-Zero") for text in health.values())
    notes = []
    if verified:
        notes.append("rows verified against the manifest"
                     + ("" if verified == count else f" for {verified}"))
    if foreign:
        notes.append("BFM-Zero's format: no manifest to verify rows against"
                     + ("" if foreign == count else f" for {foreign}"))
    files = [name for name, read in ((RUN_STATE, data.run), (METRICS_FILE, data.metrics))
             if read is not None]
    return (
        "Healthy: " + ("the buffer opens" if count == 1 else f"all {count} buffers open")
        + (f" ({'; '.join(notes)})" if notes else "")
        + (f"; {' and '.join(files)} read" if files else "") + "."
    )


def spec_rows(summary: CheckpointSummary) -> list[dict[str, Any]]:
    """One row per stored leaf: key path, dtype, row shape, bytes per row and in total."""
    return [
        {
            "key path": format_key_path(row.key_path),
            "dtype": row.dtype,
            "row shape": str(list(row.shape)),
            "bytes/row": row.row_bytes,
            "total": human_bytes(row.total_bytes),
        }
        for row in summary.spec
    ]


def latest_records(log: MetricsLog) -> dict[str, dict[str, Any]]:
    """The last record of each kind in :data:`LATEST_KINDS` that the log holds."""
    latest: dict[str, dict[str, Any]] = {}
    for record in log.records:
        if record["kind"] in LATEST_KINDS:
            latest[record["kind"]] = record
    return {kind: latest[kind] for kind in LATEST_KINDS if kind in latest}


def scalar_items(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The record's numeric and boolean fields besides ``time``, nested ones as ``a/b``, with
    their values as text (floats to 6 significant digits)."""
    items: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}/{key}" if prefix else str(key), inner)
        elif isinstance(value, float) and prefix != "time":
            items.append((prefix, f"{value:.6g}"))
        elif isinstance(value, (int, bool)):
            items.append((prefix, str(value)))

    walk("", record)
    return items

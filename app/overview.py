"""The Overview page's tables: one row per buffer, one row per stored leaf, latest metrics.

Plain lists of dicts (one dict per table row, column name -> value), ready for
``st.dataframe``; numbers stay numbers so the table sorts them as numbers.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from app.run_data import BufferEntry, MetricsLog
from bufcore.inspect import CONFIG_FILE, CheckpointSummary, format_key_path, human_bytes

# Record kinds whose latest values the Overview shows, in this order.
LATEST_KINDS = ("train", "buffer", "eval", "checkpoint")


def saved_at(entry: BufferEntry) -> str:
    """When the buffer's checkpoint was written (config.json's mtime, local time), or ``"?"``."""
    try:
        stamp = os.stat(entry.path / CONFIG_FILE).st_mtime
    except OSError:
        return "?"
    return dt.datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S")


def buffer_rows(entries: tuple[BufferEntry, ...]) -> list[dict[str, Any]]:
    """One row per buffer: kind, rows held, ring position, size, save time (or the error)."""
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
                "rows": "[time]" if s.env_count is None else f"[time, {s.env_count} envs]",
                "capacity": s.capacity,
                "length": s.length,
                "cursor": s.cursor,
                "full": s.full,
                "held": human_bytes(s.row_bytes * s.length),
                "when full": human_bytes(s.row_bytes * s.capacity),
                "format": s.format,
                "saved": saved_at(entry),
                "error": "",
            }
        )
    return rows


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

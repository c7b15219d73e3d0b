"""A run's metrics log: :class:`RunLogger` appends records to ``metrics.jsonl``, and
:func:`read_metrics` tails it.

The record format (fields, the ``nonfinite`` flag and its JSON Pointer paths) is
:mod:`bufcore.runs.records`'s; the bytes on disk are :mod:`bufcore.persist.jsonl`'s. A training
loop writes::

    with RunLogger(run_dir) as log:
        log.log("train", step, {"loss": loss, "td": {"ema": ema}})

and a dashboard polls::

    records, offset = read_metrics(run_dir / "metrics.jsonl", offset)

Data-parallel, every rank makes a logger and calls ``log`` alike; rank 0 alone writes
``metrics.jsonl`` (the seed's rank-0-only logging), and figures each rank has of its own
(buffer occupancy, samples drawn) are gathered into rank 0's record instead of being lost::

    log.log("train", step, {"loss": loss}, per_rank={"occupancy": len(buffer), "sampled": n})
    # rank 0 writes {..., "loss": ..., "ranks": {"occupancy": [r0, r1, ...], "sampled": [...]}}
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import torch

from bufcore.checks import check_bool, check_int, check_path
from bufcore.distributed import all_gather_checked, rank
from bufcore.persist.jsonl import MAX_LINE_BYTES, LineAppender, read_lines
from bufcore.persist.run_checkpoint import METRICS_FILE
from bufcore.runs.records import decode_record, encode_record

RANKS_KEY = "ranks"
"""The record key under which :meth:`RunLogger.log` puts the per-rank figures."""
# A per-rank figure is one number: ints within what records hold (int64/uint64).
_FIGURE_INTS = (-(2**63), 2**64 - 1)


class RunLogger:
    """Writes a run's ``metrics.jsonl``: one JSON object per line, each written and handed to
    the operating system before :meth:`log` returns (a reader sees it at once; a crash of this
    process loses nothing logged).

    In a default process group (:mod:`bufcore.distributed`; make the logger after
    ``init_process_group``), only rank 0 writes: on other ranks the logger touches no file and
    :meth:`log` checks and returns the record without writing it. Every rank calls ``log``
    alike, so that figures passed as ``per_rank`` reach rank 0's record.

    Args:
        run_dir: The run directory; created if missing.
        clock: Returns the ``time`` of each record (seconds since the epoch by default).
        fresh: True: start a new ``metrics.jsonl``, replacing an old one (a reader tailing it
            sees a new run and starts over). False: append to the existing file (a resumed run).

    Raises:
        TypeError: ``run_dir`` is not a path, ``clock`` not callable or ``fresh`` not a bool.
        ValueError: ``run_dir`` is empty (``""``).
        OSError: the directory or file cannot be created (``FileExistsError``: ``run_dir`` is a
            file; ``IsADirectoryError``: ``metrics.jsonl`` is a directory).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        fresh: bool = True,
    ) -> None:
        directory = check_path(run_dir, "run_dir")
        if not callable(clock):
            raise TypeError(f"clock: expected a callable returning seconds, got {clock!r:.80}")
        fresh = check_bool(fresh, "fresh")
        self._clock = clock
        self._path = directory / METRICS_FILE
        self._rank = rank()
        self._appender = LineAppender(self._path, fresh=fresh) if self._rank == 0 else None
        self._closed = False

    @property
    def path(self) -> Path:
        """The ``metrics.jsonl`` file (rank 0's, which only rank 0 writes)."""
        return self._path

    @property
    def writes(self) -> bool:
        """Whether this logger writes the file: rank 0's does (so does a lone process's)."""
        return self._appender is not None

    def log(
        self,
        kind: str,
        step: int,
        metrics: Mapping[str, Any],
        *,
        per_rank: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Append ``{"step": step, "time": clock(), "kind": kind, **metrics}`` as one line.

        Metrics keep their order. The whole record is checked and encoded before a byte is
        written: after an error the file is as before.

        With ``per_rank``, each rank's figures are gathered (one collective: every rank must
        pass ``per_rank`` in the same calls) and the record ends with ``"ranks": {name:
        [rank 0's, rank 1's, ...]}``; a lone process writes lists of one. Any rank's invalid
        record or figures fail every rank's call (the others name that rank), so no rank is
        left waiting. The record's other metrics and its time are rank 0's.

        Args:
            kind: What the record is (``"train"``, ``"eval"``, ...): an ASCII identifier.
            step: The training step, an int >= 0.
            metrics: str keys (not ``step``, ``time``, ``kind`` or ``nonfinite``) to None, bool,
                int, float, str, nested mappings, lists or tuples of those, numpy scalars, or
                numpy arrays and torch tensors with at most one dimension and 4096 elements
                (written as lists). Non-finite floats are written as null and named in the
                record's ``nonfinite`` object.
            per_rank: str keys to this rank's figures: one number each (int, float, bool,
                None, a numpy scalar or a one-element tensor); the same keys on every rank.
                ``metrics`` must not hold ``"ranks"`` then.

        Returns:
            The record as written (JSON data: tuples and arrays as lists, non-finite floats as
            None, plus ``nonfinite`` where there were any); on a rank other than 0, the record
            as rank 0 would write it with this rank's metrics, not written.

        Raises:
            TypeError: an argument or value of the wrong kind; the message names the key path
                (``metrics['td']['ema']``) and the type.
            ValueError: ``kind`` not an identifier, ``step`` negative, a reserved key, an int
                beyond 64 bits, an array of more than one dimension or 4096 elements, nesting
                deeper than 32 levels, a record longer than 16 MiB, a non-finite ``clock()``,
                or the logger is closed; with ``per_rank``: ``"ranks"`` among the metrics, or
                ranks that passed different keys.
            OSError: the write failed (the part written is removed again).
        """
        if per_rank is None:
            self._check_open()
            record = encode_record(kind, step, self._clock(), metrics)
        else:
            now = self._clock()

            def figures() -> dict[str, Any]:
                self._check_open()
                encode_record(kind, step, now, metrics)  # fails every rank, not rank 0 alone
                if isinstance(metrics, Mapping) and RANKS_KEY in metrics:
                    raise ValueError(
                        f"metrics[{RANKS_KEY!r}]: holds the per-rank figures when per_rank is "
                        "given; use another name"
                    )
                return _figures(per_rank)

            record = encode_record(
                kind, step, now, {**metrics, RANKS_KEY: _by_name(all_gather_checked(figures))}
            )
        if self._appender is not None:
            line = json.dumps(record, allow_nan=False).encode("ascii") + b"\n"
            self._appender.write_line(line)
        return record

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self.path}: the logger is closed")

    def close(self) -> None:
        """Close the file (fsynced first); idempotent."""
        self._closed = True
        if self._appender is not None:
            self._appender.close()

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        role = "" if self.writes else f", rank {self._rank}: writes nothing"
        return f"RunLogger({str(self.path)!r}, {state}{role})"


def _figures(per_rank: Any) -> dict[str, Any]:
    """This rank's figures as JSON numbers.

    Raises:
        TypeError: not a mapping, a non-str key, or a value that is not one number.
        ValueError: an int beyond 64 bits.
    """
    if not isinstance(per_rank, Mapping):
        raise TypeError(f"per_rank: expected a mapping, got {type(per_rank).__name__}")
    figures: dict[str, Any] = {}
    for key, value in per_rank.items():
        if not isinstance(key, str):
            raise TypeError(f"per_rank: keys must be str, got {key!r:.80}")
        where = f"per_rank[{key!r}]"
        if isinstance(value, torch.Tensor | np.ndarray | np.generic):
            count = value.numel() if isinstance(value, torch.Tensor) else value.size
            if count != 1:
                raise TypeError(f"{where}: expected one number, got {count} values")
            value = value.item()
        if value is None or isinstance(value, bool | float):
            figures[key] = value
        elif isinstance(value, int):
            figures[key] = check_int(value, where, minimum=_FIGURE_INTS[0], maximum=_FIGURE_INTS[1])
        else:
            raise TypeError(f"{where}: expected one number, got {type(value).__name__}")
    return figures


def _by_name(shares: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The ranks' figures as name -> [rank 0's, rank 1's, ...].

    Raises:
        ValueError: the ranks passed different keys.
    """
    names = list(shares[0])
    for rank_number, share in enumerate(shares):
        if sorted(share) != sorted(names):
            raise ValueError(
                f"per_rank: rank {rank_number} passed {sorted(share)}, rank 0 {sorted(names)}; "
                "every rank must pass the same figures"
            )
    return {name: [share[name] for share in shares] for name in names}


def read_metrics(
    path: str | os.PathLike[str], offset: int = 0, *, problems: list[str] | None = None
) -> tuple[list[dict[str, Any]], int]:
    """The complete, valid records of a ``metrics.jsonl`` from byte ``offset`` on.

    Call it again with the offset it returned to get the records written since. A last line
    still being written (no newline yet) is left for a later call. One call reads about 8 MiB
    of lines at most; the next continues.

    A new run (the file was replaced: it is shorter than ``offset``, or ``offset`` does not
    follow a line end) or a removed file gives ``([], 0)``: drop the records read so far and
    call again from 0. ``[], 0`` is also what a file not yet created gives.

    Records come back as written, with non-finite floats back in place of their nulls and the
    ``nonfinite`` object removed (an int outside the 64-bit range a logger writes, which no
    logger wrote, reads as the nearest float). A complete line that is not a valid record (not
    UTF-8 strict JSON, not an object, ``step``/``time``/``kind`` missing or malformed, longer
    than 16 MiB) is skipped, and described (file, byte offset, line number when the read
    started at 0, why) in ``problems`` if given, else in a ``RuntimeWarning``.

    A last line without its newline is never read as a record. While a :class:`RunLogger` has
    the file open it is being written, and waits. When none has (its writer stopped mid-line:
    the line is *torn*), a call that finds nothing else to read (it starts at that line, so a
    loop reading to the end meets it once) describes it like a skipped line. A logger resuming
    the log (``fresh=False``) closes it off with a newline: it is then a complete invalid line.

    Raises:
        TypeError: ``path`` is not a path, ``offset`` not an int or ``problems`` not a list.
        ValueError: ``offset`` is negative, or ``path`` is empty or not a regular file.
        OSError: the file exists but cannot be read.
    """
    file = check_path(path, "path")
    offset = check_int(offset, "offset", minimum=0)
    if problems is not None and not isinstance(problems, list):
        raise TypeError(f"problems: expected a list or None, got {type(problems).__name__}")
    tail = read_lines(file, offset)
    found: list[str] = []
    records = []
    for number, line in enumerate(tail.lines):
        try:
            if line.data is None:
                raise ValueError(f"longer than {MAX_LINE_BYTES} bytes")
            records.append(decode_record(line.data))
        except ValueError as err:
            counted = "" if tail.first_line is None else f" (line {tail.first_line + number})"
            found.append(f"{file}: byte {line.start}{counted}: {err}; skipped")
    if tail.torn and not tail.lines:
        counted = "" if tail.first_line is None else f" (line {tail.first_line})"
        found.append(
            f"{file}: byte {tail.end}{counted}: torn: the last line has no newline and no "
            "RunLogger has the file open (its writer stopped mid-line); skipped"
        )
    for problem in found:
        if problems is None:
            warnings.warn(problem, RuntimeWarning, stacklevel=2)
        else:
            problems.append(problem)
    return records, tail.end

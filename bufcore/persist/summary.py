"""What a buffer checkpoint holds, read lazily: its kind, ring position, spec and priorities.

:func:`summarize_checkpoint` answers "what is in this directory?" without loading the buffer:
it opens the checkpoint the way a load does (:func:`bufcore.persist.checkpoint.open_checkpoint`:
one directory handle, the small files verified against the manifest, HDF5 links and external
storage refused) and reads only buffer.hdf5's metadata (dataset names, shapes, dtypes), never
its rows. Hashing buffer.hdf5 means reading all of it, so that is done only when asked
(``verify=True``). ``bufcore inspect`` prints these summaries; the dashboard reuses them.

It reads both bufcore checkpoints (with a manifest) and BFM-Zero's own buffer directories
(config.json and buffer.hdf5 only; their spec is inferred from the datasets, and ``n_dim`` in
config.json, when present, gives the number of batch axes as BFM-Zero's multi-env buffer
records it).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from bufcore.checks import check_bool, check_separator
from bufcore.fields import Field
from bufcore.persist.checkpoint import OpenedCheckpoint, load_checkpoint, saved_ring_position
from bufcore.tree import KeyPath, as_key, as_key_path, dtype_name

# How many of the highest priorities a summary lists.
TOP_PRIORITIES = 5


@dataclass(frozen=True)
class SpecRow:
    """One stored leaf.

    Attributes:
        key_path: The leaf's key path.
        dtype: Its dtype's name (``"float32"``).
        shape: Its trailing shape (after the batch axes).
        row_bytes: Bytes per time row (all envs of a ``[time, env]`` buffer).
        total_bytes: Bytes of the rows held (``row_bytes * length``).
    """

    key_path: KeyPath
    dtype: str
    shape: tuple[int, ...]
    row_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class PrioritySummary:
    """The sampling priorities an expert buffer saved, normalised to sum 1.

    Attributes:
        count: Trajectories (one priority each).
        minimum: Smallest normalised priority.
        maximum: Largest normalised priority.
        entropy: Entropy of the normalised priorities, in nats (``log(count)`` when uniform).
        effective_size: ``1 / sum(p**2)``: how many equally likely trajectories the
            distribution is worth (``count`` when uniform, 1 when one takes everything).
        top: ``(motion id, normalised priority)`` of the highest ones, highest first.
    """

    count: int
    minimum: float
    maximum: float
    entropy: float
    effective_size: float
    top: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class CheckpointSummary:
    """A buffer checkpoint directory, as :func:`summarize_checkpoint` read it.

    Attributes:
        path: The directory.
        format: ``"bufcore v<manifest format version>"`` or ``"BFM-Zero"`` (no manifest).
        target: config.json's ``__target__``.
        kind: The class name (the last part of ``target``).
        capacity: Time rows the buffer holds when full.
        length: Time rows held.
        cursor: Row the next write starts at (``_idx``).
        full: Whether the ring has wrapped (``_is_full``).
        device: The device recorded in config.json.
        separator: The nested key separator of the dataset names.
        batch_dims: Leading batch axes (1: ``[time]`` rows, 2: ``[time, env]`` rows).
        env_count: Envs per time row for ``[time, env]`` rows, else None.
        spec: One row per stored leaf, in dataset order.
        row_bytes: Bytes per time row, all leaves together.
        priorities: The saved priorities (expert buffers), or None.
        verified: Whether buffer.hdf5 was hashed and matched the manifest (only with
            ``verify=True`` and a manifest).
        end_key: The end-flag leaf of a trajectory buffer (config.json's ``end_key``), or None
            for buffers without one.
    """

    path: Path
    format: str
    target: str
    kind: str
    capacity: int
    length: int
    cursor: int
    full: bool
    device: str
    separator: str
    batch_dims: int
    env_count: int | None
    spec: tuple[SpecRow, ...]
    row_bytes: int
    priorities: PrioritySummary | None
    verified: bool
    end_key: KeyPath | None = None


def summarize_checkpoint(
    path: str | os.PathLike[str], *, verify: bool = False
) -> CheckpointSummary:
    """Summarize the buffer checkpoint directory at ``path`` without reading its rows.

    Every check a load makes on the small files and on buffer.hdf5's metadata is made (the
    manifest's checksum, format and fields; config.json's ring position against the rows
    stored; the datasets against the manifest), so a checkpoint that summarizes also opens.

    Args:
        path: The checkpoint directory (bufcore's or BFM-Zero's).
        verify: Also hash buffer.hdf5 against the manifest (reads the whole file).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        CorruptCheckpointError: a file is missing, malformed or inconsistent, or (with
            ``verify``) buffer.hdf5 differs from the manifest; names the file and field.
        TypeError: ``verify`` is not a bool (checked before anything is read).
    """
    verify = check_bool(verify, "verify")
    return load_checkpoint(
        path, lambda opened: summarize_opened(opened, verify=verify), hash_payload=verify
    )


def summarize_opened(opened: OpenedCheckpoint, *, verify: bool = False) -> CheckpointSummary:
    """The summary of an open checkpoint, making every check a load makes on its metadata.

    Args:
        opened: The checkpoint, opened by :func:`~bufcore.persist.checkpoint.load_checkpoint`.
        verify: Whether it was opened with its payload hashed (only recorded here).

    Raises:
        CorruptCheckpointError: the datasets disagree with the manifest or each other.
        StateError: a field of config.json or state.json is malformed or inconsistent.
    """
    config = Field(opened.config, "config", part="config")
    # As a load reads them: the buffer classes take both from config.json, then the stored
    # datasets (and the manifest) must agree.
    separator = config.optional("nested_key_separator", "-").validate(check_separator)
    batch_dims = config.optional("n_dim", 1).integer(minimum=1, maximum=2)
    source = opened.row_source(separator, batch_dims)
    capacity = config.key("capacity").integer(minimum=1)
    cursor, full = saved_ring_position(config, source.count, capacity)
    envs = source.env_count if source.env_count is not None else 1
    rows = tuple(
        SpecRow(
            key_path=key_path,
            dtype=dtype_name(leaf.dtype),
            shape=leaf.shape,
            row_bytes=leaf.nbytes * envs,
            total_bytes=leaf.nbytes * envs * source.count,
        )
        for key_path, leaf in source.spec.items()
    )
    manifest = opened.manifest
    return CheckpointSummary(
        path=opened.path,
        format="BFM-Zero" if manifest is None else f"bufcore v{manifest['format_version']}",
        target=opened.target,
        kind=opened.target.rsplit(".", 1)[-1],
        capacity=capacity,
        length=source.count,
        cursor=cursor,
        full=full,
        device=config.optional("device", "cpu").text(),
        separator=separator,
        batch_dims=batch_dims,
        env_count=source.env_count,
        spec=rows,
        row_bytes=sum(row.row_bytes for row in rows),
        priorities=_priorities(Field(opened.state, "state", part="state")),
        verified=verify and manifest is not None,
        end_key=_end_key(config),
    )


def _end_key(config: Field) -> KeyPath | None:
    """config.json's ``end_key`` as a key path (trajectory buffers), or None."""
    saved = config.optional("end_key", None)
    return None if saved.value is None else as_key_path(saved.validate(as_key))


def _priorities(state: Field) -> PrioritySummary | None:
    """The summary of ``state['priorities']`` (with ``state['motion_ids']``), if saved.

    Raises:
        StateError: a priority is not a finite number >= 0, all are 0, or the motion ids are
            not one int per priority.
    """
    saved = state.optional("priorities", None)
    if saved.value is None:
        return None
    values = [item.real(minimum=0.0) for item in saved.items()]
    ids_field = state.optional("motion_ids", None)
    ids = (
        list(range(len(values)))
        if ids_field.value is None
        else [item.integer() for item in ids_field.items()]
    )
    if len(ids) != len(values):
        raise ids_field.error(
            f"expected {len(values)} motion ids (one per priority), got {len(ids)}"
        )
    biggest = max(values, default=0.0)
    if biggest <= 0:
        raise saved.error("expected at least one positive priority")
    # Scaled by the largest first: a sum of huge finite values must not overflow.
    scaled = [value / biggest for value in values]
    total = math.fsum(scaled)
    p = [value / total for value in scaled]
    ranked = sorted(range(len(p)), key=lambda i: -p[i])[:TOP_PRIORITIES]
    return PrioritySummary(
        count=len(p),
        minimum=min(p),
        maximum=max(p),
        entropy=-math.fsum(x * math.log(x) for x in p if x > 0),
        effective_size=1.0 / math.fsum(x * x for x in p),
        top=tuple((ids[i], p[i]) for i in ranked),
    )

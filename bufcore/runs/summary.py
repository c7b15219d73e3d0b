"""Summaries of a buffer checkpoint: what it holds, read lazily, without reading its rows.

Everything here answers "what is in there?" without reading a buffer's rows (but for a
prioritized sampler's per-row priorities, 8 bytes a row, which :func:`summarize_checkpoint`
reads for their quantiles):

- :func:`summarize_checkpoint`: a buffer checkpoint's kind, ring position, spec and saved
  priorities. It opens the checkpoint the way a load does
  (:func:`bufcore.persist.checkpoint.load_checkpoint`: one directory handle, the small files
  verified against the manifest, HDF5 links and external storage refused) and reads only
  buffer.hdf5's metadata. Hashing buffer.hdf5 means reading all of it, so that is done only
  when asked (``verify=True``). BFM-Zero's own directories (no manifest) are read too.
- :func:`window_settings`: how a trajectory buffer samples windows, with ``need``, the rows one
  window reads, so nobody re-derives it.

Each buffer's config is parsed by its class's one parser (``saved_options``, ``saved_layout``
of :func:`bufcore.buffers.base.buffer_class`). A run directory's own files (run.json, the
metrics log, BFM-Zero's train_status.json) are :mod:`bufcore.runs.run_summary`'s job; files
are read by :mod:`bufcore.persist` only. ``bufcore inspect`` prints these summaries and the
dashboard shows them (both through :mod:`bufcore.inspect`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bufcore.buffers.base import Buffer
from bufcore.buffers.ding.config import saved_config
from bufcore.buffers.ding.core import DingBuffer
from bufcore.buffers.ding.episode import EpisodeReplayBuffer
from bufcore.buffers.ding.saving import saved_status
from bufcore.buffers.loading import buffer_class
from bufcore.buffers.prioritized import SAMPLER_KEY, SAMPLER_KINDS, saved_sampler
from bufcore.buffers.windowed import WindowedBuffer, WindowOptions
from bufcore.checks import check_bool, check_int
from bufcore.errors import StateError
from bufcore.fields import Field
from bufcore.persist.checkpoint import (
    CONFIG,
    PAYLOAD,
    OpenedCheckpoint,
    load_checkpoint,
)
from bufcore.sampling.priority_maths import importance_quantiles, priority_quantiles
from bufcore.sampling.segment_tree import check_weights
from bufcore.sampling.windows import Weighting
from bufcore.tree import KeyPath, as_key_path, dtype_name, format_key_path

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
class SamplerSummary:
    """The sampler a buffer saved with its state (a prioritized sampler).

    Attributes:
        kind: ``"prioritized"``.
        options: Its constructor options (``alpha``, ``beta``, ``anneal_steps``, ``eps``,
            ``reduction``).
        max_priority: The largest priority given so far (what a new row gets).
        steps: Draws so far.
        beta: The importance-weight exponent of the next draw.
        stats: The quantiles of the held rows' saved priorities and of their importance
            weights at ``beta``, keyed as in a ``replay`` record (``priority_min``,
            ``priority_q25``, ``priority_median``, ``priority_q75``, ``priority_max``,
            ``is_weight_min``, ``is_weight_median``, ``is_weight_max``; None each when no row
            is held): what :func:`summarize_checkpoint` reads from the sampler's priority
            leaf. None where they were not read (:func:`summarize_opened`, and DI-engine
            buffers, whose monitor reports its own).
    """

    kind: str
    options: dict[str, Any]
    max_priority: float
    steps: int
    beta: float
    stats: dict[str, float | None] | None = None


@dataclass(frozen=True)
class DingSummary:
    """What a DI-engine buffer checkpoint (``NaiveReplayBuffer``, ``AdvancedReplayBuffer``,
    ``EpisodeReplayBuffer``) records beyond the ring.

    Attributes:
        storage: ``"list"`` (Python dicts, saved as columns) or ``"packed"`` (tensor rows).
        unit: What one slot holds: ``"item"``, or ``"episode"`` (then the rows are its
            episodes' transitions, not slots).
        count: Valid items (or episodes).
        push_count: Items pushed (DI-engine's ``push_count``).
        counters: The monitor's counts (``pushed``, ``sampled``, ``sample_calls``,
            ``refused_pushes``, ``refused_samples``, ``removed``).
        config: The DI-engine config as saved (infinities as ``"inf"``).
    """

    storage: str
    unit: str
    count: int
    push_count: int
    counters: dict[str, int]
    config: dict[str, Any]


@dataclass(frozen=True)
class CheckpointSummary:
    """A buffer checkpoint directory, as :func:`summarize_checkpoint` read it.

    Attributes:
        path: The directory.
        format: ``"bufcore v<manifest format version>"`` or ``"BFM-Zero"`` (no manifest).
        target: config.json's ``__target__``.
        kind: The class that loads it (``"TrajectoryDictBuffer"``, ...).
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
        end_key: The end-flag leaf of a trajectory buffer, or None for buffers without one.
        sampler: The prioritized sampler it saved (its per-row priorities are the leaf
            ``("_sampler", "priority")`` of ``spec``, ``("_ding", "priority")`` for an
            ``AdvancedReplayBuffer``), or None.
        ding: What a DI-engine buffer records beyond the ring, or None for other kinds.
        digest: The manifest's checksum, which covers the hash and size of every file: equal
            for two checkpoints exactly when they hold the same bytes (None without a
            manifest, as BFM-Zero writes them).
        rows_digest: sha256 of the manifest's entry for buffer.hdf5 (its size and block
            hashes): equal exactly when two checkpoints hold the same rows, whatever their
            saved state (priorities, generator) (None without a manifest).
        file_stamp: For a checkpoint without a manifest, what identifies it instead:
            ``"stat:"`` and the sha256 of its config and of buffer.hdf5's size and
            modification time, which rewriting either changes (None with a manifest).
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
    sampler: SamplerSummary | None = None
    digest: str | None = None
    rows_digest: str | None = None
    ding: DingSummary | None = None
    file_stamp: str | None = None


def summarize_checkpoint(
    path: str | os.PathLike[str], *, verify: bool = False
) -> CheckpointSummary:
    """Summarize the buffer checkpoint directory at ``path`` without reading its rows.

    Every check a load makes on the small files and on buffer.hdf5's metadata is made (the
    manifest's checksum, format and fields; the class's parser on config.json and state.json;
    the ring position against the rows stored; the datasets against the manifest), so a
    checkpoint that summarizes also opens. Of the rows, only a prioritized sampler's saved
    priorities are read (8 bytes a row, checked as a load checks them and verified block by
    block), for :attr:`SamplerSummary.stats`.

    Args:
        path: The checkpoint directory (bufcore's or BFM-Zero's).
        verify: Also hash buffer.hdf5 against the manifest (reads the whole file).

    Raises:
        FileNotFoundError: ``path`` is not a directory.
        ValueError: config.json names an unknown ``__target__`` (the message lists the known
            ones).
        CorruptCheckpointError: a file is missing, malformed or inconsistent, or (with
            ``verify``) buffer.hdf5 differs from the manifest; names the file and field.
        TypeError: ``verify`` is not a bool (checked before anything is read).
    """
    verify = check_bool(verify, "verify")
    return load_checkpoint(
        path,
        lambda opened: _with_sampler_stats(opened, summarize_opened(opened, verify=verify)),
        hash_payload=verify,
    )


def _with_sampler_stats(opened: OpenedCheckpoint, summary: CheckpointSummary) -> CheckpointSummary:
    """``summary`` with its prioritized sampler's :attr:`SamplerSummary.stats`, from the
    saved priority leaf (unchanged for other buffers and DI-engine's).

    Raises:
        StateError: the priorities are missing, of another shape or dtype, or not finite and
            non-negative (as a load refuses them).
    """
    sampler = summary.sampler
    if sampler is None or summary.ding is not None:
        return summary
    priorities = np.empty(0)
    if summary.length:
        source = opened.row_source(summary.separator, summary.batch_dims)
        path = (SAMPLER_KEY, SAMPLER_KINDS[sampler.kind].row_tensors[0])
        leaf = source.spec.get(path)
        if leaf is None or leaf.shape != () or leaf.dtype != torch.float64:
            got = "no dataset" if leaf is None else f"shape {list(leaf.shape)}, {leaf.dtype}"
            raise StateError("rows", f"{format_key_path(path)}: expected float64 rows, got {got}")
        read = source.read_rows(path, slice(0, summary.length)).reshape(-1)
        try:
            priorities = check_weights(read, len(read), "priority")
        except (TypeError, ValueError) as err:
            raise StateError("rows", f"{format_key_path(path)}: {err}") from err
    stats = {
        **priority_quantiles(priorities),
        **importance_quantiles(priorities, alpha=sampler.options["alpha"], beta=sampler.beta),
    }
    return dataclasses.replace(summary, sampler=dataclasses.replace(sampler, stats=stats))


def summarize_opened(opened: OpenedCheckpoint, *, verify: bool = False) -> CheckpointSummary:
    """The summary of an open checkpoint, making every check a load makes on its metadata.

    The one place summaries read an :class:`~bufcore.persist.checkpoint.OpenedCheckpoint`
    (:func:`bufcore.runs.leaf_read.read_leaf` reads rows after it).

    Args:
        opened: The checkpoint, opened by :func:`~bufcore.persist.checkpoint.load_checkpoint`.
        verify: Whether it was opened with its payload hashed (only recorded here).

    Raises:
        ValueError: an unknown ``__target__``.
        CorruptCheckpointError: the datasets disagree with the manifest or each other.
        StateError: a field of config.json or state.json is malformed or inconsistent.
    """
    cls = buffer_class(opened.target, opened.path / CONFIG)
    config = Field(opened.config, "config", part="config")
    state = Field(opened.state, "state", part="state")
    options = cls.saved_options(config, state)
    separator, batch_dims = cls.saved_layout(config)
    source = opened.row_source(separator, batch_dims)
    # The ring's size, as every class saves it (the expert buffer's equals its rows).
    capacity, cursor, full = cls.saved_ring(config, source.count)
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
    end_key = options.get("end_key")
    ding = _ding(cls, options, state)
    sampler = _sampler(state) if ding is None else _sampler(state.key("ding"))
    return CheckpointSummary(
        path=opened.path,
        format="BFM-Zero" if manifest is None else f"bufcore v{manifest['format_version']}",
        target=opened.target,
        kind=cls.__name__,
        capacity=capacity,
        length=source.count,
        cursor=cursor,
        full=full,
        device=str(options["device"]),
        separator=separator,
        batch_dims=batch_dims,
        env_count=source.env_count,
        spec=rows,
        row_bytes=sum(row.row_bytes for row in rows),
        priorities=_priorities(state),
        verified=verify and manifest is not None,
        end_key=None if end_key is None else as_key_path(end_key),
        sampler=sampler,
        ding=ding,
        digest=None if manifest is None else str(manifest["checksum"]),
        rows_digest=None if manifest is None else _entry_digest(manifest["files"][PAYLOAD]),
        file_stamp=opened.file_stamp,
    )


def _ding(cls: type[Buffer], options: dict[str, Any], state: Field) -> DingSummary | None:
    """The summary of a DI-engine buffer's own state (None for other kinds).

    Raises:
        StateError: a field is malformed.
    """
    if not issubclass(cls, DingBuffer):
        return None
    status = saved_status(state)
    return DingSummary(
        storage=options["storage"],
        unit="episode" if issubclass(cls, EpisodeReplayBuffer) else "item",
        count=status.valid,
        push_count=status.push_count,
        counters=status.counters,
        config=saved_config(options["cfg"]),
    )


def _sampler(state: Field) -> SamplerSummary | None:
    """The summary of ``state['sampler']``, if saved (through the sampler's own parser).

    Raises:
        StateError: a field is malformed.
    """
    sampler = saved_sampler(state)
    if sampler is None:
        return None
    return SamplerSummary(
        kind=sampler.kind,
        options=sampler.config(),
        max_priority=sampler.max_priority,
        steps=sampler.steps,
        beta=sampler.beta,
    )


def _entry_digest(entry: Any) -> str:
    """sha256 of a manifest entry as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(entry, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


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


# --------------------------------------------------------------------------- window settings
@dataclass(frozen=True)
class WindowSettings:
    """How a trajectory buffer samples windows.

    Attributes:
        seq_length: The default window length.
        offset: 1 when windows also read the row after each one (``next``), else 0.
        weighting: ``"trajectory"`` or ``"window"``.
        end_path: Key path of the end-flag leaf.
        motion_path: Key path of the motion-id leaf (expert buffers), else None.
        priorities: The saved priorities, one per trajectory (expert buffers), else None.
        motion_ids: The saved motion id per trajectory (expert buffers), else None.
    """

    seq_length: int
    offset: int
    weighting: Weighting
    end_path: KeyPath
    motion_path: KeyPath | None
    priorities: np.ndarray | None
    motion_ids: np.ndarray | None

    @property
    def need(self) -> int:
        """Rows one window of the default length reads (``seq_length + offset``)."""
        return self.need_for(self.seq_length)

    def need_for(self, seq_length: int) -> int:
        """Rows one window of ``seq_length`` rows reads: ``seq_length + offset``; a trajectory
        of ``L`` rows then holds ``max(0, L - need + 1)`` window starts.

        Raises:
            TypeError: ``seq_length`` is not an int.
            ValueError: ``seq_length < 1``.
        """
        return check_int(seq_length, "seq_length", minimum=1) + self.offset


def window_settings(source: str | os.PathLike[str] | Buffer) -> WindowSettings:
    """The window settings of a trajectory buffer: its checkpoint directory (small files only,
    no rows) or a loaded buffer (``TrajectoryDictBuffer``, ``TrajectoryDictBufferMultiDim``).

    Raises:
        FileNotFoundError: ``source`` is a path but not a directory.
        ValueError: a loaded buffer without windows, or an unknown ``__target__``.
        CorruptCheckpointError: a file is missing or malformed, or the checkpoint is not a
            trajectory buffer (no ``seq_length``); names the file and field.
    """
    if isinstance(source, WindowedBuffer):
        window = source._window  # the buffer's own validated options, not a rebuilt copy
        motion_key = getattr(source, "motion_id_key", None)
        saved = getattr(source, "priorities", None)
        ids = getattr(source, "motion_ids", None)
        return _settings(
            window,
            source.weighting,
            motion_key,
            None if saved is None else saved.double().cpu().numpy(),
            None if ids is None else np.asarray(ids, dtype=np.int64),
        )
    if isinstance(source, Buffer):
        raise ValueError(f"source: a {type(source).__name__} samples no windows")
    return load_checkpoint(source, _saved_settings, hash_payload=False)


def _saved_settings(opened: OpenedCheckpoint) -> WindowSettings:
    """Through the class's parser; a malformed field is a StateError, which
    :func:`~bufcore.persist.checkpoint.load_checkpoint` reports naming the file."""
    cls = buffer_class(opened.target, opened.path / CONFIG)
    config = Field(opened.config, "config", part="config")
    state = Field(opened.state, "state", part="state")
    options = cls.saved_options(config, state)
    if "seq_length" not in options:
        raise config.error(f"holds a {cls.__name__}, which samples no windows (no seq_length)")
    window = WindowOptions(**{name: options[name] for name in _WINDOW_OPTIONS})
    priorities = state.optional("priorities", None)
    ids = state.optional("motion_ids", None)
    return _settings(
        window,
        options["weighting"],
        options.get("motion_id_key"),
        None if priorities.value is None
        else np.array([item.real(minimum=0.0) for item in priorities.items()]),
        None if ids.value is None
        else np.array([item.integer() for item in ids.items()], dtype=np.int64),
    )


_WINDOW_OPTIONS = ("seq_length", "output_key_t", "output_key_tp1", "end_key")


def _settings(
    window: WindowOptions,
    weighting: Weighting,
    motion_key: Any,
    priorities: np.ndarray | None,
    motion_ids: np.ndarray | None,
) -> WindowSettings:
    return WindowSettings(
        seq_length=window.seq_length,
        offset=window.offset,
        weighting=weighting,
        end_path=window.end_path,
        motion_path=None if motion_key is None else as_key_path(motion_key),
        priorities=None if priorities is None else priorities.astype(np.float64),
        motion_ids=motion_ids,
    )

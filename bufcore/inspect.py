"""The public read-only view of buffers and runs: what ``bufcore inspect`` and the dashboard use.

Nothing here writes, and nothing loads a whole buffer; every name is a stable public name, so a
tool that looks inside bufcore's files never reaches into a private module:

- **Source kinds** (:func:`source_kind`): whether a directory is a buffer checkpoint, a run
  checkpoint, a run directory or a BFM-Zero work directory, judged by its entry names (a
  config.json counts only beside a buffer.hdf5 and naming a ``__target__``:
  :func:`is_buffer_checkpoint`);
  :func:`buffer_dirs` lists a run checkpoint's buffers (each rank's, for a checkpoint saved by
  several ranks: :func:`buffer_name` names them ``train/rank_1``, :func:`split_rank` splits
  that, :func:`rank_occupancy` puts their rows side by side); :func:`inspect_path` summarizes all of
  a path (stopping at the first damaged file), :func:`render` and :func:`to_json` lay that out.
  An RLinf buffer directory (:func:`is_rlinf_directory`) is summarized by
  :func:`summarize_rlinf_directory` (an :class:`RLinfSummary`, from its JSON files only);
  the dashboard reads its index (:func:`read_rlinf_index`), one trajectory file's leaves and
  end flags (:func:`read_rlinf_trajectory`, ``weights_only``) and draws rows as the disk
  buffer draws them (:func:`draw_rlinf_chunks`, a :class:`ChunkIndex`).
- **Summaries** (metadata only, never rows): :func:`summarize_checkpoint` for a buffer
  checkpoint (with a :class:`DingSummary` for DI-engine's buffers),
  :func:`summarize_run_checkpoint` for ``run.json``, :func:`summarize_metrics` for
  ``metrics.jsonl``, :func:`summarize_train_status` for BFM-Zero's ``train_status.json``;
  :func:`read_run_state` and the curriculum parsers
  (:func:`options_from_state`, :func:`rounds_from_state`) for what run.json saved.
- **Single-leaf reads** (:func:`read_leaf`): rows of one stored leaf, verified block by block.
- **Window settings** (:func:`window_settings`): how a trajectory buffer samples, with
  :attr:`WindowSettings.need`, the rows one window reads.
- **Sampler maths**, the formulas the samplers draw from: :func:`window_weights` (with which
  weight a drawn window comes from each trajectory), :func:`start_counts` and
  :func:`window_counts` (valid window starts per trajectory); and the TD weighting's
  :func:`clip_fractions` (the fractions of weights any beta and clip bounds clip, from the
  quantiles ``TDWeighting(quantiles=...)`` logs); a prioritized sampler's figures,
  :func:`priority_quantiles` and :func:`importance_quantiles` (the importance weights at a
  beta, from saved priorities), keyed as the ``replay`` records (:data:`REPLAY_KIND`) list
  them (:data:`PRIORITY_QUANTILES`, :data:`IS_WEIGHT_QUANTILES`).
- **Replay statistics** (:func:`replay_items`, :func:`has_replay_items`): each held item's
  priority, draw probability, importance weight, use and ``collect_iter`` in a prioritized or
  DI-engine buffer checkpoint; :func:`window_shares`: how a prioritized trajectory buffer's
  window draws spread over its trajectories.
- The names of a run directory's files (:data:`METRICS_FILE`, :data:`CHECKPOINT_DIR`,
  :data:`RUN_STATE`, :data:`BUFFERS_DIR`, :data:`CONFIG_FILE`, :data:`TRAIN_STATUS`,
  :data:`HISTORY_DIR`), :func:`earlier_checkpoints` (a run's kept checkpoints) and
  :func:`owning_run`, :func:`format_key_path` and :func:`human_bytes` for display, and
  :data:`PRIORITY_MODES`.

Each buffer's saved config is parsed by its class's one parser; files are read by
:mod:`bufcore.persist` alone. The buffer classes and loaders themselves are in :mod:`bufcore`.
"""

from __future__ import annotations

from bufcore.curriculum.history import options_from_state, rounds_from_state
from bufcore.curriculum.priorities import MODES as PRIORITY_MODES
from bufcore.persist.checkpoint import CONFIG as CONFIG_FILE
from bufcore.persist.run_checkpoint import BUFFERS as BUFFERS_DIR
from bufcore.persist.run_checkpoint import (
    CHECKPOINT_DIR,
    HISTORY_DIR,
    METRICS_FILE,
    RUN_STATE,
    TRAIN_STATUS,
    earlier_checkpoints,
    owning_run,
    read_run_state,
)
from bufcore.runs.leaf_read import read_leaf
from bufcore.runs.replay import REPLAY_KIND
from bufcore.runs.replay_items import (
    ReplayItems,
    WindowShares,
    has_replay_items,
    replay_items,
    window_shares,
)
from bufcore.runs.rlinf_summary import (
    IdSpan,
    RLinfSummary,
    is_rlinf_directory,
    summarize_rlinf_directory,
)
from bufcore.runs.rlinf_view import (
    END_FIELDS,
    LeafRow,
    RLinfIndex,
    RLinfTrajectory,
    draw_rlinf_chunks,
    read_rlinf_index,
    read_rlinf_trajectory,
)
from bufcore.runs.run_summary import (
    CurriculumSummary,
    MetricsSummary,
    RunCheckpointSummary,
    TDEMASummary,
    TrainStatusSummary,
    summarize_metrics,
    summarize_run_checkpoint,
    summarize_train_status,
)
from bufcore.runs.sources import (
    BFM_ZERO_WORKDIR,
    BUFFER_CHECKPOINT,
    RLINF_DIRECTORY,
    RUN_CHECKPOINT,
    RUN_DIRECTORY,
    Inspection,
    buffer_dirs,
    buffer_name,
    human_bytes,
    inspect_path,
    is_buffer_checkpoint,
    rank_occupancy,
    render,
    source_kind,
    split_rank,
    to_json,
)
from bufcore.runs.summary import (
    CheckpointSummary,
    DingSummary,
    PrioritySummary,
    SamplerSummary,
    SpecRow,
    WindowSettings,
    summarize_checkpoint,
    window_settings,
)
from bufcore.sampling.chunk_window import ChunkIndex
from bufcore.sampling.priority_maths import (
    IS_WEIGHT_QUANTILES,
    PRIORITY_QUANTILES,
    importance_quantiles,
    priority_quantiles,
)
from bufcore.sampling.windows import (
    WEIGHTINGS,
    TrajectoryTable,
    Weighting,
    start_counts,
    window_counts,
    window_weights,
)
from bufcore.stats.td_quantiles import clip_fractions
from bufcore.tree import KeyPath, format_key_path

__all__ = [
    "BFM_ZERO_WORKDIR",
    "BUFFERS_DIR",
    "BUFFER_CHECKPOINT",
    "CHECKPOINT_DIR",
    "CONFIG_FILE",
    "END_FIELDS",
    "HISTORY_DIR",
    "IS_WEIGHT_QUANTILES",
    "METRICS_FILE",
    "PRIORITY_MODES",
    "PRIORITY_QUANTILES",
    "REPLAY_KIND",
    "RLINF_DIRECTORY",
    "RUN_CHECKPOINT",
    "RUN_DIRECTORY",
    "RUN_STATE",
    "TRAIN_STATUS",
    "WEIGHTINGS",
    "CheckpointSummary",
    "ChunkIndex",
    "CurriculumSummary",
    "DingSummary",
    "IdSpan",
    "Inspection",
    "KeyPath",
    "LeafRow",
    "MetricsSummary",
    "PrioritySummary",
    "RLinfIndex",
    "RLinfSummary",
    "RLinfTrajectory",
    "ReplayItems",
    "RunCheckpointSummary",
    "SamplerSummary",
    "SpecRow",
    "TDEMASummary",
    "TrainStatusSummary",
    "TrajectoryTable",
    "Weighting",
    "WindowSettings",
    "WindowShares",
    "buffer_dirs",
    "buffer_name",
    "clip_fractions",
    "draw_rlinf_chunks",
    "earlier_checkpoints",
    "format_key_path",
    "has_replay_items",
    "human_bytes",
    "importance_quantiles",
    "inspect_path",
    "is_buffer_checkpoint",
    "is_rlinf_directory",
    "options_from_state",
    "owning_run",
    "priority_quantiles",
    "rank_occupancy",
    "read_leaf",
    "read_rlinf_index",
    "read_rlinf_trajectory",
    "read_run_state",
    "render",
    "replay_items",
    "rounds_from_state",
    "source_kind",
    "split_rank",
    "start_counts",
    "summarize_checkpoint",
    "summarize_metrics",
    "summarize_rlinf_directory",
    "summarize_run_checkpoint",
    "summarize_train_status",
    "to_json",
    "window_counts",
    "window_settings",
    "window_shares",
    "window_weights",
]

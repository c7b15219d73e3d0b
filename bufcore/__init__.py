"""bufcore: replay buffers for PyTorch RL that you can look inside.

Public surface: the buffer classes (DI-engine's ``NaiveReplayBuffer``, ``AdvancedReplayBuffer``
and ``EpisodeReplayBuffer`` among them, with their ``IBuffer`` protocol; RLinf's disk-backed
``TrajectoryReplayBuffer`` and its ``Trajectory``) and the parts they are
composed of (``Buffer``, the ``Sampler`` protocol and the samplers, ``PrioritizedSampler`` and
its trees), the loaders, the EMD curriculum, the TD-error statistics and weights, ``resume``
(a run's latest checkpoint read back for its loop to continue), and the errors bufcore raises
on purpose. The subpackages hold the layers (README "Development").

Each name is imported on first use (``from bufcore import DictBuffer`` or ``bufcore.DictBuffer``),
not by ``import bufcore`` itself: that keeps torch out of the way until something needs it, so
the ``bufcore`` command can answer Ctrl-C while torch loads (POT, which the EMD needs, likewise
loads on the first ``emd`` call).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bufcore.buffers.base import Buffer, load_buffer
    from bufcore.buffers.ding.advanced import AdvancedReplayBuffer
    from bufcore.buffers.ding.episode import EpisodeReplayBuffer
    from bufcore.buffers.ding.naive import NaiveReplayBuffer
    from bufcore.buffers.ding.protocol import IBuffer
    from bufcore.buffers.disk import TrajectoryReplayBuffer
    from bufcore.buffers.expert import TrajectoryDictBuffer
    from bufcore.buffers.motions import load_expert_trajectories
    from bufcore.buffers.online import TrajectoryDictBufferMultiDim
    from bufcore.buffers.rlds.convert import (
        TransitionBuffer,
        convert_rlds_to_trajectories,
        create_trajectory_data_spec,
        push_rlds_to_buffer,
    )
    from bufcore.buffers.rlds.expert import expert_buffer_from_rlds
    from bufcore.buffers.rlds.steps import get_rlds_step_features
    from bufcore.buffers.transition import DictBuffer
    from bufcore.buffers.zbuffer import ZBuffer
    from bufcore.curriculum.curriculum import Curriculum
    from bufcore.curriculum.history import Round
    from bufcore.curriculum.priorities import emd_to_priorities
    from bufcore.curriculum.transport import emd
    from bufcore.errors import (
        CorruptCheckpointError,
        CorruptFileError,
        KeyPathError,
        LeafNotLoadedError,
        MissingStateError,
        NewerFormatError,
        NoCheckpointError,
        NotARunError,
        ResumeError,
        StateError,
        WorldSizeError,
    )
    from bufcore.persist.backing import BackingFile
    from bufcore.persist.episodes import load_episode_based_h5, save_episodes
    from bufcore.persist.rlds_files import read_rlds_episodes
    from bufcore.runs.ranks import load_run_buffers, reshard_run_checkpoint, save_run_buffers
    from bufcore.runs.replay import ReplayTally
    from bufcore.runs.resume import ResumedRun, generators_state, resume
    from bufcore.runs.runlog import RunLogger, read_metrics
    from bufcore.sampling.boundaries import find_start_stop_traj
    from bufcore.sampling.index import SampleIndex
    from bufcore.sampling.prioritized import PrioritizedSampler
    from bufcore.sampling.samplers import RingPosition, Sampler, UniformRows, WindowRequest
    from bufcore.sampling.segment_tree import MinTree, SumTree
    from bufcore.stats.td_ema import TDStatsEMA
    from bufcore.stats.td_weighting import TDWeighting, build_weights, compute_td_errors
    from bufcore.storage.trajectories import Trajectory

# Each public name and the module it lives in.
_HOMES = {
    "Buffer": "bufcore.buffers.base",
    "load_buffer": "bufcore.buffers.base",
    "AdvancedReplayBuffer": "bufcore.buffers.ding.advanced",
    "EpisodeReplayBuffer": "bufcore.buffers.ding.episode",
    "NaiveReplayBuffer": "bufcore.buffers.ding.naive",
    "IBuffer": "bufcore.buffers.ding.protocol",
    "TrajectoryDictBuffer": "bufcore.buffers.expert",
    "load_expert_trajectories": "bufcore.buffers.motions",
    "TrajectoryDictBufferMultiDim": "bufcore.buffers.online",
    "DictBuffer": "bufcore.buffers.transition",
    "ZBuffer": "bufcore.buffers.zbuffer",
    "Curriculum": "bufcore.curriculum.curriculum",
    "Round": "bufcore.curriculum.history",
    "emd_to_priorities": "bufcore.curriculum.priorities",
    "emd": "bufcore.curriculum.transport",
    "CorruptCheckpointError": "bufcore.errors",
    "CorruptFileError": "bufcore.errors",
    "KeyPathError": "bufcore.errors",
    "LeafNotLoadedError": "bufcore.errors",
    "StateError": "bufcore.errors",
    "load_episode_based_h5": "bufcore.persist.episodes",
    "save_episodes": "bufcore.persist.episodes",
    "ReplayTally": "bufcore.runs.replay",
    "RunLogger": "bufcore.runs.runlog",
    "read_metrics": "bufcore.runs.runlog",
    "find_start_stop_traj": "bufcore.sampling.boundaries",
    "SampleIndex": "bufcore.sampling.index",
    "PrioritizedSampler": "bufcore.sampling.prioritized",
    "MinTree": "bufcore.sampling.segment_tree",
    "SumTree": "bufcore.sampling.segment_tree",
    "RingPosition": "bufcore.sampling.samplers",
    "Sampler": "bufcore.sampling.samplers",
    "UniformRows": "bufcore.sampling.samplers",
    "WindowRequest": "bufcore.sampling.samplers",
    "TDStatsEMA": "bufcore.stats.td_ema",
    "TDWeighting": "bufcore.stats.td_weighting",
    "build_weights": "bufcore.stats.td_weighting",
    "compute_td_errors": "bufcore.stats.td_weighting",
    "TrajectoryReplayBuffer": "bufcore.buffers.disk",
    "Trajectory": "bufcore.storage.trajectories",
    "TransitionBuffer": "bufcore.buffers.rlds.convert",
    "convert_rlds_to_trajectories": "bufcore.buffers.rlds.convert",
    "create_trajectory_data_spec": "bufcore.buffers.rlds.convert",
    "push_rlds_to_buffer": "bufcore.buffers.rlds.convert",
    "expert_buffer_from_rlds": "bufcore.buffers.rlds.expert",
    "get_rlds_step_features": "bufcore.buffers.rlds.steps",
    "read_rlds_episodes": "bufcore.persist.rlds_files",
    "BackingFile": "bufcore.persist.backing",
    "WorldSizeError": "bufcore.errors",
    "load_run_buffers": "bufcore.runs.ranks",
    "reshard_run_checkpoint": "bufcore.runs.ranks",
    "save_run_buffers": "bufcore.runs.ranks",
    "resume": "bufcore.runs.resume",
    "ResumedRun": "bufcore.runs.resume",
    "generators_state": "bufcore.runs.resume",
    "ResumeError": "bufcore.errors",
    "NotARunError": "bufcore.errors",
    "NoCheckpointError": "bufcore.errors",
    "NewerFormatError": "bufcore.errors",
    "MissingStateError": "bufcore.errors",
}

__all__ = [
    "AdvancedReplayBuffer",
    "BackingFile",
    "Buffer",
    "CorruptCheckpointError",
    "CorruptFileError",
    "Curriculum",
    "DictBuffer",
    "EpisodeReplayBuffer",
    "IBuffer",
    "KeyPathError",
    "LeafNotLoadedError",
    "MinTree",
    "MissingStateError",
    "NaiveReplayBuffer",
    "NewerFormatError",
    "NoCheckpointError",
    "NotARunError",
    "PrioritizedSampler",
    "ReplayTally",
    "ResumeError",
    "ResumedRun",
    "RingPosition",
    "Round",
    "RunLogger",
    "SampleIndex",
    "Sampler",
    "StateError",
    "SumTree",
    "TDStatsEMA",
    "TDWeighting",
    "Trajectory",
    "TrajectoryDictBuffer",
    "TrajectoryDictBufferMultiDim",
    "TrajectoryReplayBuffer",
    "TransitionBuffer",
    "UniformRows",
    "WindowRequest",
    "WorldSizeError",
    "ZBuffer",
    "build_weights",
    "compute_td_errors",
    "convert_rlds_to_trajectories",
    "create_trajectory_data_spec",
    "emd",
    "emd_to_priorities",
    "expert_buffer_from_rlds",
    "find_start_stop_traj",
    "generators_state",
    "get_rlds_step_features",
    "load_buffer",
    "load_episode_based_h5",
    "load_expert_trajectories",
    "load_run_buffers",
    "push_rlds_to_buffer",
    "read_metrics",
    "read_rlds_episodes",
    "reshard_run_checkpoint",
    "resume",
    "save_episodes",
    "save_run_buffers",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import the public name ``name`` from its module on first use, then keep it here."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'bufcore' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

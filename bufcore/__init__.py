"""bufcore: replay buffers for PyTorch RL that you can look inside.

Public surface: the buffer classes and the parts they are composed of (``Buffer``, the
``Sampler`` protocol and the samplers, ``PrioritizedSampler`` and its trees), the loaders, the
EMD curriculum, the TD-error statistics and weights, and the errors bufcore raises on purpose.
The subpackages hold the layers (README "Development"); POT, which the EMD needs, is imported on
the first ``emd`` call, not here.
"""

from __future__ import annotations

from bufcore.buffers.base import Buffer, load_buffer
from bufcore.buffers.expert import TrajectoryDictBuffer
from bufcore.buffers.motions import load_expert_trajectories
from bufcore.buffers.online import TrajectoryDictBufferMultiDim
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
    StateError,
)
from bufcore.persist.episodes import load_episode_based_h5, save_episodes
from bufcore.runs.runlog import RunLogger, read_metrics
from bufcore.sampling.boundaries import find_start_stop_traj
from bufcore.sampling.index import SampleIndex
from bufcore.sampling.prioritized import PrioritizedSampler
from bufcore.sampling.samplers import RingPosition, Sampler, UniformRows, WindowRequest
from bufcore.sampling.segment_tree import MinTree, SumTree
from bufcore.stats.td_ema import TDStatsEMA
from bufcore.stats.td_weighting import TDWeighting, build_weights, compute_td_errors

__all__ = [
    "Buffer",
    "CorruptCheckpointError",
    "CorruptFileError",
    "Curriculum",
    "DictBuffer",
    "KeyPathError",
    "LeafNotLoadedError",
    "MinTree",
    "PrioritizedSampler",
    "RingPosition",
    "Round",
    "RunLogger",
    "SampleIndex",
    "Sampler",
    "StateError",
    "SumTree",
    "TDStatsEMA",
    "TDWeighting",
    "TrajectoryDictBuffer",
    "TrajectoryDictBufferMultiDim",
    "UniformRows",
    "WindowRequest",
    "ZBuffer",
    "build_weights",
    "compute_td_errors",
    "emd",
    "emd_to_priorities",
    "find_start_stop_traj",
    "load_buffer",
    "load_episode_based_h5",
    "load_expert_trajectories",
    "read_metrics",
    "save_episodes",
]
__version__ = "0.1.0"

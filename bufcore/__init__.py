"""bufcore: replay buffers for PyTorch RL that you can look inside.

Public surface: the buffer classes, the loaders, the EMD curriculum and the checkpoint error.
"""

from __future__ import annotations

from bufcore.boundaries import find_start_stop_traj
from bufcore.checkpoint import load_buffer
from bufcore.curriculum import Curriculum, emd, emd_to_priorities
from bufcore.episodes import load_episode_based_h5, save_episodes
from bufcore.errors import CorruptCheckpointError
from bufcore.expert import load_expert_trajectories
from bufcore.trajectory import TrajectoryDictBuffer, TrajectoryDictBufferMultiDim
from bufcore.transition import DictBuffer
from bufcore.zbuffer import ZBuffer

__all__ = [
    "CorruptCheckpointError",
    "Curriculum",
    "DictBuffer",
    "TrajectoryDictBuffer",
    "TrajectoryDictBufferMultiDim",
    "ZBuffer",
    "emd",
    "emd_to_priorities",
    "find_start_stop_traj",
    "load_buffer",
    "load_episode_based_h5",
    "load_expert_trajectories",
    "save_episodes",
]
__version__ = "0.1.0"

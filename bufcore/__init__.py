"""bufcore: replay buffers for PyTorch RL that you can look inside.

Public surface: the buffer classes, the checkpoint loader and the checkpoint error.
"""

from __future__ import annotations

from bufcore.checkpoint import load_buffer
from bufcore.errors import CorruptCheckpointError
from bufcore.transition import DictBuffer
from bufcore.zbuffer import ZBuffer

__all__ = ["CorruptCheckpointError", "DictBuffer", "ZBuffer", "load_buffer"]
__version__ = "0.1.0"

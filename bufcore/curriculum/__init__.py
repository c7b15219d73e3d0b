"""The EMD curriculum: tracking error (EMD) -> expert-motion priorities, round by round.

The names the curriculum offered before it became a package are importable from here too.
"""

from __future__ import annotations

from bufcore.curriculum.curriculum import Curriculum
from bufcore.curriculum.history import Round
from bufcore.curriculum.priorities import emd_to_priorities
from bufcore.curriculum.transport import emd

__all__ = ["Curriculum", "Round", "emd", "emd_to_priorities"]

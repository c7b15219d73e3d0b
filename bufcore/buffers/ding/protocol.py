"""``IBuffer``: DI-engine's buffer interface (REFERENCE §11.1) as a typing protocol.

DI-engine code annotated with ``IBuffer`` ports by importing this one; the three DI-engine
classes of :mod:`bufcore` satisfy it (``isinstance(buffer, IBuffer)`` holds at run time too).
The seed lists eight methods; the code also makes ``save_data``/``load_data`` abstract, and
``start``/``close`` are on every buffer, so they are here as well.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class IBuffer(Protocol):
    """What every DI-engine buffer offers (see the module docstring)."""

    @classmethod
    def default_config(cls) -> Mapping[str, Any]:
        """The config keys and their defaults."""
        ...

    def push(self, data: Any, cur_collector_envstep: int) -> None:
        """Store one item or a list of them."""
        ...

    def update(self, info: Mapping[str, Any]) -> Any:
        """Update what the items carry (priorities)."""
        ...

    def sample(self, size: int, cur_learner_iter: int) -> list[Any] | None:
        """``size`` items, ``[]`` for 0, None when refused."""
        ...

    def clear(self) -> None:
        """Remove every item."""
        ...

    def count(self) -> int:
        """Valid items."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """The buffer as plain data."""
        ...

    def load_state_dict(self, state: Any) -> None:
        """Become the buffer ``state`` describes."""
        ...

    def save_data(self, file_name: str | os.PathLike[str]) -> None:
        """Save the items to ``file_name``."""
        ...

    def load_data(self, file_name: str | os.PathLike[str]) -> None:
        """Push the items saved at ``file_name``."""
        ...

    def start(self) -> None:
        """Start background work (deleting used data files)."""
        ...

    def close(self) -> None:
        """Stop background work, clearing the buffer."""
        ...

"""``NaiveReplayBuffer``: DI-engine's FIFO ring with uniform sampling (REFERENCE §11.2).

Sampling follows the reference: ``sample(0, ...)`` is ``[]``; an empty buffer, or fewer valid
items than ``size`` without replacement, refuses with None; items are drawn from the physical
slots ``[0, tail_or_size)``, optionally sliced by ``sample_range`` (physical slots, as in
DI-engine: ``slice(-10, None)`` is the last ten *slots*, not the last ten pushed once the ring
has wrapped), without replacement by default. Items come back as stored (no keys added), deep
copies with ``deepcopy``. ``clear`` resets ``push_count``, as DI-engine's does.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from bufcore.buffers.ding.config import NAIVE_DEFAULTS
from bufcore.buffers.ding.core import DingBuffer, locked
from bufcore.checks import check_bool


class NaiveReplayBuffer(DingBuffer):
    """DI-engine's naive buffer: push, uniform sample, no priorities (REFERENCE §11.2).

    ``NaiveReplayBuffer(cfg)`` or ``NaiveReplayBuffer(replay_buffer_size=1000, ...)``; see
    :class:`~bufcore.buffers.ding.core.DingBuffer` for the options (``storage=`` chooses
    Python dicts or packed tensor rows) and :meth:`default_config` for the config keys.
    """

    checkpoint_targets: ClassVar[tuple[str, ...]] = ("bufcore.NaiveReplayBuffer",)
    defaults: ClassVar[dict[str, Any]] = NAIVE_DEFAULTS

    @locked
    def sample(
        self,
        size: int,
        cur_learner_iter: int,
        sample_range: slice | None = None,
        replace: bool = False,
    ) -> list[Any] | None:
        """``size`` items drawn uniformly, or None when the buffer cannot give them.

        Args:
            size: Items to draw (0 gives ``[]``).
            cur_learner_iter: The learner's iteration (for the monitor's staleness).
            sample_range: Draw only from these physical slots of ``range(tail_or_size)``.
            replace: Draw with replacement.

        Returns:
            The items (as stored; deep copies with ``deepcopy``), or None when the buffer is
            empty or holds fewer than ``size`` candidates and ``replace`` is False (the reason
            goes to ``stats()['last_refusal']``).

        Raises:
            TypeError: ``size`` or ``cur_learner_iter`` not an int, ``sample_range`` not a
                slice, ``replace`` not a bool.
            ValueError: ``size`` negative, or a ``sample_range`` step of 0.
        """
        size, cur = self._checked_sample_args(size, cur_learner_iter)
        replace = check_bool(replace, "replace")
        candidates = self._candidates(sample_range)
        if size == 0:
            return []
        if self._valid == 0:
            self._refused("the buffer is empty")
            return None
        if len(candidates) < size and not replace:
            self._refused(
                f"not enough items to sample {size} without replacement "
                f"({len(candidates)} candidates)"
            )
            return None
        if len(candidates) == 0:
            self._refused("sample_range holds no item")
            return None
        with self._drawing(None, argument="size") as generator:
            slots = self._draw_uniform(candidates, size, replace, generator)
        return self._handed_out(slots, cur)

    def _candidates(self, sample_range: slice | None) -> np.ndarray:
        """The slots a draw chooses from.

        Raises:
            TypeError: ``sample_range`` is not a slice.
            ValueError: a slice step of 0.
        """
        slots = np.arange(self._filled())
        if sample_range is None:
            return slots
        if not isinstance(sample_range, slice):
            raise TypeError(
                f"sample_range: expected a slice or None, got {type(sample_range).__name__}"
            )
        if sample_range.step == 0:
            raise ValueError("sample_range: slice step cannot be zero")
        return slots[sample_range]

    def _handed_out(self, slots: np.ndarray, cur_learner_iter: int) -> list[Any]:
        """The items at the drawn slots, counted by the monitor."""
        self._monitor.on_sample(self._used(slots), self._staleness(slots, cur_learner_iter))
        return self._items.read(slots.tolist())

    def _cleared(self) -> None:
        self._push_count = 0

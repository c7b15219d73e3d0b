"""``Curriculum``: pushes each evaluation round's priorities into the expert buffer.

How badly the agent tracks each motion decides how often it is replayed: BFM-Zero measures an
EMD per motion after each evaluation (:func:`bufcore.curriculum.transport.emd`), turns the EMDs into
priorities (:mod:`bufcore.curriculum.priorities`), and hands them to the expert buffer and to
the simulator's motion sampler (its ``update_sampling_weight_by_id``), so episodes start on hard
motions as often as training replays them. A :class:`Curriculum` does that for one round at a
time, all or nothing, and keeps the history (:mod:`bufcore.curriculum.history`) that
checkpoints and the dashboard read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch

from bufcore.checks import check_int, check_real
from bufcore.curriculum.history import (
    Round,
    history_to_state,
    options_from_state,
    preview,
    rounds_from_state,
)
from bufcore.curriculum.priorities import PriorityOptions, check_emd_value
from bufcore.errors import StateError


class PrioritizedExpertBuffer(Protocol):
    """What :class:`Curriculum` needs from an expert buffer (``TrajectoryDictBuffer`` has it).

    ``motion_ids[i]`` is the motion stored as trajectory ``i``; ``update_priorities`` sets the
    priorities of the trajectories at ``idxs`` and renormalises, replacing ``priorities``
    (which a round sets back when the motion sampler refuses it). A buffer with
    ``file_names`` has their names passed to the sampler.
    """

    priorities: torch.Tensor

    @property
    def motion_ids(self) -> list[int]: ...

    def update_priorities(self, priorities: torch.Tensor, idxs: torch.Tensor) -> None: ...


class SamplingWeightHook(Protocol):
    """Where each round's priorities reach the simulator's motion sampler.

    Called with keywords, as BFM-Zero's training loop calls its motion library, so
    ``MotionLibBase.update_sampling_weight_by_id`` fits as it is: ``priorities`` (the round's
    unnormalised priorities, floats), ``motions_id`` (the motion id of each, same order) and
    ``file_name`` (motion id -> the buffer's ``file_names`` entry, or None for a buffer
    without them).
    """

    def __call__(
        self, *, priorities: list[float], motions_id: list[int], file_name: dict[int, str] | None
    ) -> None: ...


class Curriculum:
    """Applies evaluation rounds to an expert buffer and remembers them.

    Each round maps every motion in the buffer to its EMD; the curriculum converts them with
    :func:`~bufcore.curriculum.priorities.emd_to_priorities`' transform, hands them to
    ``buffer.update_priorities`` at the trajectory index of each motion, passes them to
    ``update_sampling_weight_by_id`` if given, and appends a :class:`Round` to :attr:`history`.
    A round is all or nothing: if any check fails, the buffer refuses the update or the hook
    raises, the round is not recorded and the buffer's priorities are as before (the
    exception propagates; what the hook itself changed before raising is the hook's affair).

    Args:
        buffer: The expert buffer: ``motion_ids`` (one per trajectory, in trajectory order) and
            ``update_priorities(priorities, idxs)``.
        min_val: Lower EMD clamp (BFM-Zero ``prioritization_min_val``).
        max_val: Upper EMD clamp (``prioritization_max_val``).
        scale: Multiplier after clamping (``prioritization_scale``).
        mode: ``"lin"``, ``"exp"`` or ``"bin"`` (``prioritization_mode``).
        update_sampling_weight_by_id: Called after the buffer's update with each round's
            priorities (:class:`SamplingWeightHook`), e.g. the simulator's
            ``motion_lib.update_sampling_weight_by_id``; None for none. It is not state: pass
            it again to :meth:`from_state_dict`.

    Raises:
        TypeError: An option has the wrong type, a motion id is not an int, or
            ``update_sampling_weight_by_id`` is not callable.
        ValueError: An option is invalid (see :class:`PriorityOptions`), the buffer holds no
            motion, or a motion id appears twice in ``buffer.motion_ids``.
    """

    def __init__(
        self,
        buffer: PrioritizedExpertBuffer,
        *,
        min_val: float = 0.5,
        max_val: float = 2.0,
        scale: float = 2.0,
        mode: str = "exp",
        update_sampling_weight_by_id: SamplingWeightHook | None = None,
    ) -> None:
        self._options = PriorityOptions(min_val, max_val, scale, mode)  # type: ignore[arg-type]
        motion_ids = _check_motion_ids(buffer.motion_ids)
        if update_sampling_weight_by_id is not None and not callable(update_sampling_weight_by_id):
            raise TypeError(
                "update_sampling_weight_by_id: expected a callable or None, got "
                f"{type(update_sampling_weight_by_id).__name__}"
            )
        self._sampling_hook = update_sampling_weight_by_id
        self.buffer = buffer
        self._motion_ids = motion_ids
        self._index_in_buffer = {motion: i for i, motion in enumerate(motion_ids)}
        self._history: list[Round] = []

    @property
    def min_val(self) -> float:
        return self._options.min_val

    @property
    def max_val(self) -> float:
        return self._options.max_val

    @property
    def scale(self) -> float:
        return self._options.scale

    @property
    def mode(self) -> str:
        return self._options.mode

    @property
    def history(self) -> list[Round]:
        """The rounds applied so far, oldest first (a copy)."""
        return list(self._history)

    @property
    def options(self) -> dict[str, Any]:
        """``min_val``, ``max_val``, ``scale`` and ``mode``."""
        return dataclasses.asdict(self._options)

    def apply(self, emd_by_motion: Mapping[int, float], *, step: int) -> Round:
        """Prioritise the buffer's trajectories by one round of EMDs.

        Args:
            emd_by_motion: Motion id -> EMD, exactly one entry for every motion in the buffer.
            step: Training step of the evaluation (an int >= 0).

        Returns:
            The :class:`Round` appended to :attr:`history`.

        Raises:
            TypeError: ``emd_by_motion`` is not a mapping, a key is not an int, a value is not
                a number, or ``step`` is not an int.
            ValueError: Motions of the buffer are missing, motions not in the buffer are
                present, an EMD is NaN, infinite or negative, ``step < 0``, every priority
                came out 0, or ``buffer.motion_ids`` changed since construction.
            Exception: Whatever the buffer's update or ``update_sampling_weight_by_id``
                raised; the buffer's priorities and the history are as before.
        """
        step = check_int(step, "step", minimum=0)
        if list(self.buffer.motion_ids) != self._motion_ids:
            raise ValueError(
                "buffer.motion_ids changed since the curriculum was built; build a new Curriculum"
            )
        emds = self._check_round(emd_by_motion)
        motions = list(emds)
        priorities = self._options.transform(
            torch.tensor([emds[m] for m in motions], dtype=torch.float64)
        )
        if not bool((priorities > 0).any()):
            # The buffer would have nothing to sample from (DESIGN §2 decision 5).
            raise ValueError(
                f"emd_by_motion: every priority is 0 (mode {self.mode!r}, min_val "
                f"{self.min_val}); raise min_val or use another mode"
            )
        idxs = torch.tensor([self._index_in_buffer[m] for m in motions], dtype=torch.int64)
        hook = self._sampling_hook
        previous = None if hook is None else self.buffer.priorities.clone()
        self.buffer.update_priorities(priorities, idxs)
        if hook is not None and previous is not None:
            try:
                hook(
                    priorities=priorities.tolist(),
                    motions_id=motions,
                    file_name=self._file_names(motions),
                )
            except BaseException:
                self.buffer.priorities = previous  # all or nothing: the round did not happen
                raise
        record = Round(
            step=step,
            emd=emds,
            priority=dict(zip(motions, priorities.tolist(), strict=True)),
        )
        self._history.append(record)
        return record

    def _file_names(self, motions: list[int]) -> dict[int, str] | None:
        """Motion id -> the buffer's file name, as BFM-Zero passes them; None without names."""
        names = getattr(self.buffer, "file_names", None)
        if names is None:
            return None
        return {m: names[self._index_in_buffer[m]] for m in motions}

    def _check_round(self, emd_by_motion: Mapping[int, float]) -> dict[int, float]:
        if not isinstance(emd_by_motion, Mapping):
            raise TypeError(
                f"emd_by_motion: expected a mapping of motion id -> EMD, "
                f"got {type(emd_by_motion).__name__}"
            )
        emds: dict[int, float] = {}
        for motion, value in emd_by_motion.items():
            motion_id = check_int(motion, "emd_by_motion: motion id")
            emds[motion_id] = check_real(value, f"emd_by_motion[{motion_id}]", finite=False)
        missing = [m for m in self._motion_ids if m not in emds]
        if missing:
            raise ValueError(
                f"emd_by_motion: {len(missing)} motion(s) of the buffer were not evaluated: "
                f"{preview(missing)}"
            )
        unknown = [m for m in emds if m not in self._index_in_buffer]
        if unknown:
            raise ValueError(
                f"emd_by_motion: {len(unknown)} motion(s) are not in the buffer: "
                f"{preview(unknown)}"
            )
        return {m: check_emd_value(value, f"emd_by_motion[{m}]") for m, value in emds.items()}

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """The options and every round, as plain JSON-ready data.

        Motion ids become lists (JSON object keys would turn them into strings): each round is
        ``{"step", "motion_ids", "emd", "priority"}`` with parallel lists.
        """
        return history_to_state(self._options, self._history)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace :attr:`history` with the rounds in ``state``.

        The options in ``state`` must equal this curriculum's: history made under other options
        would be mixed with new rounds silently otherwise. Use :meth:`from_state_dict` to build a
        curriculum with the saved options. Every round must cover exactly the buffer's motions.
        The buffer's priorities are not touched (they live in the buffer's own checkpoint).

        Raises:
            StateError: ``state`` is malformed (the message names the key path), its options
                differ from this curriculum's, or a round's motions are not the buffer's.
        """
        saved = options_from_state(state)
        for name in ("min_val", "max_val", "scale", "mode"):
            if getattr(saved, name) != getattr(self._options, name):
                raise StateError(
                    "state",
                    f"state['options'][{name!r}]: the state was made with "
                    f"{getattr(saved, name)!r}, this curriculum uses "
                    f"{getattr(self._options, name)!r}; use Curriculum.from_state_dict to "
                    "restore the saved options",
                )
        self._history = rounds_from_state(state, set(self._motion_ids))

    @classmethod
    def from_state_dict(
        cls,
        buffer: PrioritizedExpertBuffer,
        state: Mapping[str, Any],
        *,
        update_sampling_weight_by_id: SamplingWeightHook | None = None,
    ) -> Curriculum:
        """Build a curriculum over ``buffer`` with the options and history saved in ``state``.

        ``update_sampling_weight_by_id`` is the constructor's (it is not saved).

        Raises:
            StateError: ``state`` is malformed (the message names the key path), or a round's
                motions are not the buffer's.
            TypeError, ValueError: As :class:`Curriculum`.
        """
        options = options_from_state(state)
        curriculum = cls(
            buffer,
            min_val=options.min_val,
            max_val=options.max_val,
            scale=options.scale,
            mode=options.mode,
            update_sampling_weight_by_id=update_sampling_weight_by_id,
        )
        curriculum._history = rounds_from_state(state, set(curriculum._motion_ids))
        return curriculum


def _check_motion_ids(motion_ids: Sequence[Any]) -> list[int]:
    ids: list[int] = []
    seen: set[int] = set()
    for i, motion in enumerate(motion_ids):
        motion_id = check_int(motion, f"buffer.motion_ids[{i}]")
        if motion_id in seen:
            raise ValueError(
                f"buffer.motion_ids[{i}]: motion {motion_id} appears twice; each trajectory "
                f"of the expert buffer must hold a different motion"
            )
        seen.add(motion_id)
        ids.append(motion_id)
    if not ids:
        raise ValueError("buffer.motion_ids: the buffer holds no motion to prioritise")
    return ids

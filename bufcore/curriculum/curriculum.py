"""``Curriculum``: pushes each evaluation round's priorities into the expert buffer.

How badly the agent tracks each motion decides how often it is replayed: BFM-Zero measures an
EMD per motion after each evaluation (:func:`bufcore.curriculum.transport.emd`), turns the EMDs into
priorities (:mod:`bufcore.curriculum.priorities`), and hands them to the expert buffer and to
the simulator's motion sampler (its ``update_sampling_weight_by_id``), so episodes start on hard
motions as often as training replays them. A :class:`Curriculum` does that for one round at a
time, all or nothing, and keeps the history (:mod:`bufcore.curriculum.history`) that
checkpoints and the dashboard read.

Data-parallel, the ranks evaluate different motions; :meth:`Curriculum.apply_gathered` gathers
their shares (:mod:`bufcore.distributed`) into one complete round that every rank applies, so
every rank's expert buffer gets the same priorities.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
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
from bufcore.distributed import all_gather_checked
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
        emds = _read_emds(emd_by_motion)
        missing = [m for m in self._motion_ids if m not in emds]
        if missing:
            raise ValueError(
                f"emd_by_motion: {len(missing)} motion(s) of the buffer were not evaluated: "
                f"{preview(missing)}"
            )
        return self._check_share(emds)

    def _check_share(self, emds: dict[int, float]) -> dict[int, float]:
        """``emds`` (read by :func:`_read_emds`) with every motion in the buffer and every EMD
        finite and >= 0."""
        unknown = [m for m in emds if m not in self._index_in_buffer]
        if unknown:
            raise ValueError(
                f"emd_by_motion: {len(unknown)} motion(s) are not in the buffer: "
                f"{preview(unknown)}"
            )
        return {m: check_emd_value(value, f"emd_by_motion[{m}]") for m, value in emds.items()}

    # ------------------------------------------------------------------ across ranks
    def apply_gathered(self, emd_by_motion: Mapping[int, float], *, step: int) -> Round:
        """Apply one round whose motions were evaluated across the ranks of the default
        process group: each rank passes the EMDs of the motions it evaluated.

        One gather brings every rank's share to every rank; each merges them into the complete
        round (in the buffer's motion order) and applies it with :meth:`apply`, so every rank
        records the same :class:`Round` and its buffer gets the same priorities. Without a
        process group this is :meth:`apply` of ``emd_by_motion``.

        Every rank must call it (it is a collective), with the same ``step``, over an expert
        buffer holding the same motions, under the same options. An error in one rank's share
        fails every rank (the others name that rank), so no rank waits for a round that never
        comes. What follows the gather is each rank's own: a hook
        (``update_sampling_weight_by_id``) that raises fails that rank's round only.

        Args:
            emd_by_motion: This rank's share: motion id -> EMD for the motions it evaluated
                (any number, none included).
            step: Training step of the evaluation (an int >= 0), the same on every rank.

        Returns:
            The :class:`Round` appended to :attr:`history` (the same on every rank).

        Raises:
            TypeError: a share is not a mapping, has a key that is not an int or a value
                that is not a number, or ``step`` is not an int.
            ValueError: a share has an EMD that is NaN, infinite or negative, or a motion not in
                the buffer; a motion was evaluated on two ranks; motions were evaluated on no
                rank; the ranks passed different steps, or hold other motions or options; or as
                :meth:`apply`. On the ranks whose share was fine, the message starts with
                ``"rank R: "``, naming the rank whose share was not.
        """
        own = self._motion_digest()

        def share() -> dict[str, Any]:
            return {
                "step": check_int(step, "step", minimum=0),
                "options": self.options,
                "motions": own,
                "emd": list(self._check_share(_read_emds(emd_by_motion)).items()),
            }

        shares = all_gather_checked(share)
        for field in ("step", "options", "motions"):
            if any(s[field] != shares[0][field] for s in shares):
                seen = [s[field] for s in shares]
                raise ValueError(
                    f"apply_gathered: the ranks differ in {field} (rank order): "
                    f"{seen if field != 'motions' else 'other motion ids'}; every rank must "
                    "apply the same round to the same motions under the same options"
                )
        return self.apply(self._merge(shares), step=shares[0]["step"])

    def _merge(self, shares: list[dict[str, Any]]) -> dict[int, float]:
        """The complete round from the ranks' shares, in the buffer's motion order.

        Raises:
            ValueError: a motion in two shares, or in none.
        """
        owner: dict[int, int] = {}
        emds: dict[int, float] = {}
        twice: list[str] = []
        for rank, entry in enumerate(shares):
            for motion, value in entry["emd"]:
                if motion in owner:
                    twice.append(f"{motion} (ranks {owner[motion]} and {rank})")
                owner.setdefault(motion, rank)
                emds[motion] = value
        if twice:
            shown = ", ".join(twice[:20]) + (", ..." if len(twice) > 20 else "")
            raise ValueError(
                f"emd_by_motion: {len(twice)} motion(s) were evaluated on more than one rank: "
                f"{shown}; each motion must be evaluated on exactly one rank"
            )
        missing = [m for m in self._motion_ids if m not in emds]
        if missing:
            raise ValueError(
                f"emd_by_motion: {len(missing)} motion(s) of the buffer were evaluated on no "
                f"rank: {preview(missing)}"
            )
        return {m: emds[m] for m in self._motion_ids}

    def _motion_digest(self) -> str:
        """A short fingerprint of the buffer's motion ids (ranks compare it, not the list)."""
        return hashlib.sha256(json.dumps(self._motion_ids).encode("ascii")).hexdigest()[:16]

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


def _read_emds(emd_by_motion: Any) -> dict[int, float]:
    """Motion id -> number (not yet checked as an EMD).

    Raises:
        TypeError: not a mapping, a key not an int, or a value not a number.
    """
    if not isinstance(emd_by_motion, Mapping):
        raise TypeError(
            f"emd_by_motion: expected a mapping of motion id -> EMD, "
            f"got {type(emd_by_motion).__name__}"
        )
    emds: dict[int, float] = {}
    for motion, value in emd_by_motion.items():
        motion_id = check_int(motion, "emd_by_motion: motion id")
        emds[motion_id] = check_real(value, f"emd_by_motion[{motion_id}]", finite=False)
    return emds


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

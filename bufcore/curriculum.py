"""EMD curriculum: how badly the agent tracks each motion decides how often it is replayed.

BFM-Zero evaluates tracking after each evaluation round: for every expert motion it rolls the
agent out, and measures the earth mover's distance (EMD) between the states the agent visited and
the motion's target states (:func:`emd`). A large EMD means poor tracking, so that motion should
be sampled more often from the expert buffer. :func:`emd_to_priorities` turns EMDs into
priorities (clamp, scale, then ``"lin"``, ``"exp"`` or ``"bin"``), and :class:`Curriculum` pushes
one round of them into the expert buffer and keeps the history, which checkpoints and the
dashboard read.

Where this differs from BFM-Zero (DESIGN §2 decision 5): NaN, infinite and negative EMDs are
rejected with ``ValueError`` before anything is computed, instead of turning every priority into
NaN (``"exp"``/``"lin"``) or failing on ``int(NaN)`` (``"bin"``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import ot  # type: ignore[import-untyped]
import torch

from bufcore.tree import to_tensor

MODES = ("lin", "exp", "bin")
STATE_FORMAT = "bufcore.curriculum"
STATE_VERSION = 1
_OPTION_NAMES = ("min_val", "max_val", "scale", "mode")


# ----------------------------------------------------------------------------------- EMD
def emd(agent_states: Any, target_states: Any, *, num_itermax: int = 100_000) -> float:
    """Optimal-transport (earth mover's) cost between two sets of states.

    Each set is an empirical distribution with uniform weights over its rows, and moving mass
    from one row to another costs their Euclidean distance. The result is the cheapest total
    cost of turning one distribution into the other, solved exactly with POT's network simplex
    (``ot.emd2``), as BFM-Zero's tracking evaluation does. The two sets may have different
    numbers of rows. Distances are computed in float64 from coordinate differences (BFM-Zero
    expands the squared norm in float32), so identical sets cost exactly 0.

    Args:
        agent_states: ``[n, d]`` states the agent visited (numpy array, torch tensor or list).
        target_states: ``[m, d]`` states of the motion it was asked to track.
        num_itermax: Iteration cap of the simplex solver (BFM-Zero uses POT's default 100000).
            When it is reached POT warns and the returned cost is an upper bound.

    Returns:
        The transport cost, a Python float ``>= 0``.

    Raises:
        TypeError: A state set is not numeric, or ``num_itermax`` is not an int.
        ValueError: A state set is not 2-D, is empty, holds NaN or inf, the two sets have
            different feature dimensions, or ``num_itermax < 1``.
    """
    if isinstance(num_itermax, bool) or not isinstance(num_itermax, int):
        raise TypeError(f"num_itermax: expected an int, got {type(num_itermax).__name__}")
    if num_itermax < 1:
        raise ValueError(f"num_itermax: expected an int >= 1, got {num_itermax}")
    agent = _state_set(agent_states, "agent_states")
    target = _state_set(target_states, "target_states")
    if agent.shape[1] != target.shape[1]:
        raise ValueError(
            f"target_states: expected the feature dimension of agent_states ({agent.shape[1]}), "
            f"got shape {list(target.shape)}"
        )
    # Euclidean ground cost from coordinate differences. ot.dist(metric="euclidean") expands
    # |x|^2 + |y|^2 - 2 x.y, which cancels catastrophically: identical sets would cost ~1e-8
    # times the state norm instead of 0.
    cost = ot.dist(agent, target, metric="minkowski", p=2)
    weights_agent = np.full(agent.shape[0], 1.0 / agent.shape[0])
    weights_target = np.full(target.shape[0], 1.0 / target.shape[0])
    return float(ot.emd2(weights_agent, weights_target, cost, numItermax=num_itermax))


def _state_set(value: Any, argument: str) -> np.ndarray[Any, np.dtype[np.float64]]:
    tensor = to_tensor(value, path=(), argument=argument)
    if tensor.ndim != 2:
        raise ValueError(
            f"{argument}: expected a 2-D [states, features] array, got shape {list(tensor.shape)}"
        )
    if tensor.shape[0] == 0 or tensor.shape[1] == 0:
        raise ValueError(
            f"{argument}: expected at least one state with at least one feature, "
            f"got shape {list(tensor.shape)}"
        )
    array = tensor.detach().to(device="cpu", dtype=torch.float64).numpy()
    if not np.isfinite(array).all():
        bad = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(
            f"{argument}: expected finite values, got {array[tuple(bad)]} at row {bad[0]}, "
            f"column {bad[1]}"
        )
    return array


# ------------------------------------------------------------------------ priorities
def emd_to_priorities(
    emd: Any,
    *,
    min_val: float = 0.5,
    max_val: float = 2.0,
    scale: float = 2.0,
    mode: str = "exp",
) -> torch.Tensor:
    """Turn per-motion EMDs into sampling priorities, as BFM-Zero's train loop does.

    Each EMD is clamped to ``[min_val, max_val]`` and multiplied by ``scale`` (so with the
    defaults every value lies in ``[1, 4]``), then:

    - ``"lin"``: used as is.
    - ``"exp"``: ``2 ** p``; with the defaults priorities span 2..16, an 8x ratio between the
      best- and worst-tracked motions.
    - ``"bin"``: motions are grouped by ``floor(p)``, and every non-empty group gets the same
      total mass, shared equally by its members (``1 / n`` each). With the defaults the groups
      are EMD ``[0.5, 1)``, ``[1, 1.5)``, ``[1.5, 2)`` and ``>= 2``; this keeps a crowd of
      similar motions from drowning out a few hard ones.

    The result is not normalised; the buffer does that in ``update_priorities``. Values are
    float32 throughout, like the reference, so bin edges fall where BFM-Zero puts them.

    Args:
        emd: One EMD per motion: a 1-D sequence, numpy array or torch tensor.
        min_val: Lower clamp, in EMD units.
        max_val: Upper clamp, in EMD units.
        scale: Multiplier applied after clamping; must be positive.
        mode: ``"lin"``, ``"exp"`` or ``"bin"``.

    Returns:
        A float32 tensor of priorities, one per input EMD, on the CPU.

    Raises:
        TypeError: ``emd`` is not numeric, or an option has the wrong type.
        ValueError: ``emd`` is not 1-D or is empty; an EMD is NaN, infinite or negative; an
            option is not finite; ``min_val > max_val``; ``scale <= 0``; unknown ``mode``.
    """
    _check_options(min_val=min_val, max_val=max_val, scale=scale, mode=mode)
    values = to_tensor(emd, path=(), argument="emd").detach().cpu()
    if values.ndim != 1:
        raise ValueError(f"emd: expected a 1-D array of EMDs, got shape {list(values.shape)}")
    if values.numel() == 0:
        raise ValueError("emd: expected at least one EMD, got none")
    if values.dtype == torch.bool:
        raise TypeError("emd: expected numbers, got a bool array")
    # Checked in float64 so that values too large for float32 still count as finite input.
    wide = values.to(torch.float64)
    for i, value in enumerate(wide.tolist()):
        _check_emd_value(value, f"emd[{i}]")
    return _transform(values.to(torch.float32), float(min_val), float(max_val), float(scale), mode)


def _transform(
    values: torch.Tensor, min_val: float, max_val: float, scale: float, mode: str
) -> torch.Tensor:
    p = values.clamp(min=min_val, max=max_val) * scale
    if mode == "lin":
        return p
    if mode == "exp":
        return torch.pow(2.0, p).to(torch.float32)
    bins = torch.floor(p).to(torch.int64)
    _, inverse, counts = torch.unique(bins, return_inverse=True, return_counts=True)
    return torch.reciprocal(counts.to(torch.float32))[inverse]


def _check_emd_value(value: float, where: str) -> None:
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(f"{where}: expected a finite EMD >= 0, got {value}")


def _check_options(*, min_val: Any, max_val: Any, scale: Any, mode: Any) -> None:
    for name, value in (("min_val", min_val), ("max_val", max_val), ("scale", scale)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name}: expected a real number, got {type(value).__name__}")
        if not math.isfinite(float(value)):
            raise ValueError(f"{name}: expected a finite number, got {value}")
    if float(min_val) > float(max_val):
        raise ValueError(f"min_val: expected min_val <= max_val, got {min_val} > {max_val}")
    if float(scale) <= 0:
        raise ValueError(f"scale: expected a number > 0, got {scale}")
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(
            f"mode: unsupported prioritization mode {mode!r}; expected one of {list(MODES)}"
        )


# ------------------------------------------------------------------------ curriculum
class PrioritizedExpertBuffer(Protocol):
    """What :class:`Curriculum` needs from an expert buffer (``TrajectoryDictBuffer`` has it).

    ``motion_ids[i]`` is the motion stored as trajectory ``i``; ``update_priorities`` sets the
    priorities of the trajectories at ``idxs`` and renormalises.
    """

    @property
    def motion_ids(self) -> list[int]: ...

    def update_priorities(self, priorities: torch.Tensor, idxs: torch.Tensor) -> None: ...


@dataclass(frozen=True)
class Round:
    """One evaluation round applied to the expert buffer.

    Attributes:
        step: Training step of the evaluation.
        emd: Motion id -> EMD measured in this round.
        priority: Motion id -> priority passed to the buffer (before it renormalises).
    """

    step: int
    emd: dict[int, float]
    priority: dict[int, float]


class Curriculum:
    """Applies evaluation rounds to an expert buffer and remembers them.

    Each round maps every motion in the buffer to its EMD; the curriculum converts them with
    :func:`emd_to_priorities`, hands them to ``buffer.update_priorities`` at the trajectory index
    of each motion, and appends a :class:`Round` to :attr:`history`. A round is all or nothing:
    if any check fails (or the buffer refuses the update) neither the buffer nor the history
    changes.

    Args:
        buffer: The expert buffer: ``motion_ids`` (one per trajectory, in trajectory order) and
            ``update_priorities(priorities, idxs)``.
        min_val: Lower EMD clamp (BFM-Zero ``prioritization_min_val``).
        max_val: Upper EMD clamp (``prioritization_max_val``).
        scale: Multiplier after clamping (``prioritization_scale``).
        mode: ``"lin"``, ``"exp"`` or ``"bin"`` (``prioritization_mode``).

    Raises:
        TypeError: An option has the wrong type, or a motion id is not an int.
        ValueError: An option is invalid (see :func:`emd_to_priorities`), the buffer holds no
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
    ) -> None:
        _check_options(min_val=min_val, max_val=max_val, scale=scale, mode=mode)
        motion_ids = _check_motion_ids(buffer.motion_ids)
        self.buffer = buffer
        self.min_val = float(min_val)
        self.max_val = float(max_val)
        self.scale = float(scale)
        self.mode = mode
        self._motion_ids = motion_ids
        self._index_in_buffer = {motion: i for i, motion in enumerate(motion_ids)}
        self._history: list[Round] = []

    @property
    def history(self) -> list[Round]:
        """The rounds applied so far, oldest first (a copy)."""
        return list(self._history)

    @property
    def options(self) -> dict[str, Any]:
        """``min_val``, ``max_val``, ``scale`` and ``mode``."""
        return {
            "min_val": self.min_val,
            "max_val": self.max_val,
            "scale": self.scale,
            "mode": self.mode,
        }

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
        """
        step = _as_int(step, "step")
        if step < 0:
            raise ValueError(f"step: expected an int >= 0, got {step}")
        if list(self.buffer.motion_ids) != self._motion_ids:
            raise ValueError(
                "buffer.motion_ids changed since the curriculum was built; build a new Curriculum"
            )
        emds = self._check_round(emd_by_motion)
        motions = list(emds)
        priorities = _transform(
            torch.tensor([emds[m] for m in motions], dtype=torch.float32),
            self.min_val,
            self.max_val,
            self.scale,
            self.mode,
        )
        if not bool((priorities > 0).any()):
            # The buffer would have nothing to sample from (DESIGN §2 decision 5).
            raise ValueError(
                f"emd_by_motion: every priority is 0 (mode {self.mode!r}, min_val "
                f"{self.min_val}); raise min_val or use another mode"
            )
        idxs = torch.tensor([self._index_in_buffer[m] for m in motions], dtype=torch.int64)
        self.buffer.update_priorities(priorities, idxs)
        record = Round(
            step=step,
            emd=emds,
            priority=dict(zip(motions, priorities.tolist(), strict=True)),
        )
        self._history.append(record)
        return record

    def _check_round(self, emd_by_motion: Mapping[int, float]) -> dict[int, float]:
        if not isinstance(emd_by_motion, Mapping):
            raise TypeError(
                f"emd_by_motion: expected a mapping of motion id -> EMD, "
                f"got {type(emd_by_motion).__name__}"
            )
        emds: dict[int, float] = {}
        for motion, value in emd_by_motion.items():
            motion_id = _as_int(motion, "emd_by_motion: motion id")
            emds[motion_id] = _as_float(value, f"emd_by_motion[{motion_id}]")
        missing = [m for m in self._motion_ids if m not in emds]
        if missing:
            raise ValueError(
                f"emd_by_motion: {len(missing)} motion(s) of the buffer were not evaluated: "
                f"{_preview(missing)}"
            )
        unknown = [m for m in emds if m not in self._index_in_buffer]
        if unknown:
            raise ValueError(
                f"emd_by_motion: {len(unknown)} motion(s) are not in the buffer: "
                f"{_preview(unknown)}"
            )
        for motion, value in emds.items():
            _check_emd_value(value, f"emd_by_motion[{motion}]")
        return emds

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """The options and every round, as plain JSON-ready data.

        Motion ids become lists (JSON object keys would turn them into strings): each round is
        ``{"step", "motion_ids", "emd", "priority"}`` with parallel lists.
        """
        return {
            "format": STATE_FORMAT,
            "format_version": STATE_VERSION,
            "options": self.options,
            "rounds": [
                {
                    "step": r.step,
                    "motion_ids": list(r.emd),
                    "emd": [r.emd[m] for m in r.emd],
                    "priority": [r.priority[m] for m in r.emd],
                }
                for r in self._history
            ],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace :attr:`history` with the rounds in ``state``.

        The options in ``state`` must equal this curriculum's: history made under other options
        would be mixed with new rounds silently otherwise. Use :meth:`from_state_dict` to build a
        curriculum with the saved options. Every round must cover exactly the buffer's motions.
        The buffer's priorities are not touched (they live in the buffer's own checkpoint).

        Raises:
            ValueError: ``state`` is malformed (the message names the key path), its options
                differ from this curriculum's, or a round's motions are not the buffer's.
        """
        options = _parse_options(state)
        for name in _OPTION_NAMES:
            if options[name] != getattr(self, name):
                raise ValueError(
                    f"state['options'][{name!r}]: the state was made with {options[name]!r}, "
                    f"this curriculum uses {getattr(self, name)!r}; use "
                    f"Curriculum.from_state_dict to restore the saved options"
                )
        self._history = _parse_rounds(state, set(self._motion_ids))

    @classmethod
    def from_state_dict(
        cls, buffer: PrioritizedExpertBuffer, state: Mapping[str, Any]
    ) -> Curriculum:
        """Build a curriculum over ``buffer`` with the options and history saved in ``state``.

        Raises:
            ValueError: ``state`` is malformed (the message names the key path), or a round's
                motions are not the buffer's; or as :class:`Curriculum`.
            TypeError: As :class:`Curriculum`.
        """
        options = _parse_options(state)
        curriculum = cls(buffer, **options)
        curriculum._history = _parse_rounds(state, set(curriculum._motion_ids))
        return curriculum


def _check_motion_ids(motion_ids: Sequence[Any]) -> list[int]:
    ids: list[int] = []
    seen: set[int] = set()
    for i, motion in enumerate(motion_ids):
        motion_id = _as_int(motion, f"buffer.motion_ids[{i}]")
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


def _as_int(value: object, where: str) -> int:
    # numpy integers count (motion ids often come out of arrays); bools do not.
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{where}: expected an int, got {value!r:.80}")
    return int(value)


def _as_float(value: Any, where: str) -> float:
    if isinstance(value, torch.Tensor | np.ndarray):
        if value.ndim != 0:
            raise TypeError(f"{where}: expected one number, got an array of shape {value.shape}")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: expected a number, got {value!r:.80}")
    return float(value)


def _preview(items: Sequence[int], limit: int = 20) -> str:
    shown = ", ".join(str(i) for i in items[:limit])
    return f"[{shown}{', ...' if len(items) > limit else ''}]"


# ----------------------------------------------------------------- state parsing
def _where(*path: str | int) -> str:
    return "state" + "".join(f"[{part!r}]" for part in path)


def _require(mapping: Mapping[str, Any], key: str, *path: str | int) -> Any:
    if key not in mapping:
        raise ValueError(f"{_where(*path)}: missing key {key!r}")
    return mapping[key]


def _parse_options(state: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(state, Mapping):
        raise ValueError(f"state: expected a mapping, got {type(state).__name__}")
    fmt = _require(state, "format")
    if fmt != STATE_FORMAT:
        raise ValueError(f"{_where('format')}: expected {STATE_FORMAT!r}, got {fmt!r}")
    version = _require(state, "format_version")
    if version != STATE_VERSION:
        raise ValueError(
            f"{_where('format_version')}: this bufcore reads version {STATE_VERSION}, "
            f"got {version!r}"
        )
    options = _require(state, "options")
    if not isinstance(options, Mapping):
        raise ValueError(f"{_where('options')}: expected a mapping, got {type(options).__name__}")
    parsed: dict[str, Any] = {}
    for name in _OPTION_NAMES:
        value = _require(options, name, "options")
        if name == "mode":
            if not isinstance(value, str):
                raise ValueError(f"{_where('options', name)}: expected a str, got {value!r}")
            parsed[name] = value
        else:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"{_where('options', name)}: expected a number, got {value!r}")
            parsed[name] = float(value)
    try:
        _check_options(**parsed)
    except ValueError as err:
        raise ValueError(f"{_where('options')}: {err}") from err
    return parsed


def _parse_rounds(state: Mapping[str, Any], motions: set[int]) -> list[Round]:
    rounds = _require(state, "rounds")
    if not isinstance(rounds, list):
        raise ValueError(f"{_where('rounds')}: expected a list, got {type(rounds).__name__}")
    parsed: list[Round] = []
    for r, entry in enumerate(rounds):
        if not isinstance(entry, Mapping):
            raise ValueError(
                f"{_where('rounds', r)}: expected a mapping, got {type(entry).__name__}"
            )
        step = _require(entry, "step", "rounds", r)
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"{_where('rounds', r, 'step')}: expected an int >= 0, got {step!r}")
        columns: dict[str, list[Any]] = {}
        for key in ("motion_ids", "emd", "priority"):
            column = _require(entry, key, "rounds", r)
            if not isinstance(column, list):
                raise ValueError(
                    f"{_where('rounds', r, key)}: expected a list, got {type(column).__name__}"
                )
            columns[key] = column
        ids = columns["motion_ids"]
        for key in ("emd", "priority"):
            if len(columns[key]) != len(ids):
                raise ValueError(
                    f"{_where('rounds', r, key)}: expected {len(ids)} values (one per motion id), "
                    f"got {len(columns[key])}"
                )
        for i, motion in enumerate(ids):
            if isinstance(motion, bool) or not isinstance(motion, int):
                raise ValueError(
                    f"{_where('rounds', r, 'motion_ids', i)}: expected an int, got {motion!r}"
                )
        if len(set(ids)) != len(ids) or set(ids) != motions:
            raise ValueError(
                f"{_where('rounds', r, 'motion_ids')}: expected each of the buffer's "
                f"{len(motions)} motions exactly once, got {_preview(ids)}"
            )
        for key in ("emd", "priority"):
            for i, value in enumerate(columns[key]):
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not math.isfinite(value)
                    or value < 0
                ):
                    raise ValueError(
                        f"{_where('rounds', r, key, i)}: expected a finite number >= 0, "
                        f"got {value!r}"
                    )
        parsed.append(
            Round(
                step=step,
                emd={m: float(v) for m, v in zip(ids, columns["emd"], strict=True)},
                priority={m: float(v) for m, v in zip(ids, columns["priority"], strict=True)},
            )
        )
    return parsed

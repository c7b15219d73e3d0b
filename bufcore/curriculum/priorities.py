"""EMD -> sampling priority transforms (BFM-Zero's ``prioritization_*`` options).

A large EMD means the agent tracks a motion poorly, so that motion should be replayed more often.
Each EMD is clamped to ``[min_val, max_val]``, multiplied by ``scale``, then shaped by a mode:
``"lin"`` (as is), ``"exp"`` (``2 ** p``) or ``"bin"`` (equal total mass per ``floor(p)`` group).

Where this differs from BFM-Zero (DESIGN §2 decision 5): NaN, infinite and negative EMDs are
rejected with ``ValueError`` before anything is computed, instead of turning every priority into
NaN (``"exp"``/``"lin"``) or failing on ``int(NaN)`` (``"bin"``). Priorities are float32, as in
BFM-Zero, so options whose priorities would overflow float32 (``inf``) are refused when the
options are built; EMDs are clamped in float64 first, so a finite EMD beyond float32's range
(a diverged agent) gets the ``max_val`` priority instead of being called infinite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch

from bufcore.checks import check_real
from bufcore.tree import real_values

Mode = Literal["lin", "exp", "bin"]
MODES: tuple[Mode, ...] = ("lin", "exp", "bin")

FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def as_float32(value: float) -> float:
    """``value`` rounded to float32 (``inf`` past float32 max, 0 below its smallest subnormal)."""
    return float(torch.tensor([value], dtype=torch.float64).to(torch.float32))


@dataclass(frozen=True)
class PriorityOptions:
    """How EMDs become priorities, validated once.

    Attributes:
        min_val: Lower clamp, in EMD units (BFM-Zero ``prioritization_min_val``).
        max_val: Upper clamp, in EMD units (``prioritization_max_val``).
        scale: Multiplier applied after clamping, > 0 (``prioritization_scale``).
        mode: ``"lin"``, ``"exp"`` or ``"bin"`` (``prioritization_mode``).

    Raises:
        TypeError: an option has the wrong type (bools are not numbers).
        ValueError: an option is not finite, ``min_val < 0``, ``min_val > max_val``,
            ``scale <= 0``, an unknown mode, or options whose float32 priorities would overflow
            (``max_val`` or ``scale`` above float32 max, ``max_val * scale`` above it, or in
            ``"exp"`` mode ``2 ** (max_val * scale)`` above it) or ``scale`` rounding to 0.
    """

    min_val: float = 0.5
    max_val: float = 2.0
    scale: float = 2.0
    mode: Mode = "exp"

    def __post_init__(self) -> None:
        # EMDs are distances (>= 0): a negative bound is a mistake ("lin" would give negative
        # priorities with max_val < 0).
        min_val = check_real(self.min_val, "min_val", minimum=0.0)
        max_val = check_real(self.max_val, "max_val")
        scale = check_real(self.scale, "scale", positive=True)
        if min_val > max_val:
            raise ValueError(f"min_val: expected min_val <= max_val, got {min_val} > {max_val}")
        if not isinstance(self.mode, str) or self.mode not in MODES:
            raise ValueError(
                f"mode: unsupported prioritization mode {self.mode!r}; expected one of "
                f"{list(MODES)}"
            )
        object.__setattr__(self, "min_val", min_val)
        object.__setattr__(self, "max_val", max_val)
        object.__setattr__(self, "scale", scale)
        self._check_float32_range()

    def _check_float32_range(self) -> None:
        """Refuse options whose float32 priorities could be ``inf`` or 0 for every EMD.

        ``lin`` and ``exp`` grow with the EMD, so the largest priority is the one at
        ``max_val``; it is computed here exactly as :meth:`transform` computes it.

        Raises:
            ValueError: ``max_val`` or ``scale`` exceeds float32 max, ``scale`` rounds to 0 in
                float32, ``max_val * scale`` exceeds it, or (``"exp"``) ``2 ** (max_val *
                scale)`` does.
        """
        for name, value in (("max_val", self.max_val), ("scale", self.scale)):
            if math.isinf(as_float32(value)):
                raise ValueError(
                    f"{name}: {value} exceeds float32 max ({FLOAT32_MAX}); priorities are "
                    "computed in float32, as BFM-Zero computes them"
                )
        if as_float32(self.scale) == 0:
            raise ValueError(
                f"scale: {self.scale} rounds to 0 in float32, which would give every EMD the "
                "same priority"
            )
        top = self._scaled(torch.tensor([self.max_val], dtype=torch.float64))
        if not bool(torch.isfinite(top).all()):
            raise ValueError(
                f"scale: max_val * scale = {self.max_val} * {self.scale} exceeds float32 max "
                f"({FLOAT32_MAX}); priorities are computed in float32, as BFM-Zero computes them"
            )
        if self.mode == "exp" and not bool(torch.isfinite(torch.pow(2.0, top)).all()):
            raise ValueError(
                f"scale: in mode 'exp' the largest priority, 2 ** (max_val * scale) = "
                f"2 ** {float(top)}, exceeds float32 max ({FLOAT32_MAX}); keep max_val * scale "
                "below 128"
            )

    def _scaled(self, emds: torch.Tensor) -> torch.Tensor:
        """``clamp(emd) * scale`` in float32: clamped in float64, then cast.

        For every EMD float32 can hold this equals BFM-Zero's cast-then-clamp (rounding is
        monotone), so bin edges fall where the reference puts them; larger finite EMDs are
        clamped to ``max_val`` instead of turning into ``inf``.
        """
        clamped = emds.to(torch.float64).clamp(min=self.min_val, max=self.max_val)
        return clamped.to(torch.float32) * self.scale

    def transform(self, values: torch.Tensor) -> torch.Tensor:
        """Priorities of checked EMDs (finite, >= 0, any float dtype); float32, not normalised."""
        p = self._scaled(values)
        if self.mode == "lin":
            return p
        if self.mode == "exp":
            return torch.pow(2.0, p).to(torch.float32)
        # Bins are the float floors themselves: a cast to int64 would overflow past 2**63.
        _, inverse, counts = torch.unique(torch.floor(p), return_inverse=True, return_counts=True)
        return torch.reciprocal(counts.to(torch.float32))[inverse]


def check_emd_value(value: Any, where: str) -> float:
    """One EMD as a float: a number that is finite and >= 0.

    Raises:
        TypeError: not a number.
        ValueError: NaN, infinite or negative.
    """
    number = check_real(value, where, finite=False)
    if math.isnan(number) or math.isinf(number) or number < 0:
        raise ValueError(f"{where}: expected a finite EMD >= 0, got {number}")
    return number


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

    The result is not normalised; the buffer does that in ``update_priorities``. Clamped EMDs
    are float32 from there on, like the reference, so bin edges fall where BFM-Zero puts them;
    the clamp itself runs in float64, so a finite EMD too large for float32 gets ``max_val``.

    Args:
        emd: One EMD per motion: a 1-D sequence, numpy array or torch tensor.
        min_val: Lower clamp, in EMD units.
        max_val: Upper clamp, in EMD units.
        scale: Multiplier applied after clamping; must be positive.
        mode: ``"lin"``, ``"exp"`` or ``"bin"``.

    Returns:
        A float32 tensor of priorities, one per input EMD, on the CPU.

    Raises:
        TypeError: ``emd`` is not numeric (or bool or complex), or an option has the wrong type.
        ValueError: ``emd`` is not 1-D or is empty; an EMD is NaN, infinite or negative; an
            option is invalid (see :class:`PriorityOptions`: not finite, ``min_val < 0``,
            ``min_val > max_val``, ``scale <= 0``, unknown ``mode``, priorities that would
            exceed float32 max).
    """
    options = PriorityOptions(min_val, max_val, scale, mode)  # type: ignore[arg-type]
    values = real_values(emd, "emd").detach().cpu()
    if values.ndim != 1:
        raise ValueError(f"emd: expected a 1-D array of EMDs, got shape {list(values.shape)}")
    if values.numel() == 0:
        raise ValueError("emd: expected at least one EMD, got none")
    for i, value in enumerate(values.tolist()):
        check_emd_value(value, f"emd[{i}]")
    return options.transform(values)

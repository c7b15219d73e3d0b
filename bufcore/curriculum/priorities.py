"""EMD -> sampling priority transforms (BFM-Zero's ``prioritization_*`` options).

A large EMD means the agent tracks a motion poorly, so that motion should be replayed more often.
Each EMD is clamped to ``[min_val, max_val]``, multiplied by ``scale``, then shaped by a mode:
``"lin"`` (as is), ``"exp"`` (``2 ** p``) or ``"bin"`` (equal total mass per ``floor(p)`` group).

Where this differs from BFM-Zero (DESIGN §2 decision 5): NaN, infinite and negative EMDs are
rejected with ``ValueError`` before anything is computed, instead of turning every priority into
NaN (``"exp"``/``"lin"``) or failing on ``int(NaN)`` (``"bin"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch

from bufcore.checks import check_real
from bufcore.tree import to_tensor

Mode = Literal["lin", "exp", "bin"]
MODES: tuple[Mode, ...] = ("lin", "exp", "bin")


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
        ValueError: an option is not finite, ``min_val > max_val``, ``scale <= 0``, or an
            unknown mode.
    """

    min_val: float = 0.5
    max_val: float = 2.0
    scale: float = 2.0
    mode: Mode = "exp"

    def __post_init__(self) -> None:
        min_val = check_real(self.min_val, "min_val")
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

    def transform(self, values: torch.Tensor) -> torch.Tensor:
        """Priorities of checked float32 EMDs (finite, >= 0); float32, not normalised."""
        p = values.clamp(min=self.min_val, max=self.max_val) * self.scale
        if self.mode == "lin":
            return p
        if self.mode == "exp":
            return torch.pow(2.0, p).to(torch.float32)
        bins = torch.floor(p).to(torch.int64)
        _, inverse, counts = torch.unique(bins, return_inverse=True, return_counts=True)
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
    options = PriorityOptions(min_val, max_val, scale, mode)  # type: ignore[arg-type]
    values = to_tensor(emd, "emd").detach().cpu()
    if values.ndim != 1:
        raise ValueError(f"emd: expected a 1-D array of EMDs, got shape {list(values.shape)}")
    if values.numel() == 0:
        raise ValueError("emd: expected at least one EMD, got none")
    if values.dtype == torch.bool:
        raise TypeError("emd: expected numbers, got a bool array")
    # Checked in float64 so that values too large for float32 still count as finite input.
    for i, value in enumerate(values.to(torch.float64).tolist()):
        check_emd_value(value, f"emd[{i}]")
    return options.transform(values.to(torch.float32))

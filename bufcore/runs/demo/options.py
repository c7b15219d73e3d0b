"""Options of the demo run, validated once when they are made."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bufcore.checks import check_bool, check_int, check_real, check_seed
from bufcore.curriculum.priorities import PriorityOptions

# Bytes a prioritized online row adds at most: its float64 priority, its sum-tree nodes (up to
# four float64 leaves' worth: the tree is a power of two, twice over) and the tree's int64
# scratch.
PRIORITY_ROW_BYTES = 48


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """Everything that shapes a demo run; the same options and seed give the same run.

    Attributes:
        seed: Seeds every generator of the run.
        steps: Env steps (time rows written to the online buffer; transitions are ``steps *
            envs``).
        motions: Expert motions.
        envs: Parallel tracking environments.
        capacity: Time rows of the online buffer (it wraps when ``steps`` exceeds this); more
            than ``seq_length``.
        z_capacity: Vectors the z buffer keeps.
        dim: State dimension of a motion frame.
        z_dim: Length of ``z``.
        seq_length: Window length of both trajectory buffers and the frames a ``z`` encodes.
        min_length: Fewest frames of a motion.
        max_length: Most frames of a motion.
        batch_size: Rows per sample (``batch_size // seq_length`` windows).
        update_every: Env steps between agent updates.
        eval_every: Env steps between evaluation rounds (each also updates the curriculum).
        checkpoint_every: Evaluation rounds between run checkpoints. The run also checkpoints
            right after its first agent update (so every buffer has something to show
            within seconds) and at the end; each checkpoint replaced is kept under
            ``checkpoints/``.
        mix: Probability that an episode explores with a ``z`` from the z buffer.
        min_val: Curriculum: lower EMD clamp.
        max_val: Curriculum: upper EMD clamp.
        scale: Curriculum: multiplier after clamping.
        mode: Curriculum: ``"lin"``, ``"exp"`` or ``"bin"``.
        gamma: Discount of the value function's TD target.
        td_momentum: TD-EMA momentum.
        td_warmup: TD-EMA warmup steps.
        beta: TD weight temperature.
        min_weight: Smallest TD weight.
        max_weight: Largest TD weight.
        live_seconds: When set, the run is paced to last about this long (``--live``).
        prioritized: Draw the online buffer's windows by their TD errors (``--prioritized``):
            a :class:`~bufcore.PrioritizedSampler` (``alpha`` 0.6, ``beta`` 0.4 annealed to 1
            over the run's updates, ``eps`` 1e-5, window priority the ``"max"`` of its rows'),
            whose rows get ``|td| + eps`` after each TD step, and whose importance weights
            scale the value loss; the run logs a ``replay`` record every 25 env steps.

    Raises:
        ValueError: a count below its minimum, ``capacity <= seq_length``, a seed no
            ``torch.Generator`` takes, ``min_length <= seq_length``,
            ``max_length < min_length``, ``batch_size`` not a multiple of ``seq_length``, a
            probability outside ``[0, 1]``, or curriculum options :class:`PriorityOptions`
            refuses.
        TypeError: an option of the wrong type.
    """

    seed: int = 0
    steps: int = 1500
    motions: int = 24
    envs: int = 64
    capacity: int = 1000
    z_capacity: int = 4096
    dim: int = 6
    z_dim: int = 16
    seq_length: int = 8
    min_length: int = 40
    max_length: int = 300
    batch_size: int = 1024
    update_every: int = 4
    eval_every: int = 150
    checkpoint_every: int = 1
    mix: float = 0.25
    min_val: float = 0.5
    max_val: float = 2.0
    scale: float = 2.0
    mode: str = "exp"
    gamma: float = 0.98
    td_momentum: float = 0.1
    td_warmup: int = 10
    beta: float = 1.0
    min_weight: float = 0.1
    max_weight: float = 5.0
    live_seconds: float | None = None
    prioritized: bool = False

    def __post_init__(self) -> None:
        check_int(self.seed, "seed")  # an int, not None: the run is always seeded
        check_seed(self.seed)
        for name in ("steps", "motions", "envs", "z_capacity", "dim", "z_dim",
                     "seq_length", "batch_size", "update_every", "eval_every",
                     "checkpoint_every"):
            check_int(getattr(self, name), name, minimum=1)
        check_int(self.td_warmup, "td_warmup", minimum=0)
        # Every motion must hold an expert window and the frame after it.
        check_int(self.min_length, "min_length", minimum=self.seq_length + 1)
        check_int(self.max_length, "max_length", minimum=self.min_length)
        # An episode is cut at the buffer's length; sampling needs a window and its next row.
        check_int(self.capacity, "capacity", minimum=self.seq_length + 1)
        if self.batch_size % self.seq_length:
            raise ValueError(
                f"batch_size: expected a multiple of seq_length {self.seq_length}, "
                f"got {self.batch_size}"
            )
        check_real(self.mix, "mix", minimum=0.0, maximum=1.0)
        check_real(self.gamma, "gamma", minimum=0.0, maximum=1.0)
        check_real(self.td_momentum, "td_momentum", minimum=0.0, maximum=1.0)
        check_real(self.beta, "beta", minimum=0.0)
        check_real(self.min_weight, "min_weight", minimum=0.0)
        check_real(self.max_weight, "max_weight", minimum=self.min_weight)
        if self.live_seconds is not None:
            check_real(self.live_seconds, "live_seconds", minimum=0.0)
        check_bool(self.prioritized, "prioritized")
        PriorityOptions(self.min_val, self.max_val, self.scale, self.mode)  # type: ignore[arg-type]

    def buffer_bytes(self) -> int:
        """Bytes the online buffer (``envs x capacity`` rows) and the z buffer hold when full.

        An online row holds the state, target and action (``dim`` floats each), ``z``, the
        reward, and two flags; with ``prioritized``, also its priority and its share of the
        sampler's trees (48 bytes at most).
        """
        row = 4 * (3 * self.dim + self.z_dim + 1) + 2 + (PRIORITY_ROW_BYTES if self.prioritized
                                                         else 0)
        return self.envs * self.capacity * row + self.z_capacity * self.z_dim * 4

    def to_json(self) -> dict[str, Any]:
        """Every option by name, as logged in the ``run`` record and ``run.json``;
        ``prioritized`` only when set, so a run without it logs what runs logged before the
        option existed."""
        options = dataclasses.asdict(self)
        if not self.prioritized:
            del options["prioritized"]
        return options

"""What one headline child measures: :class:`ChildSpec`, passed as JSON on its command line.

Its own module so that the child's scenarios (:mod:`bench.isolated`, :mod:`bench.online_child`)
and the parent (:mod:`bench.headline`) import it without importing each other.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

TRANSITION_IMPLEMENTATIONS = ("bufcore", "per-leaf", "cpprb", "torchrl")
ONLINE_IMPLEMENTATIONS = ("bufcore", "per-leaf", "torchrl")
SCENARIOS = ("steady", "prefill", "online")


@dataclass(frozen=True)
class ChildSpec:
    """What one child process measures.

    Attributes:
        implementation: One of :data:`TRANSITION_IMPLEMENTATIONS` (``steady``, ``prefill``) or
            :data:`ONLINE_IMPLEMENTATIONS` (``online``).
        scenario: One of :data:`SCENARIOS`.
        capacity: Rows of the transition buffer, or time rows of the online buffer.
        batch: Rows per extend and per sample (transition); rows per sample (online).
        calls: Calls per timed block (sample, extend; online step, sample, extend).
        blocks: Timed blocks per op.
        mix_steps: Mix steps per timed block.
        mix_samples: Samples per mix step (after its one extend).
        envs: Envs of the online buffer (one online extend writes ``[1, envs]``).
        seq_length: Rows per window (online).
        threads: torch intra-op threads.
        pool_batches: Distinct source batches the transition extends cycle through.
    """

    implementation: str
    scenario: str
    capacity: int
    batch: int
    calls: int = 32
    blocks: int = 5
    mix_steps: int = 4
    mix_samples: int = 16
    envs: int = 1024
    seq_length: int = 8
    threads: int = 1
    pool_batches: int = 16

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario: expected one of {SCENARIOS}, got {self.scenario!r}")
        known = ONLINE_IMPLEMENTATIONS if self.scenario == "online" else TRANSITION_IMPLEMENTATIONS
        if self.implementation not in known:
            raise ValueError(
                f"implementation: expected one of {known} for scenario {self.scenario!r}, "
                f"got {self.implementation!r}"
            )
        counts = ("capacity", "batch", "calls", "blocks", "mix_steps", "mix_samples", "envs")
        for name in (*counts, "seq_length", "threads", "pool_batches"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name}: expected int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name}: expected >= 1, got {value}")
        if self.scenario == "online" and self.batch % self.seq_length:
            raise ValueError(
                f"batch: expected a multiple of seq_length {self.seq_length}, got {self.batch}"
            )

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ChildSpec:
        """Parse :meth:`to_json`'s output.

        Raises:
            TypeError: The JSON is not an object, or names a field ChildSpec does not have.
            ValueError: A field has a bad value (see ``__post_init__``).
        """
        fields = json.loads(text)
        if not isinstance(fields, dict):
            raise TypeError(f"spec: expected a JSON object, got {type(fields).__name__}")
        unknown = set(fields) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(f"spec: unknown fields {sorted(unknown)}")
        return cls(**fields)

"""Which slots of the demo's z buffer hold expert encodings and which hold random z.

A :class:`~bufcore.ZBuffer` stores only the vectors, so where each came from is lost once it
is written. The demo keeps a ring of source codes beside it, written with the buffer's own
arithmetic (a write starts at the buffer's cursor; a batch over capacity keeps its last rows),
and saves it in ``run.json`` as ``"z_source": {"labels": [...], "slots": [code per slot]}``
(slots in the buffer's physical order, one per stored vector), so the dashboard can colour z
by source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from bufcore.checks import check_int
from bufcore.errors import StateError

EXPERT, RANDOM = 0, 1
LABELS = ("expert", "random")
# A slot nothing was written to yet (never saved: only the first len(buffer) slots are).
_UNWRITTEN = -1


class ZSources:
    """Source codes of a z buffer's slots, one ring slot per buffer slot.

    Args:
        capacity: The z buffer's capacity.

    Raises:
        ValueError: ``capacity`` below 1.
        TypeError: ``capacity`` is not an int.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = check_int(capacity, "capacity", minimum=1)
        self._codes = torch.full((self.capacity,), _UNWRITTEN, dtype=torch.int8)

    def record(self, cursor: int, codes: torch.Tensor) -> None:
        """Note ``codes`` (one per vector) for a write that starts at the buffer's ``cursor``.

        Call it with the cursor the buffer had before the write.

        Raises:
            ValueError: ``cursor`` outside ``[0, capacity)``, ``codes`` not 1-D, or a code
                that is not a label's index.
        """
        start = check_int(cursor, "cursor", minimum=0, maximum=self.capacity - 1)
        if codes.ndim != 1:
            raise ValueError(f"codes: expected a 1-D tensor, got shape {tuple(codes.shape)}")
        if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= len(LABELS)):
            raise ValueError(f"codes: expected values in [0, {len(LABELS)}), got {codes.tolist()}")
        n = codes.numel()
        kept = min(n, self.capacity)
        # As the ring writes: row i of the batch lands in slot (cursor + i) % capacity.
        slots = (start + torch.arange(n - kept, n)) % self.capacity
        self._codes[slots] = codes[n - kept :].to(torch.int8)

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`state` returned: its slots' codes, the rest unwritten.

        Raises:
            StateError: ``labels`` are not this module's, or ``slots`` is not a list of at
                most ``capacity`` label indices.
        """
        slots = state.get("slots")
        if list(state.get("labels", ())) != list(LABELS):
            raise StateError("state", f"z_source['labels']: expected {list(LABELS)}, got "
                                      f"{state.get('labels')!r:.80}")
        if not isinstance(slots, list) or len(slots) > self.capacity or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c < len(LABELS)
            for c in slots
        ):
            raise StateError("state", f"z_source['slots']: expected at most {self.capacity} "
                                      f"codes in [0, {len(LABELS)}), got {slots!r:.80}")
        self._codes.fill_(_UNWRITTEN)
        self._codes[: len(slots)] = torch.tensor(slots, dtype=torch.int8)

    def state(self, length: int) -> dict[str, Any]:
        """``{"labels", "slots"}`` for ``run.json``: codes of the first ``length`` slots.

        Raises:
            ValueError: ``length`` outside ``[0, capacity]`` or covering an unwritten slot.
        """
        count = check_int(length, "length", minimum=0, maximum=self.capacity)
        slots = self._codes[:count]
        unwritten = (slots == _UNWRITTEN).nonzero()
        if len(unwritten):
            raise ValueError(f"length: slot {int(unwritten[0])} was never written")
        return {"labels": list(LABELS), "slots": slots.tolist()}

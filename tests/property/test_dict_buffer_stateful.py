"""DictBuffer against a ``deque(maxlen=capacity)`` model, with save/reload as one of the moves."""

from __future__ import annotations

import shutil
import tempfile
from collections import deque
from pathlib import Path

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from bufcore import DictBuffer


def tagged(first: int, n: int) -> dict[str, object]:
    """Rows tagged with their insertion id in every leaf, nested and of several dtypes."""
    ids = np.arange(first, first + n, dtype=np.int64)
    return {
        "id": ids,
        "obs": {
            "pos": np.stack([ids, 2 * ids], 1).astype(np.float64),
            "flag": (ids % 2 == 1)[:, None],
        },
    }


class DictBufferMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="bufcore-stateful-"))
        self.next_id = 0
        self.capacity = 1
        self.model: deque[int] = deque(maxlen=1)
        self.buffer = DictBuffer(capacity=1)

    @initialize(capacity=st.integers(1, 7), seed=st.integers(0, 2**16))
    def create(self, capacity: int, seed: int) -> None:
        self.capacity = capacity
        self.model = deque(maxlen=capacity)
        self.buffer = DictBuffer(capacity=capacity, seed=seed)

    @rule(kind=st.sampled_from(["zero", "one", "cap-1", "cap", "cap+1", "3cap+2"]))
    def extend(self, kind: str) -> None:
        c = self.capacity
        n = {"zero": 0, "one": 1, "cap-1": c - 1, "cap": c, "cap+1": c + 1, "3cap+2": 3 * c + 2}[
            kind
        ]
        self.buffer.extend(tagged(self.next_id, n))
        self.model.extend(range(self.next_id, self.next_id + n))
        self.next_id += n

    @precondition(lambda self: len(self.model) > 0)
    @rule(batch_size=st.integers(1, 20))
    def sample(self, batch_size: int) -> None:
        batch = self.buffer.sample(batch_size)
        ids = batch["id"].tolist()
        assert set(ids) <= set(self.model)
        assert batch["obs"]["pos"][:, 1].tolist() == [2.0 * i for i in ids]
        assert batch["obs"]["flag"][:, 0].tolist() == [i % 2 == 1 for i in ids]

    @rule()
    def save_and_reload(self) -> None:
        path = self.directory / "ckpt"
        self.buffer.save(path)
        reloaded = DictBuffer.load(path)
        if len(self.model):
            expected = self.buffer.sample(5)["id"]
            assert reloaded.sample(5)["id"].tolist() == expected.tolist()
        self.buffer = DictBuffer.load(path)

    @invariant()
    def length_matches(self) -> None:
        assert len(self.buffer) == len(self.model)
        assert self.buffer.is_full == (self.next_id >= self.capacity)

    @invariant()
    def contents_are_chronological(self) -> None:
        full = self.buffer.get_full_buffer()
        ids = full["id"].tolist() if full else []
        assert ids == list(self.model)

    @invariant()
    def cursor_follows_the_modulo_rule(self) -> None:
        assert self.buffer.cursor == self.next_id % self.capacity

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


DictBufferMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25)
TestDictBufferAgainstDequeModel = DictBufferMachine.TestCase

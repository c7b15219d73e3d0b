"""DI-engine's parallel mode: a collector thread pushes while a learner thread samples."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from bufcore import AdvancedReplayBuffer, NaiveReplayBuffer


@pytest.mark.parametrize("cls", [NaiveReplayBuffer, AdvancedReplayBuffer])
def test_concurrent_pushes_and_samples_keep_the_bookkeeping_whole(cls: type[Any]) -> None:
    buffer = cls(replay_buffer_size=37, seed=0)
    errors: list[BaseException] = []

    def collect() -> None:
        try:
            for step in range(400):
                buffer.push([{"i": step, "collect_iter": step}] * 3, step)
        except BaseException as err:
            errors.append(err)

    def learn() -> None:
        try:
            for step in range(400):
                batch = buffer.sample(4, step)
                if batch is not None and cls is AdvancedReplayBuffer:
                    buffer.update({
                        "replay_unique_id": [item["replay_unique_id"] for item in batch],
                        "replay_buffer_idx": [item["replay_buffer_idx"] for item in batch],
                        "priority": [1.0 + step % 3] * len(batch),
                    })
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=collect), threading.Thread(target=learn)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert buffer.push_count == 1200 and buffer.count() == 37
    assert buffer.count() == int(np.count_nonzero(buffer._live))

"""The demo records which z buffer slot holds an expert encoding and which a random z."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bufcore import ZBuffer, load_buffer
from bufcore.persist.run_checkpoint import read_run_state
from bufcore.runs.demo import run_demo
from bufcore.runs.demo.zsource import EXPERT, LABELS, RANDOM, ZSources
from tests.support import TINY_DEMO


def slot_model(capacity: int, writes: list[list[int]]) -> list[int]:
    """What each slot holds after the writes, with a plain list as the ring."""
    slots = [-1] * capacity
    cursor = 0
    for codes in writes:
        for code in codes:
            slots[cursor] = code
            cursor = (cursor + 1) % capacity
    return slots


@pytest.mark.parametrize("capacity", [1, 2, 7, 16])
@pytest.mark.parametrize("block", [1, 3, 8, 20])
def test_codes_land_in_the_slots_the_z_buffer_writes(capacity: int, block: int) -> None:
    sources, zbuffer = ZSources(capacity), ZBuffer(capacity, 2)
    writes = []
    for _ in range(5):
        codes = [EXPERT] * block + [RANDOM] * block
        sources.record(zbuffer.cursor, torch.tensor(codes))
        # Tag each vector with its code so the buffer's own placement can be compared.
        zbuffer.add(torch.tensor(codes, dtype=torch.float32)[:, None].repeat(1, 2))
        writes.append(codes)
    state = sources.state(len(zbuffer))
    assert state["slots"] == slot_model(capacity, writes)[: len(zbuffer)]
    stored = load_like(zbuffer)
    assert state["slots"] == stored


def load_like(zbuffer: ZBuffer) -> list[int]:
    """The codes the buffer itself holds, slot by slot (each vector is its code twice).

    The z buffer has no public in-order read; its storage's rows are the slots."""
    return [int(v) for v in zbuffer._storage.rows()[("z",)][: len(zbuffer), 0]]


def test_a_state_covering_an_unwritten_slot_is_refused_naming_length() -> None:
    sources = ZSources(4)
    sources.record(0, torch.tensor([EXPERT]))
    with pytest.raises(ValueError, match="length"):
        sources.state(2)


@pytest.mark.parametrize("cursor", [-1, 4])
def test_a_cursor_outside_the_ring_is_refused_naming_cursor(cursor: int) -> None:
    with pytest.raises(ValueError, match="cursor"):
        ZSources(4).record(cursor, torch.tensor([EXPERT]))


def test_an_unknown_code_is_refused_naming_codes() -> None:
    with pytest.raises(ValueError, match="codes"):
        ZSources(4).record(0, torch.tensor([len(LABELS)]))


def test_run_json_tags_every_stored_z_with_its_source(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run_demo(run, TINY_DEMO)
    saved = read_run_state(run / "checkpoint")["z_source"]
    zbuffer = load_buffer(run / "checkpoint" / "buffers" / "z")
    assert saved["labels"] == ["expert", "random"]
    assert len(saved["slots"]) == len(zbuffer)
    # Each update writes `windows` expert z then as many random ones, in order.
    windows = TINY_DEMO.batch_size // TINY_DEMO.seq_length
    updates = sum(
        1 for step in range(1, TINY_DEMO.steps + 1)
        if step % TINY_DEMO.update_every == 0 and step > TINY_DEMO.seq_length
    )
    writes = [[EXPERT] * windows + [RANDOM] * windows for _ in range(updates)]
    assert saved["slots"] == slot_model(TINY_DEMO.z_capacity, writes)[: len(zbuffer)]

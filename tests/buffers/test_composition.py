"""A new buffer kind is a composition of parts: a storage, a sampler and options, with no
persistence code of its own. This one keeps transitions and samples only the newest rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from bufcore import Buffer, DictBuffer, RingPosition, SampleIndex, WindowRequest, load_buffer
from bufcore.fields import Field
from bufcore.inspect import summarize_checkpoint
from bufcore.rng import make_generator
from bufcore.storage.ring import RingStorage


class NewestRows:
    """A sampler: rows uniformly among the ``recent`` newest (chronological) ones."""

    def __init__(self, recent: int, cursor: Any) -> None:
        self.recent, self._cursor = recent, cursor

    def draw(self, ring: RingPosition, count: int, generator: torch.Generator, *,
             window: WindowRequest | None = None) -> SampleIndex:
        back = torch.randint(min(self.recent, ring.length), (count,), generator=generator)
        return SampleIndex((self._cursor() - 1 - back) % ring.capacity)


class RecentBuffer(Buffer):
    checkpoint_targets: ClassVar[tuple[str, ...]] = ("tests.RecentBuffer",)

    def __init__(self, *, capacity: int, recent: int, device: str | torch.device = "cpu",
                 seed: int | None = None) -> None:
        self.capacity, self.recent, self.seed = capacity, recent, seed
        self.device = torch.device(device)
        self._generator = make_generator(self.device, seed)
        self._storage = RingStorage(capacity, device=self.device)
        self._sampler = NewestRows(recent, lambda: self._storage.cursor)

    def extend(self, data: dict[str, Any]) -> None:
        self._storage.write(self._storage.validate(data))

    def sample_index(self, batch_size: int) -> SampleIndex:
        with self._drawing(None, argument="batch_size") as generator:
            return self._sampler.draw(self._ring(), batch_size, generator)

    def sample(self, batch_size: int) -> dict[Any, torch.Tensor]:
        return self._storage.gather(self.sample_index(batch_size).rows)

    def state_dict(self) -> dict[str, Any]:
        config = {"capacity": self.capacity, "recent": self.recent, "device": str(self.device)}
        return self._state_dict(config, {})

    @classmethod
    def saved_options(cls, config: Field, state: Field) -> dict[str, Any]:
        sizes = {name: config.key(name).integer(minimum=1) for name in ("capacity", "recent")}
        return {**sizes, "device": config.key("device").text()}


def filled(tmp_path: Path) -> tuple[RecentBuffer, Path]:
    buffer = RecentBuffer(capacity=7, recent=3, seed=0)
    buffer.extend({"obs": torch.arange(10.0)[:, None], "act": torch.arange(10)})
    buffer.save(tmp_path / "recent")
    return buffer, tmp_path / "recent"


def test_the_new_kind_samples_only_its_newest_rows(tmp_path: Path) -> None:
    buffer, _ = filled(tmp_path)
    assert set(buffer.sample(200)[("act",)].tolist()) == {7, 8, 9}


def test_the_new_kind_saves_and_loads_with_its_sample_stream(tmp_path: Path) -> None:
    buffer, path = filled(tmp_path)
    loaded = load_buffer(path)
    assert type(loaded) is RecentBuffer and loaded.recent == 3
    assert torch.equal(loaded.sample_index(16).rows, buffer.sample_index(16).rows)


def test_the_new_kind_loads_some_leaves_only(tmp_path: Path) -> None:
    buffer, path = filled(tmp_path)
    loaded = RecentBuffer.load(path, leaves=["act"])
    assert loaded._storage.absent == {("obs",)}
    assert torch.equal(loaded.sample_index(5).rows, buffer.sample_index(5).rows)


def test_the_new_kind_is_summarized_by_inspect(tmp_path: Path) -> None:
    _, path = filled(tmp_path)
    summary = summarize_checkpoint(path)
    assert (summary.kind, summary.length, summary.cursor) == ("RecentBuffer", 7, 3)


def test_the_new_kind_refuses_a_malformed_saved_option(tmp_path: Path) -> None:
    _, path = filled(tmp_path)
    state = load_buffer(path).state_dict()
    state["config"]["recent"] = 0
    with pytest.raises(ValueError, match=r"config\['recent'\]"):
        RecentBuffer.from_state_dict(state)


def test_a_dict_buffer_built_with_another_sampler_draws_with_it() -> None:
    buffer = DictBuffer(capacity=7, seed=0, sampler=NewestRows(2, lambda: buffer.cursor))
    buffer.extend({"act": torch.arange(9)})
    assert set(buffer.sample(100)["act"].tolist()) == {7, 8}
    assert set(buffer.sample_index(100).rows.tolist()) == {0, 1}

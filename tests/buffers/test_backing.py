"""File-backed buffers (``backing=BackingFile(path)``) behave exactly as in-memory ones: the same
batches for the same seed, the same checkpoint bytes, ``out=``, refused batches, loads."""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import bufcore
from bufcore import BackingFile, DictBuffer, PrioritizedSampler, TrajectoryDictBufferMultiDim
from bufcore.persist import mapped_rows
from bufcore.storage import packed, ring

SEED = 11
CAPACITIES = [1, 2, 3, 7, 10]
KINDS = ["dict", "dict-prioritized", "online-time", "online-time-env"]
ENVS = 3


def make(kind: str, capacity: int, backing: BackingFile | None) -> Any:
    """An empty buffer of ``kind``: in memory, or in ``backing``."""
    if kind.startswith("dict"):
        sampler = PrioritizedSampler() if kind == "dict-prioritized" else None
        return DictBuffer(capacity=capacity, seed=SEED, sampler=sampler, backing=backing)
    return TrajectoryDictBufferMultiDim(
        capacity=capacity,
        n_dim=2 if kind == "online-time-env" else 1,
        seq_length=1,
        output_key_t=["obs", "step"],
        # A window with its next row needs trajectories of 2 rows, which a first row lacks.
        output_key_tp1=[],
        end_key="done",
        seed=SEED,
        backing=backing,
    )


def batch(kind: str, first: int, n: int) -> dict[str, Any]:
    """``n`` rows numbered from ``first``, in leaves of several dtypes (a nested one too)."""
    steps = torch.arange(first, first + n)
    lead: tuple[int, ...] = (n, ENVS) if kind == "online-time-env" else (n,)
    grid = steps.reshape(n, *([1] * (len(lead) - 1))).expand(lead)
    return {
        "obs": {
            "x": grid[..., None].float() * torch.tensor([1.0, -1.0, 0.5]),
            "half": grid[..., None].to(torch.bfloat16),
        },
        "step": grid.clone(),
        "done": (grid % 5 == 4)[..., None],
    }


def draw(kind: str, buffer: Any, generator: torch.Generator | None = None) -> dict[str, Any]:
    if kind.startswith("dict"):
        return buffer.sample(5, generator=generator)  # type: ignore[no-any-return]
    return buffer.sample(4, 1, generator=generator)  # type: ignore[no-any-return]


def assert_same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    else:
        assert a.dtype == b.dtype and torch.equal(a, b)


def fill(kind: str, buffers: list[Any], sizes: list[int]) -> None:
    """The same extends into every buffer, comparing a draw of each after every extend."""
    first = 0
    for size in sizes:
        for buffer in buffers:
            buffer.extend(batch(kind, first, size))
        first += size
        drawn = [draw(kind, buffer) for buffer in buffers]
        for other in drawn[1:]:
            assert_same(drawn[0], other)
        if kind == "dict-prioritized":
            for buffer, got in zip(buffers, drawn, strict=True):
                buffer.update_priority(got["_index"], torch.arange(5, dtype=torch.float32))


def digests(path: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(path.iterdir())}


CASES = [
    pytest.param(kind, capacity, id=f"{kind}-{capacity}")
    for kind in KINDS
    for capacity in CAPACITIES
]
# In core: written and read through the mapping; out of core: written packed with pwrite,
# read ahead, resident pages dropped (at every access here, so that path runs too).
MODES = [pytest.param(False, id="in-core"), pytest.param(True, id="out-of-core")]


@pytest.fixture(autouse=True)
def _drop_mappings_at_every_access(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapped_rows, "RESIDENT_LIMIT", -1)


def backed(tmp_path: Path, out_of_core: bool, name: str = "ring.bin") -> BackingFile:
    return BackingFile(tmp_path / name, out_of_core=out_of_core)


# ------------------------------------------------------------------------- equivalence
@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize(("kind", "capacity"), CASES)
def test_a_file_backed_buffer_draws_exactly_the_batches_of_one_in_memory(
    tmp_path: Path, kind: str, capacity: int, out_of_core: bool
) -> None:
    ram = make(kind, capacity, None)
    filed = make(kind, capacity, backed(tmp_path, out_of_core))
    fill(kind, [ram, filed], [1, 2, capacity + 1, 3, 1])
    assert (len(filed), filed.cursor, filed.is_full) == (len(ram), ram.cursor, ram.is_full)
    assert_same(filed.get_full_buffer(), ram.get_full_buffer())
    assert_same(filed.storage, ram.storage)
    assert filed.backing is not None and filed.backing.path == tmp_path / "ring.bin"


@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize(("kind", "capacity"), CASES)
def test_a_file_backed_buffer_saves_the_same_checkpoint_bytes_as_one_in_memory(
    tmp_path: Path, kind: str, capacity: int, out_of_core: bool
) -> None:
    ram = make(kind, capacity, None)
    filed = make(kind, capacity, backed(tmp_path, out_of_core))
    fill(kind, [ram, filed], [2, capacity + 2])
    ram.save(tmp_path / "ram")
    filed.save(tmp_path / "filed")
    assert digests(tmp_path / "filed") == digests(tmp_path / "ram")


@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize(("kind", "capacity"), CASES)
def test_a_checkpoint_opened_file_backed_continues_as_the_one_loaded_in_memory(
    tmp_path: Path, kind: str, capacity: int, out_of_core: bool
) -> None:
    source = make(kind, capacity, None)
    fill(kind, [source], [2, capacity + 1])
    source.save(tmp_path / "ckpt")
    before = digests(tmp_path / "ckpt")
    ram = bufcore.load_buffer(tmp_path / "ckpt")
    filed = bufcore.load_buffer(tmp_path / "ckpt", backing=backed(tmp_path, out_of_core))
    assert type(filed) is type(source) and filed.backing is not None
    fill(kind, [ram, filed], [1, capacity, 2])
    assert_same(filed.get_full_buffer(), ram.get_full_buffer())
    assert digests(tmp_path / "ckpt") == before  # the checkpoint is never written


@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize(("kind", "capacity"), CASES)
def test_a_restore_one_row_per_block_copies_every_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, capacity: int, out_of_core: bool
) -> None:
    monkeypatch.setattr(ring, "RESTORE_BYTES", 1)
    monkeypatch.setattr(packed, "PACK_BYTES", 1)
    source = make(kind, capacity, None)
    fill(kind, [source], [capacity + 2])
    source.save(tmp_path / "ckpt")
    filed = bufcore.load_buffer(tmp_path / "ckpt", backing=backed(tmp_path, out_of_core))
    assert_same(filed.get_full_buffer(), source.get_full_buffer())
    in_memory = type(source).from_state_dict(
        source.state_dict(), backing=backed(tmp_path, out_of_core, "ring2.bin")
    )
    assert_same(in_memory.get_full_buffer(), source.get_full_buffer())


@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize("capacity", CAPACITIES)
def test_a_partial_load_file_backed_holds_the_leaves_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capacity: int, out_of_core: bool
) -> None:
    monkeypatch.setattr(ring, "RESTORE_BYTES", 1)
    monkeypatch.setattr(packed, "PACK_BYTES", 1)
    source = make("dict", capacity, None)
    fill("dict", [source], [capacity + 2])
    source.save(tmp_path / "ckpt")
    filed = DictBuffer.load(
        tmp_path / "ckpt", leaves=["step"], backing=backed(tmp_path, out_of_core)
    )
    ram = DictBuffer.load(tmp_path / "ckpt", leaves=["step"])
    # The storage refuses whole views of a partial load: read the loaded leaf itself.
    assert torch.equal(filed._storage.view(("step",)), ram._storage.view(("step",)))
    assert torch.equal(filed.sample_index(6).rows, ram.sample_index(6).rows)
    with pytest.raises(bufcore.LeafNotLoadedError):
        filed.sample(2)


@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize(("kind", "capacity"), CASES)
def test_a_cleared_file_backed_buffer_refills_as_one_in_memory(
    tmp_path: Path, kind: str, capacity: int, out_of_core: bool
) -> None:
    ram = make(kind, capacity, None)
    filed = make(kind, capacity, backed(tmp_path, out_of_core))
    fill(kind, [ram, filed], [capacity + 1])
    for buffer in (ram, filed):
        buffer.clear()
    fill(kind, [ram, filed], [2, 1])
    assert_same(filed.get_full_buffer(), ram.get_full_buffer())


@pytest.mark.parametrize("out_of_core", MODES)
def test_load_state_dict_keeps_a_buffer_file_backed_at_its_path(
    tmp_path: Path, out_of_core: bool
) -> None:
    source = make("dict", 7, None)
    fill("dict", [source], [9])
    backing = backed(tmp_path, out_of_core)
    filed = make("dict", 4, backing)
    filed.extend(batch("dict", 100, 3))
    old_view = filed.storage["step"]  # type: ignore[index]
    filed.load_state_dict(source.state_dict())
    assert filed.backing is backing and (tmp_path / "ring.bin").exists()
    assert_same(filed.get_full_buffer(), source.get_full_buffer())
    assert_same(draw("dict", filed), draw("dict", source))
    assert old_view[:3].tolist() == [100, 101, 102]  # the old rows stay readable


# ------------------------------------------------------------------------- out= and checks
@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize("capacity", CAPACITIES)
def test_sample_into_out_fills_out_with_the_rows_the_same_draw_returns(
    tmp_path: Path, capacity: int, out_of_core: bool
) -> None:
    filed = make("dict", capacity, backed(tmp_path, out_of_core))
    fill("dict", [filed], [capacity + 1])
    state = torch.Generator().manual_seed(2).get_state()
    expected = filed.sample(5, generator=torch.Generator().set_state(state))
    out = {
        "obs": {"x": torch.empty(5, 3), "half": torch.empty(5, 1, dtype=torch.bfloat16)},
        "step": torch.empty(5, dtype=torch.int64),
        "done": torch.empty(5, 1, dtype=torch.bool),
    }
    got = filed.sample(5, generator=torch.Generator().set_state(state), out=out)
    assert got is out
    assert_same(out, expected)


def test_an_out_that_shares_the_mapped_rows_is_refused(tmp_path: Path) -> None:
    # One float32 [4] leaf fills its 16-byte rows: its view of the mapping is contiguous.
    filed = DictBuffer(capacity=8, backing=BackingFile(tmp_path / "ring.bin"))
    filed.extend({"obs": torch.randn(8, 4)})
    view = filed.storage["obs"]  # type: ignore[index]
    assert view.is_contiguous()
    with pytest.raises(ValueError, match="shares memory with the buffer's rows"):
        filed.sample(5, out={"obs": view[:5]})


def bad_shape(kind: str) -> dict[str, Any]:
    data = batch(kind, 0, 2)
    data["obs"]["x"] = data["obs"]["x"][..., :2]
    return data


def bad_dtype(kind: str) -> dict[str, Any]:
    data = batch(kind, 0, 2)
    data["step"] = data["step"].float() + 0.5
    return data


def bad_keys(kind: str) -> dict[str, Any]:
    data = batch(kind, 0, 2)
    data["extra"] = data["step"]
    return data


@pytest.mark.parametrize("out_of_core", MODES)
@pytest.mark.parametrize("bad", [bad_shape, bad_dtype, bad_keys])
@pytest.mark.parametrize("kind", KINDS)
def test_a_refused_batch_leaves_the_buffer_and_its_file_as_before(
    tmp_path: Path, kind: str, bad: Callable[[str], dict[str, Any]], out_of_core: bool
) -> None:
    path = tmp_path / "ring.bin"
    filed = make(kind, 3, backed(tmp_path, out_of_core))
    fill(kind, [filed], [4])
    position = (len(filed), filed.cursor, filed.is_full)
    rows = path.read_bytes()
    with pytest.raises((TypeError, ValueError)):
        filed.extend(bad(kind))
    assert (len(filed), filed.cursor, filed.is_full) == position
    assert path.read_bytes() == rows


def test_a_first_extend_whose_rows_do_not_fit_the_disk_raises_and_leaves_it_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filed = make("dict", 1000, BackingFile(tmp_path / "ring.bin"))

    def full_disk(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full_disk)
    with pytest.raises(OSError, match="cannot reserve"):
        filed.extend(batch("dict", 0, 2))
    assert len(filed) == 0 and filed.storage is None
    monkeypatch.undo()
    filed.extend(batch("dict", 0, 2))
    assert filed.get_full_buffer()["step"].tolist() == [0, 1]


@pytest.mark.parametrize("kind", ["dict", "online-time"])
@pytest.mark.parametrize(
    ("backing", "error", "match"),
    [
        ("ring.bin", TypeError, "expected None .* or a bufcore.BackingFile, got str"),
        (Path("ring.bin"), TypeError, "got PosixPath"),
    ],
)
def test_a_backing_that_is_not_a_backing_file_is_a_type_error(
    kind: str, backing: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        make(kind, 4, backing)


@pytest.mark.parametrize("kind", ["dict", "online-time"])
@pytest.mark.parametrize("device", ["meta", "cuda"])
def test_a_backing_file_on_a_device_other_than_the_cpu_is_refused(
    tmp_path: Path, kind: str, device: str
) -> None:
    backing = BackingFile(tmp_path / "ring.bin")
    with pytest.raises(ValueError, match="device must be 'cpu'"):
        if kind == "dict":
            DictBuffer(capacity=4, device=device, backing=backing)
        else:
            TrajectoryDictBufferMultiDim(capacity=4, device=device, backing=backing)


def test_a_closed_backing_file_is_refused_by_the_constructor(tmp_path: Path) -> None:
    backing = BackingFile(tmp_path / "ring.bin")
    backing.close()
    with pytest.raises(ValueError, match="was closed"):
        DictBuffer(capacity=4, backing=backing)


def test_a_load_refuses_a_backing_that_is_not_a_backing_file_before_reading(
    tmp_path: Path,
) -> None:
    with pytest.raises(TypeError, match="BackingFile"):
        bufcore.load_buffer(tmp_path / "missing", backing="ring.bin")  # type: ignore[arg-type]


def test_a_load_with_backing_of_a_buffer_that_keeps_rows_in_memory_is_a_type_error(
    tmp_path: Path,
) -> None:
    z = bufcore.ZBuffer(4, 2, seed=0)
    z.add(torch.ones(3, 2))
    z.save(tmp_path / "z")
    backing = BackingFile(tmp_path / "ring.bin")
    with pytest.raises(TypeError, match="ZBuffer, which keeps its rows in memory"):
        bufcore.load_buffer(tmp_path / "z", backing=backing)
    assert (tmp_path / "ring.bin").stat().st_size == 4096  # nothing allocated


def test_a_damaged_checkpoint_opened_file_backed_raises_and_the_backing_file_stays_usable(
    tmp_path: Path,
) -> None:
    source = make("dict", 6, None)
    fill("dict", [source], [6])
    source.save(tmp_path / "ckpt")
    payload = tmp_path / "ckpt" / "buffer.hdf5"
    data = bytearray(payload.read_bytes())
    data[-3] ^= 0xFF
    payload.write_bytes(bytes(data))
    backing = BackingFile(tmp_path / "ring.bin")
    with pytest.raises(bufcore.CorruptCheckpointError, match=r"buffer\.hdf5"):
        DictBuffer.load(tmp_path / "ckpt", backing=backing)
    buffer = make("dict", 6, backing)
    buffer.extend(batch("dict", 0, 2))
    assert buffer.get_full_buffer()["step"].tolist() == [0, 1]

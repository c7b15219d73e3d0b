"""The ``rlinf`` row: RLinf's disk trajectory buffer (issue 21), each measurement in a fresh
process (DESIGN §6), beside the disk's raw ceilings, a ``DictBuffer`` and RLinf's own code.

``python -m bench --only rlinf`` runs one child process per implementation, op and round
(``python -m bench.rlinf '<json spec>'``, one torch thread), the order rotated every round. A
trajectory is ``[T, B]`` (default ``[64, 64]``) holding ``curr_obs.state`` float32
``[T, B, 1024]`` (the 4 KB observation), ``actions`` and ``prev_logprobs`` float32 ``[T, B,
7]``, ``rewards`` and ``prev_values`` float32 ``[T, B, 1]``, and ``dones``, ``terminations``
and ``truncations`` bool ``[T + 1, B, 1]`` (RLinf's bootstrap row, trimmed when flattened):
4,163 bytes per row, 17.05 MB of tensors per trajectory. A child cycles through 4 such
trajectories (random floats). Rates in MB/s count these tensor bytes (the files add a few KB).

Ops:

- ``write``: a new buffer with ``auto_save=True`` (cache of 5, RLinf's default) in a fresh
  directory; ``add_trajectories([t])`` for ``write_trajectories`` trajectories, then
  ``close(wait=True)`` (for bufcore: every file fsynced, published, and the index with it);
  timed together, ``write_blocks`` blocks per process, MB/s. ``raw write+fsync``: ``os.write``
  of the same bytes in 64 MiB blocks into one new file of the same directory, then ``fsync``
  (the ceiling, and the issue's target). ``raw write+fsync, a file each`` (the same child,
  alternating blocks): the same bytes as ``write_trajectories`` new files of one
  trajectory's size, each fsynced as soon as written, then the directory (the ceiling of a
  writer that must put each trajectory in its own durable file). RLinf's ``close`` waits
  for its 20 threads' ``torch.save`` calls, which do not fsync: ``rlinf`` is that time (its
  files may sit in the page cache), ``rlinf + fsync`` adds an ``fsync`` of each of its
  files afterwards (what bufcore's guarantee costs it).
- ``sample (cached)``: ``sample(1024)`` from a window of ``window`` trajectories (default 100)
  with ``cache_size=window``, after they are written and flushed; rows/s. ``DictBuffer``:
  ``DictBuffer(capacity=rows).sample(1024)`` holding the same rows (the window's rows,
  flattened as the buffer flattens them).
- ``sample (cold)``: the same with ``enable_cache=False``: every sample reads trajectory files.
  Before each timed call every file of the directory is fsynced and dropped from the page
  cache with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (no root needed), so every read reaches the
  disk; rows/s, and ``disk MB/s``: the bytes this process read from the block device
  (``read_bytes`` of ``/proc/self/io``) over the call's time. ``raw cold read``: ``preadv`` of a
  file of the window's bytes in 64 MiB blocks, after the same eviction (the ceiling).
- ``memory``: a buffer with ``auto_save=True`` (cache 5) holding ``N`` small trajectories
  (default ``[8, 4]``, same leaves) on disk, for each ``N`` of ``memory_sizes``, added 50 at a
  time and flushed: the process's RSS and its growth since just before the buffer was made,
  the Python heap the buffer holds (``tracemalloc``, which does not see torch's tensors), and
  the cache's tensor bytes.

``rlinf``: RLinf's ``rlinf/data/storage/replay/buffer.py`` and the ``Trajectory`` dataclass
of ``rlinf/data/schema/embodied_types.py`` (with its one import,
``rlinf/utils/nested_dict_process.py``), compiled from the fetched mirror at bench time
(``--rlinf-mirror``, a git directory or a checkout; nothing of RLinf is copied into this
repository). Their parent packages are empty module objects (their ``__init__`` files import
the whole framework), and ``rlinf.utils.logging`` is replaced by a stub whose ``get_logger()``
returns a standard ``logging`` logger (RLinf's asks its scheduler's ``Worker``). The buffer's
code runs unchanged. Without the mirror, the rlinf rows are skipped with the reason.

Targets (issue 21): ``write`` bufcore / raw write+fsync >= 0.7; ``sample (cached)`` bufcore /
DictBuffer >= 0.5. Ratios divide medians over processes of the same run.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import gc
import itertools
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
import tracemalloc
import types
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.blocks import ROWS_PER_S, OpRecord
from bench.children import run_json_child
from bench.disk import drop_cache, raw_read, raw_write, raw_write_files
from bench.headline import Stats, rotation
from bench.memory import minor_faults
from bench.timing import timed

ROOT = Path(__file__).resolve().parent.parent
MB_PER_S = "MB/s"
WRITE, CACHED, COLD, COLD_DISK, MEMORY = (
    "write", "sample (cached)", "sample (cold)", "sample (cold) disk", "memory",
)
BUFCORE, RLINF, DICTBUFFER = "bufcore", "rlinf", "DictBuffer"
RAW_WRITE, RAW_READ, RLINF_FSYNC = "raw write+fsync", "raw cold read", "rlinf + fsync"
RAW_FILES = "raw write+fsync, a file each"
IMPLEMENTATIONS: dict[str, tuple[str, ...]] = {
    WRITE: (BUFCORE, RLINF, RAW_WRITE),
    CACHED: (BUFCORE, DICTBUFFER, RLINF),
    COLD: (BUFCORE, RLINF, RAW_READ),
    MEMORY: (BUFCORE, RLINF),
}
"""The implementations each op's children run (``sample (cold) disk`` comes with ``COLD``)."""
TARGETS: dict[tuple[str, str], float] = {(WRITE, RAW_WRITE): 0.7, (CACHED, DICTBUFFER): 0.5}
"""(op, the subject bufcore is divided by) -> the least ratio the issue asks for."""
BATCH = 1024
OBS_FLOATS = 1024
ACTION_DIM = 7
POOL = 4
MEMORY_BATCH = 50
MEMORY_CACHE = 5
CHILD_TIMEOUT_S = 1200
DEFAULT_MIRROR = Path("/work/.mirror/RLinf+RLinf/repo")
MIRROR_ENV = "BUFCORE_RLINF_MIRROR"
RLINF_FILES = {
    "rlinf.utils.nested_dict_process": "rlinf/utils/nested_dict_process.py",
    "rlinf.data.schema.embodied_types": "rlinf/data/schema/embodied_types.py",
    "rlinf.data.storage.replay.buffer": "rlinf/data/storage/replay/buffer.py",
}
"""RLinf's modules the rlinf rows run, in import order, and their paths in its repository."""
RLINF_PACKAGES = ("rlinf", "rlinf.utils", "rlinf.data", "rlinf.data.schema",
                  "rlinf.data.storage", "rlinf.data.storage.replay")
GIB, MIB = 2**30, 2**20


# ----------------------------------------------------------------------------- the spec
@dataclass(frozen=True)
class RlinfSpec:
    """What one child measures.

    Attributes:
        op: One of :data:`IMPLEMENTATIONS`' keys.
        implementation: One of that op's implementations.
        scratch: Directory for the child's files (a fresh subdirectory, removed at the end).
        steps: ``T`` of each trajectory.
        envs: ``B`` of each trajectory.
        obs_floats: float32 values of the observation per row.
        trajectories: ``write``: per block; ``sample``: the window; ``memory``: held.
        calls: Calls per timed block (cached sample).
        blocks: Timed blocks (``write``: blocks of ``trajectories`` adds; cold sample: calls).
        mirror: RLinf's repository (git directory or checkout) for the rlinf rows.
        threads: torch intra-op threads.
    """

    op: str
    implementation: str
    scratch: str
    steps: int = 64
    envs: int = 64
    obs_floats: int = OBS_FLOATS
    trajectories: int = 32
    calls: int = 32
    blocks: int = 3
    mirror: str = str(DEFAULT_MIRROR)
    threads: int = 1

    def __post_init__(self) -> None:
        if self.op not in IMPLEMENTATIONS:
            raise ValueError(f"op: expected one of {list(IMPLEMENTATIONS)}, got {self.op!r}")
        if self.implementation not in IMPLEMENTATIONS[self.op]:
            raise ValueError(
                f"implementation: expected one of {IMPLEMENTATIONS[self.op]} for {self.op!r}, "
                f"got {self.implementation!r}"
            )
        for name in ("steps", "envs", "obs_floats", "trajectories", "calls", "blocks",
                     "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}: expected an int >= 1, got {value!r}")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RlinfSpec:
        return cls(**json.loads(text))


# ------------------------------------------------------------------------- RLinf's code
def _git_dir(mirror: Path) -> Path | None:
    """The git directory of ``mirror`` when it is one (bare, or a checkout's ``.git``)."""
    if (mirror / "HEAD").is_file() and (mirror / "objects").is_dir():
        return mirror
    if (mirror / ".git").exists():
        return mirror / ".git"
    return None


def rlinf_unavailable(mirror: str | Path) -> str | None:
    """Why RLinf's buffer cannot be loaded from ``mirror``, or None."""
    path = Path(mirror)
    if not path.exists():
        return (f"RLinf's repository is not at {path} (fetch github:RLinf/RLinf, or pass "
                f"--rlinf-mirror / set {MIRROR_ENV})")
    if (path / RLINF_FILES["rlinf.data.storage.replay.buffer"]).is_file():
        return None
    git = _git_dir(path)
    if git is None:
        return f"{path} is neither a checkout of RLinf nor a git directory"
    missing = [
        p for p in RLINF_FILES.values()
        if subprocess.run(["git", "--git-dir", str(git), "cat-file", "-e", f"HEAD:{p}"],
                          capture_output=True, check=False).returncode
    ]
    if missing:
        return f"{path} lacks {', '.join(missing)} at HEAD (RLinf moved its buffer?)"
    return None


def _source(mirror: Path, relative: str) -> tuple[str, str]:
    """The text of ``relative`` in RLinf's repository and where it came from."""
    checkout = mirror / relative
    if checkout.is_file():
        return checkout.read_text(encoding="utf-8"), str(checkout)
    git = _git_dir(mirror)
    shown = subprocess.run(["git", "--git-dir", str(git), "show", f"HEAD:{relative}"],
                           capture_output=True, text=True, check=True)
    return shown.stdout, f"{mirror}@HEAD:{relative}"


def rlinf_version(mirror: str | Path) -> str:
    """RLinf's commit at ``mirror`` (``checkout`` when it is no git directory)."""
    git = _git_dir(Path(mirror))
    if git is None:
        return "RLinf (checkout)"
    done = subprocess.run(["git", "--git-dir", str(git), "log", "-1", "--format=%h %cs"],
                          capture_output=True, text=True, check=False)
    return f"RLinf {done.stdout.strip() or 'unknown commit'}"


def load_rlinf(mirror: str | Path) -> tuple[Any, Any]:
    """RLinf's ``TrajectoryReplayBuffer`` and ``Trajectory`` classes, compiled from ``mirror``
    (see the module docstring for the stubs).

    Raises:
        RuntimeError: :func:`rlinf_unavailable` gives a reason.
    """
    reason = rlinf_unavailable(mirror)
    if reason:
        raise RuntimeError(reason)
    for name in RLINF_PACKAGES:
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = []  # a package, but nothing is imported from disk through it
            sys.modules[name] = package
    stub = types.ModuleType("rlinf.utils.logging")
    stub.get_logger = lambda: logging.getLogger("rlinf")  # type: ignore[attr-defined]
    sys.modules["rlinf.utils.logging"] = stub
    for name, relative in RLINF_FILES.items():
        text, origin = _source(Path(mirror), relative)
        module = types.ModuleType(name)
        module.__file__ = origin
        sys.modules[name] = module
        exec(compile(text, origin, "exec"), module.__dict__)  # RLinf's own code, unchanged
    buffer = sys.modules["rlinf.data.storage.replay.buffer"]
    schema = sys.modules["rlinf.data.schema.embodied_types"]
    return buffer.TrajectoryReplayBuffer, schema.Trajectory


# ------------------------------------------------------------------------- trajectories
def make_trajectory(cls: Any, seed: int, steps: int, envs: int, obs_floats: int) -> Any:
    """A trajectory of the module docstring's leaves, as an instance of ``cls`` (bufcore's or
    RLinf's ``Trajectory``: the same fields)."""
    import torch

    generator = torch.Generator().manual_seed(seed)

    def floats(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=generator)

    def flags() -> torch.Tensor:
        return torch.rand(steps + 1, envs, 1, generator=generator) < 0.01

    return cls(
        max_episode_length=steps,
        model_weights_id="w0",
        curr_obs={"state": floats(steps, envs, obs_floats)},
        actions=floats(steps, envs, ACTION_DIM),
        prev_logprobs=floats(steps, envs, ACTION_DIM),
        rewards=floats(steps, envs, 1),
        prev_values=floats(steps, envs, 1),
        dones=flags(),
        terminations=flags(),
        truncations=flags(),
    )


def trajectory_bytes(trajectory: Any) -> int:
    """Bytes of every tensor a trajectory holds."""
    import torch

    total = 0
    for item in dataclasses.asdict(trajectory).values():
        values = item.values() if isinstance(item, dict) else [item]
        total += sum(v.nbytes for v in values if isinstance(v, torch.Tensor))
    return total


def row_bytes(obs_floats: int) -> int:
    """Bytes of one flattened row (the three flags trimmed to ``T`` rows)."""
    return 4 * (obs_floats + 2 * ACTION_DIM + 2) + 3


# ---------------------------------------------------------------------------- the child
Measured = list[tuple[str, str, OpRecord]]
"""A child's records: ``(op, subject, record)``."""


def _classes(spec: RlinfSpec) -> tuple[str, Any, Any]:
    """The version, the buffer class and the trajectory class of ``spec.implementation``."""
    if spec.implementation == RLINF:
        buffer_cls, trajectory_cls = load_rlinf(spec.mirror)
        return rlinf_version(spec.mirror), buffer_cls, trajectory_cls
    from bufcore import Trajectory, TrajectoryReplayBuffer

    return "bufcore", TrajectoryReplayBuffer, Trajectory


def _pool(spec: RlinfSpec, cls: Any) -> list[Any]:
    return [make_trajectory(cls, seed, spec.steps, spec.envs, spec.obs_floats)
            for seed in range(POOL)]


def _files(directory: Path) -> list[Path]:
    return [p for p in directory.iterdir() if p.name.startswith("trajectory_")]


def write_child(spec: RlinfSpec, scratch: Path) -> tuple[str, Measured]:
    """``write`` (see the module docstring)."""
    import numpy as np

    if spec.implementation == RAW_WRITE:
        nbytes = spec.trajectories * trajectory_bytes(
            make_trajectory(_bare_trajectory(), 0, spec.steps, spec.envs, spec.obs_floats))
        data = np.random.default_rng(0).random(nbytes // 8 + 1)
        record, files_record = OpRecord(MB_PER_S, 1, 1), OpRecord(MB_PER_S, 1, 1)
        for block in range(spec.blocks):
            target = scratch / f"raw-{block}.bin"
            seconds = raw_write(target, data)
            record.add(seconds, data.nbytes / 1e6, 0)
            target.unlink()
            directory = scratch / f"raw-files-{block}"
            directory.mkdir()
            seconds = raw_write_files(directory, data, spec.trajectories)
            files_record.add(seconds, data.nbytes / 1e6, 0)
            shutil.rmtree(directory)
        return f"numpy {np.__version__}", [(WRITE, RAW_WRITE, record),
                                           (WRITE, RAW_FILES, files_record)]
    version, buffer_cls, trajectory_cls = _classes(spec)
    pool = _pool(spec, trajectory_cls)
    source = itertools.cycle(pool).__next__
    nbytes = spec.trajectories * trajectory_bytes(pool[0])
    records = {WRITE: OpRecord(MB_PER_S, 1, spec.trajectories)}
    if spec.implementation == RLINF:
        records[RLINF_FSYNC] = OpRecord(MB_PER_S, 1, spec.trajectories)
    warm = buffer_cls(auto_save=True, auto_save_path=str(scratch / "warm"))
    warm.add_trajectories([source()])
    warm.close(wait=True)
    for block in range(spec.blocks):
        directory = scratch / f"block-{block}"
        buffer = buffer_cls(auto_save=True, auto_save_path=str(directory))
        before = minor_faults()

        def fill(buffer: Any = buffer) -> None:
            for _ in range(spec.trajectories):
                buffer.add_trajectories([source()])
            buffer.close(wait=True)

        seconds, _ = timed(fill)
        faults = minor_faults() - before
        records[WRITE].add(seconds, nbytes / 1e6, faults)
        if spec.implementation == RLINF:
            synced, _ = timed(functools.partial(_fsync_files, directory))
            records[RLINF_FSYNC].add(seconds + synced, nbytes / 1e6, faults)
        del buffer
        shutil.rmtree(directory)
    subject = {WRITE: spec.implementation, RLINF_FSYNC: RLINF_FSYNC}
    return version, [(WRITE, subject[name], record) for name, record in records.items()]


def _bare_trajectory() -> Any:
    from bufcore import Trajectory

    return Trajectory


def _fsync_files(directory: Path) -> None:
    """fsync every trajectory file of ``directory``."""
    for path in _files(directory):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _flat_rows(trajectories: Sequence[Any]) -> dict[str, Any]:
    """The rows of ``trajectories`` as one nested dict of ``[rows, ...]`` tensors, flattened as
    the buffer flattens them."""
    import torch

    from bufcore.storage.trajectories import trajectory_rows
    from bufcore.tree import unflatten

    flats = [trajectory_rows(t, "pool") for t in trajectories]
    paths = list(flats[0].rows) if flats[0] is not None else []
    joined = {p: torch.cat([f.rows[p] for f in flats if f is not None]) for p in paths}
    return unflatten(joined)


def _read_bytes() -> int:
    """Bytes this process has read from the block layer (``/proc/self/io``; 0 where absent)."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def sample_child(spec: RlinfSpec, scratch: Path) -> tuple[str, Measured]:
    """``sample (cached)`` and ``sample (cold)`` (see the module docstring)."""
    import numpy as np

    cold = spec.op == COLD
    if spec.implementation == RAW_READ:
        nbytes = spec.trajectories * trajectory_bytes(
            make_trajectory(_bare_trajectory(), 0, spec.steps, spec.envs, spec.obs_floats))
        data = np.random.default_rng(0).random(nbytes // 8 + 1)
        path = scratch / "raw.bin"
        raw_write(path, data)
        record = OpRecord(MB_PER_S, 1, 1)
        for _ in range(spec.blocks):
            record.add(raw_read(path, data), data.nbytes / 1e6, 0)
        return f"numpy {np.__version__}", [(COLD_DISK, RAW_READ, record)]
    window = spec.trajectories
    if spec.implementation == DICTBUFFER:
        from bufcore import DictBuffer, Trajectory

        pool = _pool(spec, Trajectory)
        rows = _flat_rows([pool[i % POOL] for i in range(window)])
        buffer: Any = DictBuffer(capacity=window * spec.steps * spec.envs, seed=0)
        buffer.extend(rows)
        del rows
        version = "bufcore"
    else:
        version, buffer_cls, trajectory_cls = _classes(spec)
        pool = _pool(spec, trajectory_cls)
        directory = scratch / "buffer"
        options: dict[str, Any] = (
            {"enable_cache": False} if cold else {"cache_size": window}
        )
        buffer = buffer_cls(seed=0, sample_window_size=window, auto_save=True,
                            auto_save_path=str(directory), **options)
        for i in range(window):
            buffer.add_trajectories([pool[i % POOL]])
        if spec.implementation == RLINF:
            buffer.close(wait=True)  # RLinf has no flush; its sampling needs no writer
        else:
            buffer.flush()
    del pool

    def step() -> object:
        return buffer.sample(BATCH)

    if not cold:
        record = OpRecord(ROWS_PER_S, BATCH, spec.calls)
        for _ in range(4):
            step()  # warm-up
        for _ in range(spec.blocks):
            record.measure(step)
        return version, [(CACHED, spec.implementation, record)]
    rows_record = OpRecord(ROWS_PER_S, BATCH, 1)
    disk_record = OpRecord(MB_PER_S, 1, 1)
    for _ in range(spec.blocks):
        drop_cache(directory)
        read, faults = _read_bytes(), minor_faults()
        seconds, got = timed(step)
        del got
        rows_record.add(seconds, BATCH, minor_faults() - faults)
        disk_record.add(seconds, (_read_bytes() - read) / 1e6, 0)
    return version, [(COLD, spec.implementation, rows_record),
                     (COLD_DISK, spec.implementation, disk_record)]


def _status_kib(field_name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


def _cache_bytes(buffer: Any) -> int:
    """Tensor bytes of a buffer's cache (bufcore's or RLinf's)."""
    import torch

    cache = getattr(buffer, "_cache", None)
    if cache is not None:
        return int(cache.nbytes)
    rlinf_cache = getattr(buffer, "_flat_trajectory_cache", None)
    held = None if rlinf_cache is None else rlinf_cache.get_buffer()
    stack, total = [held] if held is not None else [], 0
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            total += item.nbytes
        elif isinstance(item, dict):
            stack.extend(item.values())
    return total


def _malloc_trim() -> bool:
    """Hand glibc's free memory back to the system (``malloc_trim(0)``); False where there is
    no glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    libc.malloc_trim(0)
    return True


def memory_child(spec: RlinfSpec, scratch: Path) -> tuple[str, dict[str, Any]]:
    """``memory`` (see the module docstring)."""
    version, buffer_cls, trajectory_cls = _classes(spec)
    pool = _pool(spec, trajectory_cls)
    source = itertools.cycle(pool).__next__
    gc.collect()
    rss_before = _status_kib("VmRSS")
    tracemalloc.start()
    started = time.perf_counter()
    buffer = buffer_cls(auto_save=True, auto_save_path=str(scratch / "buffer"),
                        cache_size=MEMORY_CACHE)
    left = spec.trajectories
    while left:
        count = min(MEMORY_BATCH, left)
        buffer.add_trajectories([source() for _ in range(count)])
        left -= count
    if spec.implementation == RLINF:
        buffer.close(wait=True)
    else:
        buffer.flush()
    seconds = time.perf_counter() - started
    gc.collect()
    traced, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = _status_kib("VmRSS")
    # What of that growth is memory glibc keeps after it was freed (the write queue's peak):
    # a diagnostic, measured after the figure above.
    trimmed = _status_kib("VmRSS") if _malloc_trim() else rss
    disk = sum(p.stat().st_size for p in _files(scratch / "buffer"))
    held = len(buffer)
    return version, {
        "trajectories": held,
        "rss_mib": rss / 1024,
        "rss_growth_mib": (rss - rss_before) / 1024,
        "rss_growth_trimmed_mib": (trimmed - rss_before) / 1024,
        "traced_mib": traced / MIB,
        "traced_peak_mib": traced_peak / MIB,
        "cache_mib": _cache_bytes(buffer) / MIB,
        "disk_mib": disk / MIB,
        "seconds": seconds,
    }


def measure(spec: RlinfSpec) -> dict[str, Any]:
    """Run ``spec`` in this process (in a fresh scratch directory, removed after); the child's
    JSON object."""
    import torch

    torch.set_num_threads(spec.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("rlinf").setLevel(logging.ERROR)  # its auto_save notices
    scratch = Path(spec.scratch) / f"{spec.op.split()[0]}-{spec.implementation.split()[0]}-" \
        f"{os.getpid()}"
    scratch.mkdir(parents=True)
    out: dict[str, Any] = {"op": spec.op, "implementation": spec.implementation,
                           "trajectories": spec.trajectories, "pid": os.getpid()}
    try:
        if spec.op == MEMORY:
            out["version"], out["memory"] = memory_child(spec, scratch)
            return out
        run = write_child if spec.op == WRITE else sample_child
        out["version"], measured = run(spec, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    out["records"] = [{"op": op, "subject": subject, **record.to_json()}
                      for op, subject, record in measured]
    return out


def run_child(spec: RlinfSpec) -> dict[str, Any]:
    """:func:`measure` in a fresh ``python -m bench.rlinf`` process.

    Raises:
        RuntimeError: the child failed (its stderr's tail is in the message).
    """
    return run_json_child("bench.rlinf", spec.to_json(), threads=spec.threads,
                          what=f"{spec.op}: {spec.implementation}", timeout_s=CHILD_TIMEOUT_S)


# ---------------------------------------------------------------------------- the parent
@dataclass(frozen=True)
class RlinfConfig:
    """What the row measures (see the module docstring)."""

    steps: int = 64
    envs: int = 64
    obs_floats: int = OBS_FLOATS
    write_trajectories: int = 32
    write_blocks: int = 3
    window: int = 100
    calls: int = 32
    blocks: int = 5
    cold_calls: int = 3
    memory_sizes: tuple[int, ...] = (100, 1000, 4000)
    memory_shape: tuple[int, int] = (8, 4)
    rounds: int = 3
    ops: tuple[str, ...] = (WRITE, CACHED, COLD, MEMORY)
    scratch: str = str(ROOT / "bench" / "results" / "tmp" / "rlinf")
    mirror: str = str(DEFAULT_MIRROR)
    threads: int = 1

    def specs(self, op: str, implementation: str) -> list[RlinfSpec]:
        """Every child ``implementation`` runs for ``op`` in one round."""
        common = {"scratch": self.scratch, "mirror": self.mirror, "threads": self.threads,
                  "obs_floats": self.obs_floats}
        if op == MEMORY:
            steps, envs = self.memory_shape
            return [RlinfSpec(op, implementation, steps=steps, envs=envs, trajectories=n,
                              **common)  # type: ignore[arg-type]
                    for n in self.memory_sizes]
        if op == WRITE:
            return [RlinfSpec(op, implementation, steps=self.steps, envs=self.envs,
                              trajectories=self.write_trajectories, blocks=self.write_blocks,
                              **common)]  # type: ignore[arg-type]
        blocks = self.cold_calls if op == COLD else self.blocks
        return [RlinfSpec(op, implementation, steps=self.steps, envs=self.envs,
                          trajectories=self.window, calls=self.calls, blocks=blocks,
                          **common)]  # type: ignore[arg-type]


Key = tuple[str, str]
"""``(op, subject)``."""


@dataclass
class RlinfResults:
    """Rates per (op, subject) over processes, memory rows, versions, skips and load."""

    config: RlinfConfig
    stats: dict[Key, Stats] = field(default_factory=dict)
    memory: list[dict[str, Any]] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)
    children: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, child: dict[str, Any], position: int) -> None:
        self.children.append({**child, "position": position})
        self.versions.setdefault(child["implementation"], child["version"])
        if "memory" in child:
            self.memory.append({"implementation": child["implementation"], **child["memory"]})
            return
        for record in child["records"]:
            stats = self.stats.setdefault((record["op"], record["subject"]),
                                          Stats(record["unit"]))
            stats.rates.append(float(record["rate"]))
            stats.faults.append(float(record["faults_per_call"]))
            stats.positions.append(position)

    def ratio(self, op: str, subject: str, against: str) -> float | None:
        """Median over processes of ``subject`` / that of ``against``, for ``op``."""
        mine, theirs = self.stats.get((op, subject)), self.stats.get((op, against))
        if mine is None or theirs is None:
            return None
        return mine.median / theirs.median

    def to_json(self) -> dict[str, Any]:
        ratios = []
        for op, subject in self.stats:
            if subject == BUFCORE:
                continue
            value = self.ratio(op, BUFCORE, subject)
            target = TARGETS.get((op, subject))
            ratios.append({"op": op, "against": subject, "bufcore_over_it": value,
                           "target": target,
                           "met": None if target is None or value is None else value >= target})
        return {
            "config": dataclasses.asdict(self.config),
            "row_bytes": row_bytes(self.config.obs_floats),
            "versions": self.versions,
            "skipped": self.skipped,
            "load_average_1min": self.loads,
            "seconds": round(self.seconds, 1),
            "stats": [{"op": op, "subject": subject, **stats.to_json()}
                      for (op, subject), stats in self.stats.items()],
            "ratios": ratios,
            "memory": self.memory,
            "children": self.children,
        }


def _log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(
    cfg: RlinfConfig,
    *,
    runner: Callable[[RlinfSpec], dict[str, Any]] = run_child,
    log: Callable[[str], None] = _log,
) -> RlinfResults:
    """Every round: each op's implementations in rotated order, one fresh child each (memory:
    the first round only; its numbers do not swing). The scratch directory is removed at the
    end."""
    started = time.perf_counter()
    results = RlinfResults(cfg)
    reason = rlinf_unavailable(cfg.mirror)
    if reason:
        results.skipped[RLINF] = reason
        log(f"rlinf: RLinf's own buffer skipped: {reason}")
    present = {op: [n for n in IMPLEMENTATIONS[op] if not (n == RLINF and reason)]
               for op in cfg.ops}
    try:
        for round_ in range(cfg.rounds):
            for op in cfg.ops:
                if op == MEMORY and round_:
                    continue
                for position, name in enumerate(rotation(present[op], cfg.rounds)[round_]):
                    for spec in cfg.specs(op, name):
                        results.loads.append(os.getloadavg()[0])
                        log(f"rlinf round {round_ + 1}/{cfg.rounds}: {op} {name} "
                            f"({spec.trajectories} trajectories; load {results.loads[-1]:.2f})")
                        results.add(runner(spec), position)
    finally:
        shutil.rmtree(cfg.scratch, ignore_errors=True)
    results.loads.append(os.getloadavg()[0])
    results.seconds = time.perf_counter() - started
    return results


# ---------------------------------------------------------------------------- the report
def _verdict(value: float | None, target: float | None) -> str:
    if value is None or target is None:
        return ""
    return f">= {target:g}x: {'met' if value >= target else 'MISSED'}"


def slope_bytes(rows: list[dict[str, Any]], key: str) -> float | None:
    """Bytes per trajectory of ``key`` (MiB) between the smallest and largest ``N``."""
    if len(rows) < 2:
        return None
    low = min(rows, key=lambda r: r["trajectories"])
    high = max(rows, key=lambda r: r["trajectories"])
    if high["trajectories"] == low["trajectories"]:
        return None
    grown = float(high[key]) - float(low[key])
    return grown * MIB / int(high["trajectories"] - low["trajectories"])


def render(results: RlinfResults) -> str:
    """The rates table and the memory table (markdown), the targets and what ran."""
    cfg = results.config
    loads = results.loads or [0.0]
    row = row_bytes(cfg.obs_floats)
    per = row * cfg.steps * cfg.envs
    lines = [
        f"RLinf disk trajectory buffer (fresh process per measurement; {cfg.rounds} rounds; "
        f"trajectories [{cfg.steps}, {cfg.envs}] of {row:,} B rows = {per / 1e6:.2f} MB; "
        f"write: {cfg.write_trajectories} per block x {cfg.write_blocks} blocks; sample(1024) "
        f"from a window of {cfg.window}; 1-min load average {min(loads):.1f}-{max(loads):.1f}, "
        f"median {statistics.median(loads):.1f})",
    ]
    if results.stats:
        lines += ["| op | implementation | unit | median | worst | bufcore / this | target |",
                  "|---|---|---|---|---|---|---|"]
    for op in (WRITE, CACHED, COLD, COLD_DISK):
        subjects = [s for (o, s) in results.stats if o == op]
        for subject in subjects:
            stats = results.stats[(op, subject)]
            ratio = None if subject == BUFCORE else results.ratio(op, BUFCORE, subject)
            target = TARGETS.get((op, subject))
            lines.append(
                f"| {op} | {subject} | {stats.unit} | {stats.median:,.0f} | "
                f"{stats.low:,.0f} | "
                f"{'' if ratio is None else f'{ratio:.2f}x'} | {_verdict(ratio, target)} |"
            )
    for (op, against), target in TARGETS.items():
        value = results.ratio(op, BUFCORE, against)
        if value is not None:
            lines.append(f"target: {op} bufcore / {against} = {value:.2f}x "
                         f"({'met' if value >= target else 'MISSED'} >= {target:g}x)")
    if results.memory:
        small = cfg.memory_shape
        lines += [
            "",
            f"memory held with N trajectories [{small[0]}, {small[1]}] on disk (auto_save, "
            f"cache {MEMORY_CACHE}; RSS growth: since just before the buffer was made; Python "
            "heap: tracemalloc, which does not see tensors)",
            "| implementation | N | on disk MiB | RSS MiB | RSS growth MiB | after malloc_trim "
            "MiB | Python heap MiB | cache MiB | add+flush s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for item in sorted(results.memory, key=lambda r: (r["implementation"],
                                                          r["trajectories"])):
            lines.append(
                f"| {item['implementation']} | {item['trajectories']:,} | "
                f"{item['disk_mib']:,.1f} | {item['rss_mib']:,.1f} | "
                f"{item['rss_growth_mib']:,.1f} | {item['rss_growth_trimmed_mib']:,.1f} | "
                f"{item['traced_mib']:,.2f} | "
                f"{item['cache_mib']:,.2f} | {item['seconds']:,.1f} |"
            )
        for name in IMPLEMENTATIONS[MEMORY]:
            rows = [r for r in results.memory if r["implementation"] == name]
            heap, rss = slope_bytes(rows, "traced_mib"), slope_bytes(rows, "rss_growth_mib")
            trimmed = slope_bytes(rows, "rss_growth_trimmed_mib")
            if heap is not None and rss is not None and trimmed is not None:
                lines.append(f"{name}: per trajectory on disk, Python heap {heap:,.0f} B, RSS "
                             f"{rss:,.0f} B ({trimmed:,.0f} B after malloc_trim)")
    for name, reason in results.skipped.items():
        lines.append(f"{name}: skipped: {reason}")
    for name, version in sorted(results.versions.items()):
        lines.append(f"{name}: {version}")
    if RLINF in results.versions:
        lines.append(
            "rlinf ran: rlinf/data/storage/replay/buffer.py, embodied_types.py and "
            "nested_dict_process.py unchanged from the mirror; stubs: empty parent packages and "
            "rlinf.utils.logging.get_logger (a stdlib logger)"
        )
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    """Child entry point: one JSON spec in, one JSON line out."""
    if len(argv) != 1:
        print("usage: python -m bench.rlinf '<json spec>' (the whole row: python -m bench "
              "--only rlinf)", file=sys.stderr)
        return 2
    print(json.dumps(measure(RlinfSpec.from_json(argv[0]))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Nothing on disk is read with pickle (DESIGN §3): every checkpoint kind loads with it disabled.

One exception, tested here: RLinf's ``pkl`` trajectory format, read by one call in
``bufcore/persist/rlinf/payload.py`` and only for a caller who passed ``allow_pickle=True``.
``torch.load(weights_only=True)`` (RLinf's ``pt`` format) is no unpickling reader: it reads
tensors and plain containers only.
"""

from __future__ import annotations

import ast
import io
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
import torch.serialization

import bufcore
from bufcore import (
    AdvancedReplayBuffer,
    DictBuffer,
    EpisodeReplayBuffer,
    NaiveReplayBuffer,
    TrajectoryReplayBuffer,
    ZBuffer,
    load_buffer,
)
from tests.buffers.rlinf.rlinf_data import sampled_ids, trajectory, write_rlinf_directory

BUFCORE = Path(bufcore.__file__).parent
BFM_TARGET = "humanoidverse.agents.buffers.transition.DictBuffer"


class UnpicklingAttempted(BaseException):
    """A load path reached an unpickling reader (a BaseException, so no ``except`` hides it)."""


def disable_unpickling(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every unpickling reader raise for the rest of the test; the attempts, as they come."""
    attempts: list[str] = []

    def attempt(name: str) -> UnpicklingAttempted:
        attempts.append(name)
        return UnpicklingAttempted(f"{name} was called")

    def refuse(name: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise attempt(name)

        return refused

    class RefusedUnpickler:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise attempt("pickle.Unpickler")

    real_np_load = np.load
    real_torch_load = torch.load

    def torch_load(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("weights_only") is not True:
            raise attempt("torch.load")
        return real_torch_load(*args, **kwargs)

    def np_load(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("allow_pickle"):
            raise attempt("numpy.load(allow_pickle=True)")
        return real_np_load(*args, **kwargs)

    monkeypatch.setattr(pickle, "load", refuse("pickle.load"))
    monkeypatch.setattr(pickle, "loads", refuse("pickle.loads"))
    monkeypatch.setattr(pickle, "Unpickler", RefusedUnpickler)
    monkeypatch.setattr(torch, "load", torch_load)
    monkeypatch.setattr(torch.serialization, "load", refuse("torch.serialization.load"))
    monkeypatch.setattr(np, "load", np_load)
    return attempts


READERS = {
    "pickle.load": lambda: pickle.load(io.BytesIO(pickle.dumps(1))),
    "pickle.loads": lambda: pickle.loads(pickle.dumps(1)),
    "pickle.Unpickler": lambda: pickle.Unpickler(io.BytesIO(pickle.dumps(1))).load(),
    "torch.load": lambda: torch.load(io.BytesIO()),
    "torch.serialization.load": lambda: torch.serialization.load(io.BytesIO()),
    "numpy.load(allow_pickle=True)": lambda: np.load(io.BytesIO(), allow_pickle=True),
}


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_disabling_unpickling_makes_each_unpickling_reader_raise(
    monkeypatch: pytest.MonkeyPatch, reader: Callable[[], Any]
) -> None:
    attempts = disable_unpickling(monkeypatch)
    with pytest.raises(UnpicklingAttempted):
        reader()
    assert len(attempts) == 1


# ------------------------------------------------------------------ checkpoint kinds
def nested_batch(ids: np.ndarray) -> dict[str, Any]:
    return {
        "observation": {
            "state": np.stack([ids, ids * 0.5], 1).astype(np.float32),
            "deep": {"x": ids[:, None].astype(np.int16)},
        },
        "terminated": (ids % 3 == 0)[:, None],
    }


def assert_same_dict_buffer(loaded: Any, saved: DictBuffer) -> None:
    assert isinstance(loaded, DictBuffer)
    assert (len(loaded), loaded.cursor, loaded.is_full) == (len(saved), saved.cursor, saved.is_full)
    full, expected = loaded.get_full_buffer(), saved.get_full_buffer()
    assert full.keys() == expected.keys()
    if expected:
        observation, expected_observation = full["observation"], expected["observation"]
        assert torch.equal(observation["state"], expected_observation["state"])
        assert torch.equal(observation["deep"]["x"], expected_observation["deep"]["x"])
        assert torch.equal(full["terminated"], expected["terminated"])
        assert torch.equal(loaded.sample(64)["terminated"], saved.sample(64)["terminated"])
    else:
        assert (loaded.storage, loaded.capacity) == (None, saved.capacity)


def dict_buffer(path: Path) -> Callable[[Any], None]:
    saved = DictBuffer(capacity=6, seed=3)
    saved.extend(nested_batch(np.arange(9)))
    saved.save(path)
    return lambda loaded: assert_same_dict_buffer(loaded, saved)


def empty_dict_buffer(path: Path) -> Callable[[Any], None]:
    saved = DictBuffer(capacity=4, seed=3)
    saved.save(path)
    return lambda loaded: assert_same_dict_buffer(loaded, saved)


def z_buffer(path: Path) -> Callable[[Any], None]:
    saved = ZBuffer(8, 3, seed=4)
    saved.add(torch.arange(30, dtype=torch.float32).reshape(10, 3))
    saved.save(path)

    def check(loaded: Any) -> None:
        assert isinstance(loaded, ZBuffer)
        assert (len(loaded), loaded.cursor, loaded.dim) == (len(saved), saved.cursor, saved.dim)
        assert torch.equal(loaded.sample(256), saved.sample(256))

    return check


def bfm_zero_directory(path: Path) -> Callable[[Any], None]:
    """Written by hand exactly as BFM-Zero's DictBuffer.save lays it out (no manifest)."""
    path.mkdir()
    rng = np.random.default_rng(7)
    datasets = {
        "observation-state": rng.standard_normal((5, 4)).astype(np.float32),
        "observation-privileged_state": rng.standard_normal((5, 6)).astype(np.float32),
        "action": rng.standard_normal((5, 2)).astype(np.float32),
        "terminated": rng.random((5, 1)) < 0.5,
    }
    with h5py.File(path / "buffer.hdf5", "w") as h5:
        for name, array in datasets.items():
            h5.create_dataset(name, data=array)
    config = {
        "capacity": 8,
        "device": "cpu",
        "nested_key_separator": "-",
        "_idx": 5,
        "_is_full": False,
        "__target__": BFM_TARGET,
    }
    (path / "config.json").write_text(json.dumps(config, indent=4))

    def check(loaded: Any) -> None:
        assert isinstance(loaded, DictBuffer)
        assert (len(loaded), loaded.cursor, loaded.is_full) == (5, 5, False)
        full = loaded.get_full_buffer()
        observation = full["observation"]
        assert np.array_equal(observation["state"].numpy(), datasets["observation-state"])
        assert np.array_equal(
            observation["privileged_state"].numpy(), datasets["observation-privileged_state"]
        )
        assert np.array_equal(full["action"].numpy(), datasets["action"])
        assert np.array_equal(full["terminated"].numpy(), datasets["terminated"])

    return check


def di_engine_list_buffer(path: Path) -> Callable[[Any], None]:
    """Python dict items of every savable kind (a str, a numpy array, numbers) in list mode."""
    saved = AdvancedReplayBuffer(replay_buffer_size=4, seed=2)
    saved.push([{"data_id": f"/data/{i}.pt", "obs": np.full(3, i, np.float32), "r": i * 0.5}
                for i in range(5)], 0)

    def check(loaded: Any) -> None:
        assert isinstance(loaded, AdvancedReplayBuffer)
        assert [item["data_id"] for item in loaded.held_items()] == [
            item["data_id"] for item in saved.held_items()]
        assert loaded.sample(3, 0) is not None

    saved.save(path)
    return check


def di_engine_packed_buffer(path: Path) -> Callable[[Any], None]:
    saved = NaiveReplayBuffer(replay_buffer_size=3, seed=2, storage="packed")
    saved.push([{"obs": torch.full((2,), float(i))} for i in range(4)], 0)
    saved.save(path)
    return lambda loaded: assert_same_items(loaded, saved)


def di_engine_episode_buffer(path: Path) -> Callable[[Any], None]:
    saved = EpisodeReplayBuffer(replay_buffer_size=3, seed=2)
    saved.push([[{"t": t, "obs": torch.zeros(2)} for t in range(n)] for n in (2, 4)], 0)
    saved.save(path)

    def check(loaded: Any) -> None:
        assert isinstance(loaded, EpisodeReplayBuffer)
        assert loaded.episode_len == saved.episode_len

    return check


def assert_same_items(loaded: Any, saved: Any) -> None:
    assert type(loaded) is type(saved)
    for a, b in zip(loaded.held_items(), saved.held_items(), strict=True):
        assert torch.equal(a["obs"], b["obs"])


KINDS = [
    pytest.param(dict_buffer, DictBuffer.load, id="dict-buffer"),
    pytest.param(empty_dict_buffer, DictBuffer.load, id="empty-dict-buffer"),
    pytest.param(z_buffer, ZBuffer.load, id="z-buffer"),
    pytest.param(bfm_zero_directory, DictBuffer.load, id="bfm-zero-directory"),
    pytest.param(di_engine_list_buffer, AdvancedReplayBuffer.load, id="di-engine-list"),
    pytest.param(di_engine_packed_buffer, NaiveReplayBuffer.load, id="di-engine-packed"),
    pytest.param(di_engine_episode_buffer, EpisodeReplayBuffer.load, id="di-engine-episode"),
]


@pytest.mark.parametrize("through", ["class-load", "load_buffer"])
@pytest.mark.parametrize(("write", "class_load"), KINDS)
def test_every_checkpoint_kind_loads_with_unpickling_disabled(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write: Callable[[Path], Callable[[Any], None]],
    class_load: Callable[[Path], Any],
    through: str,
) -> None:
    check = write(tmp_path / "ckpt")
    load = class_load if through == "class-load" else load_buffer
    attempts = disable_unpickling(monkeypatch)
    check(load(tmp_path / "ckpt"))
    assert attempts == []


def test_weights_only_torch_loads_stay_allowed_when_unpickling_is_disabled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    buffer = io.BytesIO()
    torch.save({"x": torch.ones(2)}, buffer)
    attempts = disable_unpickling(monkeypatch)
    buffer.seek(0)
    assert torch.equal(torch.load(buffer, weights_only=True)["x"], torch.ones(2))
    assert attempts == []


@pytest.mark.parametrize("writer", ["bufcore", "rlinf-layout"])
def test_an_rlinf_buffer_directory_loads_with_unpickling_disabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str
) -> None:
    if writer == "bufcore":
        saved = TrajectoryReplayBuffer(auto_save=True, auto_save_path=str(tmp_path / "d"))
        saved.add_trajectories([trajectory(i) for i in range(3)])
        saved.close()
    else:
        write_rlinf_directory(tmp_path / "d", [trajectory(i) for i in range(3)])
    attempts = disable_unpickling(monkeypatch)
    loaded = TrajectoryReplayBuffer(cache_size=1, sample_window_size=0)
    loaded.load_checkpoint(tmp_path / "d")
    assert set(sampled_ids(loaded.sample(300))) == {0, 1, 2}
    assert attempts == []


def pickle_directory(path: Path) -> None:
    saved = TrajectoryReplayBuffer(trajectory_format="pkl", allow_pickle=True)
    saved.add_trajectories([trajectory(0)])
    saved.save_checkpoint(path)


def test_a_pkl_directory_is_refused_before_anything_is_unpickled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pickle_directory(tmp_path / "d")
    attempts = disable_unpickling(monkeypatch)
    with pytest.raises(ValueError, match="reading a pickle file runs any code it holds"):
        TrajectoryReplayBuffer().load_checkpoint(tmp_path / "d")
    assert attempts == []


def test_the_one_unpickling_call_is_reached_only_with_allow_pickle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pickle_directory(tmp_path / "d")
    attempts = disable_unpickling(monkeypatch)
    with pytest.raises(UnpicklingAttempted):
        TrajectoryReplayBuffer(allow_pickle=True).load_checkpoint(tmp_path / "d")
    assert attempts == ["pickle.load"]


# ------------------------------------------------------------------ static check
UNPICKLERS = {
    "pickle.load",
    "pickle.loads",
    "pickle.Unpickler",
    "_pickle.load",
    "_pickle.loads",
    "_pickle.Unpickler",
}
TORCH_LOADS = {"torch.load", "torch.serialization.load"}
NUMPY_LOADS = {"numpy.load"}


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> the dotted name it is bound to by the module's imports."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.expr, names: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(names.get(node.id, node.id))
    return ".".join(reversed(parts))


_UNKNOWN = object()


def _keyword(call: ast.Call, name: str, default: object) -> object:
    """The constant passed as ``name=``, ``default`` when absent, ``_UNKNOWN`` if not constant."""
    for keyword in call.keywords:
        if keyword.arg == name:
            value = keyword.value
            return value.value if isinstance(value, ast.Constant) else _UNKNOWN
    if any(keyword.arg is None for keyword in call.keywords):  # **options may hold it
        return _UNKNOWN
    return default


def unpickling_calls(source: str, filename: str = "<source>") -> list[str]:
    """``file:line call`` for every call in ``source`` that may unpickle."""
    tree = ast.parse(source, filename)
    names = _imported_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = _dotted(node.func, names)
        unsafe = (
            called in UNPICKLERS
            or (called in TORCH_LOADS and _keyword(node, "weights_only", None) is not True)
            or (called in NUMPY_LOADS and _keyword(node, "allow_pickle", False) is not False)
        )
        if unsafe:
            found.append(f"{filename}:{node.lineno} {called}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        "import pickle\npickle.load(f)",
        "import pickle as p\np.loads(b)",
        "from pickle import loads\nloads(b)",
        "import pickle\npickle.Unpickler(f).load()",
        "import torch\ntorch.load(f)",
        "import torch as th\nth.load(f, weights_only=False)",
        "import torch\ntorch.load(f, **options)",
        "from torch.serialization import load\nload(f)",
        "import numpy as np\nnp.load(f, allow_pickle=True)",
        "import numpy as np\nnp.load(f, allow_pickle=flag)",
    ],
)
def test_the_static_check_flags_an_unpickling_call(source: str) -> None:
    assert len(unpickling_calls(source)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ntorch.load(f, weights_only=True)",
        "import torch\ntorch.load(f, map_location='cpu', weights_only=True)",
        "import numpy as np\nnp.load(f)",
        "import numpy as np\nnp.load(f, allow_pickle=False)",
        "import json\njson.load(f)",
        "import pickle\npickle.dumps(x)",
    ],
)
def test_the_static_check_accepts_a_safe_call(source: str) -> None:
    assert unpickling_calls(source) == []


# The one unpickling call bufcore makes, and where: RLinf's pkl format, behind allow_pickle=True
# (test_the_one_unpickling_call_is_reached_only_with_allow_pickle).
OPTED_IN = {"persist/rlinf/payload.py": ["pickle.load"]}


@pytest.mark.parametrize(
    "module", sorted(BUFCORE.rglob("*.py")), ids=lambda p: str(p.relative_to(BUFCORE))
)
def test_no_bufcore_module_calls_an_unpickling_loader(module: Path) -> None:
    found = unpickling_calls(module.read_text(encoding="utf-8"), str(module))
    expected = OPTED_IN.get(str(module.relative_to(BUFCORE)), [])
    assert [call.rsplit(" ", 1)[1] for call in found] == expected

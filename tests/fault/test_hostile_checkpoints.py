"""Hand-edited checkpoints whose manifest was re-sealed (anyone can) are refused field by field.

Every row of the tables below edits one file of a saved checkpoint of one buffer kind (full and
not full), re-seals the manifest (file sizes, sha256 and its own checksum) and loads it. A load
must either raise :class:`CorruptCheckpointError` naming the edited field and the file it sits in,
never a bare ``TypeError``/``KeyError``/``RecursionError``/``MemoryError`` from inside the loader;
or, for an edit that leaves a sound checkpoint, load a buffer that samples (and, for the expert
buffer, takes priority updates), so that nothing the load accepted fails later.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bufcore import (
    CorruptCheckpointError,
    DictBuffer,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    ZBuffer,
    load_buffer,
)
from bufcore.persist.checkpoint.format import manifest_checksum
from tests.support import rewrite_file

# ----------------------------------------------------------------------------- checkpoints


def _dict(capacity: int, rows: int) -> DictBuffer:
    buffer = DictBuffer(capacity=capacity, seed=3)
    ids = np.arange(rows)
    buffer.extend(
        {
            "obs": {"a": np.stack([ids, -ids], 1).astype(np.float32)},
            "act": ids.astype(np.int64),
        }
    )
    return buffer


def _z(capacity: int, rows: int) -> ZBuffer:
    buffer = ZBuffer(capacity, 3, seed=4)
    buffer.add(np.arange(rows * 3, dtype=np.float32).reshape(rows, 3))
    return buffer


def _online(capacity: int, rows: int) -> TrajectoryDictBufferMultiDim:
    buffer = TrajectoryDictBufferMultiDim(capacity=capacity, n_dim=2, seq_length=2, seed=5)
    done = np.zeros((rows, 2, 1), bool)
    done[rows // 2, 0] = True
    buffer.extend(
        {"observation": np.arange(rows * 4, dtype=np.float32).reshape(rows, 2, 2), "done": done}
    )
    return buffer


def _expert() -> TrajectoryDictBuffer:
    episodes = [
        {"observation": np.full((length, 2), i, np.float32), "motion_id": np.full(length, mid)}
        for i, (length, mid) in enumerate([(4, 7), (3, 9)])
    ]
    buffer = TrajectoryDictBuffer(episodes, seq_length=2, seed=6)
    buffer.update_priorities([3.0, 1.0], [0, 1])
    return buffer


BUILDERS: dict[str, Callable[[], Any]] = {
    "dict_partial": lambda: _dict(5, 3),
    "dict_full": lambda: _dict(3, 5),
    "z_partial": lambda: _z(4, 2),
    "z_full": lambda: _z(3, 5),
    "online_partial": lambda: _online(7, 4),
    "online_full": lambda: _online(4, 6),
    "expert": _expert,
}
ALL = tuple(BUILDERS)
RING = tuple(k for k in ALL if k != "expert")
DICTS = ("dict_partial", "dict_full", "online_partial", "online_full")
ZS = ("z_partial", "z_full")
ONLINE = ("online_partial", "online_full")
WINDOWED = (*ONLINE, "expert")
PARTIAL = ("dict_partial", "z_partial", "online_partial")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pristine")
    paths = {}
    for kind, build in BUILDERS.items():
        build().save(root / kind)
        paths[kind] = root / kind
    return paths


def checkpoint(pristine: dict[str, Path], kind: str, tmp_path: Path) -> Path:
    path = tmp_path / kind
    shutil.copytree(pristine[kind], path)
    return path


# ----------------------------------------------------------------------------- edits


@dataclass(frozen=True)
class Raw:
    """File content written as is (not JSON-encoded)."""

    data: bytes


Edit = Callable[[Any], Any]  # parsed JSON -> new content (JSON value or Raw); may mutate


def put(key: str, value: Any) -> Edit:
    def edit(data: Any) -> Any:
        data[key] = value
        return data

    return edit


def drop(key: str) -> Edit:
    def edit(data: Any) -> Any:
        del data[key]
        return data

    return edit


def whole(value: Any) -> Edit:
    return lambda _: value


def deep(depth: int, key: str | None = None) -> Edit:
    """A list nested ``depth`` deep: the whole document, or the value at ``key``."""
    nested = Raw(b"[" * depth + b"]" * depth)
    if key is None:
        return lambda _: nested

    def edit(data: Any) -> Any:
        text = json.dumps({**data, key: "@"}).encode()
        return Raw(text.replace(b'"@"', nested.data))

    return edit


def spec_entry(field: str, value: Any) -> Edit:
    def edit(manifest: Any) -> Any:
        manifest["spec"][0][field] = value
        return manifest

    return edit


def payload_entry(field: str, value: Any) -> Edit:
    def edit(manifest: Any) -> Any:
        manifest["files"]["buffer.hdf5"][field] = value
        return manifest

    return edit


def file_entry(name: str, value: Any) -> Edit:
    def edit(manifest: Any) -> Any:
        manifest["files"][name] = value
        return manifest

    return edit


def apply_edit(path: Path, name: str, edit: Edit) -> None:
    """Edit ``name`` (a JSON file of the checkpoint, or the manifest) and re-seal the manifest."""
    content = edit(json.loads((path / name).read_text()))
    raw = content.data if isinstance(content, Raw) else (json.dumps(content) + "\n").encode()
    if name != "manifest.json":
        rewrite_file(path, name, raw)
    elif isinstance(content, dict):
        content["checksum"] = manifest_checksum(content)
        (path / name).write_text(json.dumps(content))
    else:
        (path / name).write_bytes(raw)


# ----------------------------------------------------------------------------- the table

CONFIG, STATE, MANIFEST, PAYLOAD = "config.json", "state.json", "manifest.json", "buffer.hdf5"
HUGE = 10**30


@dataclass(frozen=True)
class Case:
    """One hostile edit: which kinds, which file, and which file and field the error names."""

    name: str
    kinds: tuple[str, ...]
    file: str
    edit: Edit
    blamed: str
    match: str


def _int_field_cases(
    field: str,
    kinds: tuple[str, ...],
    bad_values: dict[str, Any],
    *,
    required: bool = True,
    matches: dict[str, str] | None = None,
) -> list[Case]:
    """One case per bad value of an int field (``matches``: labels whose message names the
    consequence rather than the field)."""
    matches = matches or {}
    cases = [
        Case(f"{field}={label}", kinds, CONFIG, put(field, value), CONFIG,
             matches.get(label, rf"\b{field}\b"))
        for label, value in bad_values.items()
    ]
    if required:
        cases.append(Case(f"{field} missing", kinds, CONFIG, drop(field), CONFIG, field))
    return cases


def _wrong_ints(*, low: int) -> dict[str, Any]:
    return {
        "str": "3",
        "float": 3.0,
        "bool": True,
        "list": [3],
        "object": {"n": 3},
        "null": None,
        "below": low - 1,
        "negative": -(10**6),
        "huge": HUGE,
    }


CASES: list[Case] = [
    # ---------------------------------------------------------------- config.json, shared
    *_int_field_cases("capacity", ALL, _wrong_ints(low=1)),
    # A dim of 10**30 is refused by the storage size it asks for, which the message quotes.
    *_int_field_cases("dim", ZS, _wrong_ints(low=1), matches={"huge": rf"\[{HUGE}\]"}),
    *_int_field_cases("n_dim", ONLINE, {**_wrong_ints(low=1), "three": 3}),
    *_int_field_cases("seq_length", WINDOWED, _wrong_ints(low=1)),
    *_int_field_cases(
        "_idx", RING, {k: v for k, v in _wrong_ints(low=0).items() if k != "null"}, required=False
    ),
    *[
        Case(f"_is_full={v!r}", RING, CONFIG, put("_is_full", v), CONFIG, "_is_full")
        for v in (1, 0, "true", [True], {})
    ],
    *[
        Case(f"expert {k}={v!r}", ("expert",), CONFIG, put(k, v), CONFIG, k)
        for k, v in (("_idx", 1), ("_idx", False), ("_idx", "0"), ("_is_full", False),
                     ("_is_full", 1))
    ],
    *[
        Case(f"device={v!r}", ALL, CONFIG, put("device", v), CONFIG, "device")
        for v in (5, None, "banana", ["cpu"], True, "")
    ],
    Case("device missing", RING, CONFIG, drop("device"), CONFIG, "device"),
    # A z buffer's config has no separator (its one leaf has no nested key).
    *[
        Case(f"separator={v!r}", (*DICTS, "expert"), CONFIG, put("nested_key_separator", v),
             CONFIG, "nested_key_separator")
        for v in (5, None, "", "/", ["-"])
    ],
    Case("separator differs from the manifest's", (*DICTS, "expert"), CONFIG,
         put("nested_key_separator", "."), MANIFEST, "nested_key_separator"),
    *[
        Case(f"__target__={v!r}", ALL, CONFIG, put("__target__", v), CONFIG, "__target__")
        for v in (5, None, ["bufcore.DictBuffer"], {"x": 1})
    ],
    Case("__target__ missing", ALL, CONFIG, drop("__target__"), CONFIG, "__target__"),
    # ZBuffer dtype
    *[
        Case(f"dtype={v!r}", ZS, CONFIG, put("dtype", v), CONFIG, "dtype")
        for v in ("complex64", "Tensor", "banana", "", 5, None, ["float32"], "float8_e4m3fn",
                  "torch.Tensor", "__class__")
    ],
    Case("dtype missing", ZS, CONFIG, drop("dtype"), CONFIG, "dtype"),
    # window options
    *[
        Case(f"{key}={v!r}", WINDOWED, CONFIG, put(key, v), CONFIG, key)
        for key in ("output_key_t", "output_key_tp1")
        for v in ("observation", [[]], [5], [["observation", 5]], {}, None, [None], 5)
    ],
    *[
        Case(f"end_key={v!r}", WINDOWED, CONFIG, put("end_key", v), CONFIG, "end_key")
        for v in ([], 5, None, ["done", 1], {}, [[]])
    ],
    *[
        Case(f"motion_id_key={v!r}", ("expert",), CONFIG, put("motion_id_key", v), CONFIG,
             "motion_id_key")
        for v in ([], 5, None, ["motion_id", 1])
    ],
    Case("motion_id_key names no leaf", ("expert",), CONFIG, put("motion_id_key", "no_leaf"),
         CONFIG, "no_leaf"),
    *[
        Case(f"output key {v!r} matches no leaf", WINDOWED, CONFIG, put("output_key_t", v),
             CONFIG, "output_key_t")
        for v in (["nothing"], [["observation", "deeper"]])
    ],
    # the document itself
    Case("config is a list", ALL, CONFIG, whole([1, 2]), CONFIG, "JSON object"),
    Case("config is a str", ALL, CONFIG, whole("x"), CONFIG, "JSON object"),
    Case("config nested 100000 deep", ALL, CONFIG, deep(100_000), CONFIG, "nested"),
    Case("config field nested 500 deep", ALL, CONFIG, deep(500, "capacity"), CONFIG, "nested"),
    Case("unknown config field nested 500 deep", ALL, CONFIG, deep(500, "extra"), CONFIG,
         "nested"),
    Case("config int of 5000 digits", ALL, CONFIG,
         lambda d: Raw(json.dumps(d).replace('"capacity": ', '"capacity": ' + "9" * 5000, 1)
                       .encode()), CONFIG, "JSON"),
    Case("config not UTF-8", ALL, CONFIG, whole(Raw(b'{"capacity": "\xff"}')), CONFIG, "JSON"),
    # ---------------------------------------------------------------- state.json
    *[
        Case(f"seed={v!r}", ALL, STATE, put("seed", v), STATE, "seed")
        for v in ("x", 1.5, True, 2**64, -(2**63) - 1, [1], {})
    ],
    *[
        Case(f"generator={v!r:.40}", ALL, STATE, put("generator", v), STATE, "generator")
        for v in (5, [], "abc", {}, {"device_type": "cpu"}, {"state": "AAAA"},
                  {"device_type": "cpu", "state": "!!"},
                  {"device_type": "cpu", "state": "AAAA"},
                  {"device_type": "cpu", "state": 5},
                  {"device_type": 5, "state": "AAAA"},
                  {"device_type": ["cpu"], "state": "AAAA"},
                  {"device_type": "banana", "state": "AAAA"})
    ],
    *[
        Case(f"weighting={v!r}", WINDOWED, STATE, put("weighting", v), STATE, "weighting")
        for v in ("banana", 5, None, ["window"])
    ],
    Case("state is a list", ALL, STATE, whole([]), STATE, "JSON object"),
    Case("state nested 100000 deep", ALL, STATE, deep(100_000), STATE, "nested"),
    Case("state field nested 500 deep", ALL, STATE, deep(500, "seed"), STATE, "nested"),
    # expert priorities and motion ids
    *[
        Case(f"priorities={label}", ("expert",), STATE, put("priorities", v), STATE, "priorities")
        for label, v in (
            ("nested", [[0.75], [0.25]]),
            ("one", [1.0]),
            ("three", [0.5, 0.25, 0.25]),
            ("negative", [-1.0, 2.0]),
            ("nan-strings", ["NaN", "NaN"]),
            ("strings", ["0.75", "0.25"]),
            ("bools", [True, False]),
            ("a-str", "0.5"),
            ("object", {"0": 0.5}),
            ("zeros", [0.0, 0.0]),
            ("float32-overflow", [1e300, 1e300]),
            ("not-normalised", [3.0, 1.0]),
        )
    ],
    Case("priorities NaN literal", ("expert",), STATE,
         lambda d: Raw(json.dumps({**d, "priorities": [float("nan"), 0.5]}).encode()), STATE,
         "priorities"),
    Case("priorities Infinity literal", ("expert",), STATE,
         lambda d: Raw(json.dumps({**d, "priorities": [float("inf"), 0.5]}).encode()), STATE,
         "priorities"),
    *[
        Case(f"motion_ids={label}", ("expert",), STATE, put("motion_ids", v), STATE, "motion_ids")
        for label, v in (
            ("strings", ["7", "9"]),
            ("floats", [7.0, 9.0]),
            ("nested", [[7], [9]]),
            ("swapped", [9, 7]),
            ("one", [7]),
            ("a-str", "79"),
            ("null", None),
            ("bools", [True, False]),
            ("huge", [HUGE, 9]),
        )
    ],
    Case("motion_ids missing", ("expert",), STATE, drop("motion_ids"), STATE, "motion_ids"),
    # ---------------------------------------------------------------- manifest.json
    *[
        Case(f"key_path={v!r}", ALL, MANIFEST, spec_entry("key_path", v), MANIFEST, "key_path")
        for v in ([], [5], "z", None, [[]])
    ],
    Case("key_path ['']", ALL, MANIFEST, spec_entry("key_path", [""]), MANIFEST, r"spec\[0\]"),
    *[
        Case(f"shape={v!r}", ALL, MANIFEST, spec_entry("shape", v), MANIFEST, "shape")
        for v in ([-1], [HUGE], [2.5], ["3"], [[3]], 3, None, [1] * 40, [True])
    ],
    *[
        Case(f"spec dtype={v!r}", ALL, MANIFEST, spec_entry("dtype", v), MANIFEST, "dtype")
        for v in ("complex64", "Tensor", "banana", 5, None, "float8_e4m3fn", "", "__class__")
    ],
    Case("spec name differs", ALL, MANIFEST, spec_entry("name", "other"), MANIFEST, "name"),
    Case("spec entry is a number", ALL, MANIFEST, lambda m: {**m, "spec": [5, *m["spec"][1:]]},
         MANIFEST, r"spec\[0\]"),
    Case("spec entry listed twice", ALL, MANIFEST,
         lambda m: {**m, "spec": [m["spec"][0], *m["spec"]]}, MANIFEST, "twice"),
    Case("spec is an object", ALL, MANIFEST, put("spec", {}), MANIFEST, "spec"),
    Case("spec lacks a leaf", ALL, MANIFEST, lambda m: {**m, "spec": m["spec"][1:]},
         PAYLOAD, "not in the manifest"),
    *[
        Case(f"rows={v!r}", RING, MANIFEST, put("rows", v), MANIFEST, "rows")
        for v in (-1, "3", 3.0, True, HUGE, None)
    ],
    Case("rows one more", ALL, MANIFEST, lambda m: {**m, "rows": m["rows"] + 1}, MANIFEST,
         "rows"),
    Case("rows one fewer", ALL, MANIFEST, lambda m: {**m, "rows": m["rows"] - 1}, MANIFEST,
         "rows"),
    Case("env_count one more", ONLINE, MANIFEST,
         lambda m: {**m, "env_count": m["env_count"] + 1}, MANIFEST, "env_count"),
    *[
        Case(f"env_count={v!r}", ONLINE, MANIFEST, put("env_count", v), MANIFEST, "env_count")
        for v in (None, -1, "2", 2.0, True, HUGE)
    ],
    Case("env_count for [time] rows", ("dict_full", "z_full", "expert"), MANIFEST,
         put("env_count", 1), MANIFEST, "env_count"),
    *[
        Case(f"batch_dims={v!r}", ALL, MANIFEST, put("batch_dims", v), MANIFEST, "batch_dims")
        for v in (0, 3, True, "1", 1.0, None)
    ],
    Case("batch_dims 2 for [time] rows", ("dict_full", "z_full", "expert"), MANIFEST,
         lambda m: {**m, "batch_dims": 2, "env_count": 1}, MANIFEST, "batch_dims"),
    Case("batch_dims 1 for [time, env] rows", ONLINE, MANIFEST,
         lambda m: {**m, "batch_dims": 1, "env_count": None}, MANIFEST, "batch_dims"),
    *[
        Case(f"manifest separator={v!r}", ALL, MANIFEST, put("nested_key_separator", v),
             MANIFEST, "nested_key_separator")
        for v in ("", 5, None, ".")
    ],
    *[
        Case(f"target={v!r}", ALL, MANIFEST, put("target", v), MANIFEST, "target")
        for v in (5, None)
    ],
    Case("target differs from config's", ALL, MANIFEST, put("target", "bufcore.ZBufferX"),
         CONFIG, "__target__"),
    *[
        Case(f"format_version={v!r}", ALL, MANIFEST, put("format_version", v), MANIFEST,
             "format_version")
        for v in (0, 3, "2", 2.0, True, None, HUGE)
    ],
    Case("format_version 1 without a whole-file sha256", ALL, MANIFEST,
         put("format_version", 1), PAYLOAD, "sha256"),
    Case("format unknown", ALL, MANIFEST, put("format", "x"), MANIFEST, "format"),
    *[
        Case(f"files lists {name!r}", ALL, MANIFEST, file_entry(name, {"size": 0, "sha256": ""}),
             MANIFEST, "files")
        for name in ("../x", "/etc/passwd", "/dev/zero", "extra.json", "manifest.json", "")
    ],
    *[
        Case(f"files[{name!r}]={v!r}", ALL, MANIFEST, file_entry(name, v), MANIFEST, name)
        for name in ("config.json", "state.json")
        for v in (5, None, [], "x", {"size": -1, "sha256": ""}, {"size": "1", "sha256": ""},
                  {"size": 1, "sha256": 5})
    ],
    *[
        Case(f"files[{name!r}] size 10**30", ALL, MANIFEST,
             file_entry(name, {"size": HUGE, "sha256": ""}), name, f"manifest says {HUGE}")
        for name in ("config.json", "state.json")
    ],
    *[
        Case(f"files is {v!r}", ALL, MANIFEST, put("files", v), MANIFEST, "files")
        for v in ([], None, {}, "x")
    ],
    *[
        Case(f"buffer.hdf5 {f}={v!r:.30}", ALL, MANIFEST, payload_entry(f, v), PAYLOAD, f)
        for f, v in (
            ("size", -1), ("size", "1"), ("size", HUGE), ("size", True), ("size", None),
            ("block_bytes", 3), ("block_bytes", 0), ("block_bytes", True),
            ("block_bytes", 1.0), ("block_bytes", 2**20 + 1),
            ("sha256_blocks", "x"), ("sha256_blocks", [5]), ("sha256_blocks", []),
            ("sha256_blocks", None),
        )
    ],
    Case("buffer.hdf5 entry is a list", ALL, MANIFEST, file_entry("buffer.hdf5", []), MANIFEST,
         "buffer.hdf5"),
    Case("manifest is a list", ALL, MANIFEST, whole([]), MANIFEST, "JSON object"),
    Case("manifest nested 100000 deep", ALL, MANIFEST, deep(100_000), MANIFEST, "nested"),
    Case("unknown manifest field nested 500 deep", ALL, MANIFEST, deep(500, "extra"), MANIFEST,
         "nested"),
    # ---------------------------------------------------------------- sizes against the payload
    Case("capacity below the stored rows", ("dict_full", "z_full", "online_full"), CONFIG,
         put("capacity", 2), CONFIG, "_idx"),
    Case("capacity 10**15 (petabytes)", ALL, CONFIG, put("capacity", 10**15), CONFIG,
         "capacity"),
    # Rows of 2 envs x 16 bytes: 2**49 bytes, past what any device holds; refused unallocated.
    Case("capacity 2**44 of [time, env] rows", ("online_partial",), CONFIG,
         put("capacity", 2**44), CONFIG, r"config\['capacity'\]: capacity: 17592186044416 rows"),
    Case("dim differs from the rows", ZS, CONFIG, put("dim", 5), PAYLOAD, "stored leaves"),
]


def _params() -> list[Any]:
    params = []
    for case in CASES:
        for kind in case.kinds:
            params.append(pytest.param(case, kind, id=f"{kind}: {case.name}"))
    return params


@pytest.mark.parametrize(("case", "kind"), _params())
def test_a_hostile_edit_raises_corrupt_checkpoint_naming_the_file_and_field(
    pristine: dict[str, Path], tmp_path: Path, case: Case, kind: str
) -> None:
    path = checkpoint(pristine, kind, tmp_path)
    apply_edit(path, case.file, case.edit)
    with pytest.raises(CorruptCheckpointError, match=case.match) as caught:
        load_buffer(path)
    assert caught.value.path == path / case.blamed


# ----------------------------------------------------------------------------- accepted edits


def exercise(buffer: Any) -> None:
    """Everything a loaded buffer is used for must work on what the load accepted."""
    if isinstance(buffer, ZBuffer):
        assert buffer.sample(4).shape == (4, buffer.dim)
        return
    batch = buffer.sample(4)
    assert batch
    if isinstance(buffer, TrajectoryDictBuffer):
        buffer.update_priorities([1.0, 2.0], [0, 1])
        assert float(buffer.priorities.sum()) == pytest.approx(1.0)
        buffer.sample(4)


ACCEPTED: list[Case] = [
    Case("capacity larger", PARTIAL, CONFIG, lambda d: {**d, "capacity": d["capacity"] + 9},
         "", ""),
    Case("separator missing (BFM-Zero default)", (*DICTS, "expert"), CONFIG,
         drop("nested_key_separator"), "", ""),
    Case("_idx and _is_full missing (BFM-Zero)", RING, CONFIG,
         lambda d: {k: v for k, v in d.items() if k not in ("_idx", "_is_full")}, "", ""),
    Case("seed null", ALL, STATE, put("seed", None), "", ""),
    Case("generator missing", ALL, STATE, drop("generator"), "", ""),
    Case("weighting window", WINDOWED, STATE, put("weighting", "window"), "", ""),
    Case("priorities missing", ("expert",), STATE,
         lambda d: {k: v for k, v in d.items() if k not in ("priorities", "motion_ids")}, "", ""),
    Case("priorities other normalised values", ("expert",), STATE, put("priorities", [0.5, 0.5]),
         "", ""),
    Case("unknown config field", ALL, CONFIG, put("comment", {"a": [1, 2]}), "", ""),
    Case("unknown state field", ALL, STATE, put("comment", "hi"), "", ""),
    Case("output keys as nested lists", WINDOWED, CONFIG,
         put("output_key_t", [["observation"]]), "", ""),
    # One block as large as any file: the whole-file hash, still verified.
    Case("block_bytes 2**62", ALL, MANIFEST, payload_entry("block_bytes", 2**62), "", ""),
    Case("block_bytes 2**100", ALL, MANIFEST, payload_entry("block_bytes", 2**100), "", ""),
]


def _accepted_params() -> list[Any]:
    return [
        pytest.param(case, kind, id=f"{kind}: {case.name}")
        for case in ACCEPTED
        for kind in case.kinds
    ]


@pytest.mark.parametrize(("case", "kind"), _accepted_params())
def test_an_accepted_edit_loads_a_buffer_that_samples(
    pristine: dict[str, Path], tmp_path: Path, case: Case, kind: str
) -> None:
    path = checkpoint(pristine, kind, tmp_path)
    apply_edit(path, case.file, case.edit)
    exercise(load_buffer(path))


@pytest.mark.parametrize("kind", ALL)
def test_an_unedited_checkpoint_loads_and_samples(
    pristine: dict[str, Path], tmp_path: Path, kind: str
) -> None:
    exercise(load_buffer(checkpoint(pristine, kind, tmp_path)))


@pytest.mark.parametrize("kind", ALL)
@pytest.mark.parametrize("name", [CONFIG, STATE])
def test_a_json_file_replaced_by_a_directory_names_that_file(
    pristine: dict[str, Path], tmp_path: Path, kind: str, name: str
) -> None:
    path = checkpoint(pristine, kind, tmp_path)
    (path / name).unlink()
    (path / name).mkdir()
    with pytest.raises(CorruptCheckpointError, match="regular file") as caught:
        load_buffer(path)
    assert caught.value.path == path / name


def test_a_capacity_this_host_cannot_allocate_is_a_memory_error_naming_config_capacity(
    pristine: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sound checkpoint too large for this host is not corrupt; the error says where to look.
    path = checkpoint(pristine, "dict_partial", tmp_path)
    apply_edit(path, CONFIG, put("capacity", 2**30))
    zeros = np.zeros

    def failing_zeros(shape: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(shape, tuple) and shape and shape[0] >= 2**30:
            raise MemoryError("Unable to allocate 16.0 GiB")
        return zeros(shape, *args, **kwargs)

    monkeypatch.setattr(np, "zeros", failing_zeros)
    match = r"config\.json: config\['capacity'\]: storage: cannot allocate .* \(1073741824 rows"
    with pytest.raises(MemoryError, match=match):
        load_buffer(path)

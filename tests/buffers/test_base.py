"""Which class a checkpoint is (exact __target__ names), and which file a bad field is in."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from bufcore import (
    CorruptCheckpointError,
    DictBuffer,
    TrajectoryDictBuffer,
    TrajectoryDictBufferMultiDim,
    ZBuffer,
    load_buffer,
)
from bufcore.buffers import base, loading
from bufcore.buffers.base import Buffer
from tests.support import reseal, rewrite_file


def dict_buffer(path: Path) -> Path:
    buffer = DictBuffer(capacity=4, seed=1)
    buffer.extend({"x": np.arange(3, dtype=np.float32)[:, None]})
    buffer.save(path)
    return path


def online_buffer(path: Path) -> Path:
    buffer = TrajectoryDictBufferMultiDim(capacity=5, output_key_tp1=[], seed=2)
    buffer.extend({"observation": np.zeros((4, 2), np.float32), "done": np.zeros((4, 1), bool)})
    buffer.save(path)
    return path


def rewrite(path: Path, name: str, edit: dict[str, Any]) -> None:
    """Change fields of a JSON file and re-seal the manifest, as anyone could."""
    data = json.loads((path / name).read_text())
    data.update(edit)
    rewrite_file(path, name, (json.dumps(data) + "\n").encode())
    if "__target__" in edit:
        reseal(path, lambda manifest: manifest.update(target=edit["__target__"]))


@pytest.mark.parametrize(
    ("target", "cls"),
    [
        ("bufcore.DictBuffer", DictBuffer),
        ("humanoidverse.agents.buffers.transition.DictBuffer", DictBuffer),
        ("metamotivo.buffers.buffers.DictBuffer", DictBuffer),
    ],
)
def test_each_listed_target_loads_as_its_class(tmp_path: Path, target: str, cls: type) -> None:
    path = dict_buffer(tmp_path / "ckpt")
    rewrite(path, "config.json", {"__target__": target})
    assert type(load_buffer(path)) is cls


@pytest.mark.parametrize(
    "target", ["my.fork.DictBuffer", "DictBuffer", "bufcore.buffers.transition.DictBuffer"]
)
def test_a_module_path_merely_ending_in_a_known_class_name_is_refused(
    tmp_path: Path, target: str
) -> None:
    path = dict_buffer(tmp_path / "ckpt")
    rewrite(path, "config.json", {"__target__": target})
    with pytest.raises(ValueError, match=rf"unknown __target__ '{target}'; known targets: "):
        load_buffer(path)


def test_the_z_buffer_target_of_bfm_zero_loads_as_a_z_buffer(tmp_path: Path) -> None:
    ZBuffer(3, 2).save(tmp_path / "z")
    target = "humanoidverse.agents.misc.zbuffer.ZBuffer"
    rewrite(tmp_path / "z", "config.json", {"__target__": target})
    assert type(load_buffer(tmp_path / "z")) is ZBuffer


def test_the_base_class_load_returns_the_class_the_checkpoint_holds(tmp_path: Path) -> None:
    loaded = Buffer.load(online_buffer(tmp_path / "online"))
    assert type(loaded) is TrajectoryDictBufferMultiDim


def test_a_transition_buffer_load_refuses_an_online_checkpoint(tmp_path: Path) -> None:
    # The online buffer is a composition of its own, not a DictBuffer subclass.
    path = online_buffer(tmp_path / "online")
    with pytest.raises(ValueError, match=r"holds a TrajectoryDictBufferMultiDim .* not a DictBuf"):
        DictBuffer.load(path)


def test_a_subclass_load_refuses_a_checkpoint_of_its_base(tmp_path: Path) -> None:
    path = dict_buffer(tmp_path / "ckpt")
    with pytest.raises(ValueError, match=r"holds a DictBuffer .* not a TrajectoryDictBufferMulti"):
        TrajectoryDictBufferMultiDim.load(path)


def test_registering_a_target_twice_is_refused() -> None:
    with pytest.raises(TypeError, match="registered twice"):

        class Copy(DictBuffer):
            checkpoint_targets: ClassVar[tuple[str, ...]] = ("bufcore.DictBuffer",)


def test_every_buffer_class_is_checkpointed() -> None:
    for cls in (DictBuffer, TrajectoryDictBufferMultiDim, TrajectoryDictBuffer, ZBuffer):
        assert issubclass(cls, Buffer)
        assert cls.checkpoint_targets[0] == f"bufcore.{cls.__name__}"


def registered_targets() -> list[str]:
    """Every __target__ some module under bufcore/buffers registers, once all are imported."""
    package = Path(base.__file__).parent
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent.parent).with_suffix("").parts
        importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(t for t, cls in loading._TARGETS.items() if cls.__module__.startswith("bufcore."))


def test_load_buffer_knows_every_target_in_a_process_that_imported_no_buffer_class() -> None:
    targets = registered_targets()
    script = (
        "import sys\n"
        "from bufcore.buffers.loading import buffer_class\n"
        "for target in sys.argv[1:]:\n"
        "    buffer_class(target, 'fresh process')\n"
    )
    done = subprocess.run([sys.executable, "-c", script, *targets], capture_output=True,
                          text=True, cwd=Path(base.__file__).parents[2], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "bufcore.AdvancedReplayBuffer" in targets and "bufcore.DictBuffer" in targets


@pytest.mark.parametrize(
    ("name", "edit", "file", "match"),
    [
        ("config.json", {"capacity": "4"}, "config.json", r"config\['capacity'\]: expected an"),
        ("config.json", {"capacity": 0}, "config.json", "capacity: expected an int >= 1"),
        ("config.json", {"device": "gpu"}, "config.json", r"config\['device'\]: expected a torch"),
        ("config.json", {"_idx": 9}, "config.json", r"config\['_idx'\]: expected an int in"),
        ("config.json", {"_is_full": 1}, "config.json", r"config\['_is_full'\]: expected a"),
        ("config.json", {"_idx": 1}, "config.json", r"config\['_idx'\]: 1 with _is_full False"),
        ("state.json", {"seed": "x"}, "state.json", r"state\['seed'\]: expected an int"),
        ("state.json", {"generator": {"state": 1}}, "state.json", r"state\['generator'\]: exp"),
    ],
)
def test_a_malformed_field_is_a_corrupt_checkpoint_naming_its_file(
    tmp_path: Path, name: str, edit: dict[str, Any], file: str, match: str
) -> None:
    path = dict_buffer(tmp_path / "ckpt")
    rewrite(path, name, edit)
    with pytest.raises(CorruptCheckpointError, match=match) as caught:
        load_buffer(path)
    assert caught.value.path == path / file


def test_rows_that_differ_from_the_configured_shape_name_the_payload(tmp_path: Path) -> None:
    ZBuffer(3, 2).save(tmp_path / "z")
    rewrite(tmp_path / "z", "config.json", {"dim": 5})
    with pytest.raises(CorruptCheckpointError, match=r"stored leaves \(\['z'\] \[2\]") as caught:
        load_buffer(tmp_path / "z")
    assert caught.value.path == tmp_path / "z" / "buffer.hdf5"


def test_an_online_checkpoint_whose_end_key_has_no_dataset_names_the_payload(
    tmp_path: Path,
) -> None:
    path = online_buffer(tmp_path / "online")
    rewrite(path, "config.json", {"end_key": "truncated"})
    match = r"end_key \['truncated'\] has no dataset"
    with pytest.raises(CorruptCheckpointError, match=match) as caught:
        load_buffer(path)
    assert caught.value.path == path / "buffer.hdf5"


def test_load_keeps_the_saved_seed_and_device(tmp_path: Path) -> None:
    loaded = load_buffer(dict_buffer(tmp_path / "ckpt"))
    assert (loaded.seed, loaded.device) == (1, torch.device("cpu"))


def test_an_old_config_whose_rows_exceed_the_capacity_names_the_capacity(tmp_path: Path) -> None:
    path = dict_buffer(tmp_path / "ckpt")
    config = json.loads((path / "config.json").read_text())
    del config["_idx"], config["_is_full"]
    config["capacity"] = 2
    (path / "config.json").write_text(json.dumps(config))
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").unlink()
    (path / "state.json").unlink()
    config["__target__"] = "humanoidverse.agents.buffers.transition.DictBuffer"
    (path / "config.json").write_text(json.dumps(config))
    assert manifest["rows"] == 3
    with pytest.raises(CorruptCheckpointError, match="3 stored rows exceed the capacity 2"):
        load_buffer(path)


@pytest.mark.parametrize(("device", "error"), [("gpu", ValueError), (3, TypeError)])
def test_a_bad_device_argument_is_refused_before_anything_is_read(
    tmp_path: Path, device: Any, error: type
) -> None:
    with pytest.raises(error, match="device: expected a torch device"):
        load_buffer(tmp_path / "not even there", device=device)


# Devices torch parses but no buffer can live on: "meta" has no generator, and no host has a
# hundredth CUDA device (a CPU-only host has none at all).
UNUSABLE_DEVICES = ["meta", "cuda:99"]


@pytest.mark.parametrize("device", UNUSABLE_DEVICES)
def test_a_device_no_buffer_can_live_on_is_refused_before_anything_is_read(
    tmp_path: Path, device: str
) -> None:
    with pytest.raises(ValueError, match="device") as built:
        DictBuffer(capacity=2, device=device)
    with pytest.raises(ValueError, match="device") as loaded:
        load_buffer(tmp_path / "not even there", device=device)
    assert (type(loaded.value), str(loaded.value)) == (ValueError, str(built.value))


@pytest.mark.parametrize("device", UNUSABLE_DEVICES)
def test_loading_a_sound_checkpoint_onto_an_unusable_device_does_not_blame_the_file(
    tmp_path: Path, device: str
) -> None:
    path = dict_buffer(tmp_path / "ckpt")
    with pytest.raises(ValueError, match="device") as caught:
        load_buffer(path, device=device)
    assert type(caught.value) is ValueError
    assert "config.json" not in str(caught.value)


@pytest.mark.parametrize("device", UNUSABLE_DEVICES)
def test_a_state_dict_restored_onto_an_unusable_device_is_the_constructors_value_error(
    device: str,
) -> None:
    state = DictBuffer(capacity=2).state_dict()
    with pytest.raises(ValueError, match="device") as caught:
        DictBuffer.from_state_dict(state, device=device)
    assert type(caught.value) is ValueError


def expert_buffer(path: Path) -> Path:
    episodes = [
        {"observation": np.full((4, 2), m, np.float32), "motion_id": np.full(4, m)}
        for m in range(3)
    ]
    TrajectoryDictBuffer(episodes, seq_length=2, seed=0).save(path)
    return path


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"output_key_t": ["nope"]}, r"output_key_t: key \['nope'\] matches no stored leaf"),
        ({"end_key": "observation"}, r"episodes\['observation'\]: expected end flags"),
        ({"motion_id_key": "absent"}, r"the rows lack \['absent'\]"),
        ({"capacity": 5}, r"config\['capacity'\]: says 5 rows, but buffer.hdf5 holds 12"),
    ],
)
def test_expert_options_the_rows_cannot_serve_are_a_corrupt_config(
    tmp_path: Path, edit: dict[str, Any], match: str
) -> None:
    path = expert_buffer(tmp_path / "expert")
    rewrite(path, "config.json", edit)
    with pytest.raises(CorruptCheckpointError, match=match) as caught:
        load_buffer(path)
    assert caught.value.path == path / "config.json"


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"priorities": [0.0, 0.0, 0.0]}, "make every priority zero"),
        ({"priorities": [0.5, 0.5]}, "expected 3 priorities"),
        ({"priorities": [0.5, -0.5, 1.0]}, r"state\['priorities'\]\[1\]: expected a number >= 0"),
        ({"motion_ids": [2, 1, 0]}, r"state\['motion_ids'\]: expected the motion ids the rows"),
    ],
)
def test_saved_expert_priorities_that_cannot_be_used_are_a_corrupt_state(
    tmp_path: Path, edit: dict[str, Any], match: str
) -> None:
    path = expert_buffer(tmp_path / "expert")
    rewrite(path, "state.json", edit)
    with pytest.raises(CorruptCheckpointError, match=match) as caught:
        load_buffer(path)
    assert caught.value.path == path / "state.json"


@pytest.mark.parametrize(
    ("edit", "field"),
    [({"_idx": 2}, "_idx"), ({"_is_full": False}, "_is_full"), ({"_is_full": 1}, "_is_full")],
)
def test_an_expert_checkpoint_that_is_not_full_is_refused(
    tmp_path: Path, edit: dict[str, Any], field: str
) -> None:
    path = expert_buffer(tmp_path / "expert")
    rewrite(path, "config.json", edit)
    with pytest.raises(CorruptCheckpointError, match=rf"config\['{field}'\]: an expert buffer is"):
        load_buffer(path)


def saved_on_cuda(path: Path) -> Path:
    """A checkpoint as a CUDA host writes it: config.json's device and a Philox state (on an
    ordinal no host here has, so that the device is missing wherever the test runs)."""
    dict_buffer(path)
    rewrite(path, "config.json", {"device": "cuda:99"})
    rewrite(path, "state.json", {"generator": {"device_type": "cuda", "state": "AAAAAAAAAAA="}})
    return path


@pytest.mark.parametrize("load", [DictBuffer.load, load_buffer])
def test_a_cuda_checkpoint_loads_onto_the_cpu_with_a_warning_on_a_host_without_that_device(
    tmp_path: Path, load: Any
) -> None:
    path = saved_on_cuda(tmp_path / "ckpt")
    with pytest.warns(RuntimeWarning, match=r"saved on device 'cuda:99'.*loading onto the CPU"):
        buffer = load(path)
    assert buffer.device == torch.device("cpu")
    rows = DictBuffer.load(path, "cpu").get_full_buffer()["x"]
    assert torch.equal(buffer.get_full_buffer()["x"], rows)
    assert buffer.sample(2)["x"].device == torch.device("cpu")


def test_an_explicit_device_loads_a_cuda_checkpoint_without_a_warning(tmp_path: Path) -> None:
    path = saved_on_cuda(tmp_path / "ckpt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DictBuffer.load(path, device="cpu").device == torch.device("cpu")

"""RLinf's ``Trajectory`` and how one becomes rows: the checks, the flattening, the way back.

A :class:`Trajectory` holds ``[T, B, ...]`` tensors (``T`` steps of ``B`` envs) and dicts of them
(``curr_obs``, ``next_obs``, ``forward_inputs``), plus ``max_episode_length`` and
``model_weights_id`` (REFERENCE §9.1). Its rows are the flat ``[T*B, ...]`` view RLinf samples
from (REFERENCE §9.3): row ``i`` is step ``i // B`` of env ``i % B``.

- ``T`` and ``B`` come from ``prev_logprobs`` when it is set, else from ``rewards``; a
  trajectory with neither has no rows (RLinf skips it).
- Every tensor with at least two axes becomes a leaf of rows (key path ``("actions",)`` or
  ``("curr_obs", "rgb")``, nested dicts at any depth); tensors with fewer axes and
  non-tensor values stay in the trajectory's file but are not rows.
- ``dones``, ``terminations`` and ``truncations`` may carry ``extra`` leading rows, one per
  rollout epoch (RLinf PR #675): with ``T % extra == 0`` they are cut into ``extra`` epochs of
  ``T / extra + 1`` steps and the first step of each epoch is dropped.
- Unlike RLinf, every row leaf must then have exactly ``T`` steps and ``B`` envs (RLinf reads
  ``T`` from ``rewards`` here but from ``prev_logprobs`` for the count, REFERENCE §9.7 bug 7),
  and a trajectory must have at least one row.

:func:`payload` is what a trajectory's file holds (RLinf's layout: a dict of the fields that
are not None); :func:`from_payload` checks such a dict read back from a file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from bufcore.checks import check_int
from bufcore.tree import KeyPath, LeafSpec, Spec, describe_spec, format_key_path

# The tensor fields of RLinf's Trajectory, in its order (``versions`` arrived with RLinf's
# asynchronous training; older files lack it).
TENSOR_FIELDS = (
    "actions",
    "intervene_flags",
    "rewards",
    "terminations",
    "truncations",
    "dones",
    "prev_logprobs",
    "prev_values",
    "versions",
)
# The dict fields, in the order RLinf's flattening emits them (not the dataclass order).
DICT_FIELDS = ("curr_obs", "next_obs", "forward_inputs")
# Fields that may carry one extra leading row per rollout epoch.
EPOCH_FIELDS = frozenset({"dones", "terminations", "truncations"})
# Values a trajectory's dicts may hold besides tensors: saved in its file, never rows.
_PLAIN = (bool, int, float, str, type(None))


@dataclass
class Trajectory:
    """RLinf's trajectory: ``[T, B, ...]`` tensors and dicts of them (REFERENCE §9.1).

    Field names, order and defaults are RLinf's (``rlinf/data/schema/embodied_types.py``), so
    code that builds RLinf trajectories builds these.
    """

    max_episode_length: int = 0
    model_weights_id: str = ""
    actions: torch.Tensor | None = None
    intervene_flags: torch.Tensor | None = None
    rewards: torch.Tensor | None = None
    terminations: torch.Tensor | None = None
    truncations: torch.Tensor | None = None
    dones: torch.Tensor | None = None
    prev_logprobs: torch.Tensor | None = None
    prev_values: torch.Tensor | None = None
    versions: torch.Tensor | None = None
    forward_inputs: dict[str, Any] = field(default_factory=dict)
    curr_obs: dict[str, Any] = field(default_factory=dict)
    next_obs: dict[str, Any] = field(default_factory=dict)


FIELD_NAMES = tuple(f.name for f in dataclasses.fields(Trajectory))


@dataclass(frozen=True)
class TrajectoryRows:
    """A checked trajectory and its rows.

    Attributes:
        steps: ``T``.
        envs: ``B``.
        shape: The full shape of the tensor ``T`` and ``B`` were read from (the index's
            ``shape``: ``prev_logprobs``'s, else ``rewards``').
        rows: Key path -> ``[T*B, ...]`` (views of the trajectory's tensors where no copy is
            needed), in RLinf's order.
    """

    steps: int
    envs: int
    shape: tuple[int, ...]
    rows: dict[KeyPath, torch.Tensor]

    @property
    def count(self) -> int:
        """Rows: ``T * B``."""
        return self.steps * self.envs

    @property
    def spec(self) -> Spec:
        """Trailing shape and dtype of every leaf."""
        return {path: LeafSpec(tuple(t.shape[1:]), t.dtype) for path, t in self.rows.items()}


def trajectory_rows(trajectory: Any, where: str) -> TrajectoryRows | None:
    """Check ``trajectory`` and flatten it; None when it has no rows to give (neither
    ``prev_logprobs`` nor ``rewards``).

    Raises:
        TypeError: not a :class:`Trajectory`, or a field of the wrong kind: a tensor field
            that is no tensor, a dict field that is no dict, a dict value that is neither a
            tensor, a dict nor a plain value (bool, int, float, str, None), a row tensor
            without dense data.
        ValueError: ``T * B == 0``, or a row tensor without ``T`` steps of ``B`` envs (after
            the epoch rows are dropped).
    """
    if not isinstance(trajectory, Trajectory):
        raise TypeError(f"{where}: expected a Trajectory, got {type(trajectory).__name__}")
    check_int(trajectory.max_episode_length, f"{where}.max_episode_length")
    if not isinstance(trajectory.model_weights_id, str):
        raise TypeError(
            f"{where}.model_weights_id: expected a str, got {trajectory.model_weights_id!r:.80}"
        )
    for name in TENSOR_FIELDS:
        value = getattr(trajectory, name)
        if value is not None and not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{where}.{name}: expected a tensor or None, got {type(value).__name__}"
            )
    leaves: dict[KeyPath, torch.Tensor] = {}
    for name in TENSOR_FIELDS:
        value = getattr(trajectory, name)
        if value is not None and value.ndim >= 2:
            leaves[(name,)] = value
    for name in DICT_FIELDS:
        _collect(getattr(trajectory, name), (name,), leaves, where)
    source = next(
        (name for name in ("prev_logprobs", "rewards") if getattr(trajectory, name) is not None),
        None,
    )
    if source is None:
        return None
    reference: torch.Tensor = getattr(trajectory, source)
    if reference.ndim < 2:
        raise ValueError(
            f"{where}.{source}: expected [T, B, ...], got shape {list(reference.shape)}"
        )
    steps, envs = int(reference.shape[0]), int(reference.shape[1])
    if steps * envs == 0:
        raise ValueError(f"{where}.{source}: shape {list(reference.shape)} holds no rows")
    rows = {
        path: _flat(tensor, path, steps, envs, where) for path, tensor in leaves.items()
    }
    return TrajectoryRows(steps, envs, tuple(reference.shape), rows)


def _collect(
    value: Any, path: KeyPath, leaves: dict[KeyPath, torch.Tensor], where: str
) -> None:
    """Add the row tensors of the dict field at ``path`` to ``leaves``, checking its values."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{where}.{path[0]}{format_key_path(path[1:])}: expected a dict, got "
            f"{type(value).__name__}"
        )
    for key, item in value.items():
        child = (*path, key)
        if not isinstance(key, str):
            raise TypeError(f"{where}.{path[0]}{format_key_path(path[1:])}: key {key!r} is no str")
        if isinstance(item, torch.Tensor):
            if item.ndim >= 2:
                leaves[child] = item
        elif isinstance(item, Mapping):
            _collect(item, child, leaves, where)
        elif not isinstance(item, _PLAIN):
            raise TypeError(
                f"{where}.{child[0]}{format_key_path(child[1:])}: expected a tensor, a dict or a "
                f"plain value (bool, int, float, str, None), got {type(item).__name__}"
            )


def _flat(tensor: torch.Tensor, path: KeyPath, steps: int, envs: int, where: str) -> torch.Tensor:
    """``tensor`` ``[T(+extra), B, ...]`` as ``[T*B, ...]`` rows (epoch rows dropped)."""
    name = f"{where}.{path[0]}{format_key_path(path[1:])}"
    if tensor.is_nested or tensor.layout != torch.strided or tensor.is_meta:
        raise TypeError(f"{name}: expected a dense tensor with data")
    got = int(tensor.shape[0])
    extra = got - steps
    if path[0] in EPOCH_FIELDS and len(path) == 1 and extra > 0:
        if steps % extra:
            raise ValueError(
                f"{name}: {got} steps for T={steps} means {extra} epoch rows, but T is not a "
                f"multiple of {extra}"
            )
        epochs = tensor.reshape(extra, steps // extra + 1, *tensor.shape[1:])[:, 1:]
        tensor = epochs.reshape(steps, *tensor.shape[1:])
    elif extra:
        raise ValueError(
            f"{name}: expected {steps} steps (T, from the trajectory's shape), got shape "
            f"{list(tensor.shape)}"
        )
    if int(tensor.shape[1]) != envs:
        raise ValueError(f"{name}: expected {envs} envs (B), got shape {list(tensor.shape)}")
    return tensor.reshape(steps * envs, *tensor.shape[2:])


def check_spec(rows: TrajectoryRows, spec: Spec, where: str) -> None:
    """Refuse rows whose leaves differ from ``spec`` (the buffer's, fixed by its first rows).

    Raises:
        ValueError: another set of leaves, or a leaf of another trailing shape or dtype.
    """
    got = rows.spec
    if got != spec:
        raise ValueError(
            f"{where}: its rows ({describe_spec(got)}) differ from the buffer's "
            f"({describe_spec(spec)}); every trajectory must have the same leaves, shapes and "
            "dtypes"
        )


def compact(trajectory: Trajectory) -> Trajectory:
    """``trajectory`` with every tensor a dense CPU tensor that owns exactly its storage, for
    serialising (``torch.save`` writes a tensor's whole storage, so a view of a larger tensor
    would write all of it). A tensor that already is one is kept (detached from autograd, not
    copied); any other is copied. The result shares those tensors with the caller's: serialise
    it before the caller can change them."""
    values = {name: _compact(getattr(trajectory, name)) for name in FIELD_NAMES}
    return Trajectory(**values)


def _compact(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        owned = (
            value.device.type == "cpu"
            and value.layout == torch.strided
            and not value.is_conj()
            and not value.is_neg()
            and value.is_contiguous()
            and value.storage_offset() == 0
            and value.untyped_storage().nbytes() == value.nbytes
        )
        return value.detach() if owned else value.detach().to("cpu", copy=True).contiguous()
    if isinstance(value, Mapping):
        return {key: _compact(item) for key, item in value.items()}
    return value


def payload(trajectory: Trajectory) -> dict[str, Any]:
    """What the trajectory's file holds: its fields that are not None, by name (RLinf's)."""
    values = {name: getattr(trajectory, name) for name in FIELD_NAMES}
    return {name: value for name, value in values.items() if value is not None}


def from_payload(data: Any, max_episode_length: int) -> Trajectory:
    """The trajectory a file's ``data`` holds (see :func:`payload`); fields it lacks keep their
    defaults, ``max_episode_length`` comes from the index (as RLinf reads it) unless the file
    has its own, and names that are no field of :class:`Trajectory` are ignored (as RLinf's
    loader ignores them).

    Raises:
        ValueError: ``data`` is not a dict, or a field holds a value of the wrong kind.
    """
    if not isinstance(data, dict):
        raise ValueError(f"expected a dict of trajectory fields, got {type(data).__name__}")
    trajectory = Trajectory(max_episode_length=max_episode_length)
    for name in FIELD_NAMES:
        if name not in data:
            continue
        value = data[name]
        if name in TENSOR_FIELDS:
            ok = value is None or isinstance(value, torch.Tensor)
        elif name in DICT_FIELDS:
            ok = value is None or isinstance(value, dict)
        elif name == "model_weights_id":
            ok = isinstance(value, str)
        else:
            ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            raise ValueError(f"field {name!r} holds a {type(value).__name__}")
        setattr(trajectory, name, {} if value is None and name in DICT_FIELDS else value)
    return trajectory


def from_rows(
    rows: Mapping[KeyPath, torch.Tensor],
    steps: int,
    envs: int,
    *,
    max_episode_length: int,
    model_weights_id: str,
) -> Trajectory:
    """The trajectory whose rows are ``rows``: each leaf reshaped back to ``[T, B, ...]``.

    Epoch rows dropped by the flattening do not come back (``dones`` has ``T`` steps), nor
    do values that were never rows; RLinf's memory-only checkpoints save the same.
    """
    trajectory = Trajectory(
        max_episode_length=max_episode_length, model_weights_id=model_weights_id
    )
    for path, flat in rows.items():
        value = flat.reshape(steps, envs, *flat.shape[1:]).clone()  # its own storage to save
        if len(path) == 1:
            setattr(trajectory, path[0], value)
            continue
        node: dict[str, Any] = getattr(trajectory, path[0])
        for part in path[1:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return trajectory


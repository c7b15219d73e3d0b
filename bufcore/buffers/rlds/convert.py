"""RLDS steps as TF-Agents transitions (REFERENCE §10.2), and those pushed into a buffer.

Each step is paired with the next one (a first step is padded after the last, as in the
reference) and becomes one transition, a nested dict::

    {"step_type": int32 (), "observation": ..., "action": ..., "policy_info": ... (only with a
     policy_info_fn that returns something), "next_step_type": int32 (), "reward": ...,
     "discount": ...}

with step types FIRST 0 (``is_first`` wins), LAST 2 (``is_last``), MID 1 otherwise; a
single-step episode (a first step followed by a first step) is LAST/LAST; the discount is 0 on
a step that is both last and terminal. N steps give N transitions.

Differences from the reference (DESIGN §2 decision 9, README "Differences from the reference
implementations"): the whole dataset is read and checked before the first transition is
yielded or anything is pushed, so a bad episode anywhere raises at the call and pushes nothing;
an episode must start with a first step; a first step that is not last followed by a first step
is an error (the reference relabels it LAST/LAST). Errors are ``ValueError`` with the
reference's messages (it raised ``tf.errors.InvalidArgumentError`` for the sequence checks),
followed by the step they are about.

Pushing (:func:`push_rlds_to_buffer`) writes into any buffer with the small protocol
:class:`TransitionBuffer` describes: a ``spec`` to compare with (exact key paths, per-row
shapes and dtypes, as the reference compares table signatures) and an all-or-nothing
``extend``. ``DictBuffer`` has both.

It also writes into a :class:`~bufcore.buffers.disk.TrajectoryReplayBuffer` (RLinf's), one
:class:`~bufcore.storage.trajectories.Trajectory` per episode with ``T`` its steps and
``B = 1``, every transition field kept::

    actions         action            (a nested action: forward_inputs["action"])
    rewards         reward            (must be one tensor: it gives the rows, as in RLinf)
    dones           next_step_type == LAST: the transition into the episode's last step
                    (the single step of a one-step episode); False elsewhere, the last
                    step's own row included (its action leads nowhere)
    terminations    dones and the episode's last step is terminal
    truncations     dones and it is not
    curr_obs        observation (a nested dict as it is; a bare tensor as {"observation": ...})
    forward_inputs  {"step_type", "next_step_type", "discount", ["policy_info"]}

``next_obs`` is left empty: the next observation is the next row of the same trajectory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from bufcore.buffers.disk import TrajectoryReplayBuffer
from bufcore.buffers.rlds.steps import (
    ACTION,
    DISCOUNT,
    IS_FIRST,
    IS_LAST,
    IS_TERMINAL,
    OBSERVATION,
    REWARD,
    Steps,
    read_steps,
)
from bufcore.storage.leaves import leaf_tensor
from bufcore.storage.trajectories import Trajectory, from_rows
from bufcore.tree import (
    KeyPath,
    LeafSpec,
    Spec,
    check_cast,
    describe_spec,
    dtype_name,
    flatten,
    format_key_path,
    unflatten,
)

FIRST, MID, LAST = 0, 1, 2
STEP_TYPE = "step_type"
NEXT_STEP_TYPE = "next_step_type"
POLICY_INFO = "policy_info"
# Where a bare (not nested) observation goes in a Trajectory's curr_obs.
BARE_OBSERVATION = "observation"
# The Trajectory's fields that mark where episodes end (bool, one per row).
_ENDINGS = ("dones", "terminations", "truncations")

PolicyInfoFn = Callable[[dict[str, Any], dict[str, Any]], Any]


@runtime_checkable
class TransitionBuffer(Protocol):
    """What :func:`push_rlds_to_buffer` writes into.

    Attributes:
        spec: Key path (tuple of str) -> the shape (after the batch axis) and dtype of one
            stored row, as objects with ``shape`` and ``dtype`` (:class:`bufcore.tree.LeafSpec`);
            None while the buffer holds no spec yet (the first extend fixes it).
    """

    @property
    def spec(self) -> Mapping[KeyPath, Any] | None: ...

    def extend(self, data: Mapping[str, Any]) -> None:
        """Append a nested dict of ``[N, ...]`` rows, all validated before any is written (a
        batch that raises leaves the buffer as it was)."""
        ...


@dataclass(frozen=True)
class Transitions:
    """Every transition of a dataset as columns: ``rows`` (key path -> ``[N, ...]``)."""

    rows: dict[KeyPath, torch.Tensor]
    count: int

    @property
    def spec(self) -> Spec:
        """Key path -> per-row shape and dtype."""
        return {p: LeafSpec(tuple(t.shape[1:]), t.dtype) for p, t in self.rows.items()}

    def batch(self) -> dict[str, Any]:
        """The nested dict of ``[N, ...]`` columns (what a buffer's ``extend`` takes)."""
        return unflatten(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in range(self.count):
            yield unflatten({path: column[row] for path, column in self.rows.items()})


def create_trajectory_data_spec(rlds_data: Iterable[Any]) -> Spec:
    """The shapes and dtypes of the transitions the episodes give, without a policy info.

    Only the structure is read and checked here (as the reference's spec, which did not check
    the steps' sequence); :func:`convert_rlds_to_trajectories` checks that too.

    Args:
        rlds_data: An iterable of RLDS episodes (see :mod:`bufcore.buffers.rlds.steps`).

    Returns:
        Key path -> :class:`~bufcore.tree.LeafSpec` of one transition (per row): for the
        reference's test data ``step_type`` int32 ``[]``, ``observation`` float32 ``[2]``,
        ``action`` float32 ``[1]``, ``next_step_type`` int32 ``[]``, ``reward`` float32 ``[]``,
        ``discount`` float32 ``[]``.

    Raises:
        ValueError: as :func:`~bufcore.buffers.rlds.steps.read_steps`, or no episode shows a
            structure (no episode, or only empty lists of steps).
        TypeError: as :func:`~bufcore.buffers.rlds.steps.read_steps`.
    """
    spec = read_steps(rlds_data).spec
    if spec is None:
        raise ValueError(
            "rlds_data: no episode holds a step (nor a dict of stacked arrays) to take the "
            "spec from"
        )
    # The layout of zero transitions: the spec, by the code that makes the transitions.
    empty = {p: torch.empty((0, *leaf.shape), dtype=leaf.dtype) for p, leaf in spec.items()}
    return Transitions(_transition_rows(empty, None), 0).spec


def convert_rlds_to_trajectories(
    rlds_data: Iterable[Any], policy_info_fn: PolicyInfoFn | None = None
) -> Iterator[dict[str, Any]]:
    """Turn RLDS episodes into transitions, one per step (see the module docstring).

    Everything is read and checked when this is called, before the first transition is
    yielded; the transitions are views of columns holding the whole dataset.

    Args:
        rlds_data: An iterable of RLDS episodes (see :mod:`bufcore.buffers.rlds.steps`).
        policy_info_fn: Called as ``policy_info_fn(step, next_step)`` with two step dicts
            (the next one of the last step is the padding: every leaf zero, ``is_first``
            True); what it returns (a leaf or nested dict, the same structure for every
            step) becomes ``policy_info``. ``None`` or empty (``()``, ``{}``) for every step
            gives no ``policy_info``, as no function does.

    Returns:
        An iterator of transition dicts.

    Raises:
        ValueError: a bad episode (see :func:`~bufcore.buffers.rlds.steps.read_steps` and
            :meth:`~bufcore.buffers.rlds.steps.Steps.check_sequence`), or policy infos that
            are empty for some steps only or whose keys or shapes differ between steps.
        TypeError: as :func:`~bufcore.buffers.rlds.steps.read_steps`, or a policy info that
            is not numeric or whose dtype does not cast to the first one's.
    """
    return iter(transitions(rlds_data, policy_info_fn))


def push_rlds_to_buffer(
    rlds_data: Iterable[Any],
    buffer: TransitionBuffer | TrajectoryReplayBuffer,
    policy_info_fn: PolicyInfoFn | None = None,
) -> int:
    """Convert RLDS episodes and append the transitions to ``buffer``: in one ``extend``, or
    into a ``TrajectoryReplayBuffer`` in one ``add_trajectories`` of one trajectory per
    episode (see the module docstring for the mapping).

    Everything is checked first: the episodes (as :func:`convert_rlds_to_trajectories`), then
    the transitions' spec against ``buffer.spec`` (unless the buffer has none yet; for a
    ``TrajectoryReplayBuffer`` in its row key paths, ``("forward_inputs", "step_type")`` and
    so on), then the batch by the buffer's own ``extend`` or ``add_trajectories``; any error
    leaves the buffer (and a ``TrajectoryReplayBuffer``'s directory) as it was. A buffer
    smaller than the dataset keeps the last transitions (or trajectories), as its
    ``extend`` (or window) does.

    Args:
        rlds_data: An iterable of RLDS episodes (see :mod:`bufcore.buffers.rlds.steps`).
        buffer: A :class:`TransitionBuffer`, such as a ``DictBuffer``, or a
            ``TrajectoryReplayBuffer``.
        policy_info_fn: As for :func:`convert_rlds_to_trajectories`.

    Returns:
        The number of transitions written (one per step; 0 for data without steps).

    Raises:
        TypeError: ``buffer`` is neither a ``TrajectoryReplayBuffer`` nor has a ``spec`` and
            an ``extend``; a nested ``reward`` pushed into a ``TrajectoryReplayBuffer``; or
            as :func:`convert_rlds_to_trajectories`, or the buffer's ``extend``
            (``add_trajectories``).
        ValueError: the buffer's spec differs from the transitions' (the reference's "Replay
            buffer table signature spec should match RLDS data spec.", then the
            differences); or as :func:`convert_rlds_to_trajectories`, or the buffer's
            ``extend`` (``add_trajectories``).
        FileExistsError: as ``TrajectoryReplayBuffer.add_trajectories``.
    """
    if isinstance(buffer, TrajectoryReplayBuffer):
        return _push_trajectories(rlds_data, buffer, policy_info_fn)
    if not isinstance(buffer, TransitionBuffer):
        raise TypeError(
            "buffer: expected a buffer with a spec and an extend method (a DictBuffer, say), "
            f"or a TrajectoryReplayBuffer, got {type(buffer).__name__}"
        )
    converted = transitions(rlds_data, policy_info_fn)
    if not converted.rows:
        return 0  # no step showed a structure: nothing to compare, nothing to write
    stored = buffer.spec
    if stored is not None:
        _check_spec(converted.spec, stored)
    if converted.count:
        buffer.extend(converted.batch())
    return converted.count


def transitions(rlds_data: Iterable[Any], policy_info_fn: PolicyInfoFn | None) -> Transitions:
    """Every transition of the dataset as columns, after every check (see
    :func:`convert_rlds_to_trajectories`, whose errors it raises)."""
    return _converted(rlds_data, policy_info_fn)[1]


def _converted(
    rlds_data: Iterable[Any], policy_info_fn: PolicyInfoFn | None
) -> tuple[Steps, Transitions]:
    """The checked steps and their transitions (see :func:`transitions`)."""
    steps = read_steps(rlds_data)
    if steps.spec is None:
        return steps, Transitions({}, 0)
    steps.check_sequence()
    infos = None if policy_info_fn is None else _policy_infos(steps, policy_info_fn)
    return steps, Transitions(_transition_rows(steps.columns, infos), steps.count)


def _push_trajectories(
    rlds_data: Iterable[Any],
    buffer: TrajectoryReplayBuffer,
    policy_info_fn: PolicyInfoFn | None,
) -> int:
    """:func:`push_rlds_to_buffer` into a ``TrajectoryReplayBuffer``."""
    steps, converted = _converted(rlds_data, policy_info_fn)
    if not converted.rows:
        return 0
    spec = {_trajectory_path(path): leaf for path, leaf in converted.spec.items()}
    spec.update({(name,): LeafSpec((), torch.bool) for name in _ENDINGS})
    stored = buffer.spec
    if stored is not None:
        _check_spec(spec, stored)
    trajectories = _episode_trajectories(steps, converted)
    if trajectories:
        buffer.add_trajectories(trajectories)
    return converted.count


def _trajectory_path(path: KeyPath) -> KeyPath:
    """Where a transition's leaf goes in a Trajectory's rows (the module docstring's table).

    Raises:
        TypeError: a nested reward (RLinf's ``rewards`` is one tensor).
    """
    head, rest = path[0], path[1:]
    if head == OBSERVATION:
        return ("curr_obs", *rest) if rest else ("curr_obs", BARE_OBSERVATION)
    if head == ACTION:
        return ("forward_inputs", ACTION, *rest) if rest else ("actions",)
    if head == REWARD:
        if rest:
            raise TypeError(
                f"rlds_data{format_key_path(path)}: a TrajectoryReplayBuffer takes one reward "
                "tensor per step (its rewards), got a nested reward"
            )
        return ("rewards",)
    return ("forward_inputs", *path)  # step_type, next_step_type, discount, policy_info


def _episode_trajectories(steps: Steps, converted: Transitions) -> list[Trajectory]:
    """One ``[T, 1, ...]`` Trajectory per episode with steps (each with its own storage).

    Raises:
        TypeError: as :func:`_trajectory_path`.
    """
    rows = {_trajectory_path(path): column for path, column in converted.rows.items()}
    lengths = torch.tensor([end - start for start, end in steps.spans()], dtype=torch.int64)
    held = lengths > 0
    ends = torch.tensor(steps.offsets[1:], dtype=torch.int64)[held] - 1
    # An episode ends terminally when its last step does; every row of it knows.
    terminal = steps.flag(IS_TERMINAL)[ends].repeat_interleave(lengths[held])
    dones = converted.rows[(NEXT_STEP_TYPE,)] == LAST
    rows[("dones",)] = dones
    rows[("terminations",)] = dones & terminal
    rows[("truncations",)] = dones & ~terminal
    return [
        from_rows(
            {path: column[start:end] for path, column in rows.items()},
            end - start,
            1,
            max_episode_length=0,
            model_weights_id="",
        )
        for start, end in steps.spans()
        if end > start
    ]


def _transition_rows(
    columns: dict[KeyPath, torch.Tensor], infos: dict[KeyPath, torch.Tensor] | None
) -> dict[KeyPath, torch.Tensor]:
    """The transitions' columns from checked step columns (and policy info columns)."""
    first, last, terminal = (columns[(name,)] for name in (IS_FIRST, IS_LAST, IS_TERMINAL))
    step_type = torch.full((len(first),), MID, dtype=torch.int32)
    step_type[last] = LAST
    step_type[first] = FIRST
    next_step_type = torch.full_like(step_type, FIRST)  # the padding after the last step
    next_step_type[:-1] = step_type[1:]
    single = (step_type == FIRST) & (next_step_type == FIRST)
    step_type[single] = LAST
    next_step_type[single] = LAST
    ended = last & terminal
    rows: dict[KeyPath, torch.Tensor] = {(STEP_TYPE,): step_type}
    rows.update(_under(columns, OBSERVATION))
    rows.update(_under(columns, ACTION))
    rows.update(infos or {})
    rows[(NEXT_STEP_TYPE,)] = next_step_type
    rows.update(_under(columns, REWARD))
    for path, column in _under(columns, DISCOUNT).items():
        discount = column.clone()
        discount[ended] = 0
        rows[path] = discount
    return rows


def _under(columns: dict[KeyPath, torch.Tensor], feature: str) -> dict[KeyPath, torch.Tensor]:
    return {path: column for path, column in columns.items() if path[0] == feature}


def _policy_infos(steps: Steps, policy_info_fn: PolicyInfoFn) -> dict[KeyPath, torch.Tensor]:
    """``policy_info`` columns from calling the function on every pair of steps; none when
    it returns nothing for every pair.

    Raises:
        ValueError: empty for some pairs only, or keys or shapes that differ between pairs.
        TypeError: a leaf that is not numeric or does not cast to the first pair's dtype.
    """
    padding = unflatten(
        {path: torch.zeros_like(column[0]) for path, column in steps.columns.items()}
    )
    padding[IS_FIRST] = torch.tensor(True)
    rows: dict[KeyPath, list[torch.Tensor]] = {}
    first_spec: Spec = {}
    empty_at: int | None = None
    for row in range(steps.count):
        following = steps.row(row + 1) if row + 1 < steps.count else padding
        info = policy_info_fn(steps.row(row), following)
        where = f"policy_info_fn at {steps.where(row)}"
        if info is None or (isinstance(info, tuple | list | Mapping) and len(info) == 0):
            empty_at = row if empty_at is None else empty_at
            if rows:
                raise ValueError(
                    f"{where}: returned nothing, but a policy info for an earlier step"
                )
            continue
        if empty_at is not None:
            raise ValueError(
                f"{where}: returned a policy info, but nothing at {steps.where(empty_at)}"
            )
        flat = flatten(info, argument=where) if isinstance(info, Mapping) else {(): info}
        leaves = {
            (POLICY_INFO, *path): leaf_tensor(value, 0, where=f"{where}{format_key_path(path)}")
            .detach()
            .cpu()
            for path, value in flat.items()
        }
        if not rows:
            first_spec = {p: LeafSpec(tuple(t.shape), t.dtype) for p, t in leaves.items()}
            rows = {path: [] for path in leaves}
        found = {p: LeafSpec(tuple(t.shape), t.dtype) for p, t in leaves.items()}
        if found.keys() != first_spec.keys() or any(
            found[p].shape != first_spec[p].shape for p in found
        ):
            raise ValueError(
                f"{where}: returned {describe_spec(found)}, but for the first step "
                f"{describe_spec(first_spec)}"
            )
        for path, tensor in leaves.items():
            check_cast(tensor, first_spec[path].dtype, where=f"{where}{format_key_path(path)}")
            rows[path].append(tensor.to(first_spec[path].dtype))
    return {path: torch.stack(values) for path, values in rows.items()}


def _check_spec(produced: Spec, stored: Mapping[KeyPath, Any]) -> None:
    """Refuse a buffer whose spec is not exactly the transitions'.

    Raises:
        ValueError: the reference's message, then what differs.
    """
    differences = [f"{format_key_path(p)} not in the buffer" for p in produced if p not in stored]
    differences += [f"{format_key_path(p)} not in the data" for p in stored if p not in produced]
    for path, leaf in produced.items():
        held = stored.get(path)
        if held is not None and (tuple(held.shape), held.dtype) != (leaf.shape, leaf.dtype):
            held_dtype = (
                dtype_name(held.dtype) if isinstance(held.dtype, torch.dtype) else held.dtype
            )
            differences.append(
                f"{format_key_path(path)}: the buffer holds {list(held.shape)} {held_dtype}, "
                f"the data {list(leaf.shape)} {dtype_name(leaf.dtype)}"
            )
    if differences:
        raise ValueError(
            "Replay buffer table signature spec should match RLDS data spec. ("
            + "; ".join(differences)
            + ")"
        )

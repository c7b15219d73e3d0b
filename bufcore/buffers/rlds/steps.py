"""Every step of an RLDS dataset read into columns and checked, before anything is converted.

RLDS data here is an iterable of episodes, each a mapping with ``"steps"``: either an iterable
of step dicts or one dict of stacked arrays (a leading time axis), with numpy or torch leaves
(or numbers) and nested dicts wherever a feature is one (``observation`` usually). Only the
seven step features of :func:`get_rlds_step_features` are read; other step keys (step
metadata, strings) and episode keys are left alone, as in the reference.

:func:`read_steps` lays all steps end to end as CPU columns ``[N, ...]`` (one per leaf), with
the episodes' offsets, so that every message can name ``rlds_data[e]['steps'][s]``; and
:meth:`Steps.check_sequence` applies the reference's three pair checks plus DESIGN §2 decision
9's two (every episode starts with a first step; a first step that is not last is not followed
by a first step). The whole dataset is read and checked before a caller converts or pushes
anything, so a bad episode anywhere means nothing is pushed.

Spec: the first episode that has a structure (a non-empty list of steps, or a dict of stacked
arrays) fixes each leaf's per-step shape and dtype; later steps and episodes must have the
same key paths and shapes and dtypes that cast to it without changing values
(:func:`bufcore.tree.check_cast`), as for a buffer's later batches. The flags must be scalars
per step, bool or integers 0/1, and are stored as bool.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bufcore.storage.leaves import leaf_tensor
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

OBSERVATION = "observation"
ACTION = "action"
REWARD = "reward"
DISCOUNT = "discount"
IS_FIRST = "is_first"
IS_LAST = "is_last"
IS_TERMINAL = "is_terminal"
STEPS = "steps"
FLAGS = (IS_FIRST, IS_LAST, IS_TERMINAL)
_FEATURES = (OBSERVATION, ACTION, REWARD, DISCOUNT, IS_FIRST, IS_LAST, IS_TERMINAL)


def get_rlds_step_features() -> list[str]:
    """The features every RLDS step holds (the reference's list, in its order)."""
    return list(_FEATURES)


@dataclass(frozen=True)
class Steps:
    """Every step of a dataset, episodes end to end.

    Attributes:
        columns: Key path (under one of the seven features) -> ``[N, ...]`` CPU tensor; the
            flags are bool ``[N]``.
        spec: Key path -> per-step shape and dtype (the columns' trailing shapes); None when
            no episode showed a structure (no episode, or only empty lists of steps).
        offsets: The first row of each episode (``len(rlds_data) + 1`` entries, the last N).
    """

    columns: dict[KeyPath, torch.Tensor]
    spec: Spec | None
    offsets: list[int]

    @property
    def count(self) -> int:
        """Steps in all."""
        return self.offsets[-1]

    def where(self, row: int) -> str:
        """How messages name the step at ``row``: ``rlds_data[e]['steps'][s]``."""
        episode = bisect.bisect_right(self.offsets, row) - 1
        return f"rlds_data[{episode}][{STEPS!r}][{row - self.offsets[episode]}]"

    def spans(self) -> list[tuple[int, int]]:
        """Each episode's rows ``[start, end)``, in order (empty episodes included)."""
        return list(itertools.pairwise(self.offsets))

    def flag(self, name: str) -> torch.Tensor:
        """The bool ``[N]`` column of one flag."""
        return self.columns[(name,)]

    def row(self, row: int) -> dict[str, Any]:
        """One step as a nested dict of the seven features (views of the columns)."""
        return unflatten({path: column[row] for path, column in self.columns.items()})

    def check_sequence(self) -> None:
        """Refuse steps whose flags do not form whole episodes, naming the first bad step.

        Each step is checked with the one after it (a first step after the last one, as the
        reference pads); at the earliest bad step, the first rule in this order is reported.

        Raises:
            ValueError: an episode's first step is not a first step; a terminal step is not
                last; a mid step (neither first nor last) or a first step that is not last is
                followed by a first step (or ends the data); a last step is followed by a step
                that is not first.
        """
        first, last, terminal = (self.flag(name) for name in FLAGS)
        following_first = torch.cat([first[1:], torch.ones(1, dtype=torch.bool)])
        starts = torch.zeros(self.count, dtype=torch.bool)
        begun = [start for start, end in self.spans() if end > start]
        starts[begun] = True
        rules = (
            ("The first step of an episode must be a first step.", starts & ~first),
            ("Terminal step must be the last step of an episode.", terminal & ~last),
            ("Mid step should not be followed by a first step.", ~first & ~last & following_first),
            ("Last step of an episode must be followed by a first step.", last & ~following_first),
            (
                "A first step that is not last should not be followed by a first step.",
                first & ~last & following_first,
            ),
        )
        earliest: tuple[int, str] | None = None
        for message, bad in rules:
            found = bad.nonzero()
            if len(found) and (earliest is None or int(found[0, 0]) < earliest[0]):
                earliest = (int(found[0, 0]), message)
        if earliest is not None:
            row, message = earliest
            raise ValueError(f"{message} ({self.where(row)})")


def read_steps(rlds_data: Iterable[Any]) -> Steps:
    """Read every episode's steps into columns, checking their structure (not yet the flags'
    sequence: see :meth:`Steps.check_sequence`).

    Raises:
        TypeError: ``rlds_data`` is not an iterable of episodes, ``steps`` is neither a mapping
            nor an iterable of mappings, a leaf is not numeric, or a dtype does not cast to the
            spec's; flags that are not bool or integers.
        ValueError: an episode without ``steps`` (the reference's "No dataset representing
            RLDS steps exist in the data."); a step without one of the seven features (the
            reference's "Invalid RLDS step spec. ..."); stacked leaves of different lengths;
            key paths or shapes that differ from the spec; flags that are not scalars per step
            or integers other than 0 and 1. Every message names the episode (and step).
    """
    if isinstance(rlds_data, Mapping | str | bytes) or not isinstance(rlds_data, Iterable):
        raise TypeError(
            "rlds_data: expected an iterable of episodes (dicts with 'steps'), got "
            f"{type(rlds_data).__name__}"
        )
    spec: Spec | None = None
    parts: list[dict[KeyPath, torch.Tensor]] = []
    offsets = [0]
    for index, episode in enumerate(rlds_data):
        where = f"rlds_data[{index}]"
        if not isinstance(episode, Mapping) or STEPS not in episode:
            found = list(episode) if isinstance(episode, Mapping) else type(episode).__name__
            raise ValueError(
                f"No dataset representing RLDS {STEPS} exist in the data. ({where} holds "
                f"{found})"
            )
        steps = episode[STEPS]
        where = f"{where}[{STEPS!r}]"
        columns: dict[KeyPath, torch.Tensor] | None
        if isinstance(steps, Mapping):
            columns = _stacked(steps, where)
        elif isinstance(steps, Iterable) and not isinstance(steps, str | bytes):
            columns = _stepwise(steps, where)
        else:
            raise TypeError(
                f"{where}: expected a dict of stacked arrays or an iterable of step dicts, got "
                f"{type(steps).__name__}"
            )
        length = 0
        if columns is not None:
            spec = _conform(columns, spec, where)
            length = len(columns[(IS_FIRST,)])
            parts.append(columns)
        offsets.append(offsets[-1] + length)
    joined = (
        {}
        if spec is None
        else {path: torch.cat([part[path] for part in parts]) for path in spec}
    )
    return Steps(joined, spec, offsets)


def _features(step: Mapping[str, Any], where: str) -> dict[KeyPath, Any]:
    """The leaves of the seven features of one step (or stacked steps), by key path.

    Raises:
        ValueError: a feature is missing (the reference's message, then ``where``).
        TypeError: a key is not a str.
    """
    features = get_rlds_step_features()
    if not all(name in step for name in features):
        raise ValueError(
            f"Invalid RLDS step spec. Features expected are {features}, but found "
            f"{list(step.keys())} ({where})"
        )
    leaves: dict[KeyPath, Any] = {}
    for name in features:
        value = step[name]
        if isinstance(value, Mapping):
            nested = flatten(value, argument=f"{where}[{name!r}]")
            leaves.update({(name, *path): leaf for path, leaf in nested.items()})
        else:
            leaves[(name,)] = value
    return leaves


def _stacked(steps: Mapping[str, Any], where: str) -> dict[KeyPath, torch.Tensor]:
    """A dict of stacked arrays as columns ``[T, ...]``.

    Raises:
        ValueError: a missing feature, a leaf without a time axis, or leaves of different
            lengths.
        TypeError: a leaf that is not numeric.
    """
    columns = {
        path: _tensor(value, 1, f"{where}{format_key_path(path)}")
        for path, value in _features(steps, where).items()
    }
    lengths = {len(column) for column in columns.values()}
    if len(lengths) > 1:
        listing = ", ".join(f"{format_key_path(p)}: {len(c)}" for p, c in columns.items())
        raise ValueError(f"{where}: every feature needs one row per step, got {listing}")
    return _as_flags(columns, where)


def _stepwise(steps: Iterable[Any], where: str) -> dict[KeyPath, torch.Tensor] | None:
    """An iterable of step dicts as columns ``[T, ...]``; None for no step.

    Raises:
        TypeError: a step that is not a mapping, a leaf that is not numeric, or a dtype that
            does not cast to the episode's first step's.
        ValueError: a missing feature, or key paths or shapes that differ from the first step's.
    """
    rows: dict[KeyPath, list[torch.Tensor]] = {}
    first: Spec = {}
    for number, step in enumerate(steps):
        here = f"{where}[{number}]"
        if not isinstance(step, Mapping):
            raise TypeError(f"{here}: expected a step dict, got {type(step).__name__}")
        leaves = {
            path: _tensor(value, 0, f"{here}{format_key_path(path)}")
            for path, value in _features(step, here).items()
        }
        if not rows:
            first = {path: LeafSpec(tuple(t.shape), t.dtype) for path, t in leaves.items()}
            rows = {path: [] for path in leaves}
        _check_paths(leaves, first, here, f"{where}[0]")
        for path, tensor in leaves.items():
            leaf, at = first[path], f"{here}{format_key_path(path)}"
            if tuple(tensor.shape) != leaf.shape:
                raise ValueError(
                    f"{at}: expected shape {list(leaf.shape)} (as the first step's), got "
                    f"{list(tensor.shape)}"
                )
            rows[path].append(_cast(tensor, leaf, at))
    if not rows:
        return None
    return _as_flags({path: torch.stack(values) for path, values in rows.items()}, where)


def _tensor(value: Any, time_axes: int, where: str) -> torch.Tensor:
    """A leaf as a CPU tensor; numpy scalars too (``np.bool_``, what indexing an array gives,
    is no number to :func:`bufcore.tree.to_tensor`).

    Raises:
        TypeError: not numeric.
        ValueError: fewer than ``time_axes`` axes.
    """
    numpy_scalar = isinstance(value, np.generic | np.ndarray) and value.ndim == 0
    if numpy_scalar and value.dtype.kind in "biuf":
        value = torch.from_numpy(np.array(value))
    return leaf_tensor(value, time_axes, where=where).cpu()


def _as_flags(columns: dict[KeyPath, torch.Tensor], where: str) -> dict[KeyPath, torch.Tensor]:
    """The columns with each flag made a bool ``[T]`` column.

    Raises:
        ValueError: a flag is not one scalar per step, or an integer other than 0 or 1.
        TypeError: a flag is neither bool nor integer.
    """
    for name in FLAGS:
        column = columns[(name,)]
        here = f"{where}[{name!r}]"
        if column.ndim != 1:
            raise ValueError(
                f"{here}: expected one scalar flag per step, got shape {list(column.shape)}"
            )
        if column.dtype == torch.bool:
            continue
        if column.is_floating_point() or column.is_complex():
            raise TypeError(f"{here}: expected bool flags, got dtype {dtype_name(column.dtype)}")
        wide = column.to(torch.int64)
        bad = ((wide != 0) & (wide != 1)).nonzero()
        if len(bad):
            step = int(bad[0, 0])
            raise ValueError(f"{here}: expected flags 0 or 1, got {int(wide[step])} at step {step}")
        columns[(name,)] = wide.bool()
    return columns


def _conform(columns: dict[KeyPath, torch.Tensor], spec: Spec | None, where: str) -> Spec:
    """Cast an episode's columns to ``spec`` in place (the first episode fixes it).

    Raises:
        ValueError: other key paths or per-step shapes than the spec's, or values that do not
            fit its dtype.
        TypeError: a dtype that does not cast safely to the spec's.
    """
    found = {path: LeafSpec(tuple(c.shape[1:]), c.dtype) for path, c in columns.items()}
    if spec is None:
        return found
    _check_paths(columns, spec, where, "the first episode's")
    for path, leaf in spec.items():
        if found[path].shape != leaf.shape:
            raise ValueError(
                f"{where}{format_key_path(path)}: expected {list(leaf.shape)} per step (as the "
                f"first episode's: {describe_spec({path: leaf})}), got {list(found[path].shape)}"
            )
        columns[path] = _cast(columns[path], leaf, f"{where}{format_key_path(path)}")
    return spec


def _check_paths(leaves: Mapping[KeyPath, Any], spec: Spec, where: str, reference: str) -> None:
    """Raises ``ValueError`` when ``leaves`` has other key paths than ``spec``, which came
    from ``reference``."""
    missing = [format_key_path(p) for p in spec if p not in leaves]
    extra = [format_key_path(p) for p in leaves if p not in spec]
    if missing or extra:
        raise ValueError(
            f"{where}: the features' keys differ from {reference} (missing: "
            f"{', '.join(missing) or 'none'}; unexpected: {', '.join(extra) or 'none'})"
        )


def _cast(tensor: torch.Tensor, leaf: LeafSpec, where: str) -> torch.Tensor:
    """``tensor`` as ``leaf``'s dtype, refused when the cast changes its values.

    Raises:
        TypeError: the dtype does not cast safely.
        ValueError: values outside the dtype's range.
    """
    check_cast(tensor, leaf.dtype, where=where)
    return tensor.to(leaf.dtype)

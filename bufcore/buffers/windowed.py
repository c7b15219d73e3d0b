"""What the two trajectory buffers share: window options, end flags and the window gather.

Both :class:`~bufcore.buffers.online.TrajectoryDictBufferMultiDim` and
:class:`~bufcore.buffers.expert.TrajectoryDictBuffer` sample ``batch_size // seq_length`` windows,
slice-major (rows ``[i * L, (i + 1) * L)`` are one window), as
``{key: [batch, ...], "next": {key: [batch, ...]}}``; ``next`` holds the row after each one in
the same env, and a window plus its ``next`` rows lie in one trajectory. :class:`WindowOptions`
holds their options, validated once; the helpers below read end flags and gather windows.

Keys: an output or end key is a str (top level) or a tuple key path (any depth); JSON configs
store tuples as lists, and a nested dict key selects all its leaves.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from bufcore.checks import MAX_COUNT, check_int
from bufcore.errors import KeyPathError
from bufcore.fields import Field
from bufcore.sampling.windows import WEIGHTINGS, Weighting, check_weighting, window_index
from bufcore.storage.ring import RingStorage
from bufcore.tree import (
    Key,
    KeyPath,
    as_key,
    as_key_path,
    format_key_path,
    key_json,
    key_list,
    unflatten,
)

DEFAULT_KEYS: tuple[Key, ...] = ("observation",)
DEFAULT_END_KEY = "done"
# Window lengths are compared with int64 row counts; longer than any storage can hold.
MAX_SEQ_LENGTH = MAX_COUNT


def select_paths(spec: Collection[KeyPath], keys: list[Key], argument: str) -> list[KeyPath]:
    """The stored leaves (key paths of ``spec``) under each key, in order.

    Raises:
        KeyPathError: a key matches no stored leaf.
    """
    selected: list[KeyPath] = []
    for key in keys:
        prefix = as_key_path(key)
        found = [p for p in spec if p[: len(prefix)] == prefix]
        if not found:
            stored = ", ".join(format_key_path(p) for p in spec)
            raise KeyPathError(
                f"{argument}: key {format_key_path(prefix)} matches no stored leaf; "
                f"stored: {stored}"
            )
        selected.extend(p for p in found if p not in selected)
    return selected


@dataclass(frozen=True)
class WindowOptions:
    """How a trajectory buffer is sampled, validated once.

    Attributes:
        seq_length: Default window length, >= 1.
        output_key_t: Keys returned for the window rows.
        output_key_tp1: Keys returned under ``"next"``; empty for none (windows then need
            ``seq_length`` rows instead of ``seq_length + 1``).
        end_key: The end-flag leaf.
        weighting: ``"trajectory"`` (the reference's) or ``"window"``.

    Raises:
        TypeError: malformed keys or a non-int ``seq_length``.
        ValueError: ``seq_length`` outside ``[1, 2**62]`` or an unknown weighting.
    """

    seq_length: int = 1
    output_key_t: Sequence[Key] = DEFAULT_KEYS
    output_key_tp1: Sequence[Key] = DEFAULT_KEYS
    end_key: Key = DEFAULT_END_KEY
    weighting: Weighting = "trajectory"
    end_path: KeyPath = field(init=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        seq_length = check_int(self.seq_length, "seq_length", minimum=1, maximum=MAX_SEQ_LENGTH)
        set_(self, "seq_length", seq_length)
        set_(self, "output_key_t", key_list(self.output_key_t, "output_key_t"))
        set_(self, "output_key_tp1", key_list(self.output_key_tp1, "output_key_tp1"))
        set_(self, "end_key", as_key(self.end_key, "end_key"))
        set_(self, "weighting", check_weighting(self.weighting))
        set_(self, "end_path", as_key_path(self.end_key))

    @property
    def offset(self) -> int:
        """1 when windows also read the row after each one (``next``), else 0."""
        return 1 if self.output_key_tp1 else 0

    def request(self, batch_size: int, seq_length: int | None) -> tuple[int, int]:
        """``(seq_length, windows)`` for a sample call, with the reference's checks.

        Raises:
            TypeError: non-int sizes.
            ValueError: a size below 1, ``batch_size < seq_length``, or ``batch_size`` not a
                multiple of ``seq_length``.
        """
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=MAX_COUNT)
        seq = self.seq_length if seq_length is None else check_int(
            seq_length, "seq_length", minimum=1, maximum=MAX_SEQ_LENGTH
        )
        if batch_size < seq:
            raise ValueError(
                "The batch-size must be bigger than the sequence length, got "
                f"batch_size={batch_size} and seq_length={seq}."
            )
        if batch_size % seq != 0:
            raise ValueError(
                "The batch-size must be divisible by the sequence length, got "
                f"batch_size={batch_size} and seq_length={seq}."
            )
        return seq, batch_size // seq

    def output_paths(self, spec: Collection[KeyPath]) -> tuple[list[KeyPath], list[KeyPath]]:
        """The leaves of ``spec`` read for ``t`` and for ``next``.

        Raises:
            KeyPathError: an output key matches no leaf.
        """
        return (
            select_paths(spec, list(self.output_key_t), "output_key_t"),
            select_paths(spec, list(self.output_key_tp1), "output_key_tp1"),
        )

    def to_config(self) -> dict[str, Any]:
        """config.json fields (the weighting is bufcore-only and goes to state.json)."""
        return {
            "seq_length": self.seq_length,
            "output_key_t": [key_json(k) for k in self.output_key_t],
            "output_key_tp1": [key_json(k) for k in self.output_key_tp1],
            "end_key": key_json(self.end_key),
        }

    @staticmethod
    def saved_kwargs(config: Field, state: Field) -> dict[str, Any]:
        """Constructor keyword arguments from saved config and state (BFM-Zero's defaults).

        Raises:
            StateError: a field has the wrong type.
        """
        default_keys = [key_json(k) for k in DEFAULT_KEYS]
        return {
            "seq_length": config.key("seq_length").integer(minimum=1, maximum=MAX_SEQ_LENGTH),
            "output_key_t": config.optional("output_key_t", default_keys).validate(key_list),
            "output_key_tp1": config.optional("output_key_tp1", default_keys).validate(key_list),
            "end_key": config.optional("end_key", DEFAULT_END_KEY).validate(as_key),
            "weighting": state.optional("weighting", "trajectory").choice(WEIGHTINGS),
        }


def check_end_leaf(shape: Sequence[int], batch_dims: int, where: str) -> None:
    """End flags must be ``[n]``/``[n, 1]`` (``[n, E]``/``[n, E, 1]`` with an env axis).

    Raises:
        ValueError: another shape.
    """
    if tuple(shape[batch_dims:]) not in ((), (1,)):
        lead = "n" if batch_dims == 1 else "n, env"
        raise ValueError(
            f"{where}: expected end flags [{lead}] or [{lead}, 1], got shape {list(shape)}"
        )


def end_matrix(tensor: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """End flags ``[n, E]`` (``E = 1`` for ``[time]`` rows) from a leaf; only the trailing
    singleton is squeezed, never the env axis."""
    n = int(tensor.shape[0])
    env = 1 if batch_dims == 1 else int(tensor.shape[1])
    return (tensor != 0).reshape(n, env)


def gather_windows(
    storage: RingStorage,
    start: torch.Tensor,
    env: torch.Tensor,
    *,
    seq_length: int,
    paths: tuple[list[KeyPath], list[KeyPath]],
) -> dict[str, Any]:
    """Read the windows' rows (and the rows after them) with one gather per leaf each."""
    paths_t, paths_tp1 = paths
    shape = {"length": seq_length, "capacity": storage.capacity, "env_count": storage.envs}
    out = unflatten(storage.gather(window_index(start, env, **shape), paths_t))
    if paths_tp1:
        out["next"] = unflatten(storage.gather(window_index(start + 1, env, **shape), paths_tp1))
    return out


class WindowedBuffer:
    """The window options of a trajectory buffer as read-only attributes (BFM-Zero's names)."""

    _window: WindowOptions

    @property
    def seq_length(self) -> int:
        """Default window length."""
        return self._window.seq_length

    @property
    def output_key_t(self) -> list[Key]:
        """Keys returned for the window rows."""
        return list(self._window.output_key_t)

    @property
    def output_key_tp1(self) -> list[Key]:
        """Keys returned under ``"next"``."""
        return list(self._window.output_key_tp1)

    @property
    def end_key(self) -> Key:
        """The end-flag leaf."""
        return self._window.end_key

    @property
    def weighting(self) -> Weighting:
        """``"trajectory"`` or ``"window"``."""
        return self._window.weighting

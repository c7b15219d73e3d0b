"""The curriculum's history: one :class:`Round` per evaluation, and its plain-data form.

``Curriculum.state_dict()`` is JSON-ready data (:func:`history_to_state`)::

    {"format": "bufcore.curriculum", "format_version": 1,
     "options": {"min_val": 0.5, "max_val": 2.0, "scale": 2.0, "mode": "exp"},
     "rounds": [{"step": 1000, "motion_ids": [...], "emd": [...], "priority": [...]}, ...]}

Motion ids are lists, parallel to ``emd`` and ``priority``: as JSON object keys they would turn
into strings. :func:`options_from_state` and :func:`rounds_from_state` check every field before
anything is used and raise :class:`bufcore.errors.StateError` naming the key path
(``state['rounds'][1]['step']``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bufcore.curriculum.priorities import MODES, PriorityOptions
from bufcore.fields import Field

STATE_FORMAT = "bufcore.curriculum"
STATE_VERSION = 1


@dataclass(frozen=True)
class Round:
    """One evaluation round applied to the expert buffer.

    Attributes:
        step: Training step of the evaluation.
        emd: Motion id -> EMD measured in this round.
        priority: Motion id -> priority passed to the buffer (before it renormalises).
    """

    step: int
    emd: dict[int, float]
    priority: dict[int, float]


def preview(items: Sequence[int], limit: int = 20) -> str:
    """``[1, 2, 3, ...]``: at most ``limit`` ids, for error messages."""
    shown = ", ".join(str(i) for i in items[:limit])
    return f"[{shown}{', ...' if len(items) > limit else ''}]"


def history_to_state(options: PriorityOptions, rounds: Sequence[Round]) -> dict[str, Any]:
    """The options and rounds as JSON-ready data (see the module docstring)."""
    return {
        "format": STATE_FORMAT,
        "format_version": STATE_VERSION,
        "options": dataclasses.asdict(options),
        "rounds": [
            {
                "step": r.step,
                "motion_ids": list(r.emd),
                "emd": [r.emd[m] for m in r.emd],
                "priority": [r.priority[m] for m in r.emd],
            }
            for r in rounds
        ],
    }


def options_from_state(state: Mapping[str, Any]) -> PriorityOptions:
    """The options saved in ``state``, after checking its format and version.

    Raises:
        StateError: ``state`` is not a mapping, has another format or version, or its options
            are missing or invalid.
    """
    root = Field(state, "state", part="state")
    found = root.key("format")
    if found.value != STATE_FORMAT:
        raise found.error(f"expected {STATE_FORMAT!r}, got {found.value!r}")
    version = root.key("format_version")
    if version.value != STATE_VERSION:
        raise version.error(f"this bufcore reads version {STATE_VERSION}, got {version.value!r}")
    options = root.key("options")
    numbers = {name: options.key(name).real() for name in ("min_val", "max_val", "scale")}
    mode = options.key("mode").choice(MODES)
    return options.parse(lambda _: PriorityOptions(mode=mode, **numbers))


def rounds_from_state(state: Mapping[str, Any], motions: set[int]) -> list[Round]:
    """The rounds saved in ``state``; each must cover exactly ``motions``.

    Raises:
        StateError: a round is malformed (the message names its key path).
    """
    parsed: list[Round] = []
    for entry in Field(state, "state", part="state").key("rounds").items():
        step = entry.key("step").integer(minimum=0)
        ids_field = entry.key("motion_ids")
        ids = [item.integer() for item in ids_field.items()]
        columns: dict[str, list[float]] = {}
        for key in ("emd", "priority"):
            column = entry.key(key)
            values = column.items()
            if len(values) != len(ids):
                raise column.error(
                    f"expected {len(ids)} values (one per motion id), got {len(values)}"
                )
            columns[key] = [value.real(minimum=0.0) for value in values]
        if len(set(ids)) != len(ids) or set(ids) != motions:
            raise ids_field.error(
                f"expected each of the buffer's {len(motions)} motions exactly once, "
                f"got {preview(ids)}"
            )
        parsed.append(
            Round(
                step=step,
                emd=dict(zip(ids, columns["emd"], strict=True)),
                priority=dict(zip(ids, columns["priority"], strict=True)),
            )
        )
    return parsed

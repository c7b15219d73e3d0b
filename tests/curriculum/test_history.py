"""Curriculum state: plain JSON out, checked field by field on the way back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bufcore.curriculum.curriculum import Curriculum
from tests.support import FakeExpertBuffer as FakeBuffer


# --------------------------------------------------------------------- persistence
def two_rounds(buffer: FakeBuffer, **options: Any) -> Curriculum:
    curriculum = Curriculum(buffer, **options)
    curriculum.apply({0: 0.5, 1: 1.7, 2: 3.0}, step=100)
    curriculum.apply({2: 0.2, 0: 1.1, 1: 0.9}, step=200)
    return curriculum


def test_state_dict_is_plain_json() -> None:
    state = two_rounds(FakeBuffer([0, 1, 2])).state_dict()
    assert json.loads(json.dumps(state)) == state


def test_load_state_dict_restores_the_history_through_json() -> None:
    original = two_rounds(FakeBuffer([0, 1, 2]), mode="bin")
    state = json.loads(json.dumps(original.state_dict()))
    buffer = FakeBuffer([0, 1, 2])
    restored = Curriculum(buffer, mode="bin")
    restored.load_state_dict(state)
    assert restored.history == original.history
    assert buffer.calls == []


def test_from_state_dict_restores_the_saved_options_and_history() -> None:
    original = two_rounds(FakeBuffer([0, 1, 2]), min_val=0.1, max_val=4.0, scale=1.5, mode="lin")
    restored = Curriculum.from_state_dict(FakeBuffer([2, 0, 1]), original.state_dict())
    assert restored.options == original.options
    assert restored.history == original.history


def test_load_state_dict_refuses_other_options_and_keeps_the_history() -> None:
    curriculum = two_rounds(FakeBuffer([0, 1, 2]), mode="exp")
    state = two_rounds(FakeBuffer([0, 1, 2]), mode="bin").state_dict()
    before = curriculum.history
    with pytest.raises(ValueError, match=r"state\['options'\]\['mode'\]"):
        curriculum.load_state_dict(state)
    assert curriculum.history == before


def corrupt(state: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    state = json.loads(json.dumps(state))
    node = state
    for part in path[:-1]:
        node = node[part]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return state


DELETE = object()
BAD_STATES = [
    (("rounds",), DELETE, r"state: missing key 'rounds'"),
    (("format",), "other", r"state\['format'\]: expected 'bufcore.curriculum'"),
    (("format_version",), 99, r"state\['format_version'\]"),
    (("options",), [], r"state\['options'\]: expected a mapping"),
    (("options", "scale"), DELETE, r"state\['options'\]: missing key 'scale'"),
    (("options", "scale"), "2", r"state\['options'\]\['scale'\]: expected a number"),
    (("rounds",), {}, r"state\['rounds'\]: expected a list"),
    (("rounds", 1), 3, r"state\['rounds'\]\[1\]: expected a mapping"),
    (("rounds", 1, "step"), -5, r"state\['rounds'\]\[1\]\['step'\]: expected an int >= 0"),
    (("rounds", 0, "emd"), [1.0], r"state\['rounds'\]\[0\]\['emd'\]: expected 3 values"),
    (("rounds", 0, "priority"), DELETE, r"state\['rounds'\]\[0\]: missing key 'priority'"),
    (("rounds", 1, "priority", 1), -1.0, r"state\['rounds'\]\[1\]\['priority'\]\[1\]"),
    (("rounds", 1, "emd", 2), None, r"state\['rounds'\]\[1\]\['emd'\]\[2\]"),
    (("rounds", 0, "motion_ids", 0), "0", r"state\['rounds'\]\[0\]\['motion_ids'\]\[0\]"),
    (("rounds", 0, "motion_ids"), [0, 1, 7], r"state\['rounds'\]\[0\]\['motion_ids'\]"),
    (("rounds", 0, "motion_ids"), [0, 1, 1], r"state\['rounds'\]\[0\]\['motion_ids'\]"),
]


@pytest.mark.parametrize(("path", "value", "match"), BAD_STATES)
def test_load_state_dict_rejects_a_malformed_state_naming_the_key_path(
    path: tuple[Any, ...], value: Any, match: str
) -> None:
    state = corrupt(two_rounds(FakeBuffer([0, 1, 2])).state_dict(), path, value)
    curriculum = Curriculum(FakeBuffer([0, 1, 2]))
    curriculum.apply({0: 1.0, 1: 1.0, 2: 1.0}, step=7)
    before = curriculum.history
    with pytest.raises(ValueError, match=match):
        curriculum.load_state_dict(state)
    assert curriculum.history == before


def test_from_state_dict_rejects_a_state_that_is_not_a_mapping() -> None:
    with pytest.raises(ValueError, match="state: expected a mapping"):
        Curriculum.from_state_dict(FakeBuffer([0]), [])  # type: ignore[arg-type]

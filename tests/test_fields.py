"""Reading saved plain data field by field: every error names the key path and the part."""

from __future__ import annotations

import pytest

from bufcore.errors import StateError
from bufcore.fields import Field

STATE = {"rounds": [{"step": 3, "mode": "exp", "ok": True}], "name": "x", "ratio": 0.5}


def root() -> Field:
    return Field(STATE, "state", part="state")


def test_fields_read_typed_values_at_any_depth() -> None:
    entry = root().key("rounds").items()[0]
    assert entry.key("step").integer(minimum=0) == 3
    assert entry.key("mode").choice(("lin", "exp")) == "exp"
    assert entry.key("ok").flag() is True
    assert root().key("name").text() == "x"
    assert root().key("ratio").real(minimum=0.0) == 0.5


def test_an_optional_field_falls_back_to_its_default() -> None:
    assert root().optional("absent", 7).integer() == 7


@pytest.mark.parametrize(
    ("read", "match"),
    [
        (lambda f: f.key("missing"), r"^state: missing key 'missing'$"),
        (lambda f: f.key("name").items(), r"^state\['name'\]: expected a list, got str$"),
        (lambda f: f.key("rounds").key("x"), r"^state\['rounds'\]: expected a mapping, got list$"),
        (lambda f: f.key("rounds").items()[0].key("step").integer(minimum=5),
         r"^state\['rounds'\]\[0\]\['step'\]: expected an int >= 5, got 3$"),
        (lambda f: f.key("name").integer(), r"^state\['name'\]: expected an int, got 'x'$"),
        (lambda f: f.key("name").real(), r"^state\['name'\]: expected a number, got 'x'$"),
        (lambda f: f.key("ratio").text(), r"^state\['ratio'\]: expected a str, got 0.5$"),
        (lambda f: f.key("ratio").flag(), r"^state\['ratio'\]: expected a bool, got 0.5$"),
        (lambda f: f.key("name").choice(("a",)), r"^state\['name'\]: expected one of \['a'\]"),
        (lambda f: f.key("name").parse(int), r"^state\['name'\]: invalid literal"),
    ],
)
def test_a_bad_field_raises_a_state_error_naming_where_it_sits(read: object, match: str) -> None:
    with pytest.raises(StateError, match=match) as caught:
        read(root())  # type: ignore[operator]
    assert caught.value.part == "state"


def test_the_part_travels_with_every_error() -> None:
    with pytest.raises(StateError) as caught:
        Field({}, "config", part="config").key("capacity")
    assert caught.value.part == "config"

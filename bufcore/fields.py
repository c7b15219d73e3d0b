"""Reading saved plain data (parsed JSON) field by field, with errors that name the key path.

Saved state comes back as nested dicts and lists: a checkpoint's ``config.json`` and
``state.json``, a curriculum's ``state_dict()``. Every field is checked where it is read, with the
validators of :mod:`bufcore.checks`, and a bad one raises :class:`bufcore.errors.StateError`
naming where it sits::

    rounds = Field(state, "state", part="state").key("rounds").items()
    step = rounds[1].key("step").integer(minimum=0)
    # StateError: state['rounds'][1]['step']: expected an int >= 0, got -5

A :class:`Field` is a value and its location; it never copies or changes the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from bufcore.checks import check_choice, check_int, check_real
from bufcore.errors import StateError, StatePart

T = TypeVar("T")
S = TypeVar("S", bound=str)


class Field:
    """A value of saved plain data and where it sits.

    Args:
        value: The value (a parsed JSON value).
        where: Its location as error messages show it (``"state['rounds'][0]"``).
        part: Which part of the saved state it belongs to (see :class:`StateError`).
    """

    __slots__ = ("part", "value", "where")

    def __init__(self, value: Any, where: str, *, part: StatePart) -> None:
        self.value = value
        self.where = where
        self.part: StatePart = part

    def error(self, problem: str) -> StateError:
        """A :class:`StateError` about this field: ``"<where>: <problem>"``."""
        return StateError(self.part, f"{self.where}: {problem}")

    def _child(self, value: Any, key: str | int) -> Field:
        return Field(value, f"{self.where}[{key!r}]", part=self.part)

    def validate(self, check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``check(value, where, *args, **kwargs)``: a validator of :mod:`bufcore.checks` (or one
        with the same signature) applied here, its errors raised as :class:`StateError`."""
        try:
            return check(self.value, self.where, *args, **kwargs)
        except (TypeError, ValueError) as err:
            raise StateError(self.part, str(err)) from err

    # ------------------------------------------------------------------ containers
    def mapping(self) -> Mapping[str, Any]:
        """The value, which must be a mapping."""
        if not isinstance(self.value, Mapping):
            raise self.error(f"expected a mapping, got {type(self.value).__name__}")
        return self.value

    def key(self, name: str) -> Field:
        """The field at ``name`` of this mapping, which must be present."""
        mapping = self.mapping()
        if name not in mapping:
            raise self.error(f"missing key {name!r}")
        return self._child(mapping[name], name)

    def optional(self, name: str, default: Any) -> Field:
        """The field at ``name`` of this mapping, or ``default`` (as a field) when absent."""
        return self._child(self.mapping().get(name, default), name)

    def items(self) -> list[Field]:
        """The items of this list, as fields."""
        if not isinstance(self.value, list):
            raise self.error(f"expected a list, got {type(self.value).__name__}")
        return [self._child(item, i) for i, item in enumerate(self.value)]

    # ---------------------------------------------------------------------- scalars
    def integer(self, *, minimum: int | None = None, maximum: int | None = None) -> int:
        """The value as an int within the bounds."""
        return self.validate(check_int, minimum=minimum, maximum=maximum)

    def real(self, *, minimum: float | None = None) -> float:
        """The value as a finite float, at least ``minimum``."""
        return self.validate(check_real, minimum=minimum)

    def text(self) -> str:
        """The value, which must be a str."""
        if not isinstance(self.value, str):
            raise self.error(f"expected a str, got {self.value!r:.80}")
        return self.value

    def flag(self) -> bool:
        """The value, which must be a bool."""
        if not isinstance(self.value, bool):
            raise self.error(f"expected a bool, got {self.value!r:.80}")
        return self.value

    def choice(self, choices: Sequence[S]) -> S:
        """The value, which must be one of ``choices``."""
        choice: S = self.validate(check_choice, choices)
        return choice

    def parse(self, convert: Callable[[Any], T]) -> T:
        """``convert(value)``, with its ``TypeError``/``ValueError`` reported at this field."""
        try:
            return convert(self.value)
        except StateError:
            raise
        except (TypeError, ValueError) as err:
            raise self.error(str(err)) from err

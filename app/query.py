"""Query-parameter hygiene: which values of a shared link no widget can take.

Streamlit seeds a widget bound to the URL from its query parameter before the page sees it;
an integer ``number_input`` handed ``inf`` raises ``OverflowError`` inside Streamlit (it
rejects other bad values itself, by falling back to the default). The entry script drops
such values first, so a hand-edited link shows the defaults instead of a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping


def infinite_values(params: Mapping[str, str], *, keep: Iterable[str] = ()) -> list[str]:
    """The keys whose value reads as an infinite number (``inf``, ``-Infinity``, ``1e999``).

    Args:
        params: Query parameters, name to (last) value.
        keep: Keys never reported (free-text widgets, where ``inf`` may be a name).

    Returns:
        The keys to drop, in ``params`` order.

    Raises:
        TypeError: a value is not a str.
    """
    kept = set(keep)
    found = []
    for key, value in params.items():
        if not isinstance(value, str):
            raise TypeError(f"params[{key!r}]: expected a str, got {type(value).__name__}")
        if key in kept:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        if math.isinf(number):
            found.append(key)
    return found

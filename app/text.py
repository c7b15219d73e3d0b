"""Text the dashboard shows through Markdown: :func:`literal` makes a path or an error message
appear exactly as written.

Streamlit draws ``st.error``, ``st.warning``, captions and the rest as Markdown, so a message
holding ``__target__`` shows a bold "target", a ``*`` starts emphasis and ``$...$`` becomes
maths. Messages from bufcore and the file system are data, not Markdown: every page passes
them through :func:`literal` before putting them in a Markdown string.
"""

from __future__ import annotations

import re

# What CommonMark, GitHub tables and strikethrough, HTML and Streamlit's maths act on; each is
# shown as itself after a backslash.
_ACTIVE = re.compile(r"([\\`*_\[\]<>#|~$])")


def literal(text: object) -> str:
    """``str(text)`` with every character Markdown would act on escaped, so it is shown as
    written (``__target__`` stays ``__target__``)."""
    return _ACTIVE.sub(r"\\\1", str(text))

"""literal() keeps paths and error messages as written when Streamlit draws them as Markdown."""

from __future__ import annotations

import pytest

from app.text import literal
from tests.app.conftest import shown

MESSAGES = [
    "config.json: unknown __target__ 'os.system'",
    "/runs/*star*/a_b_c/[x](y)",
    "costs $5 and $6 | a ~~b~~ <b>c</b> # d `e` \\ f \\_g",
    "",
]
ACTIVE = set("\\`*_[]<>#|~$")


@pytest.mark.parametrize("message", MESSAGES)
def test_markdown_shows_an_escaped_message_as_it_was_written(message: str) -> None:
    assert shown(literal(message)) == message


@pytest.mark.parametrize("message", MESSAGES)
def test_every_character_markdown_acts_on_is_escaped(message: str) -> None:
    escaped = literal(message)
    position = 0
    while position < len(escaped):
        if escaped[position] == "\\":
            assert escaped[position + 1] in ACTIVE
            position += 2
        else:
            assert escaped[position] not in ACTIVE
            position += 1


def test_plain_words_and_paths_without_markdown_stay_as_they_are() -> None:
    text = "/tmp/runs/demo/checkpoint: cannot be read (step 40)"
    assert literal(text) == text

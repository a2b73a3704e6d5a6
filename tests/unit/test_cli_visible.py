"""Stored text printed by the CLI cannot take over the terminal: bidi overrides, escape sequences
and other control or format characters are shown escaped; text, line breaks and emoji are kept."""

from __future__ import annotations

from rag_router.cli.common import visible
from rag_router.cli.store import snippet


def test_control_and_bidi_characters_are_shown_escaped() -> None:
    assert visible("evil\u202etxt.exe") == "evil\\u202etxt.exe"
    assert visible("red\x1b[31m alert") == "red\\u001b[31m alert"
    assert visible("a\u2066b\u2069") == "a\\u2066b\\u2069"


def test_ordinary_text_is_unchanged() -> None:
    text = "第三条 员工每年享有带薪年假十天。\n\tCafé — 👨\u200d👩\u200d👧 ok"
    assert visible(text) == text
    assert visible(snippet(text)) == text

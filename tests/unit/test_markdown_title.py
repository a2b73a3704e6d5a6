"""The title of a Markdown file: the front matter's, else its first level-1 heading."""

from __future__ import annotations

import pytest

from indexers.ingest.formats import read_markdown


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("# 员工手册\n\n第一条 ...\n", "员工手册"),
        ("---\ntitle: Notes\n---\n# Heading\n", "Notes"),
        ("---\ndate: 2024-01-01\n---\n\n## Part\n# Guide #\n", "Guide"),
        ("Intro line.\n\n```sh\n# a shell comment\n```\n# Real\n", "Real"),
        ("Setext title\n============\n\nBody.\n", "Setext title"),
        ("#hashtag, not a heading\n", None),
        ("plain text\n", None),
    ],
)
def test_the_title_and_the_text_as_written(text: str, title: str | None) -> None:
    parsed = read_markdown(text.encode("utf-8"))
    assert (parsed.title, parsed.text) == (title, text)

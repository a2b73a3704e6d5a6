from __future__ import annotations

import pytest

from indexers.structure import heading_metadata


@pytest.mark.parametrize(
    ("title", "text", "metadata", "found"),
    [
        ("Article 17 Right to erasure", "1. The data subject ...", {}, {"article": 17}),
        (None, "Art. 5\nPrinciples relating to processing", {}, {"article": 5}),
        ("第十七条 删除权", "个人信息处理者 ...", {}, {"article": 17}),
        ("第一千零六十二条", "夫妻在婚姻关系存续期间 ...", {}, {"article": 1062}),
        ("第三章 个人信息的处理规则", "", {}, {"chapter": 3}),
        ("Section 3.2 Fees", "The customer pays ...", {}, {"section": "3.2"}),
        ("§ 4 Haftung", "", {}, {"section": 4}),
        ("Article 17 Right to erasure", "", {"article": 99}, {}),  # metadata wins
        ("An article about privacy", "Articles are written ...", {}, {}),
        ("Chapter IV Controller and processor", "", {}, {"chapter": "IV"}),
        ("Article I, Section 1", "All legislative Powers ...", {"section": 1}, {"article": 1}),
        ("Article XIV", "", {}, {"article": 14}),
        ("Amendment XXVI", "Section 1. The right of citizens ...", {}, {"amendment": 26, "section": 1}),
    ],
)
def test_heading_metadata(
    title: str | None, text: str, metadata: dict[str, object], found: dict[str, object]
) -> None:
    assert heading_metadata(title, text, metadata) == found

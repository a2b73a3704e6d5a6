from __future__ import annotations

import pytest

from indexers.text.structure import heading_metadata, law_name, split_sections


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
        # a law or document name before the heading becomes ``law`` (its short name)
        ("刑法 第二十条", "为了使国家、公共利益 ...", {}, {"article": 20, "law": "刑法"}),
        ("刑法　第二十条", "", {}, {"article": 20, "law": "刑法"}),  # ideographic space
        ("中华人民共和国民法典第一千零六十二条", "", {}, {"article": 1062, "law": "民法典"}),
        ("《个人信息保护法》第13条", "", {}, {"article": 13, "law": "个人信息保护法"}),
        ("公司法（2023修订） 第１３条", "", {}, {"article": 13, "law": "公司法", "version": 2023}),  # １３
        ("刑法 第二十条", "", {"law": "中华人民共和国刑法"}, {"article": 20}),  # metadata wins
        ("GDPR Article 17 Right to erasure", "", {}, {"article": 17, "law": "GDPR"}),
        ("U.S. Constitution Article I", "", {}, {"article": 1, "law": "U.S. Constitution"}),
        (None, "中华人民共和国刑法 第二十条\n为了 ...", {}, {"article": 20, "law": "刑法"}),
        # inserted articles (之N) are articles of their own
        ("刑法 第一百三十三条之一", "在道路上驾驶机动车 ...", {}, {"article": "133-1", "law": "刑法"}),
        ("第287条之二", "", {}, {"article": "287-2"}),
        # not headings: prose that cites an article, a title that only mentions one
        (None, "本法第二十条规定的正当防卫 ...", {}, {}),
        ("Notes on Article 5", "", {}, {}),
        ("宪法 序言", "中国是世界上历史最悠久的国家之一。", {}, {}),
    ],
)
def test_heading_metadata(
    title: str | None, text: str, metadata: dict[str, object], found: dict[str, object]
) -> None:
    assert heading_metadata(title, text, metadata) == found


def test_law_names_are_compared_by_their_short_form() -> None:
    assert law_name("《中华人民共和国刑法》") == "刑法"
    assert law_name("民法典（2020年）") == "民法典"
    assert law_name("中华人民共和国") == "中华人民共和国"  # nothing left to shorten to
    assert law_name("GDPR") == "GDPR"


def test_sections_cut_at_inserted_articles() -> None:
    text = "第一百三十三条 交通肇事 ……\n第一百三十三条之一 在道路上驾驶机动车 ……\n第一百三十四条 重大责任事故"
    assert [s.metadata.get("article") for s in split_sections(text, {})] == [133, "133-1", 134]

"""A sentence longer than the limit: the answer quotes the clauses that answer, not its first words."""

from __future__ import annotations

import pytest

from indexers.text.lexical import Analyzer
from rag_router.answer.extractive import extractive_answer
from rag_router.answer.prompting import Constraints, Source, count_words

ARTICLE_20 = (
    "为了使国家、公共利益、本人或者他人的人身、财产和其他权利免受正在进行的不法侵害，而采取的制止不法侵害的行为，"
    "对不法侵害人造成损害的，属于正当防卫，不负刑事责任。"
)
ARTICLE_26 = (
    "Everyone has the right to education, which shall be free at least in the elementary and "
    "fundamental stages, and elementary education shall be compulsory."
)


@pytest.mark.parametrize("limit", [50, 30, 20])
def test_a_chinese_limit_keeps_the_clause_that_answers(limit: int) -> None:
    source = Source(1, "xf#0", "xf-20", "刑法 第二十条", ARTICLE_20)
    question = f"不超过{limit}字回答什么是正当防卫"
    answer = extractive_answer(question, [source], Constraints(max_chars=limit, language="zh"), Analyzer())
    assert len(answer) <= limit and answer.endswith("[1]") and not answer.endswith(" [1]")  # CJK: no space
    assert "正当防卫" in answer
    quoted = answer.removesuffix("[1]").strip("…")
    assert quoted in ARTICLE_20  # quoted as stored, cut only at its ends


def test_an_english_word_limit_keeps_the_clause_that_answers() -> None:
    source = Source(1, "u#0", "udhr-26", "Article 26", ARTICLE_26)
    answer = extractive_answer(
        "Is elementary education compulsory?", [source], Constraints(max_words=8), Analyzer()
    )
    assert answer.startswith("…") and answer.endswith("compulsory. [1]")
    assert count_words(answer.removesuffix(" [1]")) <= 8


def test_a_plain_text_files_title_line_is_not_glued_to_its_first_sentence() -> None:
    from rag_router.answer.extractive import quotable

    text = "Parking at the Harbour office\nStaff parking in the underground garage costs 5 EUR per day.\n"
    assert quotable(text, "Parking at the Harbour office") == [
        "Staff parking in the underground garage costs 5 EUR per day."
    ]
    assert quotable(text, None)[0].startswith("Parking at the Harbour office Staff")  # no title: as is

"""search.followup: a follow-up's subject from earlier questions (pure)."""

from __future__ import annotations

import datetime as dt

import pytest

from rag_router.search.followup import resolve

TODAY = dt.date(2026, 12, 3)


@pytest.mark.parametrize(
    ("earlier", "question", "query"),
    [
        (["What does GDPR Article 17 say?"], "And Article 18?", "And GDPR Article 18?"),
        (["What does GDPR Article 17 say?", "And Article 18?"], "And Article 19?", "And GDPR Article 19?"),
        (["员工手册第六条规定了什么？"], "那第七条呢？", "那《员工手册》第七条呢？"),
        (["刑法第二十条是什么"], "第二十一条呢", "《刑法》第二十一条呢"),
        (
            ["What does Section 3 of the travel policy say?"],
            "and Section 4?",
            "and Section 4 of the travel policy?",
        ),
        (
            ["How much is the meal allowance on a business trip?"],
            "what about hotels?",
            "what about hotels? business trip",
        ),
    ],
)
def test_a_follow_up_takes_the_subject_it_lacks(earlier: list[str], question: str, query: str) -> None:
    followed = resolve(question, earlier, today=TODAY)
    assert followed.query == query
    assert followed.carried is not None and followed.carried["from"] in earlier


@pytest.mark.parametrize(
    ("earlier", "question"),
    [
        (["What does GDPR Article 17 say?"], "What does Article 2 of the UDHR say?"),  # its own law
        (["What does GDPR Article 17 say?"], "How fast may trucks drive inside depots?"),  # a new subject
        (["年休假有几天？"], "那婚假呢？"),  # Chinese: no subject to tell from what was asked
        ([], "And Article 18?"),  # nothing earlier
        (["What is the speed limit?"], "And Article 5?"),  # no document named before
        (["What does GDPR Article 17 say?"], "What does Section 2 of the IT security policy say?"),  # IT
        (["What does GDPR Article 17 say?"], "Article 18 of GDPR on restriction?"),
    ],
)
def test_a_question_with_its_own_subject_or_nothing_to_lean_on_is_searched_as_asked(
    earlier: list[str], question: str
) -> None:
    followed = resolve(question, earlier, today=TODAY)
    assert followed.query == question and followed.carried is None

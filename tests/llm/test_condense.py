"""answer.condense: a follow-up the rules leave alone, rewritten by the model (the scripted
fake server), and the model's output treated as untrusted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from rag_router.answer.condense import rewritten
from rag_router.api import create_app
from rag_router.settings import Settings
from tests.fakes.vllm import ScriptedLLM, Step, serve, words

DOCS = [
    {"id": "travel", "title": "Travel policy", "text": "Employees may book economy class on every flight."},
    {
        "id": "contractors",
        "title": "Contractor rules",
        "text": "Contractors book their own travel and are reimbursed for economy class flights only.",
    },
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Do contractors book economy class flights?", "Do contractors book economy class flights?"),
        ('Rewritten question: "Do contractors fly economy?"\nsome more', "Do contractors fly economy?"),
        ("", None),
        ("Does that also apply to contractors?", None),  # the question itself
        ("x" * 500, None),  # longer than a rewrite can be
    ],
)
def test_only_a_rewrite_counts(text: str, expected: str | None) -> None:
    assert rewritten(text, "Does that also apply to contractors?", "Which class may I fly?") == expected


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[ScriptedLLM, str]]:
    llm = ScriptedLLM()
    with serve(llm.app) as url:
        yield llm, url


def test_chat_condenses_a_follow_up_with_the_model_when_asked_to(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, fake: tuple[ScriptedLLM, str]
) -> None:
    llm, url = fake
    llm.play(
        Step(words("Which flight class may contractors book?")),
        Step(words("Contractors are reimbursed for economy class flights only [1].")),
    )
    settings = Settings(data_dir=tmp_path, llm={"base_url": f"{url}/v1", "condense": True})
    messages = [
        {"role": "user", "content": "Which flight class may I book?"},
        {"role": "assistant", "content": "Economy class [1]."},
        {"role": "user", "content": "Does that also apply to contractors?"},
    ]
    with TestClient(create_app(settings, embedder=embedder)) as c:
        assert c.post("/v1/documents", json={"documents": DOCS}).status_code == 200
        start = len(llm.requests)
        body = c.post("/v1/chat/completions", json={"model": "rag-router", "messages": messages}).json()
    condense = llm.requests[start]["messages"]
    assert "Which flight class may I book?" in condense[1]["content"]
    assert "Does that also apply to contractors?" in condense[1]["content"]
    carried = body["rag"]["route"]["features"]["carried"]
    assert carried == {
        "from": "Which flight class may I book?",
        "condensed": "Which flight class may contractors book?",
    }
    assert body["rag"]["sources"][0]["doc_id"] == "contractors"


def test_without_the_setting_the_model_is_not_asked_to_condense(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, fake: tuple[ScriptedLLM, str]
) -> None:
    llm, url = fake
    llm.play(Step(words("Economy class [1].")))
    settings = Settings(data_dir=tmp_path, llm={"base_url": f"{url}/v1"})
    with TestClient(create_app(settings, embedder=embedder)) as c:
        assert c.post("/v1/documents", json={"documents": DOCS}).status_code == 200
        start = len(llm.requests)
        body = c.post(
            "/v1/answer", json={"query": "Does that also apply to contractors?", "history": ["Which class?"]}
        ).json()
    assert len(llm.requests) == start + 1  # the answer only
    assert "carried" not in body["route"]["features"]

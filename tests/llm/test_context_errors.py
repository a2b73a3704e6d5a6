"""A prompt over the server's window, in both dialects, and the answer flow fitting it (the fake)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Document
from rag_router.answer.llm import context_exceeded
from rag_router.api import create_app
from rag_router.settings import Settings
from tests.conftest import doc_json
from tests.fakes.vllm import ScriptedLLM, Step, serve, words

LLAMA_CPP = {
    "error": {
        "code": 400,
        "message": "request (3031 tokens) exceeds the available context size (1024 tokens)",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 3031,
        "n_ctx": 1024,
    }
}
OPENAI = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
}


def test_both_dialects_give_the_window() -> None:
    llama = context_exceeded(400, json.dumps(LLAMA_CPP))
    openai = context_exceeded(400, json.dumps(OPENAI))
    assert llama is not None and (llama.n_ctx, llama.n_prompt) == (1024, 3031)
    assert openai is not None and openai.n_ctx == 4096
    assert context_exceeded(400, '{"error": {"message": "n must be 1", "type": "invalid_request"}}') is None
    assert context_exceeded(503, json.dumps(LLAMA_CPP)) is None
    assert context_exceeded(400, "not json") is None


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[ScriptedLLM, str]]:
    llm = ScriptedLLM()
    with serve(llm.app) as url:
        yield llm, url


@pytest.mark.parametrize("dialect", [LLAMA_CPP, OPENAI], ids=["llama.cpp", "openai"])
def test_a_prompt_over_the_window_is_refitted_and_asked_once_more(
    tmp_path: Path,
    embedder: SentenceTransformerEmbedder,
    sample_docs: list[Document],
    fake: tuple[ScriptedLLM, str],
    dialect: dict[str, object],
) -> None:
    llm, url = fake
    answer = "Everyone has the right to education [1]."
    llm.play(Step(status=400, error=dialect), Step(words(answer)))
    settings = Settings(data_dir=tmp_path, llm={"base_url": f"{url}/v1", "context_tokens": 32768})
    with TestClient(create_app(settings, embedder=embedder)) as c:
        assert (
            c.post("/v1/documents", json={"documents": [doc_json(d) for d in sample_docs]}).status_code == 200
        )
        body = c.post("/v1/answer", json={"query": "right to education?"}).json()
    assert body["mode"] == "llm" and not body["degraded"] and body["answer"] == answer
    first, second = (json.dumps(r["messages"]) for r in llm.requests)
    assert len(llm.requests) == 2 and len(second) <= len(first)
    assert second.count("[") <= first.count("[")  # no more sources than the first prompt


def test_each_source_reaches_the_model_cut_to_what_the_question_needs(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, fake: tuple[ScriptedLLM, str]
) -> None:
    """The sentence sharing most of the question's terms and one either side: the prompt (most of
    the time to first token on a CPU) is short; the rest of the paragraph stays out."""
    llm, url = fake
    filler = [f"The harbour log for day {i} records calm water and routine traffic." for i in range(12)]
    text = " ".join([*filler[:6], "The lighthouse keeper retired in 1931 after forty years.", *filler[6:]])
    llm.play(Step(words("The lighthouse keeper retired in 1931 [1].")))
    settings = Settings(data_dir=tmp_path, llm={"base_url": f"{url}/v1"})
    with TestClient(create_app(settings, embedder=embedder)) as c:
        assert c.post("/v1/documents", json={"documents": [{"id": "log", "text": text}]}).status_code == 200
        body = c.post("/v1/answer", json={"query": "When did the lighthouse keeper retire?"}).json()
    prompt = llm.requests[0]["messages"][1]["content"]
    assert "retired in 1931" in prompt and "day 5 records" in prompt and "day 6 records" in prompt
    assert "day 0 records" not in prompt and "day 11 records" not in prompt
    assert body["mode"] == "llm" and body["citations"][0]["doc_id"] == "log"


def test_answers_cut_at_max_tokens_do_not_open_the_circuit_breaker(
    tmp_path: Path,
    embedder: SentenceTransformerEmbedder,
    sample_docs: list[Document],
    fake: tuple[ScriptedLLM, str],
) -> None:
    """A small model that runs long is answering, not failing: six truncations in a row (the
    breaker opens after five failures) and the seventh question still reaches the model."""
    llm, url = fake
    answer = "Everyone has the right to education [1]."
    llm.play(*[Step(words(answer), finish="length")] * 6, Step(words(answer)))
    settings = Settings(data_dir=tmp_path, llm={"base_url": f"{url}/v1"})
    with TestClient(create_app(settings, embedder=embedder)) as c:
        assert (
            c.post("/v1/documents", json={"documents": [doc_json(d) for d in sample_docs]}).status_code == 200
        )
        bodies = [c.post("/v1/answer", json={"query": "right to education?"}).json() for _ in range(7)]
    assert [b["mode"] for b in bodies] == ["extractive"] * 6 + ["llm"] and len(llm.requests) == 7

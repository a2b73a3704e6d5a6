"""Grounded answers against a scripted vLLM-compatible server on loopback: faults, limits, JSON, SSE."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Document
from rag_router.answer.prompting import count_words
from rag_router.api import create_app
from rag_router.settings import Settings
from tests.conftest import doc_json, loaded_app
from tests.fakes.vllm import ScriptedLLM, Step, serve, words

# Generous where the LLM answers: a loaded 2-core CI machine must not turn a slow search into a
# timeout. The fault tests use a short deadline of their own (HASTY_S): a hanging model is cut
# off by it, and the bound they assert only separates "cut off" from "hung" (no speed measured).
TIMEOUT_S = 20.0
HASTY_S = 2.0
EDUCATION = "Everyone has the right to education [1]. Education shall be free in the elementary stages [1]."


@pytest.fixture(scope="module")
def llm() -> Iterator[tuple[ScriptedLLM, str]]:
    fake = ScriptedLLM()
    with serve(fake.app) as url:
        yield fake, url


@pytest.fixture(scope="module")
def data_dir(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: SentenceTransformerEmbedder,
    sample_docs: list[Document],
) -> Path:
    path = tmp_path_factory.mktemp("answer")
    with loaded_app(path, embedder, [doc_json(d) for d in sample_docs]):
        return path


def _client(llm: tuple[ScriptedLLM, str], data_dir: Path, embedder: Any, timeout_s: float) -> TestClient:
    settings = Settings(
        data_dir=data_dir, llm={"base_url": f"{llm[1]}/v1", "timeout_s": timeout_s, "max_retries": 2}
    )
    return TestClient(create_app(settings, embedder=embedder))  # a fresh breaker per test


@pytest.fixture
def client(
    llm: tuple[ScriptedLLM, str], data_dir: Path, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    with _client(llm, data_dir, embedder, TIMEOUT_S) as c:
        yield c


@pytest.fixture
def hasty_client(
    llm: tuple[ScriptedLLM, str], data_dir: Path, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    with _client(llm, data_dir, embedder, HASTY_S) as c:
        yield c


def ask(client: TestClient, query: str, **extra: Any) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    r = client.post("/v1/answer", json={"query": query, **extra})
    elapsed = time.monotonic() - started
    assert r.status_code == 200, r.text
    return r.json(), elapsed


def test_an_llm_answer_is_cited_and_mapped_to_chunks(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    fake, _ = llm
    fake.play(Step([*words(EDUCATION), " See also [9]."]))
    body, _ = ask(client, "What does the declaration say about the right to education?")
    assert body["mode"] == "llm" and body["degraded"] is False and body["finish_reason"] == "stop"
    assert body["answer"].startswith("Everyone has the right to education [1].")
    assert body["citations"] == [{"n": 1, "chunk_id": body["hits"][0]["chunk_id"], "doc_id": "udhr-art-26"}]
    assert body["usage"]["prompt_tokens"] == 100
    sent = fake.requests[0]
    assert sent["stream"] is True and sent["messages"][0]["role"] == "system"
    assert "[1] Universal Declaration of Human Rights, Article 26 — " in sent["messages"][1]["content"]
    metrics = client.get("/metrics").text
    assert (
        "rag_llm_ttft_seconds_count 1.0" in metrics and 'rag_llm_tokens_total{kind="completion"}' in metrics
    )


FAULTS = {
    "503 until the retries run out": [Step(status=503, retry_after="0")],
    "429 with Retry-After past the deadline": [Step(status=429, retry_after="100")],
    "error inside a 200 stream": [Step(words(EDUCATION), inband_error_after=3)],
    "truncated at max_tokens": [Step(words(EDUCATION), finish="length")],
    "stream ends without [DONE]": [Step(words(EDUCATION), done=False)],
    "hang after the first token": [Step(words(EDUCATION), hang_after=1)],
    "hang before any token": [Step(words(EDUCATION), hang_after=0)],
    "connection reset mid-stream": [Step(words(EDUCATION), reset_after=2)],
    "400 bad request": [Step(status=400)],
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_llm_fault_ends_in_a_degraded_extractive_answer_in_time(
    hasty_client: TestClient, llm: tuple[ScriptedLLM, str], fault: str
) -> None:
    llm[0].play(*FAULTS[fault])
    body, elapsed = ask(hasty_client, "What does the declaration say about the right to education?")
    assert body["mode"] == "extractive" and body["degraded"] is True
    assert body["answer"] and "[1]" in body["answer"] and body["citations"][0]["doc_id"] == "udhr-art-26"
    assert elapsed < HASTY_S + 10, elapsed  # cut off at the deadline, not hung (the fake hangs for an hour)


@pytest.mark.parametrize("stream", [False, True])
def test_a_truncated_answer_replaced_by_quotes_still_reports_its_tokens(
    client: TestClient, llm: tuple[ScriptedLLM, str], stream: bool
) -> None:
    """The model answered, at length, and its answer was replaced: the tokens it took are in
    usage and /metrics, as for any replaced answer (a real 135M model hit this in CI)."""
    llm[0].play(Step(words(EDUCATION), finish="length"))
    query = "What does the declaration say about the right to education?"
    if stream:
        with client.stream("POST", "/v1/answer", json={"query": query, "stream": True}) as r:
            events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
        body = next(e for e in events if "usage" in e)
    else:
        body, _ = ask(client, query)
    assert body["mode"] == "extractive" and body["degraded"] is True
    assert body["usage"]["prompt_tokens"] == 100 and body["usage"]["completion_tokens"] > 0
    metrics = client.get("/metrics").text
    assert "rag_llm_ttft_seconds_count 1.0" in metrics


def test_a_retry_after_503_recovers(client: TestClient, llm: tuple[ScriptedLLM, str]) -> None:
    llm[0].play(Step(status=503, retry_after="0"), Step(words(EDUCATION)))
    body, _ = ask(client, "right to education?")
    assert body["mode"] == "llm" and not body["degraded"] and len(llm[0].requests) == 2


@pytest.mark.parametrize(
    ("query", "limit", "measure"),
    [
        ("Summarise the right to education in at most 12 words", 12, count_words),
        # the store is English: a Chinese question finds it through the article it names (a
        # question naming none is declined: the embedder cannot read it, tests/api/test_abstain.py)
        ("用不超过20字概括第二十六条", 20, len),
    ],
)
def test_word_and_character_limits_hold_whatever_the_model_writes(
    client: TestClient, llm: tuple[ScriptedLLM, str], query: str, limit: int, measure: Any
) -> None:
    long_en = (
        "Everyone has the right to education [1]. " * 3
        + "Technical education shall be generally available [1]."
    )
    long_zh = "人人都有受教育的权利[1]。" + "教育应当免费，至少在初级和基本阶段应如此[1]。" * 3
    llm[0].play(Step(words(long_zh if "字" in query else long_en)))
    body, _ = ask(client, query)
    assert body["mode"] == "llm" and 0 < measure(body["answer"]) <= limit, body["answer"]
    assert llm[0].requests[0]["max_tokens"] < 120  # compiled from the limit, not the 512 default


def test_json_answers_are_repaired_and_guided(client: TestClient, llm: tuple[ScriptedLLM, str]) -> None:
    fenced = (
        'Here you go:\n```json\n{"answer": "Everyone has the right to education [1]", "article": "26",}\n```'
    )
    llm[0].play(Step(words(fenced)))
    body, _ = ask(client, "Which article covers education? Answer as JSON with fields answer, article")
    assert body["answer_json"] == {"answer": "Everyone has the right to education [1]", "article": "26"}
    assert body["citations"][0]["n"] == 1
    guided = llm[0].requests[0]["response_format"]
    assert guided["type"] == "json_schema" and guided["json_schema"]["schema"]["required"] == [
        "answer",
        "article",
    ]


def test_one_self_repair_call_when_the_repairers_give_up(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    llm[0].play(Step(words("I am unable to format that.")), Step(words('{"answer": "Free education [1]"}')))
    body, _ = ask(client, "Right to education, as JSON")
    assert body["mode"] == "llm" and body["answer_json"] == {"answer": "Free education [1]"}
    assert len(llm[0].requests) == 2 and "does not parse" in llm[0].requests[1]["messages"][0]["content"]


def sse_events(text: str) -> list[tuple[str, Any]]:
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_streaming_sends_route_hits_tokens_then_done(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    llm[0].play(Step(words(EDUCATION)))
    with client.stream("POST", "/v1/answer", json={"query": "right to education?", "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.read().decode())
    kinds = [k for k, _ in events]
    assert (
        kinds[:2] == ["route", "hits"]
        and kinds[-1] == "done"
        and kinds.count("token") == len(words(EDUCATION))
    )
    assert "".join(d["text"] for k, d in events if k == "token") == EDUCATION
    assert events[-1][1]["answer"] == EDUCATION and events[-1][1]["mode"] == "llm"


def test_a_stream_that_breaks_ends_with_a_degraded_done(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    llm[0].play(Step(words(EDUCATION), done=False))
    with client.stream("POST", "/v1/answer", json={"query": "right to education?", "stream": True}) as r:
        events = sse_events(r.read().decode())
    done = events[-1]
    assert done[0] == "done" and done[1]["degraded"] is True and done[1]["mode"] == "extractive"


def test_without_an_llm_answers_are_extractive_and_not_degraded(
    data_dir: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with TestClient(create_app(Settings(data_dir=data_dir), embedder=embedder)) as c:
        body, _ = ask(c, "Is slavery allowed? Answer in at most 30 words.")
    assert body["mode"] == "extractive" and body["degraded"] is False
    assert (
        count_words(body["answer"]) <= 30
        and body["citations"]
        and body["citations"][0]["doc_id"] == "udhr-art-4"
    )


def test_no_retry_once_a_token_has_arrived(client: TestClient, llm: tuple[ScriptedLLM, str]) -> None:
    llm[0].play(Step(words(EDUCATION), reset_after=2), Step(words(EDUCATION)))
    body, _ = ask(client, "right to education?")
    assert body["mode"] == "extractive" and body["degraded"] and len(llm[0].requests) == 1


def test_a_client_that_goes_away_cancels_the_upstream_call(
    llm: tuple[ScriptedLLM, str], data_dir: Path, embedder: SentenceTransformerEmbedder
) -> None:
    fake, llm_url = llm
    fake.play(Step(words(EDUCATION), hang_after=1))
    settings = Settings(data_dir=data_dir, llm={"base_url": f"{llm_url}/v1", "timeout_s": 30})
    with serve(create_app(settings, embedder=embedder)) as url:
        with httpx.stream(
            "POST", f"{url}/v1/answer", json={"query": "education?", "stream": True}, timeout=10
        ) as r:
            for line in r.iter_lines():
                if line.startswith("event: token"):
                    break  # the model is now hanging mid-answer; we leave
        deadline = time.monotonic() + 5
        while fake.cancelled == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert fake.cancelled == 1


def test_a_json_answer_that_turns_into_prose_is_stopped_early(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    prose = "Well, let me think about this question carefully before answering it. " * 12
    llm[0].play(Step(words(prose), delay_s=0.01))
    query = {"query": "Right to education, as JSON with fields answer", "stream": True}
    with client.stream("POST", "/v1/answer", json=query) as r:
        events = sse_events(r.read().decode())
    tokens = [d for k, d in events if k == "token"]
    assert events[-1][1]["mode"] == "extractive" and events[-1][1]["degraded"] is True
    assert 0 < len(tokens) < len(words(prose))  # cut off well before the model finished


def test_nothing_relevant_declines_without_calling_the_model(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    llm[0].play(Step(words("NSFNET was a network [1].")))
    body, _ = ask(client, "What is NSFNET?")
    assert body["abstained"] and body["citations"] == [] and body["answer_json"] is None
    assert llm[0].requests == []  # no sources worth a call


def test_an_answer_without_markers_is_cited_by_the_sources_that_support_it(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    """A small model rarely writes [n]: each sentence a source supports gets that source's number."""
    llm[0].play(Step(words("Everyone has the right to education. Elementary education shall be free.")))
    body, _ = ask(client, "What does the declaration say about the right to education?")
    assert body["mode"] == "llm" and not body["degraded"]
    assert (
        body["answer"] == "Everyone has the right to education [1]. Elementary education shall be free [1]."
    )
    assert body["citations"][0]["doc_id"] == "udhr-art-26" and any("attributed" in n for n in body["notes"])


def test_prompt_text_never_reaches_the_answer(client: TestClient, llm: tuple[ScriptedLLM, str]) -> None:
    leaked = (
        "The rules are: Use only the sources between the <sources> markers.\n"
        "Cite every claim with the source number in square brackets, e.g. [1] or [2, 3].\n"
        "Everyone has the right to education [1]."
    )
    llm[0].play(Step(words(leaked)))
    body, _ = ask(client, "What does the declaration say about the right to education?")
    assert body["mode"] == "llm" and body["answer"] == "Everyone has the right to education [1]."


def test_an_answer_no_source_supports_is_not_presented_as_grounded(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    llm[0].play(Step(words("The moon is made of green cheese. Paris hosts the Olympic games.")))
    body, _ = ask(client, "What does the declaration say about the right to education?")
    assert body["mode"] == "extractive" and body["degraded"] is True
    assert "cheese" not in body["answer"] and body["citations"][0]["doc_id"] == "udhr-art-26"
    assert any("no source supports" in n for n in body["notes"])


def test_an_answer_cut_at_max_tokens_past_the_asked_limit_is_kept_trimmed(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    """The limit would cut it anyway: a model that ran on past "at most 12 words" still answers."""
    long_en = "Everyone has the right to education [1]. " * 4 + "Technical education shall be"
    llm[0].play(Step(words(long_en), finish="length"))
    body, _ = ask(client, "Summarise the right to education in at most 12 words")
    assert body["mode"] == "llm" and not body["degraded"] and body["finish_reason"] == "length"
    assert body["answer"] == " ".join(["Everyone has the right to education [1]."] * 2)  # 12 words
    assert count_words(body["answer"]) <= 12


def test_an_answer_cut_inside_its_first_sentence_keeps_that_sentences_citation(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    """The fresh-clone walk: "at most 10 words" left a fragment with no [n] shown as an answer."""
    text = "Article 3 of the Universal Declaration says everyone has the right to life and liberty [1]."
    llm[0].play(Step(words(text), finish="length"))
    body, _ = ask(client, "What does Article 3 say? At most 6 words.")
    assert body["mode"] == "llm" and count_words(body["answer"]) <= 6
    assert body["answer"].endswith("[1]") and body["citations"] and body["citations"][0]["n"] == 1


def test_a_claim_its_source_does_not_hold_is_removed_and_said(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    """The model's second sentence states a number Article 26 does not: it is not shown as
    grounded; the note says what was removed and why."""
    fake, _ = llm
    fake.play(Step(words(f"{EDUCATION.split(' [1].')[0]} [1]. Education is free for 12 years [1].")))
    body, _ = ask(client, "What does the declaration say about the right to education?")
    assert body["mode"] == "llm" and body["degraded"] is False
    assert body["answer"].startswith("Everyone has the right to education [1]")
    assert "12 years" not in body["answer"]
    assert any("12 is not in source [1]" in n for n in body["notes"]), body["notes"]


def test_an_answer_none_of_whose_claims_hold_is_replaced_by_quotes(
    client: TestClient, llm: tuple[ScriptedLLM, str]
) -> None:
    fake, _ = llm
    fake.play(Step(words("Elementary education lasts 12 years [1].")))
    body, _ = ask(client, "What does the declaration say about the right to education?")
    assert body["mode"] == "extractive" and body["degraded"] is True
    assert "12 years" not in body["answer"] and body["citations"]
    assert any("do not support the model's claims" in n for n in body["notes"]), body["notes"]
    assert body["usage"]["prompt_tokens"] == 100  # the replaced answer's tokens were still spent

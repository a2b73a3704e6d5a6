"""The official openai client, unchanged, against our /v1/chat/completions on a real socket."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Document
from rag_router.api import create_app
from rag_router.settings import Settings
from tests.conftest import doc_json
from tests.fakes.vllm import ScriptedLLM, Step, serve, words

ANSWER = "No one shall be held in slavery or servitude [1]."
QUESTION = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Is slavery allowed?"}]


@pytest.fixture(scope="module")
def base_url(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: SentenceTransformerEmbedder,
    sample_docs: list[Document],
) -> Iterator[str]:
    fake = ScriptedLLM()
    fake.play(Step(words(ANSWER)))
    with serve(fake.app) as llm_url:
        settings = Settings(
            data_dir=Path(tmp_path_factory.mktemp("openai")), llm={"base_url": f"{llm_url}/v1"}
        )
        with serve(create_app(settings, embedder=embedder)) as url:
            docs = [doc_json(d) for d in sample_docs]
            assert httpx.post(f"{url}/v1/documents", json={"documents": docs}, timeout=60).status_code == 200
            yield f"{url}/v1"


def test_sync_client(base_url: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="unused")
    reply = client.chat.completions.create(model="rag-router", messages=QUESTION)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == ANSWER and reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.completion_tokens == len(words(ANSWER))
    rag = (reply.model_extra or {})["rag"]
    assert rag["mode"] == "llm" and rag["sources"][0]["doc_id"] == "udhr-art-4"


def test_streaming_client(base_url: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="unused")
    stream = client.chat.completions.create(model="rag-router", messages=QUESTION, stream=True)  # type: ignore[arg-type]
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == ANSWER and chunks[-1].choices[0].finish_reason == "stop"


def test_async_client(base_url: str) -> None:
    async def main() -> str | None:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="unused") as client:
            reply = await client.chat.completions.create(model="rag-router", messages=QUESTION)  # type: ignore[arg-type]
            return reply.choices[0].message.content

    assert asyncio.run(main()) == ANSWER


def test_a_request_without_a_user_message_is_a_422(base_url: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="rag-router", messages=[{"role": "system", "content": "hi"}])

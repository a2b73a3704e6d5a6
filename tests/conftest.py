"""Shared fixtures: one real embedding model per session, the sample corpus, temp data dirs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.ingest.load import load_paths
from indexers.records import Document, Vector
from indexers.text.lexical import Analyzer
from indexers.tiers.base import Tier
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.qdrant_edge import QdrantEdgeTier

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"

# A server started by a test records itself per user (rag_router.owner.user_file): in the suite's
# own state dir, so a test's server is never found by the user's commands, nor theirs by a test.
# Server subprocesses inherit it.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="rag-router-test-state-")


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The packaged all-MiniLM-L6-v2 on CPU: the real model, loaded once."""
    return SentenceTransformerEmbedder(device="cpu")


class CountingEmbedder:
    """Wraps the real embedder and counts what it is asked to embed."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.embedded: list[str] = []

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def embed(self, texts: Sequence[str]) -> Vector:
        self.embedded.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def counting_embedder(embedder: SentenceTransformerEmbedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


def doc_json(doc: Document) -> dict[str, Any]:
    """A document as the REST API takes it."""
    return {"id": doc.id, "text": doc.text, "title": doc.title, "metadata": dict(doc.metadata)}


@pytest.fixture(scope="session")
def sample_docs() -> list[Document]:
    docs = [d for d in load_paths([SAMPLE]) if isinstance(d, Document)]
    assert len(docs) == 33
    return docs


@pytest.fixture
async def tiers(tmp_path: Path) -> AsyncIterator[dict[str, Tier]]:
    a = Analyzer()
    made: dict[str, Tier] = {
        "hot": QdrantEdgeTier(tmp_path / "hot", dim=384, analyzer=a),
        "cold": LocalColdTier(tmp_path / "cold", dim=384, analyzer=a),
    }
    for t in made.values():
        await t.ensure()
    yield made
    for t in made.values():
        await t.close()


@contextmanager
def loaded_app(
    data_dir: Path, embedder: Any, documents: Sequence[dict[str, Any]], **settings: Any
) -> Iterator[Any]:
    """A TestClient over the real app with ``documents`` posted (the API tests' usual start)."""
    from fastapi.testclient import TestClient

    from rag_router.api import create_app
    from rag_router.settings import Settings

    with TestClient(create_app(Settings(data_dir=data_dir, **settings), embedder=embedder)) as client:
        r = client.post("/v1/documents", json={"documents": list(documents)})
        assert r.status_code == 200, r.text
        yield client


# A real model behind the answers: llama.cpp's server (xllamacpp) on the packaged SmolLM2-135M,
# started once per run on a free loopback port. One thread and OMP_WAIT_POLICY=passive
# (rag_router.cli.llm): a busy 2-core CI machine keeps 30-55 tokens/s where spinning OpenMP
# threads fell to ~1 token/s. Two slots of LLM_SLOT_CTX tokens: a test that leaves a generation
# running does not block the next one.
LLM_SLOT_CTX = 1024


@pytest.fixture(scope="session")
def real_llm() -> Iterator[Any]:
    from rag_router.cli.llm import LocalConfig, local_server, packaged_gguf
    from tests.fakes.vllm import free_port

    config = LocalConfig(
        model=packaged_gguf(), ctx=2 * LLM_SLOT_CTX, threads=1, parallel=2, port=free_port(), alias="smollm2"
    )
    with local_server(config) as running:
        yield running


PG_URL_ENV = "RAG_TEST_PG_URL"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database on the server RAG_TEST_PG_URL names (`.ci/postgres start`)."""
    import os
    import uuid

    base = os.environ.get(PG_URL_ENV)
    if not base:
        pytest.skip(f"{PG_URL_ENV} is not set: no PostgreSQL server (.ci/postgres start prints one)")
    import psycopg

    name = f"rag_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

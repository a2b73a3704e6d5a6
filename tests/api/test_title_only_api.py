"""A document with a title and no text goes in over POST /v1/documents and is found by its title,
in both embedded tiers; one with neither is refused with the envelope."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from rag_router.api import create_app
from rag_router.settings import Settings

TITLE = "Aerodynamic heating of blunt bodies at hypersonic speeds"
OTHERS = [
    {"id": "tide", "text": "Tide tables for the harbour are published every spring by the port office."},
    {"id": "bread", "text": "Sourdough bread rises slowly because wild yeast ferments the dough overnight."},
]


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path_factory.mktemp("title-only"))
    with TestClient(create_app(settings, embedder=embedder)) as c:
        yield c


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_a_title_only_document_is_stored_and_found_by_its_title(client: TestClient, tier: str) -> None:
    doc = {"id": f"cran-{tier}", "title": TITLE, "text": ""}
    stored = client.post("/v1/documents", json={"documents": [doc, *OTHERS], "tier": tier})
    assert stored.status_code == 200, stored.text
    assert stored.json()["results"][0]["status"] == "created"
    query = {"query": "hypersonic heating of blunt bodies", "route": tier}
    hits = client.post("/v1/search", json=query).json()["hits"]
    assert hits[0]["doc_id"] == f"cran-{tier}"
    got = client.get(f"/v1/documents/cran-{tier}").json()
    assert got["title"] == TITLE


def test_a_document_with_neither_title_nor_text_is_a_422(client: TestClient) -> None:
    refused = client.post("/v1/documents", json={"documents": [{"id": "void", "text": "  ", "title": " "}]})
    assert refused.status_code == 422
    assert "title" in refused.json()["error"]["message"]

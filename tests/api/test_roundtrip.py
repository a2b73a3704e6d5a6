"""Property test: whatever a user stores comes back byte for byte (ends trimmed at most), in both
embedded tiers, through POST /v1/documents → GET /v1/documents/{id} → a search hit; ids with
"/", "%", spaces and CJK included."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexers.embed.embedder import SentenceTransformerEmbedder
from rag_router.api import create_app
from rag_router.settings import Settings

# Any Unicode a JSON body can carry (no lone surrogates), weighted towards what breaks text code:
# CJK and its punctuation, combining marks, odd spaces, line breaks, emoji.
TEXT = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=("Cs",)),
        st.sampled_from(list("。！？；，、「」《》\n\r\t \u3000\u00a0\u200b\u0301 éß数据保护第十条😀.!?#*")),
    ),
    min_size=1,
    max_size=300,
).filter(lambda t: t.strip())
IDS = st.text(alphabet=st.sampled_from(list("ab/%_ -.数据Zé09")), min_size=1, max_size=24).filter(
    lambda i: not any(part in (".", "..") for part in i.split("/"))  # refused: see the test below
)


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[httpx.Client]:
    """A real uvicorn server on loopback: TestClient decodes a path twice ("%2500" → NUL)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("roundtrip")), embedder=embedder)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(1200):  # the lifespan opens the tiers first
        if server.started:
            break
        time.sleep(0.05)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
        yield c
    server.should_exit = True
    thread.join(30)


@pytest.mark.parametrize("tier", ["hot", "cold"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc_id=IDS, text=TEXT, title=st.one_of(st.none(), TEXT))
def test_stored_text_comes_back_byte_for_byte(
    client: httpx.Client, tier: str, doc_id: str, text: str, title: str | None
) -> None:
    posted = client.post(
        "/v1/documents", json={"documents": [{"id": doc_id, "text": text, "title": title}], "tier": tier}
    )
    assert posted.status_code == 200, posted.text
    assert posted.json()["results"][0]["status"] != "failed", posted.text
    got = client.get(f"/v1/documents/{quote(doc_id, safe='')}")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["id"] == doc_id and body["tiers"] == [tier] and body["title"] == title
    assert body["text"] == text  # byte for byte, the whitespace around it too
    chunks = [c["text"] for c in body["chunks"]]
    assert all(c.strip() and c in text for c in chunks)  # every chunk is a slice of the text
    hits = client.post(
        "/v1/search", json={"query": text[:200], "filters": {"doc_id": [doc_id]}, "route": tier, "top_k": 5}
    ).json()["hits"]
    assert {h["text"] for h in hits} <= set(chunks)
    assert client.delete(f"/v1/documents/{quote(doc_id, safe='')}").status_code == 200
    assert client.get(f"/v1/documents/{quote(doc_id, safe='')}").status_code == 404


@pytest.mark.parametrize("doc_id", [".", "..", "a/../b", "reports/./q1"])
def test_an_id_that_a_url_cannot_address_is_refused(client: httpx.Client, doc_id: str) -> None:
    r = client.post("/v1/documents", json={"documents": [{"id": doc_id, "text": "x"}]})
    assert r.status_code == 422 and "path segment" in r.json()["error"]["message"]


@pytest.mark.parametrize("doc_id", ["tab\tid", "line\nbreak", "nul\x00id", "del\x7fid"])
def test_an_id_with_a_control_character_is_refused(client: httpx.Client, doc_id: str) -> None:
    """A NUL cannot be typed as a command-line argument; a tab or line break splits a line of
    `documents list`: such a document could be stored but never be named again."""
    r = client.post("/v1/documents", json={"documents": [{"id": doc_id, "text": "x"}]})
    assert r.status_code == 422 and "control characters" in r.json()["error"]["message"]


def test_the_readme_file_id_is_fetched_and_deleted_with_or_without_escaping(client: httpx.Client) -> None:
    doc = {"id": "reports/2024/q1.pdf", "text": "Quarterly report.", "title": "Q1"}
    assert client.post("/v1/documents", json={"documents": [doc]}).status_code == 200
    assert client.get("/v1/documents/reports/2024/q1.pdf").json()["id"] == "reports/2024/q1.pdf"
    assert client.get("/v1/documents/reports%2F2024%2Fq1.pdf").status_code == 200
    assert client.delete("/v1/documents/reports/2024/q1.pdf").json()["deleted_chunks"] == 1
    missing = client.get("/v1/documents/reports/2024/q1.pdf")
    assert missing.status_code == 404 and "reports/2024/q1.pdf" in missing.json()["error"]["message"]
    unknown = client.get("/v1/nothing-here")
    assert unknown.status_code == 404 and "GET /v1/nothing-here" in unknown.json()["error"]["message"]

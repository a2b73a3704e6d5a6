"""The REST contract of API.md, through the real app, engines and model."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Document
from indexers.tiers.query import Filters
from rag_router.api import create_app
from rag_router.search.flow import Searcher, SearchParams
from rag_router.search.route import Policy
from rag_router.settings import Settings
from tests.conftest import doc_json, loaded_app

HIT_FIELDS = {"chunk_id", "doc_id", "title", "text", "score", "tier", "metadata", "legs", "relevant"}


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: SentenceTransformerEmbedder,
    sample_docs: list[Document],
) -> Iterator[TestClient]:
    docs = [doc_json(d) for d in sample_docs]
    with loaded_app(tmp_path_factory.mktemp("api"), embedder, docs, max_body_bytes=64 * 1024) as c:
        yield c


def assert_envelope(r: Any, status: int, mentions: str) -> None:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"code", "message", "type", "request_id"}
    assert mentions.lower() in err["message"].lower()
    assert err["request_id"] == r.headers["x-request-id"]


def test_health_ready_metrics(client: TestClient, sample_docs: list[Document]) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    backends = ready.json()["backends"]
    assert backends["hot"]["ok"] is True and backends["hot"]["engine"] == "qdrant-edge"
    assert backends["cold"]["ok"] and set(backends) == {"hot", "cold", "llm", "embedder"}
    stored = sum(len(client.get(f"/v1/documents/{d.id}").json()["chunks"]) for d in sample_docs)
    assert backends["hot"]["chunks"] + backends["cold"]["chunks"] == stored > 0
    client.post("/v1/search", json={"query": "slavery"})
    metrics = client.get("/metrics").text
    assert 'rag_route_decisions_total{tiers="hot+cold"}' in metrics


def test_request_ids_are_echoed_or_made_and_every_request_is_counted(client: TestClient) -> None:
    given = client.post("/v1/search", json={"query": "slavery"}, headers={"x-request-id": "trace-42"})
    assert given.headers["x-request-id"] == "trace-42" == given.json()["request_id"]
    made = [client.post("/v1/search", json={"query": "slavery"}).headers["x-request-id"] for _ in range(2)]
    assert made[0] != made[1] and all(len(m) == 24 for m in made)
    assert client.post("/v1/search", json={}).status_code == 422
    metrics = client.get("/metrics").text
    assert 'rag_http_requests_total{route="/v1/search",status="200"}' in metrics
    assert 'rag_http_requests_total{route="/v1/search",status="422"}' in metrics


def test_search_response_has_every_field(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "Is everyone equal before the law?", "top_k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"hits", "route", "timings_ms", "degraded", "unavailable", "request_id"}
    assert len(body["hits"]) == 3
    assert all(set(h) == HIT_FIELDS for h in body["hits"])
    top = body["hits"][0]
    assert top["doc_id"] == "udhr-art-7" and top["tier"] == "cold"
    assert {"cold.dense", "cold.lexical"} <= set(top["legs"])
    assert set(body["route"]) == {"tiers", "reason", "features", "filters", "missing"}
    assert body["route"]["missing"] is None  # no clause named: nothing can be missing
    assert body["route"]["tiers"] == ["hot", "cold"]
    assert {"features", "embed", "hot", "cold", "fuse", "fetch", "total"} <= set(body["timings_ms"])
    assert body["degraded"] is False and body["unavailable"] == []


def test_placement_by_date_and_routes(client: TestClient) -> None:
    hot = client.post("/v1/search", json={"query": "tiers", "route": "hot"}).json()
    assert hot["hits"] and all(h["tier"] == "hot" and h["doc_id"].startswith("notes-") for h in hot["hits"])
    cold = client.post("/v1/search", json={"query": "tiers", "route": "cold"}).json()
    assert cold["hits"] and all(h["tier"] == "cold" and h["doc_id"].startswith("udhr-") for h in cold["hits"])


def test_filters_are_applied_and_echoed(client: TestClient) -> None:
    body = {"query": "rights", "filters": {"article": [3, 9], "year": {"gte": 1900, "lte": 1950}}}
    r = client.post("/v1/search", json=body).json()
    assert {h["doc_id"] for h in r["hits"]} == {"udhr-art-3", "udhr-art-9"}
    assert r["route"]["filters"] == {"article": ["3", "9"], "year": {"gte": 1900, "lte": 1950}}
    dated = client.post(
        "/v1/search", json={"query": "rights", "filters": {"date": {"gte": "2026-01-01"}}}
    ).json()
    assert dated["hits"] and all(h["metadata"]["date"] >= "2026-01-01" for h in dated["hits"])


def test_legs_can_be_restricted(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "asylum", "legs": ["lexical"]}).json()
    assert r["hits"] and all(set(h["legs"]) <= {"hot.lexical", "cold.lexical"} for h in r["hits"])


@pytest.mark.parametrize(
    ("body", "status", "mentions"),
    [
        ({"query": ""}, 422, "query"),
        ({"query": "   "}, 422, "query"),
        ({"query": "x", "top_k": 0}, 422, "top_k"),
        ({"query": "x", "top_k": 101}, 422, "top_k"),
        ({"query": "x", "colour": "red"}, 422, "colour"),
        ({"query": "x", "route": "warm"}, 422, "route"),
        ({"query": "x", "filters": {"color": "red"}}, 422, "color"),
        ({"query": "x", "filters": {"year": "recent"}}, 422, "year"),
        ({"query": "x", "filters": {"date": {"after": "2020-01-01"}}}, 422, "date"),
        ({"query": "x", "filters": {"date": {"gte": "yesterday"}}}, 422, "date"),
        ({"query": "x", "filters": {"tags": []}}, 422, "tags"),
    ],
)
def test_bad_search_input_is_a_clear_4xx(
    client: TestClient, body: dict[str, Any], status: int, mentions: str
) -> None:
    assert_envelope(client.post("/v1/search", json=body), status, mentions)


def test_a_chat_message_longer_than_a_query_is_a_422_not_a_500(client: TestClient) -> None:
    body = {"messages": [{"role": "user", "content": "word " * 1000}]}
    assert_envelope(client.post("/v1/chat/completions", json=body), 422, "at most 4096")


def test_invalid_json_and_oversized_body(client: TestClient) -> None:
    r = client.post("/v1/search", content=b'{"query": ', headers={"content-type": "application/json"})
    assert_envelope(r, 422, "the body is not valid JSON at character 10")
    assert r.json()["error"]["code"] == "invalid_json"
    latin1 = client.post(
        "/v1/search", content=b'{"query": "caf\xe9"}', headers={"content-type": "application/json"}
    )
    assert_envelope(latin1, 422, "not UTF-8")
    assert latin1.json()["error"]["code"] == "invalid_json"
    huge = json.dumps({"query": "x" * 70_000})
    assert_envelope(
        client.post("/v1/search", content=huge, headers={"content-type": "application/json"}), 413, "bytes"
    )


def test_a_date_that_is_no_date_is_refused_not_read_as_undated(client: TestClient) -> None:
    r = client.post(
        "/v1/documents", json={"documents": [{"id": "d", "text": "x", "metadata": {"date": "yesterday"}}]}
    )
    assert_envelope(r, 422, "metadata.date must be an ISO date")
    assert client.get("/v1/documents/d").status_code == 404


def test_bad_documents_change_nothing(client: TestClient) -> None:
    before = client.get("/v1/documents/udhr-art-1").json()
    for body in (
        {"documents": []},
        {"documents": [{"text": "  "}]},
        {"documents": [{"id": "udhr-art-1", "text": "replaced", "extra": 1}]},
        {"documents": [{"id": "udhr-art-1", "text": "replaced"}], "tier": "lukewarm"},
        {"documents": [{"id": "udhr-art-1", "text": "replaced", "metadata": {"date": "yesterday"}}]},
    ):
        r = client.post("/v1/documents", json=body)
        assert r.status_code == 422, r.text
    assert client.get("/v1/documents/udhr-art-1").json() == before


def test_document_lifecycle(client: TestClient) -> None:
    doc = {
        "id": "memo-1",
        "text": "The quarterly compliance memo covers encryption at rest.",
        "title": "Memo",
        "metadata": {"date": "2026-11-01", "tags": ["memo"]},
    }
    first = client.post("/v1/documents", json={"documents": [doc]}).json()["results"][0]
    assert first == {"id": "memo-1", "status": "created", "chunks": 1, "tier": "hot", "error": None}
    again = client.post("/v1/documents", json={"documents": [doc]}).json()["results"][0]
    assert again["status"] == "unchanged"
    got = client.get("/v1/documents/memo-1").json()
    assert got["tiers"] == ["hot"] and got["chunks"][0]["chunk_id"] == "memo-1#0"
    hit = client.post("/v1/search", json={"query": "encryption at rest memo", "top_k": 1}).json()["hits"][0]
    assert hit["doc_id"] == "memo-1"
    moved = client.post("/v1/documents", json={"documents": [doc], "tier": "cold"}).json()["results"][0]
    assert moved["status"] == "updated" and moved["tier"] == "cold"
    assert client.get("/v1/documents/memo-1").json()["tiers"] == ["cold"]
    assert client.delete("/v1/documents/memo-1").status_code == 200
    assert_envelope(client.get("/v1/documents/memo-1"), 404, "memo-1")
    hits = client.post("/v1/search", json={"query": "encryption at rest memo"}).json()["hits"]
    assert all(h["doc_id"] != "memo-1" for h in hits)


def test_too_many_documents_is_413(client: TestClient) -> None:
    docs = [{"text": f"d{i}"} for i in range(300)]
    assert_envelope(client.post("/v1/documents", json={"documents": docs}), 413, "at most")


def test_api_keys_and_tenants(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=["k-default", "acme:k-acme"])  # type: ignore[list-item]
    with TestClient(create_app(settings, embedder=embedder)) as c:
        assert_envelope(c.post("/v1/search", json={"query": "x"}), 401, "api key")
        acme = {"Authorization": "Bearer k-acme"}
        doc = {"documents": [{"id": "a1", "text": "Acme's private pricing sheet."}]}
        assert c.post("/v1/documents", json=doc, headers=acme).status_code == 200
        own = c.post("/v1/search", json={"query": "pricing sheet"}, headers=acme).json()["hits"]
        other = c.post(
            "/v1/search", json={"query": "pricing sheet"}, headers={"Authorization": "Bearer k-default"}
        )
        assert [h["doc_id"] for h in own] == ["a1"]
        assert other.json()["hits"] == []


def test_a_clause_reference_routes_to_that_article(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "What does Article 4 say?", "top_k": 3}).json()
    features = r["route"]["features"]
    assert set(features) == {
        "language",
        "years",
        "date_range",
        "clauses",
        "laws",
        "version",
        "identifiers",
        "quoted",
        "recency",
        "domain",
        "searched_text",
        "instructions",
    }
    assert features["clauses"] == [
        {"text": "Article 4", "number": 4, "path": [4], "span": [10, 19], "kind": "article", "sub": None}
    ]
    assert r["route"]["filters"] == {"article": ["4"]}
    assert [h["doc_id"] for h in r["hits"]] == ["udhr-art-4"]
    assert "clause" in r["route"]["reason"]


def test_recency_keeps_to_hot_and_years_go_cold(client: TestClient) -> None:
    recent = client.post("/v1/search", json={"query": "latest release notes"}).json()
    assert recent["route"]["tiers"] == ["hot"] and all(h["tier"] == "hot" for h in recent["hits"])
    old = client.post("/v1/search", json={"query": "rights proclaimed in 1948"}).json()
    # an implied year is soft: undated documents (placed hot) pass it, so hot is searched too
    assert old["route"]["tiers"] == ["hot", "cold"] and old["route"]["filters"] == {
        "year": {"gte": 1948, "lte": 1948, "or_missing": True}
    }
    assert old["hits"] and all(h["metadata"]["year"] == 1948 for h in old["hits"])


def test_implied_filters_that_find_nothing_are_dropped_explicit_ones_are_not(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "Article 99 on freedom of religion"}).json()
    assert "dropped" in r["route"]["reason"] and r["route"]["filters"] == {}
    assert r["hits"][0]["doc_id"] == "udhr-art-18"
    explicit = client.post(
        "/v1/search", json={"query": "freedom of religion", "filters": {"article": 99}}
    ).json()
    assert explicit["hits"] == [] and explicit["route"]["filters"] == {"article": ["99"]}
    wins = client.post("/v1/search", json={"query": "Article 18 religion", "filters": {"article": 3}}).json()
    assert "explicit article filter wins" in wins["route"]["reason"]
    assert {h["doc_id"] for h in wins["hits"]} == {"udhr-art-3"}


def test_cascade_skips_cold_only_when_hot_is_strong(client: TestClient) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]
    query = "How does rag-router place documents in the hot and cold tiers?"

    def searcher(threshold: float) -> Searcher:
        return Searcher(
            embedder=services.embed_worker,
            analyzer=services.analyzer,
            tiers=services.tiers,
            metrics=services.metrics,
            policy=Policy(cascade_min_score=threshold),
        )

    assert client.portal is not None  # the app's own event loop
    strong = client.portal.call(searcher(0.2).search, SearchParams(query, filters=Filters("default")))
    assert strong.tiers == ["hot"] and "cold skipped" in "; ".join(strong.reasons)
    assert all(h.tier == "hot" for h in strong.hits)
    weak = client.portal.call(searcher(0.99).search, SearchParams(query, filters=Filters("default")))
    assert weak.tiers == ["hot", "cold"] and "cold searched too" in "; ".join(weak.reasons)
    assert {h.tier for h in weak.hits} == {"hot", "cold"}


def test_a_filter_that_finds_nothing_in_the_routed_tier_widens_to_both_first(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "latest reading of Article 4", "top_k": 1}).json()
    assert "widened to hot and cold" in r["route"]["reason"]
    assert r["route"]["filters"] == {"article": ["4"]} and r["hits"][0]["doc_id"] == "udhr-art-4"


def test_a_sub_level_that_matches_nothing_is_dropped_before_the_article(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "Article 4, Section 2", "top_k": 2}).json()
    assert "dropped section" in r["route"]["reason"]
    assert r["route"]["filters"] == {"article": ["4"]} and [h["doc_id"] for h in r["hits"]] == ["udhr-art-4"]


def test_the_law_named_at_a_clause_filters_and_is_dropped_before_the_article(client: TestClient) -> None:
    r = client.post("/v1/search", json={"query": "What does Article 4 of the UDHR say?", "top_k": 2}).json()
    assert r["route"]["features"]["laws"] == [{"text": "UDHR", "names": ["UDHR"], "span": [27, 31]}]
    assert r["route"]["filters"] == {"article": ["4"], "law": ["UDHR"]}
    assert [h["doc_id"] for h in r["hits"]] == ["udhr-art-4"] and "dropped" not in r["route"]["reason"]
    # the sample holds no ECHR: the law goes first, the article stays
    r = client.post("/v1/search", json={"query": "ECHR Article 4 slavery", "top_k": 2}).json()
    assert "dropped law" in r["route"]["reason"]
    assert r["route"]["filters"] == {"article": ["4"]} and [h["doc_id"] for h in r["hits"]] == ["udhr-art-4"]


def test_a_chinese_clause_query_finds_its_english_article(client: TestClient) -> None:
    """No word of "第二十六条说了什么" is in the English text, and the packaged embedder reads English
    only: its dense leg, at weight 0, still lists what the article filter lets through."""
    r = client.post("/v1/search", json={"query": "第二十六条说了什么？", "top_k": 3}).json()
    assert r["route"]["filters"] == {"article": ["26"]} and "dense weight 0" in r["route"]["reason"]
    assert [h["doc_id"] for h in r["hits"]] == ["udhr-art-26"]


def test_query_then_fetch_hydrates_only_the_kept_hits_and_drops_deleted_ones(client: TestClient) -> None:
    """Tiers return ids and scores; only the fused top-k are fetched, each from its best tier."""
    services = client.app.state.services  # type: ignore[attr-defined]
    asked: list[tuple[str, int]] = []

    class Spy:
        def __init__(self, name: str, tier: Any) -> None:
            self.name, self.tier = name, tier

        def __getattr__(self, attr: str) -> Any:
            return getattr(self.tier, attr)

        async def hydrate(self, refs: Any) -> Any:
            asked.append((self.name, len(refs)))
            found = await self.tier.hydrate(refs)  # the first hit's chunk was deleted since the search:
            return {r: c for r, c in found.items() if r != refs[0]}

    searcher = Searcher(
        embedder=services.embed_worker,
        analyzer=services.analyzer,
        tiers={name: Spy(name, t) for name, t in services.tiers.items()},
        metrics=services.metrics,
        policy=Policy(),
    )
    assert client.portal is not None
    params = SearchParams(
        "right to education and free elementary schooling", top_k=4, route="both", filters=Filters("default")
    )
    out = client.portal.call(searcher.search, params)
    assert asked and all(n <= 4 for _, n in asked)  # never the 2 × 100 candidates
    assert {name for name, _ in asked} <= {"hot", "cold"}
    full = client.post(
        "/v1/search", json={"query": params.query, "top_k": 4, "route": "both", "rerank": False}
    ).json()
    expected = [h["chunk_id"] for h in full["hits"]]
    assert len(out.hits) == 4 - len(asked)  # one dropped per tier asked
    assert [h.chunk_id for h in out.hits] == [c for c in expected if c in {h.chunk_id for h in out.hits}]


def test_a_tier_that_fails_to_fetch_its_hits_degrades_the_answer(client: TestClient) -> None:
    services = client.app.state.services  # type: ignore[attr-defined]

    class Broken:
        def __init__(self, tier: Any) -> None:
            self.tier = tier

        def __getattr__(self, attr: str) -> Any:
            return getattr(self.tier, attr)

        async def hydrate(self, refs: Any) -> Any:
            raise ConnectionError("the cold tier went away after the search")

    searcher = Searcher(
        embedder=services.embed_worker,
        analyzer=services.analyzer,
        tiers={"hot": services.tiers["hot"], "cold": Broken(services.tiers["cold"])},
        metrics=services.metrics,
        policy=Policy(),
    )
    assert client.portal is not None
    params = SearchParams(
        "How does rag-router place documents in the hot and cold tiers?",
        route="both",
        filters=Filters("default"),
    )
    out = client.portal.call(searcher.search, params)
    assert out.degraded and out.unavailable == ["cold"]
    assert out.hits and all(h.tier == "hot" for h in out.hits)  # hot's hits stay, cold's are dropped


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_pages_need_no_network(client: TestClient, page: str) -> None:
    """Every script, style and image the page references is served by the service itself."""
    html = client.get(page)
    assert html.status_code == 200 and "text/html" in html.headers["content-type"]
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*'([^']+)'""", html.text)
    urls = [a or b for a, b in refs]
    assert urls and not [u for u in urls if u.startswith(("http:", "https:", "//"))], urls
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200 and r.content, url
    assert client.get("/openapi.json").json()["info"]["title"] == "rag-router"


def test_a_request_deadline_bounds_every_stage_of_a_search(client: TestClient) -> None:
    """One deadline per request, carried in the parameters: past it, no stage waits."""
    import time

    from rag_router.errors import BackendUnavailable

    searcher = client.app.state.services.searcher  # type: ignore[attr-defined]
    assert client.portal is not None
    late = SearchParams(
        "a question never asked before, about asylum",
        deadline=time.monotonic() - 1,
        filters=Filters("default"),
    )
    with pytest.raises(BackendUnavailable):
        client.portal.call(searcher.search, late)
    on_time = SearchParams("asylum", deadline=time.monotonic() + 30, filters=Filters("default"))
    assert client.portal.call(searcher.search, on_time).hits

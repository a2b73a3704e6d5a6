"""The Elasticsearch adapter's requests, checked against the ES 8.x REST API, through an HTTP fake.

The real-server contract tests (tests/contract, ``RAG_TEST_ELASTIC_URL``) cover behaviour; these
cover the exact request bodies and the bulk error paths that a healthy server rarely shows.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import numpy as np
import pytest
from elasticsearch import AsyncElasticsearch
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Chunk, EmbeddedChunk, chunk_key
from indexers.tiers.base import TierError
from indexers.tiers.elastic import ElasticTier, index_template
from indexers.tiers.query import Filters, Range, SearchQuery
from rag_router.api import create_app
from rag_router.settings import Settings
from tests.fakes.elastic import FakeElastic
from tests.fakes.vllm import serve


@pytest.fixture(scope="module")
def fake_server() -> Iterator[tuple[FakeElastic, str]]:
    fake = FakeElastic()
    with serve(fake.app) as url:
        yield fake, url


@pytest.fixture
async def tier(fake_server: tuple[FakeElastic, str]) -> AsyncIterator[tuple[ElasticTier, FakeElastic]]:
    fake, url = fake_server
    fake.requests.clear()
    fake.bulk_script.clear()
    fake.index_exists = False
    t = ElasticTier(
        AsyncElasticsearch(url, retry_on_timeout=False, max_retries=0), index="rag-cold", dim=4, max_retries=2
    )
    yield t, fake
    await t.close()


def chunk(i: int, **meta: object) -> EmbeddedChunk:
    c = Chunk(f"d{i}#0", f"d{i}", 0, f"text {i}", "T", {"date": "2019-05-06", "article": 17, **meta})
    return EmbeddedChunk(c, np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32))


def test_the_index_template_is_the_documented_es8_shape() -> None:
    body = index_template("rag-cold", 384)
    assert body["index_patterns"] == ["rag-cold*"] and isinstance(body["priority"], int)
    settings, mappings = body["template"]["settings"], body["template"]["mappings"]
    props = mappings["properties"]
    assert props["vector"] == {
        "type": "dense_vector",
        "dims": 384,
        "index": True,
        "similarity": "cosine",
        "index_options": {"type": "int8_hnsw", "m": 16, "ef_construction": 100},
    }
    assert props["text"]["analyzer"] == "english" and props["text"]["fields"]["cjk"]["analyzer"] == "cjk"
    assert settings["analysis"]["analyzer"]["cjk"]["filter"] == ["cjk_width", "lowercase", "cjk_uni_bigram"]
    # Chinese as the embedded tiers analyse it: characters and bigrams
    assert settings["analysis"]["filter"]["cjk_uni_bigram"] == {"type": "cjk_bigram", "output_unigrams": True}
    assert {props[f]["type"] for f in ("tenant", "doc_id", "kw", "article", "section", "chapter")} == {
        "keyword"
    }
    assert props["year"]["type"] == "integer" and props["date"]["type"] == "date"
    assert props["metadata"] == {"type": "object", "enabled": False}


async def test_ensure_puts_the_template_then_creates_the_index(tier: tuple[ElasticTier, FakeElastic]) -> None:
    t, fake = tier
    await t.ensure()
    put = fake.calls("/_index_template/rag-cold-template")
    assert len(put) == 1 and put[0].method == "PUT" and put[0].body == index_template("rag-cold", 4)
    assert [(r.method, r.path) for r in fake.requests[1:]] == [("HEAD", "/rag-cold"), ("PUT", "/rag-cold")]


async def test_bulk_index_lines_ids_and_refresh(tier: tuple[ElasticTier, FakeElastic]) -> None:
    t, fake = tier
    await t.upsert([chunk(1), chunk(2, section="3.2")])
    (bulk,) = fake.calls("/_bulk")
    assert bulk.query.get("refresh") == "wait_for"
    assert bulk.body[0] == {"index": {"_index": "rag-cold", "_id": "default/d1#0"}}
    source = bulk.body[1]
    assert source["tenant"] == "default" and source["doc_id"] == "d1" and source["date"] == "2019-05-06"
    assert source["year"] == 2019 and source["article"] == "17" and "article=17" in source["kw"]
    assert source["vector"] == [0.5, 0.5, 0.5, 0.5] and bulk.body[3]["section"] == "3.2"


async def test_bulk_items_are_checked_one_by_one_and_429s_retried(
    tier: tuple[ElasticTier, FakeElastic],
) -> None:
    t, fake = tier
    fake.bulk_script[:] = [[201, 429, 400, 409], [201]]  # a 200 response with errors: true
    with pytest.raises(TierError, match="2 of 4 items failed") as failed:
        await t.upsert([chunk(i) for i in range(4)])
    assert "default/d2#0: 400" in str(failed.value) and "default/d3#0: 409" in str(failed.value)
    first, retry = fake.calls("/_bulk")
    assert len(first.body) == 8 and retry.body[::2] == [
        {"index": {"_index": "rag-cold", "_id": "default/d1#0"}}
    ]


async def test_a_429_that_clears_on_retry_is_success(tier: tuple[ElasticTier, FakeElastic]) -> None:
    t, fake = tier
    fake.bulk_script[:] = [[429, 201], [201]]
    await t.upsert([chunk(0), chunk(1)])
    assert len(fake.calls("/_bulk")) == 2


async def test_deleting_missing_ids_is_not_an_error(tier: tuple[ElasticTier, FakeElastic]) -> None:
    t, fake = tier
    fake.bulk_script[:] = [[200, 404]]
    await t.delete("default", ["d0#0", "gone#0"])
    (bulk,) = fake.calls("/_bulk")
    assert bulk.body == [
        {"delete": {"_index": "rag-cold", "_id": "default/d0#0"}},
        {"delete": {"_index": "rag-cold", "_id": "default/gone#0"}},
    ]


async def test_hybrid_search_is_one_msearch_with_the_same_filter_on_both_legs(
    tier: tuple[ElasticTier, FakeElastic],
) -> None:
    t, fake = tier
    fake.hits[:] = [
        {
            "tenant": "acme",
            "chunk_id": "d1#0",
            "doc_id": "d1",
            "n": 0,
            "text": "x",
            "title": None,
            "metadata": {},
            "content_hash": "h",
        }
    ]
    filters = Filters(
        tenant="acme",
        year=Range(gte=2019),
        date=Range(lte=dt.date(2020, 12, 31)),
        keywords={"article": ("17", "18")},
    )
    query = SearchQuery("right to erasure", ["right", "erasur"], np.ones(4, dtype=np.float32), filters, k=7)
    legs = await t.search(query)
    (msearch,) = fake.calls("/_msearch")
    header, lexical, header2, dense = msearch.body
    expected_filter = [
        {"term": {"tenant": "acme"}},
        {"terms": {"kw": ["article=17", "article=18"]}},
        {"range": {"year": {"gte": 2019}}},
        {"range": {"date": {"lte": "2020-12-31"}}},
    ]
    assert header == header2 == {"index": "rag-cold"}
    assert lexical["size"] == 7 and lexical["query"]["bool"]["filter"] == expected_filter
    assert lexical["query"]["bool"]["must"][0]["multi_match"]["query"] == "right to erasure"
    knn = dense["knn"]
    assert knn["field"] == "vector" and knn["k"] == 7 and knn["num_candidates"] >= 7
    assert knn["query_vector"] == [1.0] * 4 and knn["filter"] == expected_filter
    assert (
        [h.chunk.chunk_id for h in legs["lexical"]] == ["d1#0"] == [h.chunk.chunk_id for h in legs["dense"]]
    )
    (hit,) = legs["dense"]
    assert hit.key == chunk_key("acme", "d1#0") and hit.ref == "acme/d1#0"  # fusion key; ES _id
    chunks = await t.hydrate([hit.ref, "acme/deleted#0"])
    assert chunks == {"acme/d1#0": hit.chunk}  # a missing id is absent, not an error
    (mget,) = fake.calls("/_mget")
    assert mget.path == "/rag-cold/_mget" and mget.body["ids"] == ["acme/d1#0", "acme/deleted#0"]


async def test_a_query_space_filters_only_the_knn_leg(tier: tuple[ElasticTier, FakeElastic]) -> None:
    """A split embedder's query searches the chunks of its own model with kNN, all with BM25."""
    t, fake = tier
    filters = Filters(tenant="acme", keywords={"article": ("17",)})
    query = SearchQuery("第十七条", ["第十七条"], np.ones(4, dtype=np.float32), filters, k=3, space="zh")
    await t.search(query)
    (msearch,) = fake.calls("/_msearch")
    _, lexical, _, dense = msearch.body
    both = [{"term": {"tenant": "acme"}}, {"terms": {"kw": ["article=17"]}}]
    assert lexical["query"]["bool"]["filter"] == both
    assert dense["knn"]["filter"] == [*both, {"terms": {"kw": ["text_lang=zh"]}}]


def test_server_urls_switch_the_engines_without_code_changes(
    fake_server: tuple[FakeElastic, str], tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    """RAG_QDRANT__URL / RAG_ELASTIC__URL alone pick the server adapters; /readyz names them."""
    _, es_url = fake_server
    settings = Settings(data_dir=tmp_path, qdrant={"url": "http://127.0.0.1:9"}, elastic={"url": es_url})
    with TestClient(create_app(settings, embedder=embedder)) as client:
        ready = client.get("/readyz")
    backends = ready.json()["backends"]
    assert ready.status_code == 503  # no Qdrant server on port 9: not ready, but serving
    assert backends["hot"] == {"ok": False, "engine": "qdrant", "chunks": None}
    assert (backends["cold"]["ok"], backends["cold"]["engine"]) == (True, "elasticsearch")

"""One contract, every tier: the embedded engines here; server adapters join when they exist.

Each test gets a factory that opens the tier at a path, so reopen-after-close is tested
against the same files. Data is the sample corpus embedded by the real model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.records import Chunk, Document, EmbeddedChunk, chunk_key
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.base import Tier
from indexers.tiers.listing import DocumentPage, DocumentQuery
from indexers.tiers.local_cold import LocalColdTier
from indexers.tiers.qdrant_edge import QdrantEdgeTier
from indexers.tiers.query import Filters, Range, SearchQuery

ANALYZER = Analyzer()
Factory = Callable[..., Tier]


def qdrant_edge(path: Path, dim: int, **kw: object) -> Tier:
    return QdrantEdgeTier(
        path, dim=dim, analyzer=ANALYZER, indexing_threshold_kb=kw.get("small_index") and 64
    )  # type: ignore[arg-type]


def local_cold(path: Path, dim: int, **kw: object) -> Tier:
    return LocalColdTier(
        path, dim=dim, analyzer=ANALYZER, ivf_threshold=1000 if kw.get("small_index") else 200_000
    )


def local_cold_shards(path: Path, dim: int, **kw: object) -> Tier:
    """The embedded cold tier with its lexical index in three shards searched side by side."""
    return LocalColdTier(
        path,
        dim=dim,
        analyzer=ANALYZER,
        ivf_threshold=1000 if kw.get("small_index") else 200_000,
        lexical_shards=3,
    )


def qdrant_local(path: Path, dim: int, **kw: object) -> Tier:
    """qdrant-client's local mode: the server adapter's code paths, in process."""
    from qdrant_client import AsyncQdrantClient

    from indexers.tiers.qdrant_server import QdrantServerTier

    client = AsyncQdrantClient(path=str(path))
    return QdrantServerTier(
        client, collection="hot", dim=dim, analyzer=ANALYZER, engine="qdrant-local", local=True
    )


def qdrant_server(path: Path, dim: int, **kw: object) -> Tier:
    url = os.environ.get("RAG_TEST_QDRANT_URL")
    if not url:
        pytest.skip("RAG_TEST_QDRANT_URL is not set: no Qdrant server to test against")
    from qdrant_client import AsyncQdrantClient

    from indexers.tiers.qdrant_server import QdrantServerTier

    client = AsyncQdrantClient(url=url, api_key=os.environ.get("RAG_TEST_QDRANT_API_KEY"))
    collection = "test_" + hashlib.blake2b(str(path).encode(), digest_size=6).hexdigest()
    return QdrantServerTier(client, collection=collection, dim=dim, analyzer=ANALYZER)


def elasticsearch(path: Path, dim: int, **kw: object) -> Tier:
    url = os.environ.get("RAG_TEST_ELASTIC_URL")
    if not url:
        pytest.skip("RAG_TEST_ELASTIC_URL is not set: no Elasticsearch server to test against")
    from elasticsearch import AsyncElasticsearch

    from indexers.tiers.elastic import ElasticTier

    client = AsyncElasticsearch(url, api_key=os.environ.get("RAG_TEST_ELASTIC_API_KEY"))
    index = "rag-test-" + hashlib.blake2b(str(path).encode(), digest_size=6).hexdigest()
    return ElasticTier(client, index=index, dim=dim)


TIERS = {
    "qdrant-edge": qdrant_edge,
    "local-cold": local_cold,
    "local-cold-shards": local_cold_shards,
    "qdrant-local": qdrant_local,
    "qdrant-server": qdrant_server,
    "elasticsearch": elasticsearch,
}


SERVERS = {"qdrant-server", "elasticsearch"}  # skip themselves without RAG_TEST_*_URL


@pytest.fixture(
    params=[pytest.param(n, marks=[pytest.mark.integration] if n in SERVERS else []) for n in sorted(TIERS)]
)
def make_tier(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., Tier]:
    factory = TIERS[request.param]
    return lambda dim=384, **kw: factory(tmp_path / "tier", dim, **kw)


@pytest.fixture(scope="module")
def embedded_sample(
    embedder: SentenceTransformerEmbedder, sample_docs: list[Document]
) -> list[EmbeddedChunk]:
    chunker = Chunker(embedder.count_tokens, max_tokens=120)
    chunks = [c for d in sample_docs for c in chunker.chunk(d)]
    vectors = embedder.embed([c.embed_text for c in chunks])
    return [EmbeddedChunk(c, v) for c, v in zip(chunks, vectors, strict=True)]


@pytest.fixture
async def tier(make_tier: Factory, embedded_sample: list[EmbeddedChunk]) -> AsyncIterator[Tier]:
    t = make_tier()
    await t.ensure()
    await t.upsert(embedded_sample)
    yield t
    await t.close()


def query(
    embedder: SentenceTransformerEmbedder, text: str, *, k: int = 5, legs=("dense", "lexical"), **filters
) -> SearchQuery:  # type: ignore[no-untyped-def]
    return SearchQuery(
        text=text,
        terms=ANALYZER.query_terms(text),
        vector=embedder.embed([text])[0],
        filters=Filters(**{"tenant": "default", **filters}),
        k=k,
        legs=legs,
    )


async def test_count_and_idempotent_reupsert(tier: Tier, embedded_sample: list[EmbeddedChunk]) -> None:
    assert await tier.count() == len(embedded_sample)
    await tier.upsert(embedded_sample[:5])
    assert await tier.count() == len(embedded_sample)
    assert await tier.count("someone-else") == 0


async def test_dense_leg_finds_the_paraphrase(tier: Tier, embedder: SentenceTransformerEmbedder) -> None:
    result = await tier.search(query(embedder, "Can I be tortured or punished cruelly?", legs=("dense",)))
    assert set(result) == {"dense"}
    assert result["dense"][0].chunk.doc_id == "udhr-art-5"
    scores = [h.score for h in result["dense"]]
    assert scores == sorted(scores, reverse=True)


async def test_lexical_leg_uses_stemming(tier: Tier, embedder: SentenceTransformerEmbedder) -> None:
    result = await tier.search(query(embedder, "asylums from persecutions", legs=("lexical",)))
    assert set(result) == {"lexical"}
    assert result["lexical"][0].chunk.doc_id == "udhr-art-14"


async def test_hybrid_returns_both_legs(tier: Tier, embedder: SentenceTransformerEmbedder) -> None:
    result = await tier.search(query(embedder, "right to education"))
    assert set(result) == {"dense", "lexical"}
    assert result["dense"][0].chunk.doc_id == "udhr-art-26"
    assert result["lexical"][0].chunk.doc_id == "udhr-art-26"


async def test_ids_only_search_then_hydrate_gives_the_same_hits(
    tier: Tier, embedder: SentenceTransformerEmbedder
) -> None:
    """Query, then fetch: keys and scores as a full search; chunks from hydrate; deleted → absent."""
    full = await tier.search(query(embedder, "right to education", k=8))
    bare = await tier.search(dataclasses.replace(query(embedder, "right to education", k=8), payload=False))
    for leg in ("dense", "lexical"):
        assert [h.key for h in bare[leg]] == [h.key for h in full[leg]]
        assert [h.score for h in bare[leg]] == pytest.approx([h.score for h in full[leg]], rel=1e-4)
        assert all(h.key == chunk_key("default", h.chunk.chunk_id) for h in full[leg] if h.chunk)
    refs = [h.ref for h in bare["dense"]]
    chunks = await tier.hydrate(refs)
    assert [chunks[h.ref] for h in bare["dense"]] == [h.chunk for h in full["dense"]]
    gone = full["dense"][0].chunk
    assert gone is not None
    await tier.delete("default", [gone.chunk_id])
    assert bare["dense"][0].ref not in await tier.hydrate(refs)
    assert len(await tier.hydrate(refs)) == len(refs) - 1


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"year": Range(gte=2020)}, lambda c: (c.year or 0) >= 2020),
        ({"year": Range(lt=2000)}, lambda c: c.year is not None and c.year < 2000),
        ({"date": Range(gte=dt.date(2026, 1, 1), lte=dt.date(2026, 12, 31))}, lambda c: c.year == 2026),
        ({"keywords": {"tags": ("release",)}}, lambda c: "release" in c.tags),
        (
            {"keywords": {"doc_id": ("udhr-art-3", "udhr-art-9")}},
            lambda c: c.doc_id in ("udhr-art-3", "udhr-art-9"),
        ),
        ({"keywords": {"article": ("17",)}}, lambda c: c.metadata.get("article") == 17),
        (
            {"keywords": {"law": ("UDHR",), "article": ("1", "2")}},
            lambda c: c.metadata.get("article") in (1, 2),
        ),
    ],
)
async def test_filters_apply_to_both_legs_before_top_k(
    tier: Tier,
    embedder: SentenceTransformerEmbedder,
    embedded_sample: list[EmbeddedChunk],
    filters: dict[str, object],
    expected: Callable[[Chunk], bool],
) -> None:
    allowed = {e.chunk.chunk_id for e in embedded_sample if expected(e.chunk)}
    assert allowed, "the case must select something"
    # A query that matches the filtered-out documents best: post-filtering would return nothing.
    result = await tier.search(query(embedder, "everyone has the right freedom", k=len(allowed), **filters))
    for leg in ("dense", "lexical"):
        found = {h.chunk.chunk_id for h in result[leg]}
        assert found <= allowed
    assert {h.chunk.chunk_id for h in result["dense"]} == allowed


@pytest.mark.parametrize(
    "filters",
    [
        {"year": Range(gte=2025, lte=2025)},
        {"date": Range(gte=dt.date(2025, 1, 1), lt=dt.date(2026, 1, 1))},
        {"year": Range(gt=2024, lt=2026), "date": Range(gte=dt.date(2025, 1, 1), lte=dt.date(2025, 12, 31))},
    ],
)
async def test_soft_time_filters_keep_undated_chunks_and_drop_those_dated_outside(
    tier: Tier, embedder: SentenceTransformerEmbedder, filters: dict[str, object]
) -> None:
    """An implied time filter (``or_missing``) passes a chunk without the field, in both legs;
    a chunk dated outside the range still fails it, and the same filter without ``or_missing``
    drops the undated chunk."""
    text = "Carbon emissions fell sharply, the annual emissions report said."
    cases = {"undated": {}, "old": {"date": "2019-05-01"}, "new": {"date": "2025-03-01"}}
    chunks = [Chunk(f"{doc}#0", doc, 0, text, None, meta) for doc, meta in cases.items()]
    vectors = embedder.embed([c.embed_text for c in chunks])
    await tier.upsert([EmbeddedChunk(c, v) for c, v in zip(chunks, vectors, strict=True)])
    soft = await tier.search(query(embedder, "carbon emissions", or_missing=frozenset(filters), **filters))
    hard = await tier.search(query(embedder, "carbon emissions", **filters))
    for leg in ("dense", "lexical"):
        assert {h.chunk.doc_id for h in soft[leg] if h.chunk} == {"undated", "new"}
        assert {h.chunk.doc_id for h in hard[leg] if h.chunk} == {"new"}


async def test_the_dense_leg_searches_only_its_space_and_the_lexical_leg_every_chunk(
    make_tier: Factory,
) -> None:
    """A split embedder's two models share a dimension, not a space: a query's dense leg sees only
    the chunks in its language (``SearchQuery.space``), its lexical leg all of them. The vectors
    here are the same for both chunks, so only the space can keep one out."""
    t = make_tier(dim=4)
    await t.ensure()
    try:
        vector = np.asarray([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
        texts = {"en": "statute of limitations for theft 盗窃", "zh": "盗窃罪的追诉时效 theft"}
        chunks = [Chunk(f"{lang}#0", lang, 0, text, None, {}) for lang, text in texts.items()]
        await t.upsert([EmbeddedChunk(c, vector) for c in chunks])
        for space in ("zh", "en"):
            q = SearchQuery(
                text="盗窃 theft",
                terms=ANALYZER.query_terms("盗窃 theft"),
                vector=vector,
                filters=Filters(tenant="default"),
                k=5,
                space=space,
            )
            result = await t.search(q)
            assert [h.chunk.doc_id for h in result["dense"]] == [space]
            assert {h.chunk.doc_id for h in result["lexical"]} == {"en", "zh"}
        everything = await t.search(dataclasses.replace(q, space=None))
        assert {h.chunk.doc_id for h in everything["dense"]} == {"en", "zh"}
    finally:
        await t.close()


async def test_tenants_are_isolated(tier: Tier, embedder: SentenceTransformerEmbedder) -> None:
    result = await tier.search(query(embedder, "education", tenant="acme"))
    assert result.get("dense", []) == [] and result.get("lexical", []) == []


async def test_delete_and_fetch(tier: Tier, embedder: SentenceTransformerEmbedder) -> None:
    before = await tier.fetch("default", ["udhr-art-26", "udhr-art-1"])
    assert {c.doc_id for c in before} == {"udhr-art-26", "udhr-art-1"}
    await tier.delete("default", [c.chunk_id for c in before if c.doc_id == "udhr-art-26"])
    await tier.delete("default", ["no-such-chunk"])
    assert {c.doc_id for c in await tier.fetch("default", ["udhr-art-26", "udhr-art-1"])} == {"udhr-art-1"}
    result = await tier.search(query(embedder, "right to education elementary"))
    assert all(h.chunk.doc_id != "udhr-art-26" for leg in result.values() for h in leg)


async def test_reopen_after_close_keeps_everything(
    make_tier: Factory, embedded_sample: list[EmbeddedChunk], embedder: SentenceTransformerEmbedder
) -> None:
    first = make_tier()
    await first.ensure()
    await first.upsert(embedded_sample)
    await first.delete("default", ["udhr-art-1#0"])
    await first.close()
    second = make_tier()
    await second.ensure()
    assert await second.count() == len(embedded_sample) - 1
    result = await second.search(query(embedder, "right to education"))
    assert result["dense"][0].chunk.doc_id == "udhr-art-26"
    await second.close()


async def test_concurrent_readers(tier: Tier, embedder: SentenceTransformerEmbedder) -> None:
    texts = ["slavery", "privacy of correspondence", "marriage consent", "freedom of assembly"] * 5
    queries = [query(embedder, t, k=3) for t in texts]
    results = await asyncio.gather(*(tier.search(q) for q in queries))
    serial = [await tier.search(q) for q in queries[:4]]
    for got, want in zip(results[:4], serial, strict=True):
        assert [h.chunk.chunk_id for h in got["dense"]] == [h.chunk.chunk_id for h in want["dense"]]


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(64, dim))
    x = centers[rng.integers(0, 64, n)] + 0.35 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.slow
async def test_ann_recall_after_reopen(make_tier: Factory) -> None:
    """With the approximate index built (HNSW / IVF), recall@10 against exact search ≥ 0.95."""
    dim, n = 64, 4000
    vectors = _clustered(n, dim, seed=1)
    items = [
        EmbeddedChunk(Chunk(f"v{i}#0", f"v{i}", 0, f"vector {i}", None, {}), vectors[i]) for i in range(n)
    ]
    first = make_tier(dim=dim, small_index=True)
    await first.ensure()
    for start in range(0, n, 1000):
        await first.upsert(items[start : start + 1000])
    await first.optimize()
    before_reopen = await first.search(
        SearchQuery("", [], vectors[0], Filters("default"), k=1, legs=("dense",))
    )
    assert before_reopen["dense"][0].chunk.chunk_id == "v0#0"
    await first.close()
    tier = make_tier(dim=dim, small_index=True)
    await tier.ensure()
    probes = _clustered(50, dim, seed=2)
    hits = total = 0
    for probe in probes:
        base = SearchQuery("", [], probe, Filters("default"), k=10, legs=("dense",))
        approx = await tier.search(base)
        exact = await tier.search(
            SearchQuery("", [], probe, Filters("default"), k=10, legs=("dense",), exact=True)
        )
        want = {h.chunk.chunk_id for h in exact["dense"]}
        hits += len(want & {h.chunk.chunk_id for h in approx["dense"]})
        total += len(want)
    await tier.close()
    assert hits / total >= 0.95


async def test_congruence_exact_dense_top_k(
    tmp_path: Path, embedded_sample: list[EmbeddedChunk], embedder: SentenceTransformerEmbedder
) -> None:
    """Same data, same exact search: every tier returns the same top-k, in the same order."""
    tiers = [factory(tmp_path / name, 384) for name, factory in sorted(TIERS.items())]
    rankings = []
    for t in tiers:
        await t.ensure()
        await t.upsert(embedded_sample)
    for text in ("fair trial", "work and pay", "religion"):
        q = query(embedder, text, k=8, legs=("dense",))
        exact = SearchQuery(q.text, q.terms, q.vector, q.filters, k=8, legs=("dense",), exact=True)
        rankings.append([[h.chunk.chunk_id for h in (await t.search(exact))["dense"]] for t in tiers])
    for t in tiers:
        await t.close()
    for per_tier in rankings:
        assert all(r == per_tier[0] for r in per_tier)


async def test_dated_lists_documents_by_year_across_tenants(
    tier: Tier, embedded_sample: list[EmbeddedChunk]
) -> None:
    other = Chunk("o#0", "o", 0, "Another tenant's old memo.", None, {"year": 1990}, tenant="acme")
    await tier.upsert([EmbeddedChunk(other, embedded_sample[0].vector)])
    dated = await tier.dated(2000)
    expected = {(c.chunk.tenant, c.chunk.doc_id) for c in embedded_sample if (c.chunk.year or 9999) <= 2000}
    assert {(t, d) for t, d, _ in dated} == expected | {("acme", "o")}
    assert len(dated) == len(expected) + 1  # one entry per document, not per chunk
    assert all(meta.get("year", 0) <= 2000 or "date" in meta for _, _, meta in dated)
    assert await tier.dated(1900) == []


# Listing: every tier pages a tenant's documents by id, filters them and counts them the same way.
# Small documents with made-up vectors: listing reads no vector, so no model is needed.
LIST_DIM = 8


@pytest.fixture(scope="module")
def fake_elastic_url() -> Iterator[str]:
    from tests.fakes.elastic import FakeElastic
    from tests.fakes.vllm import serve

    with serve(FakeElastic(stateful=True).app) as url:
        yield url


def elastic_fake(path: Path, dim: int, url: str) -> Tier:
    """The Elasticsearch adapter against the HTTP fake (tests/fakes/elastic.py): the requests it
    sends, answered as ES 8 answers them; the real server joins with RAG_TEST_ELASTIC_URL."""
    from elasticsearch import AsyncElasticsearch

    from indexers.tiers.elastic import ElasticTier

    index = "rag-list-" + hashlib.blake2b(str(path).encode(), digest_size=6).hexdigest()
    return ElasticTier(AsyncElasticsearch(url, max_retries=0), index=index, dim=dim)


@pytest.fixture(
    params=[
        pytest.param(n, marks=[pytest.mark.integration] if n in SERVERS else [])
        for n in [*sorted(TIERS), "elastic-fake"]
    ]
)
async def list_tier(
    request: pytest.FixtureRequest, tmp_path: Path, fake_elastic_url: str
) -> AsyncIterator[Tier]:
    if request.param == "elastic-fake":
        t = elastic_fake(tmp_path / "tier", LIST_DIM, fake_elastic_url)
    else:
        t = TIERS[request.param](tmp_path / "tier", LIST_DIM)
    await t.ensure()
    yield t
    await t.close()


def doc(
    doc_id: str, chunks: int = 1, *, tenant: str = "default", title: str | None = None, **meta: object
) -> list[EmbeddedChunk]:
    seed = int(hashlib.blake2b(doc_id.encode(), digest_size=4).hexdigest(), 16)
    vector = np.random.default_rng(seed).normal(size=LIST_DIM).astype(np.float32)
    vector /= np.linalg.norm(vector)
    texts = [f"{doc_id} part {n}" for n in range(chunks)]
    return [
        EmbeddedChunk(Chunk(f"{doc_id}#{n}", doc_id, n, text, title, dict(meta), tenant), vector)
        for n, text in enumerate(texts)
    ]


# ids that sort differently by code point, by case and by length: "B" < "a" < "a/b" < "é" < "中"
LISTED = {
    "a": doc("a", 2, title="Alpha report", source="web", date="2020-01-05"),
    "B": doc("B", title="beta notes", source="mail", date="2021-06-01"),
    "a/b": doc("a/b", 3, title="Über alles", source="web"),
    "é": doc("é", title="über die Sache", source="web", date="2020-12-31"),
    "中": doc("中", title="中华人民共和国劳动法", source="mail", date="2019-03-01"),
    **{f"d{i:02d}": doc(f"d{i:02d}", 1 + i % 3, title=f"Doc {i}", source="bulk") for i in range(20)},
}


async def pages(
    tier: Tier, limit: int, tenant: str = "default", filters: dict[str, Any] | None = None, **kw: Any
) -> list[DocumentPage]:
    """Every page of a listing, following the cursor."""
    out: list[DocumentPage] = []
    after = None
    while True:
        query = DocumentQuery(Filters(tenant, **(filters or {})), after=after, limit=limit, **kw)
        page = await tier.documents(query)
        out.append(page)
        if not page.more:
            return out
        after = page.documents[-1].doc_id


async def test_documents_pages_by_id_with_counts_and_a_total(list_tier: Tier) -> None:
    await list_tier.upsert([c for chunks in LISTED.values() for c in chunks])
    got = await pages(list_tier, 7)
    assert [len(p.documents) for p in got] == [7, 7, 7, 4]
    assert all(p.total == len(LISTED) for p in got)
    listed = [d for p in got for d in p.documents]
    assert [d.doc_id for d in listed] == sorted(LISTED)  # code-point order, each once
    for d in listed:
        assert d.chunks == len(LISTED[d.doc_id])
        assert d.title == LISTED[d.doc_id][0].chunk.title
        assert dict(d.metadata) == dict(LISTED[d.doc_id][0].chunk.metadata)
    one = await list_tier.documents(DocumentQuery(Filters("default"), limit=len(LISTED)))
    assert not one.more and len(one.documents) == len(LISTED)
    assert (await list_tier.documents(DocumentQuery(Filters("default"), after="中"))).documents == []


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"filters": {"keywords": {"source": ("web",)}}}, {"a", "a/b", "é"}),
        ({"filters": {"date": Range(gte=dt.date(2020, 1, 1), lte=dt.date(2020, 12, 31))}}, {"a", "é"}),
        ({"title_prefix": "über"}, {"a/b", "é"}),  # case-insensitive, beyond ASCII
        ({"title_prefix": "中华"}, {"中"}),
        ({"title_prefix": "doc 1"}, {f"d{i:02d}" for i in range(10, 20)} | {"d01"}),
        ({"title_prefix": "Ü", "filters": {"date": Range(gte=dt.date(2020, 1, 1))}}, {"é"}),
        ({"title_prefix": "zzz"}, set()),
    ],
)
async def test_documents_filters_select_documents_and_the_total(
    list_tier: Tier, query: dict[str, Any], expected: set[str]
) -> None:
    await list_tier.upsert([c for chunks in LISTED.values() for c in chunks])
    got = await pages(list_tier, 2, **query)
    listed = [d.doc_id for p in got for d in p.documents]
    assert listed == sorted(expected)
    assert {p.total for p in got} == {len(expected)}


async def test_documents_are_tenant_scoped(list_tier: Tier) -> None:
    await list_tier.upsert(LISTED["a"] + LISTED["B"] + doc("a", 4, tenant="acme") + doc("z", tenant="acme"))
    mine = await list_tier.documents(DocumentQuery(Filters("default")))
    theirs = await list_tier.documents(DocumentQuery(Filters("acme")))
    assert [(d.doc_id, d.chunks) for d in mine.documents] == [("B", 1), ("a", 2)] and mine.total == 2
    assert [(d.doc_id, d.chunks) for d in theirs.documents] == [("a", 4), ("z", 1)] and theirs.total == 2
    assert (await list_tier.documents(DocumentQuery(Filters("nobody")))).total == 0


async def test_documents_cursor_is_stable_while_others_are_written(list_tier: Tier) -> None:
    """Writes and deletes between pages never make an original document skipped or repeated."""
    await list_tier.upsert([c for chunks in LISTED.values() for c in chunks])
    seen: list[str] = []
    after = None
    for step in range(100):
        page = await list_tier.documents(DocumentQuery(Filters("default"), after=after, limit=5))
        seen += [d.doc_id for d in page.documents]
        if not page.more:
            break
        after = page.documents[-1].doc_id
        # before the cursor, after it, and a new chunk count for one not listed yet
        await list_tier.upsert(
            doc(f"{after}-new{step}") + doc(f"0-early{step}") + doc("d19", 5, title="Doc 19")
        )
        await list_tier.delete("default", [f"{seen[0]}#0"])  # one already listed goes
    originals = [d for d in seen if d in LISTED]
    assert originals == sorted(LISTED)  # every original once, in order
    assert not any("early" in d for d in seen)  # written before the cursor: next listing's
    assert any("-new" in d for d in seen)  # written after the cursor: on a later page

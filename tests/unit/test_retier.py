"""retier: aged documents move hot → cold by copy, verify, delete; idempotent; safe to interrupt."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest

from indexers.embed.cache import EmbeddingCache
from indexers.ingest.retier import retier, to_chunk
from indexers.records import Document, Vector
from indexers.tiers.base import Tier, VectorSource
from indexers.tiers.query import Filters, SearchQuery
from tests.conftest import CountingEmbedder
from tests.unit.test_pipeline import long_text, pipeline

LATER = dt.date(2027, 8, 1)  # 2026-06-01 has aged out of a 365-day window by then


class FailingDelete:
    """The hot tier, except that its first delete dies (a kill between copy and delete)."""

    def __init__(self, inner: Tier) -> None:
        self.inner = inner
        self.failed = False

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        if not self.failed:
            self.failed = True
            raise RuntimeError("killed")
        await self.inner.delete(tenant, chunk_ids)


class SomeVectors:
    """The hot tier, giving back the stored vectors of only the chunks ``keep`` names."""

    def __init__(self, inner: Tier, keep: set[str]) -> None:
        self.inner = inner
        self.keep = keep

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def vectors(self, tenant: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        held = await cast(VectorSource, self.inner).vectors(tenant, chunk_ids)
        return {c: v for c, v in held.items() if c in self.keep}


@pytest.fixture
def docs() -> list[Document]:
    return [
        Document("old", long_text("aged memo", 10), metadata={"date": "2026-06-01"}),
        Document("old-year", long_text("aged year", 4), metadata={"year": 2025}),
        Document("recent", long_text("fresh memo", 4), metadata={"date": "2026-11-01"}),
        Document("undated", long_text("timeless", 4)),
    ]


async def test_aged_documents_move_without_reembedding_and_a_rerun_moves_nothing(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], tmp_path: Path, docs: list[Document]
) -> None:
    cache = EmbeddingCache(tmp_path / "cache.sqlite", model="m", dim=384)
    p = pipeline(counting_embedder, tiers, cache=cache)
    await p.ingest(docs)  # both "old" ones are inside the window today, so hot
    old_chunks = await tiers["hot"].fetch("default", ["old", "old-year"])
    counting_embedder.embedded.clear()

    report = await retier(tiers["hot"], tiers["cold"], p, hot_window_days=365, today=LATER)
    assert (report.aged, report.moved, report.chunks, report.errors) == (2, 2, len(old_chunks), [])
    assert counting_embedder.embedded == []  # vectors came from the cache
    assert await tiers["hot"].fetch("default", ["old", "old-year"]) == []
    moved = await tiers["cold"].fetch("default", ["old", "old-year"])
    assert [(c.chunk_id, c.content_hash) for c in moved] == [(c.chunk_id, c.content_hash) for c in old_chunks]
    assert {c.doc_id for c in await tiers["hot"].fetch("default", ["recent", "undated"])} == {
        "recent",
        "undated",
    }

    again = await retier(tiers["hot"], tiers["cold"], p, hot_window_days=365, today=LATER)
    assert (again.aged, again.moved) == (0, 0) and await tiers["cold"].count() == len(old_chunks)
    cache.close()


async def test_the_hot_tiers_vectors_move_and_only_those_it_lacks_are_embedded(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], docs: list[Document]
) -> None:
    """No embedding cache: the vectors come from the hot tier itself. A chunk it gives no vector
    for is embedded again; every copied chunk is found in cold by its own vector."""
    p = pipeline(counting_embedder, tiers)
    await p.ingest(docs)
    old = await tiers["hot"].fetch("default", ["old", "old-year"])
    stored = await cast(VectorSource, tiers["hot"]).vectors("default", [c.chunk_id for c in old])
    assert set(stored) == {c.chunk_id for c in old}
    assert await cast(VectorSource, tiers["hot"]).vectors("acme", [c.chunk_id for c in old]) == {}
    lacking = old[0]
    hot = SomeVectors(tiers["hot"], {c.chunk_id for c in old[1:]})
    counting_embedder.embedded.clear()

    report = await retier(hot, tiers["cold"], p, hot_window_days=365, today=LATER)  # type: ignore[arg-type]
    assert (report.moved, report.chunks, report.errors) == (2, len(old), [])
    assert counting_embedder.embedded == [to_chunk(lacking, "default").embed_text]
    for chunk in old:
        query = SearchQuery(
            "", [], stored[chunk.chunk_id], Filters("default"), k=1, legs=("dense",), exact=True
        )
        (top,) = (await tiers["cold"].search(query))["dense"]
        assert top.chunk is not None and top.chunk.chunk_id == chunk.chunk_id and top.score > 0.999


class CountingOptimize:
    """The cold tier, counting its ``optimize`` calls."""

    def __init__(self, inner: Tier) -> None:
        self.inner = inner
        self.optimized = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def optimize(self) -> bool:
        self.optimized += 1
        return await self.inner.optimize()


async def test_a_retier_that_moved_documents_optimizes_the_cold_tier_once(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], docs: list[Document]
) -> None:
    """The cold tier switches its vector index kind once a retier ends (a move of 505k chunks
    into an empty tier left FAISS flat until the next start); nothing moved, nothing to do."""
    p = pipeline(counting_embedder, tiers)
    await p.ingest(docs)
    cold = CountingOptimize(tiers["cold"])
    await retier(tiers["hot"], cold, p, hot_window_days=365, today=LATER, dry_run=True)  # type: ignore[arg-type]
    assert cold.optimized == 0
    report = await retier(tiers["hot"], cold, p, hot_window_days=365, today=LATER)  # type: ignore[arg-type]
    assert report.moved == 2 and cold.optimized == 1
    again = await retier(tiers["hot"], cold, p, hot_window_days=365, today=LATER)  # type: ignore[arg-type]
    assert again.moved == 0 and cold.optimized == 1


async def test_an_interrupted_move_is_finished_by_the_next_run(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], docs: list[Document]
) -> None:
    p = pipeline(counting_embedder, tiers)
    await p.ingest(docs[:1])
    n = await tiers["hot"].count()
    hot = FailingDelete(tiers["hot"])
    with pytest.raises(RuntimeError, match="killed"):
        await retier(hot, tiers["cold"], p, hot_window_days=365, today=LATER)  # type: ignore[arg-type]
    assert await tiers["hot"].count() == n and await tiers["cold"].count() == n  # copied, not yet deleted
    report = await retier(hot, tiers["cold"], p, hot_window_days=365, today=LATER)  # type: ignore[arg-type]
    assert report.moved == 1 and await tiers["hot"].count() == 0 and await tiers["cold"].count() == n


async def test_dry_run_changes_nothing(
    counting_embedder: CountingEmbedder, tiers: dict[str, Tier], docs: list[Document]
) -> None:
    p = pipeline(counting_embedder, tiers)
    await p.ingest(docs)
    before = await tiers["hot"].count()
    report = await retier(tiers["hot"], tiers["cold"], p, hot_window_days=365, today=LATER, dry_run=True)
    assert report.aged == 2 and report.moved == 0 and await tiers["hot"].count() == before

"""The embedded hot tier lists documents whose chunks are spread over sealed and fresh shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.listing import DocumentQuery
from indexers.tiers.qdrant_edge import QdrantEdgeTier
from indexers.tiers.query import Filters


def chunk(doc_id: str, n: int) -> EmbeddedChunk:
    vector = np.full(8, 8**-0.5, dtype=np.float32)
    return EmbeddedChunk(Chunk(f"{doc_id}#{n}", doc_id, n, f"{doc_id} {n}", doc_id.upper(), {}), vector)


async def test_a_document_across_shards_is_one_row_with_every_chunk(tmp_path: Path) -> None:
    tier = QdrantEdgeTier(tmp_path, dim=8, analyzer=Analyzer(), compaction="inprocess")
    await tier.ensure()
    await tier.upsert([chunk("a", 0), chunk("a", 1), chunk("b", 0)])
    assert await tier.optimize()  # sealed: a#0, a#1, b#0
    await tier.upsert([chunk("a", 2), chunk("a", 1), chunk("c", 0)])  # a#1 moves to the fresh shard
    assert len(tier.shard_names()) == 2
    page = await tier.documents(DocumentQuery(Filters("default")))
    rows = [(d.doc_id, d.chunks, d.title) for d in page.documents]
    assert rows == [("a", 3, "A"), ("b", 1, "B"), ("c", 1, "C")]
    assert page.total == 3 and not page.more
    await tier.close()


async def every_page(tier: QdrantEdgeTier, limit: int) -> list[tuple[str, int]]:
    rows: list[tuple[str, int]] = []
    after = None
    while True:
        page = await tier.documents(DocumentQuery(Filters("default"), after=after, limit=limit))
        rows += [(d.doc_id, d.chunks) for d in page.documents]
        if not page.more:
            return rows
        after = page.documents[-1].doc_id


async def test_pages_reuse_each_shards_facet_until_that_shard_is_written(tmp_path: Path) -> None:
    """A walk of every page facets each shard once (it faceted every shard on every page: 3.5 s
    a page at 500k chunks); new documents go to the fresh shard and leave the sealed shard's facet
    kept; a chunk replaced or deleted in the sealed shard makes it faceted again."""
    tier = QdrantEdgeTier(tmp_path, dim=8, analyzer=Analyzer(), compaction="inprocess")
    await tier.ensure()
    await tier.upsert([chunk(f"d{i:02d}", n) for i in range(30) for n in range(1 + i % 2)])
    assert await tier.optimize()
    facets = tier.shards._facets
    expected = [(f"d{i:02d}", 1 + i % 2) for i in range(30)]
    assert await every_page(tier, 4) == expected
    assert facets.made == 2  # the sealed shard and the (empty) fresh one, once each for 8 pages

    await tier.upsert([chunk("e00", 0)])  # fresh only: the sealed shard is not written
    made = facets.made
    assert await every_page(tier, 4) == [*expected, ("e00", 1)]
    assert facets.made == made + 1

    await tier.upsert([chunk("d00", 1)])  # d00 gains a chunk in fresh; the sealed shard holds none of it
    await tier.upsert([chunk("d01", 1)])  # d01#1 moves out of the sealed shard into fresh
    await tier.delete("default", ["d02#0", "d03#0", "d03#1"])  # d02 and d03 leave the sealed shard
    rows = dict(await every_page(tier, 4))
    assert rows["d00"] == 2 and rows["d01"] == 2
    assert "d02" not in rows and "d03" not in rows
    page = await tier.documents(DocumentQuery(Filters("default"), limit=5))
    assert page.total == 29 and [d.doc_id for d in page.documents] == ["d00", "d01", "d04", "d05", "d06"]
    await tier.close()

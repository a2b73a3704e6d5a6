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

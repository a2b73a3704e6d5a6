"""The cold tier counts a listing's total once per store version, not once per page.

At 1M documents the count walks the whole (tenant, doc_id) index; counted on every page, a walk
of the list (and a delete by filter, which walks it) grew as N² (bench/scale.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from indexers.records import Chunk, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.listing import DocumentQuery
from indexers.tiers.local_cold import LocalCold
from indexers.tiers.query import Filters


def chunk(doc_id: str) -> EmbeddedChunk:
    vector = np.full(4, 0.5, dtype=np.float32)
    return EmbeddedChunk(Chunk(f"{doc_id}#0", doc_id, 0, f"text of {doc_id}", doc_id.upper(), {}), vector)


def walk(cold: LocalCold) -> tuple[list[str], list[int]]:
    ids, totals, after = [], [], None
    while True:
        page = cold.documents(DocumentQuery(Filters("default"), after=after, limit=3))
        ids += [d.doc_id for d in page.documents]
        totals.append(page.total)
        if not page.more:
            return ids, totals
        after = ids[-1]


def test_a_walk_counts_once_and_a_write_is_counted_on_the_next_page(tmp_path: Path) -> None:
    cold = LocalCold(tmp_path / "cold", dim=4, analyzer=Analyzer())
    cold.upsert([chunk(f"d{i:02d}") for i in range(10)])
    counts: list[str] = []
    cold._parts()[0].reader().set_trace_callback(
        lambda sql: counts.append(sql) if "COUNT(DISTINCT" in sql else None
    )
    ids, totals = walk(cold)
    assert ids == [f"d{i:02d}" for i in range(10)] and totals == [10] * 4
    assert len(counts) == 1  # four pages, one count

    first = cold.documents(DocumentQuery(Filters("default"), limit=3))
    cold.upsert([chunk("e00")])  # a write between two pages
    second = cold.documents(DocumentQuery(Filters("default"), after=first.documents[-1].doc_id, limit=3))
    assert (first.total, second.total) == (10, 11)
    cold.delete("default", ["d00#0"])
    assert cold.documents(DocumentQuery(Filters("default"), limit=3)).total == 10
    # another filter is another count
    assert cold.documents(DocumentQuery(Filters("other"), limit=3)).total == 0
    cold.close()


def test_a_reopened_store_knows_every_tenant(tmp_path: Path) -> None:
    """The tenants are read back by index seeks at start-up (a filter of one tenant admits every
    row only when no other tenant ever wrote: ``LocalCold._allowed``)."""
    from indexers.tiers.cold_store import Store

    cold = LocalCold(tmp_path / "cold", dim=4, analyzer=Analyzer())
    for tenant in ["default", "acme", "中文", "a"]:
        doc = f"{tenant}-doc"
        cold.upsert(
            [EmbeddedChunk(Chunk(f"{doc}#0", doc, 0, "text", None, {}, tenant), np.ones(4, np.float32))]
        )
    cold.close()
    assert Store(tmp_path / "cold" / "cold.sqlite").tenants == {"default", "acme", "中文", "a"}
    assert Store(tmp_path / "empty.sqlite").tenants == set()

"""What Qdrant stores for a chunk, shared by the embedded (Edge) and server (qdrant-client) hot tiers.

One point per (tenant, chunk) with a deterministic UUID, a named dense vector (cosine), a named
sparse vector holding BM25's term-frequency part (Qdrant's IDF modifier supplies the rest), and
a payload with every filterable field: ``tenant``, ``doc_id``, ``kw`` (``key=value`` terms),
``year``, ``date`` (RFC 3339).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from indexers.records import EmbeddedChunk, StoredChunk, chunk_uuid
from indexers.text.lexical import Analyzer, bm25_document_vector
from indexers.tiers.query import Filters, Range

DENSE, SPARSE = "dense", "lexical"
STORED_KEYS = ["chunk_id", "doc_id", "text", "title", "metadata", "content_hash"]
# HNSW search breadth (Qdrant's hnsw_ef; ``RAG_QDRANT__HNSW_EF`` in the service). A hot tier of
# 500k chunks on 2 cores (m 16, ef_construct 100, SciFact's queries; bench/hot_scale.py), by
# hnsw_ef 128 / 256 / 384 / 512: recall@10 against exact search 0.903 / 0.942 / 0.959 / 0.967,
# SciFact nDCG@10 0.6482 / 0.6507 / 0.6508 / 0.6508, 64 clients 124 / 102 / 92 / 69 searches/s.
# 384 is the least that keeps 0.95. Segments under Qdrant's full-scan threshold (~6,500 vectors
# of 384 floats) are searched exactly whatever it is.
HNSW_EF = 384


def point_id(tenant: str, chunk_id: str) -> str:
    """Deterministic per (tenant, chunk): a retried upsert overwrites, never duplicates."""
    return str(chunk_uuid(tenant, chunk_id))


def iso(day: dt.date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


def payload(item: EmbeddedChunk) -> dict[str, Any]:
    chunk = item.chunk
    out: dict[str, Any] = {
        "tenant": chunk.tenant,
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "n": chunk.n,
        "text": chunk.text,
        "title": chunk.title,
        "metadata": dict(chunk.metadata),
        "content_hash": chunk.content_hash,
        "kw": chunk.keywords(),
    }
    if chunk.year is not None:
        out["year"] = chunk.year
    if chunk.date is not None:
        out["date"] = iso(chunk.date)
    return out


def sparse(item: EmbeddedChunk, analyzer: Analyzer, avg_len: float) -> tuple[list[int], list[float]]:
    return bm25_document_vector(analyzer.terms(item.chunk.embed_text), avg_len=avg_len)


def stored(data: dict[str, Any]) -> StoredChunk:
    return StoredChunk(
        chunk_id=data["chunk_id"],
        doc_id=data["doc_id"],
        text=data["text"],
        title=data.get("title"),
        metadata=data.get("metadata") or {},
        content_hash=data["content_hash"],
    )


# Filters, written once for both hot tiers: which payload conditions a search or a fetch needs.
# Each adapter only spells them in its library's classes (qdrant-edge or qdrant-client models).
@dataclass(frozen=True, slots=True)
class Condition:
    key: str
    value: str | None = None  # match one value
    any: tuple[str, ...] = ()  # match any of these
    numbers: Range | None = None  # a numeric range (year)
    dates: tuple[str | None, str | None, str | None, str | None] | None = None  # gte, lte, gt, lt (ISO)
    or_missing: bool = False  # a point without ``key`` passes too (spelled: range OR is_empty)


def conditions(filters: Filters) -> list[Condition]:
    """Our Filters → payload conditions; every one hits a payload index."""
    out = [Condition("tenant", value=filters.tenant)]
    for group in filters.keyword_terms():
        out.append(Condition("kw", value=group[0]) if len(group) == 1 else Condition("kw", any=tuple(group)))
    if filters.year is not None:
        out.append(Condition("year", numbers=filters.year, or_missing=filters.soft("year")))
    if filters.date is not None:
        r = filters.date
        gte, lte, gt, lt = (iso(d) if d is not None else None for d in (r.gte, r.lte, r.gt, r.lt))
        out.append(Condition("date", dates=(gte, lte, gt, lt), or_missing=filters.soft("date")))
    return out


def tenant_conditions(tenant: str, doc_ids: Sequence[str] | None = None) -> list[Condition]:
    out = [Condition("tenant", value=tenant)]
    if doc_ids is not None:
        out.append(Condition("doc_id", any=tuple(doc_ids)))
    return out

"""What Qdrant stores for a chunk, shared by the embedded (Edge) and server (qdrant-client) hot tiers.

One point per (tenant, chunk) with a deterministic UUID, a named dense vector (cosine), a named
sparse vector holding BM25's term-frequency part (Qdrant's IDF modifier supplies the rest), and
a payload with every filterable field: ``tenant``, ``doc_id``, ``kw`` (``key=value`` terms),
``year``, ``date`` (RFC 3339).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from indexers.documents import EmbeddedChunk, StoredChunk, chunk_uuid
from indexers.lexical import Analyzer, bm25_document_vector

DENSE, SPARSE = "dense", "lexical"
STORED_KEYS = ["chunk_id", "doc_id", "text", "title", "metadata", "content_hash"]


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

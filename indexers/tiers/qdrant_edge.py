"""Hot tier, embedded: Qdrant Edge (Qdrant's own engine in-process).

One shard per data directory holds a named dense vector (cosine, HNSW once optimized),
a named sparse vector with Qdrant's IDF modifier (BM25: the document side carries the
saturated term frequency, Qdrant multiplies in IDF at query time), and payload indexes on
every filterable field. Both legs run in one ``query_batch`` call under the same filter.

Qdrant Edge runs no background optimizer and holds the GIL for the whole of each call, so
``optimize()`` is explicit: the pipeline calls it after a bulk write, in a worker thread.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from indexers.documents import (
    EmbeddedChunk,
    Filters,
    LegHit,
    Range,
    SearchQuery,
    StoredChunk,
)
from indexers.lexical import Analyzer, bm25_document_vector, bm25_query_vector
from indexers.tiers._worker import Worker
from indexers.tiers.base import LegResults, TierError

log = logging.getLogger(__name__)

DENSE, SPARSE = "dense", "lexical"
_POINT_NS = uuid.UUID("5b0c6a36-7c4e-4a55-9d55-2b7b8f3a7e10")
_STORED_KEYS = ("chunk_id", "doc_id", "text", "title", "metadata", "content_hash")


def point_id(tenant: str, chunk_id: str) -> str:
    """Deterministic UUID per (tenant, chunk): a retried upsert overwrites, never duplicates."""
    return str(uuid.uuid5(_POINT_NS, f"{tenant}\x00{chunk_id}"))


def _iso(day: dt.date) -> str:
    return f"{day.isoformat()}T00:00:00Z"


class QdrantEdgeTier:
    """The embedded hot tier."""

    def __init__(
        self,
        path: Path,
        *,
        dim: int,
        analyzer: Analyzer,
        avg_len: float = 100.0,
        indexing_threshold_kb: int | None = None,
        hnsw_ef: int = 128,
    ) -> None:
        self._path = path
        self._dim = dim
        self._analyzer = analyzer
        self._avg_len = avg_len
        self._indexing_threshold_kb = indexing_threshold_kb
        self._hnsw_ef = hnsw_ef
        self._shard: qe.EdgeShard | None = None
        self._lock = threading.Lock()  # serialises open/close against calls
        self._worker = Worker("qdrant-edge")

    @property
    def engine(self) -> str:
        return "qdrant-edge"

    def _config(self) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self._dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=self._indexing_threshold_kb),
        )

    def _open(self) -> qe.EdgeShard:
        with self._lock:
            if self._shard is None:
                self._path.mkdir(parents=True, exist_ok=True)
                fresh = not any(self._path.iterdir())
                config = self._config()
                if fresh:
                    shard = qe.EdgeShard.create(str(self._path), config)
                else:
                    shard = qe.EdgeShard.load(str(self._path), config)
                if fresh or not shard.info().payload_schema:
                    _create_payload_indexes(shard)
                self._shard = shard
            return self._shard

    async def ensure(self) -> None:
        await self._worker.run(self._open)

    # writes ---------------------------------------------------------------------------

    def _point(self, item: EmbeddedChunk) -> qe.Point:
        chunk = item.chunk
        indices, values = bm25_document_vector(self._analyzer.terms(chunk.embed_text), avg_len=self._avg_len)
        payload: dict[str, Any] = {
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
            payload["year"] = chunk.year
        if chunk.date is not None:
            payload["date"] = _iso(chunk.date)
        vector: dict[str, Any] = {
            DENSE: item.vector.astype(float).tolist(),
            SPARSE: qe.SparseVector(indices=indices, values=values),
        }
        return qe.Point(id=point_id(chunk.tenant, chunk.chunk_id), vector=vector, payload=payload)

    def _upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        points = [self._point(c) for c in chunks]
        self._open().update(qe.UpdateOperation.upsert_points(points))

    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        if chunks:
            await self._worker.run(self._upsert, chunks)

    def _delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        ids: list[qe.PointId] = [point_id(tenant, c) for c in chunk_ids]
        self._open().update(qe.UpdateOperation.delete_points(ids))

    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            await self._worker.run(self._delete, tenant, chunk_ids)

    def optimize_now(self) -> bool:
        """Build HNSW and payload indexes for everything written so far (blocking, GIL-holding)."""
        shard = self._open()
        changed = shard.optimize()
        shard.flush()
        return changed

    async def optimize(self) -> bool:
        return await self._worker.run(self.optimize_now)

    # reads ----------------------------------------------------------------------------

    def _search(self, query: SearchQuery) -> LegResults:
        qfilter = to_filter(query.filters)
        params = qe.SearchParams(hnsw_ef=self._hnsw_ef, exact=query.exact)
        requests: list[tuple[str, qe.QueryRequest]] = []
        if "dense" in query.legs and query.vector is not None:
            nearest = qe.Query.Nearest(query.vector.astype(float).tolist(), using=DENSE)
            requests.append(("dense", self._request(nearest, qfilter, params, query.k)))
        if "lexical" in query.legs and query.terms:
            indices, values = bm25_query_vector(query.terms)
            sparse = qe.Query.Nearest(qe.SparseVector(indices=indices, values=values), using=SPARSE)
            requests.append(("lexical", self._request(sparse, qfilter, None, query.k)))
        if not requests:
            return {}
        batch = self._open().query_batch(qe.QueryBatchRequest([r for _, r in requests]))
        return {
            leg: [LegHit(_stored(p.payload or {}), float(p.score)) for p in points]
            for (leg, _), points in zip(requests, batch, strict=True)
        }

    @staticmethod
    def _request(
        query: qe.Query, qfilter: qe.Filter, params: qe.SearchParams | None, k: int
    ) -> qe.QueryRequest:
        return qe.QueryRequest(
            limit=k, query=query, filter=qfilter, params=params, with_payload=list(_STORED_KEYS)
        )

    async def search(self, query: SearchQuery) -> LegResults:
        return await self._worker.run(self._search, query)

    def _fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        qfilter = qe.Filter(
            must=[
                qe.FieldCondition(key="tenant", match=qe.MatchValue(tenant)),
                qe.FieldCondition(key="doc_id", match=qe.MatchAny(list(doc_ids))),
            ]
        )
        payloads: list[dict[str, Any]] = []
        offset: qe.PointId | None = None
        shard = self._open()
        while True:
            records, offset = shard.scroll(
                qe.ScrollRequest(offset=offset, limit=512, filter=qfilter, with_payload=True)
            )
            payloads.extend(r.payload or {} for r in records)
            if offset is None:
                break
        payloads.sort(key=lambda p: (p.get("doc_id", ""), p.get("n", 0)))  # document order, as SQLite gives
        return [_stored(p) for p in payloads]

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        if not doc_ids:
            return []
        return await self._worker.run(self._fetch, tenant, doc_ids)

    def _count(self, tenant: str | None) -> int:
        qfilter = None
        if tenant is not None:
            qfilter = qe.Filter(must=[qe.FieldCondition(key="tenant", match=qe.MatchValue(tenant))])
        return self._open().count(qe.CountRequest(exact=True, filter=qfilter))

    async def count(self, tenant: str | None = None) -> int:
        return await self._worker.run(self._count, tenant)

    async def ping(self) -> bool:
        try:
            await self._worker.run(lambda: self._open().info())
        except Exception:  # any engine failure means "not ready"
            log.exception("qdrant-edge ping failed")
            return False
        return True

    def _close(self) -> None:
        with self._lock:
            if self._shard is not None:
                self._shard.flush()
                self._shard.close()
                self._shard = None

    async def close(self) -> None:
        await self._worker.run(self._close)
        self._worker.shutdown()


def _create_payload_indexes(shard: qe.EdgeShard) -> None:
    schema: dict[str, qe.PayloadSchemaType | qe.KeywordIndexParams] = {
        "tenant": qe.KeywordIndexParams(is_tenant=True),
        "doc_id": qe.PayloadSchemaType.Keyword,
        "kw": qe.PayloadSchemaType.Keyword,
        "year": qe.PayloadSchemaType.Integer,
        "date": qe.PayloadSchemaType.Datetime,
    }
    for name, params in schema.items():
        shard.update(qe.UpdateOperation.create_field_index(name, params))


def _stored(payload: dict[str, Any]) -> StoredChunk:
    try:
        return StoredChunk(
            chunk_id=payload["chunk_id"],
            doc_id=payload["doc_id"],
            text=payload["text"],
            title=payload.get("title"),
            metadata=payload.get("metadata") or {},
            content_hash=payload["content_hash"],
        )
    except KeyError as exc:
        raise TierError(f"qdrant-edge point without {exc} in its payload") from exc


def to_filter(filters: Filters) -> qe.Filter:
    """Our Filters → a Qdrant filter (every condition indexed; see _create_payload_indexes)."""
    must: list[qe.FieldCondition] = [qe.FieldCondition(key="tenant", match=qe.MatchValue(filters.tenant))]
    for group in filters.keyword_terms():
        match = qe.MatchValue(group[0]) if len(group) == 1 else qe.MatchAny(group)
        must.append(qe.FieldCondition(key="kw", match=match))
    if filters.year is not None:
        must.append(qe.FieldCondition(key="year", range=_float_range(filters.year)))
    if filters.date is not None:
        must.append(qe.FieldCondition(key="date", range=_date_range(filters.date)))
    return qe.Filter(must=list(must))


def _float_range(r: Range) -> qe.RangeFloat:
    return qe.RangeFloat(gte=r.gte, lte=r.lte, gt=r.gt, lt=r.lt)


def _date_range(r: Range) -> qe.RangeDateTime:
    def iso(day: dt.date | None) -> str | None:
        return _iso(day) if day is not None else None

    return qe.RangeDateTime(gte=iso(r.gte), lte=iso(r.lte), gt=iso(r.gt), lt=iso(r.lt))

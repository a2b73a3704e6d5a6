"""Hot tier on a Qdrant server (or qdrant-client's local mode), through ``AsyncQdrantClient``.

Multitenancy is payload-based: one collection, ``tenant`` a keyword payload index marked
``is_tenant`` (Qdrant co-locates each tenant's points and plans filtered searches per tenant).
That is what Qdrant recommends for many small tenants; a collection per tenant costs memory per
collection and makes every new tenant a schema change.

Points are the embedded tier's (``qdrant_points``): named dense vector (cosine) + named sparse
vector with the IDF modifier; every filterable field has a payload index, since filters on
unindexed fields fall back to full scans (qdrant#4237). Upserts go in bounded batches with
``wait=True`` (acknowledged = applied) and are retried on transient errors. Both legs run in one
``query_batch_points`` call under the same filter; each leg comes back ranked on its own because
fusion happens once, above the tiers, where every hit keeps its per-leg rank (docs/design.md).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from indexers.records import EmbeddedChunk, StoredChunk, Vector
from indexers.text.lexical import Analyzer, bm25_query_vector
from indexers.tiers import qdrant_points as qp
from indexers.tiers.base import DatedDocument, LegResults, TierError, TierUnavailable
from indexers.tiers.listing import FIRST_KEYS, DocumentPage, DocumentQuery, page_of, summaries, title_matches
from indexers.tiers.query import Filters, HitRef, LegHit, SearchQuery

log = logging.getLogger(__name__)

PAYLOAD_INDEXES: dict[str, Any] = {
    "tenant": models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
    "doc_id": models.PayloadSchemaType.KEYWORD,
    "kw": models.PayloadSchemaType.KEYWORD,
    "year": models.PayloadSchemaType.INTEGER,
    "date": models.PayloadSchemaType.DATETIME,
}
_EVERY = (1 << 31) - 1  # a facet's limit that keeps every value


def _transient(exc: BaseException) -> bool:
    if isinstance(exc, ResponseHandlingException):  # connection errors and timeouts
        return True
    return isinstance(exc, UnexpectedResponse) and exc.status_code in (429, 500, 502, 503, 504)


class QdrantServerTier:
    def __init__(
        self,
        client: AsyncQdrantClient,
        *,
        collection: str,
        dim: int,
        analyzer: Analyzer,
        avg_len: float = 100.0,
        batch: int = 256,
        hnsw_ef: int = qp.HNSW_EF,
        engine: str = "qdrant",
        local: bool = False,
    ) -> None:
        self._client = client
        self._collection = collection
        self._dim = dim
        self._analyzer = analyzer
        self._avg_len = avg_len
        self._batch = batch
        self._hnsw_ef = hnsw_ef
        self._engine = engine
        self._local = local  # qdrant-client's local mode: exact search, no payload indexes

    @property
    def engine(self) -> str:
        return self._engine

    async def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_transient),
                stop=stop_after_attempt(4),
                wait=wait_exponential_jitter(multiplier=0.2, max=3.0),
                reraise=True,
            ):
                with attempt:
                    return await fn(*args, **kwargs)
        except ResponseHandlingException as exc:
            raise TierUnavailable(f"qdrant {what}: {exc}") from exc
        except UnexpectedResponse as exc:
            raise TierError(f"qdrant {what}: {exc.status_code} {exc.content[:300]!r}") from exc
        raise AssertionError("unreachable")

    async def ensure(self) -> None:
        if not await self._call("collection_exists", self._client.collection_exists, self._collection):
            await self._call(
                "create_collection",
                self._client.create_collection,
                self._collection,
                vectors_config={
                    qp.DENSE: models.VectorParams(size=self._dim, distance=models.Distance.COSINE)
                },
                sparse_vectors_config={qp.SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
            )
        for field, schema in PAYLOAD_INDEXES.items() if not self._local else ():
            await self._call(
                "create_payload_index",
                self._client.create_payload_index,
                self._collection,
                field_name=field,
                field_schema=schema,
                wait=True,
            )

    def _point(self, item: EmbeddedChunk) -> models.PointStruct:
        indices, values = qp.sparse(item, self._analyzer, self._avg_len)
        return models.PointStruct(
            id=qp.point_id(item.chunk.tenant, item.chunk.chunk_id),
            vector={
                qp.DENSE: item.vector.astype(float).tolist(),
                qp.SPARSE: models.SparseVector(indices=indices, values=values),
            },
            payload=qp.payload(item),
        )

    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        for start in range(0, len(chunks), self._batch):
            points = [self._point(c) for c in chunks[start : start + self._batch]]
            await self._call("upsert", self._client.upsert, self._collection, points=points, wait=True)

    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        if not chunk_ids:
            return
        ids: list[models.ExtendedPointId] = [qp.point_id(tenant, c) for c in chunk_ids]
        selector = models.PointIdsList(points=ids)
        await self._call("delete", self._client.delete, self._collection, points_selector=selector, wait=True)

    async def search(self, query: SearchQuery) -> LegResults:
        qfilter = to_filter(query.filters)
        legs: list[tuple[str, models.QueryRequest]] = []
        if "dense" in query.legs and query.vector is not None:
            params = None if self._local else models.SearchParams(hnsw_ef=self._hnsw_ef, exact=query.exact)
            legs.append(
                (
                    "dense",
                    self._request(
                        query.vector.astype(float).tolist(),
                        qp.DENSE,
                        to_filter(query.dense_filters),
                        query.k,
                        params,
                    ),
                )
            )
        if "lexical" in query.legs and query.terms:
            indices, values = bm25_query_vector(query.terms)
            vector = models.SparseVector(indices=indices, values=values)
            legs.append(("lexical", self._request(vector, qp.SPARSE, qfilter, query.k, None)))
        if not legs:
            return {}
        responses = await self._call(
            "query_batch_points",
            self._client.query_batch_points,
            self._collection,
            requests=[r for _, r in legs],
        )
        # Payloads come in the same round trip: a second one would cost more than they do.
        pairs = zip(legs, responses, strict=True)
        return {leg: [_leg_hit(p) for p in response.points] for (leg, _), response in pairs}

    async def hydrate(self, refs: Sequence[HitRef]) -> dict[HitRef, StoredChunk]:
        if not refs:
            return {}
        records = await self._call(
            "retrieve",
            self._client.retrieve,
            self._collection,
            ids=[str(r) for r in refs],
            with_payload=qp.STORED_KEYS,
            with_vectors=False,
        )
        return {str(r.id): qp.stored(r.payload) for r in records if r.payload}

    async def vectors(self, tenant: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        """The dense vectors of those of ``chunk_ids`` stored, by chunk id (``VectorSource``)."""
        if not chunk_ids:
            return {}
        records = await self._call(
            "retrieve",
            self._client.retrieve,
            self._collection,
            ids=[qp.point_id(tenant, c) for c in chunk_ids],
            with_payload=["chunk_id"],
            with_vectors=[qp.DENSE],
        )
        found: dict[str, Vector] = {}
        for r in records:
            vector: Any = r.vector
            found[str((r.payload or {})["chunk_id"])] = np.asarray(vector[qp.DENSE], dtype=np.float32)
        return found

    @staticmethod
    def _request(
        vector: Any, using: str, qfilter: models.Filter, k: int, params: models.SearchParams | None
    ) -> models.QueryRequest:
        return models.QueryRequest(
            query=vector, using=using, filter=qfilter, limit=k, params=params, with_payload=qp.STORED_KEYS
        )

    async def _scroll(self, qfilter: models.Filter, keys: list[str]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        offset: models.ExtendedPointId | None = None
        while True:
            records, offset = await self._call(
                "scroll",
                self._client.scroll,
                self._collection,
                scroll_filter=qfilter,
                limit=512,
                offset=offset,
                with_payload=keys,
                with_vectors=False,
            )
            out.extend(r.payload or {} for r in records)
            if offset is None:
                return out

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        if not doc_ids:
            return []
        payloads = await self._scroll(tenant_filter(tenant, doc_ids), [*qp.STORED_KEYS, "n"])
        payloads.sort(key=lambda p: (p.get("doc_id", ""), p.get("n", 0)))
        return [qp.stored(p) for p in payloads]

    async def dated(self, through_year: int) -> list[DatedDocument]:
        qfilter = models.Filter(
            must=[models.FieldCondition(key="year", range=models.Range(lte=through_year))]
        )
        found: dict[tuple[str, str], DatedDocument] = {}
        for p in await self._scroll(qfilter, ["tenant", "doc_id", "metadata"]):
            found.setdefault((p["tenant"], p["doc_id"]), (p["tenant"], p["doc_id"], p.get("metadata") or {}))
        return list(found.values())

    async def count(self, tenant: str | None = None) -> int:
        qfilter = tenant_filter(tenant) if tenant is not None else None
        result = await self._call(
            "count", self._client.count, self._collection, count_filter=qfilter, exact=True
        )
        return int(result.count)

    async def documents(self, query: DocumentQuery) -> DocumentPage:
        """Every matching id with its chunk count (a facet on ``doc_id``, or a scroll of titles under
        ``title_prefix``), paged here (Qdrant ranges no keyword), then the page's first chunks."""
        qfilter = to_filter(query.filters)
        counts: Counter[str] = Counter()
        if query.title_prefix is None:
            facet = await self._call(
                "facet",
                self._client.facet,
                self._collection,
                "doc_id",
                facet_filter=qfilter,
                limit=_EVERY,
                exact=True,
            )
            counts.update({str(hit.value): hit.count for hit in facet.hits})
        else:
            titled = await self._scroll(qfilter, ["doc_id", "title"])
            counts.update(p["doc_id"] for p in titled if title_matches(p.get("title"), query.title_prefix))
        ids, more = page_of(counts, query.after, query.limit)
        payloads = await self._scroll(tenant_filter(query.filters.tenant, ids), FIRST_KEYS) if ids else []
        return DocumentPage(summaries(ids, counts, payloads), len(counts), more)

    async def optimize(self) -> bool:
        return False  # the server's optimizer runs on its own

    async def ping(self) -> bool:
        try:
            await self._client.get_collections()
        except Exception:  # any failure means "not ready"
            log.exception("qdrant ping failed")
            return False
        return True

    async def close(self) -> None:
        await self._client.close()


def to_filter(filters: Filters) -> models.Filter:
    """Our Filters → a Qdrant filter (the conditions: ``qdrant_points.conditions``)."""
    return _spell(qp.conditions(filters))


def tenant_filter(tenant: str, doc_ids: Sequence[str] | None = None) -> models.Filter:
    return _spell(qp.tenant_conditions(tenant, doc_ids))


def _spell(conds: list[qp.Condition]) -> models.Filter:
    must: list[models.Condition] = []
    for c in conds:
        cond = _spell_one(c)
        if c.or_missing:  # "in range, or no such field" (is_empty: the key is absent)
            empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=c.key))
            must.append(models.Filter(should=[cond, empty]))
        else:
            must.append(cond)
    return models.Filter(must=must)


def _spell_one(c: qp.Condition) -> models.FieldCondition:
    if c.numbers is not None:
        r = c.numbers
        return models.FieldCondition(key=c.key, range=models.Range(gte=r.gte, lte=r.lte, gt=r.gt, lt=r.lt))
    if c.dates is not None:
        gte, lte, gt, lt = c.dates
        return models.FieldCondition(key=c.key, range=models.DatetimeRange(gte=gte, lte=lte, gt=gt, lt=lt))
    match: models.Match = (
        models.MatchValue(value=c.value) if c.value is not None else models.MatchAny(any=list(c.any))
    )
    return models.FieldCondition(key=c.key, match=match)


def _leg_hit(point: models.ScoredPoint) -> LegHit:
    key = uuid.UUID(str(point.id)).int  # the server sends our UUID point ids as strings
    return LegHit(key, float(point.score), qp.stored(point.payload or {}), str(point.id))

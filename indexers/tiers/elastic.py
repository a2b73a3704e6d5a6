"""Cold tier on Elasticsearch 8.x: BM25 + ``dense_vector`` (int8_hnsw), through the async client.

- **Index template** (``rag-cold-template`` for ``rag-cold*``): ``text``/``title`` with the
  ``english`` analyzer plus a ``.cjk`` sub-field (``cjk_width`` + ``cjk_bigram`` with unigrams) for Chinese;
  ``vector`` a ``dense_vector`` with cosine similarity and ``int8_hnsw``; keyword/integer/date
  fields for every filter (``tenant``, ``doc_id``, ``kw``, ``article``, ``section``, ``chapter``,
  ``year``, ``date``); ``metadata`` stored, not indexed.
- **Writes**: ``async_streaming_bulk`` with deterministic ``_id``s (``tenant/chunk_id``), item by
  item: a 200 with ``errors: true`` is not success. 429 items are retried with backoff (the
  helper's ``retry_on_status``); any other failed item fails the call with its id and reason, so
  a half-done write is never acknowledged (a retry overwrites by id). ``refresh="wait_for"``:
  acknowledged means searchable, which the pipeline's change detection relies on.
- **Search**: one ``_msearch`` round trip with the BM25 query and the ``knn`` query under the same
  filter; the legs come back ranked on their own and are fused above the tiers (RRF or weighted),
  so no paid licence is needed (ES's ``rrf`` retriever needs one).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from elastic_transport import ConnectionError as ESConnectionError
from elastic_transport import ConnectionTimeout
from elasticsearch import ApiError, AsyncElasticsearch
from elasticsearch.helpers import async_streaming_bulk

from indexers.records import EmbeddedChunk, StoredChunk, chunk_key
from indexers.tiers import qdrant_points as qp
from indexers.tiers.base import DatedDocument, LegResults, TierError, TierUnavailable
from indexers.tiers.listing import DocumentPage, DocumentQuery, DocumentSummary
from indexers.tiers.query import Filters, HitRef, LegHit, SearchQuery

log = logging.getLogger(__name__)

STRUCTURE_FIELDS = ("article", "section", "chapter", "amendment", "version")
TITLE_RAW_MAX = 1024  # longer titles are not indexed whole (a keyword term's practical bound)
_SOURCE = ["tenant", "chunk_id", "doc_id", "n", "text", "title", "metadata", "content_hash"]


def index_template(index: str, dim: int) -> dict[str, Any]:
    """The body of ``PUT _index_template/{index}-template``."""
    text: dict[str, Any] = {
        "type": "text",
        "analyzer": "english",
        "fields": {"cjk": {"type": "text", "analyzer": "cjk"}},
    }
    # title.raw: the whole title as one lowercased keyword, for the listing's title_prefix
    raw = {"type": "keyword", "normalizer": "folded", "ignore_above": TITLE_RAW_MAX}
    title = {**text, "fields": {**text["fields"], "raw": raw}}
    properties: dict[str, Any] = {
        "tenant": {"type": "keyword"},
        "chunk_id": {"type": "keyword"},
        "doc_id": {"type": "keyword"},
        "n": {"type": "integer"},
        "text": text,
        "title": title,
        "kw": {"type": "keyword"},
        "year": {"type": "integer"},
        "date": {"type": "date"},
        "content_hash": {"type": "keyword", "index": False},
        "metadata": {"type": "object", "enabled": False},
        "vector": {
            "type": "dense_vector",
            "dims": dim,
            "index": True,
            "similarity": "cosine",
            "index_options": {"type": "int8_hnsw", "m": 16, "ef_construction": 100},
        },
        **{f: {"type": "keyword"} for f in STRUCTURE_FIELDS},
    }
    return {
        "index_patterns": [f"{index}*"],
        "priority": 200,
        "template": {
            "settings": {
                "number_of_shards": 1,
                "refresh_interval": "1s",
                "analysis": {
                    # characters plus bigrams, as indexers/text/lexical.py analyses Chinese for the
                    # embedded tiers (docs/benchmarks.md: topic success@1 0.902 against 0.866
                    # for bigrams alone on cn-criminal-law)
                    "filter": {"cjk_uni_bigram": {"type": "cjk_bigram", "output_unigrams": True}},
                    "normalizer": {"folded": {"type": "custom", "filter": ["lowercase"]}},
                    "analyzer": {
                        "cjk": {
                            "type": "custom",
                            "tokenizer": "standard",
                            "filter": ["cjk_width", "lowercase", "cjk_uni_bigram"],
                        }
                    },
                },
            },
            "mappings": {"dynamic": "false", "properties": properties},
        },
    }


def doc_id(tenant: str, chunk_id: str) -> str:
    return f"{tenant}/{chunk_id}"


def source(item: EmbeddedChunk) -> dict[str, Any]:
    body = qp.payload(item)
    if body.get("date"):
        body["date"] = body["date"][:10]
    for field in STRUCTURE_FIELDS:
        value = item.chunk.metadata.get(field)
        if value is not None:
            body[field] = str(value)
    body["vector"] = [float(x) for x in item.vector]
    return body


def to_filter(filters: Filters) -> list[dict[str, Any]]:
    clauses: list[dict[str, Any]] = [{"term": {"tenant": filters.tenant}}]
    for group in filters.keyword_terms():
        clauses.append({"terms": {"kw": group}})
    if filters.year is not None:
        r = filters.year
        clauses.append(_or_missing(filters, "year", {"range": {"year": _bounds(r.gte, r.lte, r.gt, r.lt)}}))
    if filters.date is not None:
        r = filters.date
        inside = {"range": {"date": _bounds(*(_day(v) for v in (r.gte, r.lte, r.gt, r.lt)))}}
        clauses.append(_or_missing(filters, "date", inside))
    return clauses


def _or_missing(filters: Filters, name: str, inside: dict[str, Any]) -> dict[str, Any]:
    """``inside``, or also "no such field" when the filter is soft for ``name``."""
    if not filters.soft(name):
        return inside
    missing = {"bool": {"must_not": [{"exists": {"field": name}}]}}
    return {"bool": {"should": [inside, missing], "minimum_should_match": 1}}


def _day(value: dt.date | None) -> str | None:
    return value.isoformat() if value is not None else None


def _bounds(gte: Any, lte: Any, gt: Any, lt: Any) -> dict[str, Any]:
    return {k: v for k, v in (("gte", gte), ("lte", lte), ("gt", gt), ("lt", lt)) if v is not None}


def search_bodies(query: SearchQuery, num_candidates: int) -> list[tuple[str, dict[str, Any]]]:
    """(leg, body) for ``_msearch``: BM25 over text and title (English and CJK), and kNN."""
    filters = to_filter(query.filters)
    bodies: list[tuple[str, dict[str, Any]]] = []
    if "lexical" in query.legs and query.text.strip():
        match = {"multi_match": {"query": query.text, "fields": ["text", "text.cjk", "title", "title.cjk"]}}
        bodies.append(
            (
                "lexical",
                {
                    "size": query.k,
                    "_source": _SOURCE,
                    "query": {"bool": {"must": [match], "filter": filters}},
                },
            )
        )
    if "dense" in query.legs and query.vector is not None:
        knn = {
            "field": "vector",
            "query_vector": [float(x) for x in query.vector],
            "k": query.k,
            "num_candidates": max(num_candidates, query.k),
            "filter": filters if query.space is None else to_filter(query.dense_filters),
        }
        bodies.append(("dense", {"size": query.k, "_source": _SOURCE, "knn": knn}))
    return bodies


def documents_body(query: DocumentQuery) -> dict[str, Any]:
    """One page of documents: a composite aggregation on ``doc_id`` (keyword order, ``after`` the
    cursor), each bucket's first chunk by ``n``, and the number of matching ids (``cardinality``:
    exact in practice below its precision threshold, 40,000 ids; approximate above)."""
    filters = to_filter(query.filters)
    if query.title_prefix is not None:
        filters.append({"prefix": {"title.raw": {"value": query.title_prefix.lower()}}})
    composite: dict[str, Any] = {
        "size": query.limit + 1,
        "sources": [{"doc_id": {"terms": {"field": "doc_id"}}}],
    }
    if query.after is not None:
        composite["after"] = {"doc_id": query.after}
    first = {"top_hits": {"size": 1, "sort": [{"n": "asc"}], "_source": ["title", "metadata"]}}
    return {
        "size": 0,
        "query": {"bool": {"filter": filters}},
        "aggs": {
            "docs": {"composite": composite, "aggs": {"first": first}},
            "total": {"cardinality": {"field": "doc_id", "precision_threshold": 40_000}},
        },
    }


def document_page(result: dict[str, Any], limit: int) -> DocumentPage:
    aggs = result["aggregations"]
    docs = []
    for bucket in aggs["docs"]["buckets"][:limit]:
        hits = bucket["first"]["hits"]["hits"]
        src = hits[0]["_source"] if hits else {}
        doc_id, chunks = bucket["key"]["doc_id"], bucket["doc_count"]
        docs.append(DocumentSummary(doc_id, src.get("title"), chunks, src.get("metadata") or {}))
    return DocumentPage(docs, int(aggs["total"]["value"]), len(aggs["docs"]["buckets"]) > limit)


class ElasticTier:
    def __init__(
        self,
        client: AsyncElasticsearch,
        *,
        index: str,
        dim: int,
        chunk_size: int = 500,
        max_retries: int = 3,
        num_candidates: int = 100,
    ) -> None:
        self._es = client
        self._index = index
        self._dim = dim
        self._chunk_size = chunk_size
        self._max_retries = max_retries
        self._num_candidates = num_candidates

    @property
    def engine(self) -> str:
        return "elasticsearch"

    async def _call(self, what: str, coro: Any) -> Any:
        try:
            return await coro
        except (ESConnectionError, ConnectionTimeout) as exc:
            raise TierUnavailable(f"elasticsearch {what}: {exc}") from exc
        except ApiError as exc:
            raise TierError(f"elasticsearch {what}: {exc.meta.status} {exc.message}") from exc

    async def ensure(self) -> None:
        await self._call(
            "put_index_template",
            self._es.indices.put_index_template(
                name=f"{self._index}-template", **index_template(self._index, self._dim)
            ),
        )
        if not await self._call("exists", self._es.indices.exists(index=self._index)):
            await self._call("create", self._es.options(ignore_status=400).indices.create(index=self._index))

    async def _bulk(self, actions: list[dict[str, Any]], what: str) -> None:
        failed: list[str] = []
        try:
            async for ok, item in async_streaming_bulk(
                self._es,
                actions,
                chunk_size=self._chunk_size,
                max_retries=self._max_retries,
                initial_backoff=0.5,
                max_backoff=8,
                raise_on_error=False,
                raise_on_exception=False,
                refresh="wait_for",
            ):
                if not ok:
                    ((op, result),) = item.items()
                    if op == "delete" and result.get("status") == 404:
                        continue  # deleting what is not there is not an error
                    reason = (
                        (result.get("error") or {}).get("reason")
                        or result.get("error")
                        or result.get("status")
                    )
                    failed.append(f"{result.get('_id')}: {result.get('status')} {reason}")
        except (ESConnectionError, ConnectionTimeout) as exc:
            raise TierUnavailable(f"elasticsearch bulk {what}: {exc}") from exc
        if failed:
            raise TierError(
                f"elasticsearch bulk {what}: {len(failed)} of {len(actions)} items failed: {failed[:5]}"
            )

    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        if chunks:
            actions = [
                {
                    "_op_type": "index",
                    "_index": self._index,
                    "_id": doc_id(c.chunk.tenant, c.chunk.chunk_id),
                    "_source": source(c),
                }
                for c in chunks
            ]
            await self._bulk(actions, "index")

    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            actions = [
                {"_op_type": "delete", "_index": self._index, "_id": doc_id(tenant, c)} for c in chunk_ids
            ]
            await self._bulk(actions, "delete")

    async def search(self, query: SearchQuery) -> LegResults:
        bodies = search_bodies(query, self._num_candidates)
        if not bodies:
            return {}
        searches: list[dict[str, Any]] = []
        for _, body in bodies:
            searches += [{"index": self._index}, body]
        result = await self._call("msearch", self._es.msearch(searches=searches))
        out: dict[str, list[LegHit]] = {}
        for (leg, _), response in zip(bodies, result["responses"], strict=True):
            if "error" in response:
                raise TierError(f"elasticsearch {leg} search: {response['error']}")
            out[leg] = [_leg_hit(h, query.filters.tenant) for h in response["hits"]["hits"]]
        return out

    async def hydrate(self, refs: Sequence[HitRef]) -> dict[HitRef, StoredChunk]:
        if not refs:
            return {}
        result = await self._call(
            "mget", self._es.mget(index=self._index, ids=[str(r) for r in refs], source=qp.STORED_KEYS)
        )
        return {d["_id"]: qp.stored(d["_source"]) for d in result["docs"] if d.get("found")}

    async def _pages(self, query: dict[str, Any], fields: list[str]) -> AsyncIterator[dict[str, Any]]:
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": 1000,
                "query": query,
                "_source": fields,
                "sort": [{"tenant": "asc"}, {"chunk_id": "asc"}],
            }
            if after is not None:
                body["search_after"] = after
            result = await self._call("search", self._es.search(index=self._index, **body))
            hits = result["hits"]["hits"]
            for hit in hits:
                yield hit["_source"]
            if len(hits) < 1000:
                return
            after = hits[-1]["sort"]

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        if not doc_ids:
            return []
        query = {"bool": {"filter": [{"term": {"tenant": tenant}}, {"terms": {"doc_id": list(doc_ids)}}]}}
        found = [s async for s in self._pages(query, _SOURCE)]
        found.sort(key=lambda s: (s["doc_id"], s.get("n", 0)))
        return [qp.stored(s) for s in found]

    async def dated(self, through_year: int) -> list[DatedDocument]:
        docs: dict[tuple[str, str], DatedDocument] = {}
        async for s in self._pages(
            {"range": {"year": {"lte": through_year}}}, ["tenant", "doc_id", "metadata"]
        ):
            docs.setdefault((s["tenant"], s["doc_id"]), (s["tenant"], s["doc_id"], s.get("metadata") or {}))
        return list(docs.values())

    async def count(self, tenant: str | None = None) -> int:
        query = {"term": {"tenant": tenant}} if tenant is not None else {"match_all": {}}
        result = await self._call("count", self._es.count(index=self._index, query=query))
        return int(result["count"])

    async def documents(self, query: DocumentQuery) -> DocumentPage:
        result = await self._call("search", self._es.search(index=self._index, **documents_body(query)))
        return document_page(result, query.limit)

    async def optimize(self) -> bool:
        return False  # Elasticsearch merges segments on its own

    async def ping(self) -> bool:
        try:
            return bool(await self._es.ping())
        except Exception:  # any failure means "not ready"
            log.exception("elasticsearch ping failed")
            return False

    async def close(self) -> None:
        await self._es.close()


def _leg_hit(hit: dict[str, Any], tenant: str) -> LegHit:
    """Chunks come with the hits (_source in the same round trip); the ref is the document _id."""
    source = hit["_source"]
    return LegHit(chunk_key(tenant, source["chunk_id"]), float(hit["_score"]), qp.stored(source), hit["_id"])

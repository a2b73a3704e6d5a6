"""One Qdrant Edge shard: its schema, points, filters, queries, export and offline build.

``QdrantEdgeTier`` composes several of these (one fresh, some sealed); this module knows
nothing of that. ``python -m indexers.tiers.edge_shard build SRC DEST CONFIG`` builds and
optimizes a sealed shard from an export in a separate process, so that Qdrant Edge's
GIL-holding ``optimize()`` never runs inside the serving process.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from indexers.records import EmbeddedChunk, StoredChunk
from indexers.text.lexical import Analyzer, bm25_query_vector
from indexers.tiers.qdrant_points import (
    DENSE,
    SPARSE,
    STORED_KEYS,
    Condition,
    conditions,
    payload,
    point_id,
    sparse,
    stored,
    tenant_conditions,
)
from indexers.tiers.query import Filters, HitRef, LegHit, SearchQuery

_STORED_KEYS = STORED_KEYS
_SCROLL = 512


@dataclass(frozen=True, slots=True)
class ShardConfig:
    dim: int
    indexing_threshold_kb: int | None = None
    # HNSW build threads; one core is left to serving (a build runs beside the server).
    indexing_threads: int = max(1, (os.cpu_count() or 2) - 1)
    # Threads of the shard's search pool. One: the service runs many searches at once, and
    # splitting each across segments on a pool cost twice the CPU here (0.99 vs 0.52 ms a
    # hybrid search on SciFact) for a 0.15 ms shorter wall time.
    search_threads: int = 1

    def edge(self) -> qe.EdgeConfig:
        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=self.indexing_threshold_kb),
            # Qdrant's defaults (m 16, ef_construct 100, full_scan_threshold 10000 KB)
            hnsw_config=qe.HnswIndexConfig(
                m=16, ef_construct=100, full_scan_threshold=10_000, max_indexing_threads=self.indexing_threads
            ),
            max_search_threads=self.search_threads,
        )


def open_shard(path: Path, config: ShardConfig) -> qe.EdgeShard:
    """Open a shard, creating it (with its payload indexes) when the folder is empty."""
    path.mkdir(parents=True, exist_ok=True)
    if not any(path.iterdir()):
        shard = qe.EdgeShard.create(str(path), config.edge())
        _create_payload_indexes(shard)
        return shard
    return qe.EdgeShard.load(str(path), config.edge())


def _create_payload_indexes(shard: qe.EdgeShard) -> None:
    """Every filterable field is indexed: unindexed filters are slow (qdrant#4237)."""
    schema: dict[str, qe.PayloadSchemaType | qe.KeywordIndexParams] = {
        "tenant": qe.KeywordIndexParams(is_tenant=True),
        "doc_id": qe.PayloadSchemaType.Keyword,
        "kw": qe.PayloadSchemaType.Keyword,
        "year": qe.PayloadSchemaType.Integer,
        "date": qe.PayloadSchemaType.Datetime,
    }
    for name, params in schema.items():
        shard.update(qe.UpdateOperation.create_field_index(name, params))


# A point before it is one (qe.Point does not pickle): id, dense vector, sparse indices and
# values, payload. Built where the CPU is (the Ray engine's workers), made a point by the owner.
PointParts = tuple[str, np.ndarray[Any, Any], list[int], list[float], dict[str, Any]]


def point_parts(item: EmbeddedChunk, analyzer: Analyzer, avg_len: float) -> PointParts:
    indices, values = sparse(item, analyzer, avg_len)
    return (point_id(item.chunk.tenant, item.chunk.chunk_id), item.vector, indices, values, payload(item))


def from_parts(parts: PointParts) -> qe.Point:
    pid, dense, indices, values, data = parts
    vector: dict[str, Any] = {
        DENSE: dense.astype(float).tolist(),
        SPARSE: qe.SparseVector(indices=indices, values=values),
    }
    return qe.Point(id=pid, vector=vector, payload=data)


def to_point(item: EmbeddedChunk, analyzer: Analyzer, avg_len: float) -> qe.Point:
    return from_parts(point_parts(item, analyzer, avg_len))


# queries -------------------------------------------------------------------------------


def leg_requests(query: SearchQuery, hnsw_ef: int) -> list[tuple[str, qe.QueryRequest]]:
    """One request per leg, both under the query's filters (the dense leg also in its space)."""
    qfilter = to_filter(query.filters)
    requests: list[tuple[str, qe.QueryRequest]] = []
    if "dense" in query.legs and query.vector is not None:
        nearest = qe.Query.Nearest(query.vector.astype(float).tolist(), using=DENSE)
        params = qe.SearchParams(hnsw_ef=hnsw_ef, exact=query.exact)
        dense_filter = qfilter if query.space is None else to_filter(query.dense_filters)
        requests.append(("dense", _request(nearest, dense_filter, params, query.k, query.payload)))
    if "lexical" in query.legs and query.terms:
        indices, values = bm25_query_vector(query.terms)
        sparse = qe.Query.Nearest(qe.SparseVector(indices=indices, values=values), using=SPARSE)
        requests.append(("lexical", _request(sparse, qfilter, None, query.k, query.payload)))
    return requests


def _request(
    query: qe.Query, qfilter: qe.Filter, params: qe.SearchParams | None, k: int, payload: bool
) -> qe.QueryRequest:
    return qe.QueryRequest(
        limit=k,
        query=query,
        filter=qfilter,
        params=params,
        with_payload=list(_STORED_KEYS) if payload else False,
    )


def search(
    shard: qe.EdgeShard, requests: Sequence[tuple[str, qe.QueryRequest]], *, payload: bool = True
) -> dict[str, list[LegHit]]:
    """Hits keyed and referenced by point id; with their chunks when ``payload``.

    Point ids are our UUIDs already (chunk_uuid). Each attribute of a result is converted from
    Rust on access, so each is read once: this loop runs 200 times a hybrid search.
    """
    batch = shard.query_batch(qe.QueryBatchRequest([r for _, r in requests]))
    out: dict[str, list[LegHit]] = {}
    for (leg, _), points in zip(requests, batch, strict=True):
        hits = []
        for p in points:
            pid: Any = p.id  # a UUID: its .int is the fusion key
            hits.append(LegHit(pid.int, p.score, stored(p.payload or {}) if payload else None, pid))
        out[leg] = hits
    return out


def hydrate(shard: qe.EdgeShard, point_ids: Sequence[HitRef]) -> dict[HitRef, StoredChunk]:
    ids: list[qe.PointId] = [i if isinstance(i, uuid.UUID) else uuid.UUID(str(i)) for i in point_ids]
    records = shard.retrieve(ids, with_payload=list(_STORED_KEYS), with_vector=False)
    return {r.id: stored(r.payload) for r in records if r.payload}


def to_filter(filters: Filters) -> qe.Filter:
    """Our Filters → a Qdrant Edge filter (the conditions: ``qdrant_points.conditions``)."""
    return _spell(conditions(filters))


def tenant_filter(tenant: str, doc_ids: Sequence[str] | None = None) -> qe.Filter:
    return _spell(tenant_conditions(tenant, doc_ids))


def _spell(conds: list[Condition]) -> qe.Filter:
    must: list[qe.FieldCondition | qe.Filter] = []
    for c in conds:
        cond = _spell_one(c)
        # "in range, or no such field": a nested should (Qdrant's is_empty is true for a
        # missing key, the only way a payload lacks year/date here)
        must.append(qe.Filter(should=[cond, qe.IsEmptyCondition(key=c.key)]) if c.or_missing else cond)
    return qe.Filter(must=list(must))


def _spell_one(c: Condition) -> qe.FieldCondition:
    if c.numbers is not None:
        r = c.numbers
        return qe.FieldCondition(key=c.key, range=qe.RangeFloat(gte=r.gte, lte=r.lte, gt=r.gt, lt=r.lt))
    if c.dates is not None:
        gte, lte, gt, lt = c.dates
        return qe.FieldCondition(key=c.key, range=qe.RangeDateTime(gte=gte, lte=lte, gt=gt, lt=lt))
    match = qe.MatchValue(c.value) if c.value is not None else qe.MatchAny(list(c.any))
    return qe.FieldCondition(key=c.key, match=match)


def scroll(
    shard: qe.EdgeShard,
    qfilter: qe.Filter | None = None,
    *,
    vectors: bool = False,
    keys: list[str] | None = None,
) -> Iterator[list[qe.Record]]:
    """Pages of records (every payload key, or ``keys``); each page is one short engine call, so
    others run in between."""
    offset: qe.PointId | None = None
    with_payload: bool | list[str] = keys if keys is not None else True
    while True:
        records, offset = shard.scroll(
            qe.ScrollRequest(
                offset=offset, limit=_SCROLL, filter=qfilter, with_payload=with_payload, with_vector=vectors
            )
        )
        if records:
            yield records
        if offset is None:
            return


# listing -------------------------------------------------------------------------------


# export and offline build --------------------------------------------------------------


def export(shards: Sequence[qe.EdgeShard], folder: Path) -> set[str]:
    """Write every point of ``shards`` to ``folder`` (dense.npy + points.jsonl); returns the ids."""
    folder.mkdir(parents=True, exist_ok=True)
    ids: set[str] = set()
    dense: list[list[float]] = []
    with (folder / "points.jsonl").open("w", encoding="utf-8") as out:
        for shard in shards:
            for page in scroll(shard, vectors=True):
                for record in page:
                    vector: Any = record.vector
                    sparse = vector[SPARSE]
                    out.write(
                        json.dumps(
                            {
                                "id": str(record.id),
                                "payload": record.payload,
                                "si": sparse.indices,
                                "sv": sparse.values,
                            }
                        )
                        + "\n"
                    )
                    dense.append(vector[DENSE])
                    ids.add(str(record.id))
    np.save(folder / "dense.npy", np.asarray(dense, dtype=np.float32))
    return ids


def build(source: Path, dest: Path, config: ShardConfig, batch: int = 1024) -> int:
    """Create ``dest`` from an export, optimize it (HNSW, payload indexes) and close it."""
    dense = np.load(source / "dense.npy")
    shard = open_shard(dest, config)
    points: list[qe.Point] = []
    n = 0
    with (source / "points.jsonl").open(encoding="utf-8") as lines:
        for i, line in enumerate(lines):
            record = json.loads(line)
            vector: dict[str, Any] = {
                DENSE: dense[i].tolist(),
                SPARSE: qe.SparseVector(indices=record["si"], values=record["sv"]),
            }
            points.append(qe.Point(id=record["id"], vector=vector, payload=record["payload"]))
            if len(points) >= batch:
                shard.update(qe.UpdateOperation.upsert_points(points))
                n, points = n + len(points), []
    if points:
        shard.update(qe.UpdateOperation.upsert_points(points))
        n += len(points)
    shard.optimize()
    shard.flush()
    shard.close()
    return n


def _die_with_parent() -> None:
    """Linux: a build whose server was killed stops too (the next start sweeps its output)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before the call above
            raise SystemExit(1)


def build_command(source: Path, dest: Path, config: ShardConfig) -> list[str]:
    return [
        sys.executable,
        "-m",
        "indexers.tiers.edge_shard",
        "build",
        str(source),
        str(dest),
        json.dumps(asdict(config)),
    ]


if __name__ == "__main__":
    _, verb, src, dst, cfg = sys.argv
    if verb != "build":
        raise SystemExit(f"unknown command {verb!r}")
    os.nice(10)  # the serving process keeps priority over an index build
    _die_with_parent()
    print(build(Path(src), Path(dst), ShardConfig(**json.loads(cfg))))

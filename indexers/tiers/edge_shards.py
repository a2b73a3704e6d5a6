"""The embedded hot tier's engine, blocking: one fresh Qdrant Edge shard and sealed ones.

``EdgeShards`` keeps the layout (``manifest.json``), takes writes (an upsert goes to the fresh
shard and leaves the sealed ones), rotates and swaps shards for ``QdrantEdgeTier``'s compaction
(``indexers.tiers.qdrant_edge``), and reads across every shard: search, hydrate, fetch, the
stored vectors, listing pages (``edge_pages``). Each call is blocking; the tier runs them in
worker threads.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from indexers.records import DOC_HASH, EmbeddedChunk, StoredChunk, Vector
from indexers.text.lexical import Analyzer
from indexers.tiers import edge_shard as es
from indexers.tiers import qdrant_points as qp
from indexers.tiers.base import DatedDocument, LegResults
from indexers.tiers.cold_segment import HeldChunk
from indexers.tiers.edge_pages import Facets, document_page
from indexers.tiers.listing import DocumentPage, DocumentQuery
from indexers.tiers.query import HitRef, LegHit, SearchQuery

log = logging.getLogger(__name__)

Named = tuple[str, qe.EdgeShard]


class EdgeShards:
    """The hot engine (blocking): one fresh shard plus sealed, optimized shards, in ``path``."""

    def __init__(
        self,
        path: Path,
        *,
        config: es.ShardConfig,
        analyzer: Analyzer,
        avg_len: float,
        hnsw_ef: int,
        max_sealed: int,
    ) -> None:
        self.dir = path
        self.config = config
        self._analyzer = analyzer
        self._avg_len = avg_len
        self._hnsw_ef = hnsw_ef
        self._max_sealed = max_sealed
        self._lock = threading.RLock()  # guards the shard list; writes hold it for their duration
        self._fresh: Named | None = None
        self._sealed: list[Named] = []
        self._retired: list[Named] = []  # swapped out; closed at the next swap (in-flight reads finish)
        self._next = 1
        self._writes: dict[str, int] = {}  # each shard's writes that changed it: its facets' key
        self._facets = Facets()

    @property
    def engine(self) -> str:
        return "qdrant-edge"

    # layout -------------------------------------------------------------------------

    def _manifest(self) -> Path:
        return self.dir / "manifest.json"

    def _write_manifest(self) -> None:
        assert self._fresh is not None
        body = {"fresh": self._fresh[0], "sealed": [name for name, _ in self._sealed], "next": self._next}
        tmp = self._manifest().with_suffix(".tmp")
        tmp.write_text(json.dumps(body))
        tmp.replace(self._manifest())

    def new_name(self, kind: str) -> str:
        name = f"{kind}-{self._next:06d}"
        self._next += 1
        return name

    def _open(self) -> Named:
        with self._lock:
            if self._fresh is None:
                self.dir.mkdir(parents=True, exist_ok=True)
                if self._manifest().exists():
                    body = json.loads(self._manifest().read_text())
                    self._next = int(body["next"])
                    fresh_name, sealed = str(body["fresh"]), [str(n) for n in body["sealed"]]
                else:
                    fresh_name, sealed = self.new_name("fresh"), []
                self._sweep({fresh_name, *sealed})
                self._sealed = [(n, es.open_shard(self.dir / n, self.config)) for n in sealed]
                self._fresh = (fresh_name, es.open_shard(self.dir / fresh_name, self.config))
                self._write_manifest()
            return self._fresh

    def _sweep(self, keep: set[str]) -> None:
        """Remove what a crashed build left behind: folders the manifest does not list."""
        for child in self.dir.iterdir():
            ours = child.name.startswith(("fresh-", "sealed-"))
            if child.is_dir() and ours and child.name not in keep:
                log.warning("hot tier: removing %s (not in the manifest)", child.name)
                shutil.rmtree(child, ignore_errors=True)

    def _shards(self) -> list[Named]:
        fresh = self._open()
        with self._lock:
            return [fresh, *self._sealed]

    # writes -------------------------------------------------------------------------

    def ensure(self) -> None:
        self._open()

    def ping(self) -> None:
        self._open()[1].info()

    def fresh_size(self) -> int:
        """Points in the fresh shard (approximate: it decides when to seal)."""
        return self._open()[1].count(qe.CountRequest(exact=False))

    @property
    def avg_len(self) -> float:
        return self._avg_len

    def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        self.upsert_points([es.to_point(c, self._analyzer, self._avg_len) for c in chunks])

    def upsert_points(self, points: Sequence[qe.Point]) -> None:
        ids: list[qe.PointId] = [p.id for p in points]
        with self._lock:
            name, fresh = self._open()
            fresh.update(qe.UpdateOperation.upsert_points(list(points)))
            self._wrote(name)
            for sealed in self._sealed:
                self._drop(sealed, ids)

    def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        ids: list[qe.PointId] = [qp.point_id(tenant, c) for c in chunk_ids]
        with self._lock:
            for shard in self._shards():
                self._drop(shard, ids)

    def _drop(self, named: Named, ids: list[qe.PointId]) -> None:
        """Delete those of ``ids`` the shard holds; a shard that holds none is not written (its
        kept facets stay: a sealed shard, while new documents arrive)."""
        name, shard = named
        held: list[qe.PointId] = [r.id for r in shard.retrieve(ids, with_payload=False, with_vector=False)]
        if held:
            shard.update(qe.UpdateOperation.delete_points(held))
            self._wrote(name)

    def _wrote(self, name: str) -> None:
        self._writes[name] = self._writes.get(name, 0) + 1

    # compaction ---------------------------------------------------------------------

    def rotate(self, merge: bool) -> list[Named]:
        """Start a new fresh shard; the old one joins the sealed list as a build input."""
        with self._lock:
            old = self._open()
            merge = merge or len(self._sealed) + 1 > self._max_sealed
            if old[1].count(qe.CountRequest(exact=True)) == 0 and not (merge and len(self._sealed) > 1):
                return []
            name = self.new_name("fresh")
            self._fresh = (name, es.open_shard(self.dir / name, self.config))
            self._sealed.append(old)
            self._write_manifest()
            return list(self._sealed) if merge else [old]

    def swap(self, inputs: list[Named], built: Named, exported: set[str]) -> None:
        with self._lock:
            present: set[str] = set()
            for _, shard in inputs:
                for page in es.scroll(shard):
                    present.update(str(r.id) for r in page)
            gone: list[qe.PointId] = list(exported - present)  # deleted or moved during the build
            if gone:
                built[1].update(qe.UpdateOperation.delete_points(gone))
            for retired_name, shard in self._retired:
                shard.close()
                shutil.rmtree(self.dir / retired_name, ignore_errors=True)
            names = {n for n, _ in inputs}
            self._retired = inputs
            self._sealed = [s for s in self._sealed if s[0] not in names] + [built]
            self._write_manifest()

    # reads --------------------------------------------------------------------------

    def search(self, query: SearchQuery) -> LegResults:
        requests = es.leg_requests(query, self._hnsw_ef)
        if not requests:
            return {}
        merged: dict[str, list[LegHit]] = {leg: [] for leg, _ in requests}
        for _, shard in self._shards():
            for leg, hits in es.search(shard, requests, payload=query.payload).items():
                merged[leg].extend(hits)
        return {leg: sorted(hits, key=lambda h: -h.score)[: query.k] for leg, hits in merged.items()}

    def hydrate(self, refs: Sequence[HitRef]) -> dict[HitRef, StoredChunk]:
        found: dict[HitRef, StoredChunk] = {}
        for _, shard in self._shards():
            found.update(es.hydrate(shard, [r for r in refs if r not in found]))
            if len(found) == len(refs):
                break
        return found

    def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        payloads = [
            r.payload or {}
            for _, shard in self._shards()
            for page in es.scroll(shard, es.tenant_filter(tenant, doc_ids))
            for r in page
        ]
        payloads.sort(key=lambda p: (p.get("doc_id", ""), p.get("n", 0)))  # document order
        return [qp.stored(p) for p in payloads]

    def vectors(self, tenant: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        """The dense vectors of those of ``chunk_ids`` stored, by chunk id (``VectorSource``)."""
        ids: list[qe.PointId] = [qp.point_id(tenant, c) for c in chunk_ids]
        found: dict[str, Vector] = {}
        for _, shard in self._shards():
            for record in shard.retrieve(ids, with_payload=["chunk_id"], with_vector=True):
                vector: Any = record.vector
                found[str((record.payload or {})["chunk_id"])] = np.asarray(
                    vector[qp.DENSE], dtype=np.float32
                )
        return found

    def hashes(self) -> Iterator[HeldChunk]:
        """Every point's (tenant, doc id, chunk id, content hash, document hash), shard by shard."""
        for _, shard in self._shards():
            for page in es.scroll(shard):
                for r in page:
                    p = r.payload or {}
                    meta = p.get("metadata") or {}
                    yield (p["tenant"], p["doc_id"], p["chunk_id"], p["content_hash"], meta.get(DOC_HASH))

    def dated(self, through_year: int) -> list[DatedDocument]:
        qfilter = qe.Filter(must=[qe.FieldCondition(key="year", range=qe.RangeFloat(lte=through_year))])
        found: dict[tuple[str, str], DatedDocument] = {}
        for _, shard in self._shards():
            for page in es.scroll(shard, qfilter):
                for record in page:
                    p = record.payload or {}
                    found.setdefault(
                        (p["tenant"], p["doc_id"]), (p["tenant"], p["doc_id"], p.get("metadata") or {})
                    )
        return list(found.values())

    def count(self, tenant: str | None) -> int:
        qfilter = es.tenant_filter(tenant) if tenant is not None else None
        return sum(shard.count(qe.CountRequest(exact=True, filter=qfilter)) for _, shard in self._shards())

    def documents(self, query: DocumentQuery) -> DocumentPage:
        """Counted per shard (a chunk lives in one shard), paged by id here from each shard's
        facet, kept until the shard is written (``edge_pages``)."""
        with self._lock:
            listed = [(name, self._writes.get(name, 0), shard) for name, shard in self._shards()]
        return document_page(listed, query, es.to_filter(query.filters), self._facets)

    def shard_names(self) -> list[str]:
        """Fresh first, then sealed (for tests and /readyz details)."""
        return [name for name, _ in self._shards()]

    def close(self) -> None:
        with self._lock:
            for _, shard in [*([self._fresh] if self._fresh else []), *self._sealed, *self._retired]:
                with contextlib.suppress(Exception):
                    shard.flush()
                shard.close()
            for name, _ in self._retired:
                shutil.rmtree(self.dir / name, ignore_errors=True)
            self._fresh, self._sealed, self._retired = None, [], []
            self._facets.clear()

    def optimize(self) -> bool:
        """Not used: ``QdrantEdgeTier`` seals and merges shards itself (``compact``)."""
        return False

"""Cold tier, embedded: tantivy (BM25 + filters) and FAISS (vectors) over SQLite.

SQLite is the tier's source of truth: documents' chunks, metadata, filter fields and
vectors, each row stamped with a monotonically increasing ``version``; deletions leave a
tombstone with their version. tantivy and FAISS are derived indexes that remember the last
version they applied (a watermark beside their files), so after a crash, or when a file is
lost, ``ensure()`` replays whatever they missed. A write is acknowledged once SQLite has
committed it (WAL, synchronous=FULL) and both indexes have applied it.

FAISS index choice (see docs/design.md): below ``ivf_threshold`` vectors an exact
``IndexFlatIP`` wrapped in ``IndexIDMap2`` — exact, supports ``remove_ids`` and ID
selectors, ~1.5 KB per vector; above it an ``IndexIVFScalarQuantizer`` (SQ8, 4× smaller,
still supports ``remove_ids`` and selectors). HNSW is not used: it cannot remove ids, and
this tier replaces chunks in place. Filters become an ``IDSelectorBatch`` built from SQLite,
so they apply before top-k on both legs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from indexers.language import LANGUAGES
from indexers.records import SPACE_KEY, EmbeddedChunk, StoredChunk, Vector, chunk_key
from indexers.text.lexical import Analyzer
from indexers.tiers.base import DatedDocument, LegResults
from indexers.tiers.cold_bulk import BulkLoads
from indexers.tiers.cold_segment import COLUMNS, ON_CONFLICT, row_of
from indexers.tiers.cold_shards import Lexical, catch_up_lexical, drop_other_layouts, open_lexical
from indexers.tiers.cold_store import (
    ROW_COLUMNS,
    Store,
    document_page,
    filter_sql,
    vector_rows,
)
from indexers.tiers.cold_vectors import KMeans, VectorIndex
from indexers.tiers.listing import DocumentPage, DocumentQuery
from indexers.tiers.query import Filters, HitRef, LegHit, SearchQuery
from indexers.tiers.threaded import ThreadedTier

log = logging.getLogger(__name__)


class LocalCold(BulkLoads):
    """The embedded cold engine (blocking): SQLite + tantivy + FAISS in ``path``; tantivy in
    ``lexical_shards`` shards searched side by side (``indexers.tiers.cold_shards``)."""

    def __init__(
        self,
        path: Path,
        *,
        dim: int,
        analyzer: Analyzer,
        ivf_threshold: int = 200_000,
        lexical_shards: int = 1,
    ) -> None:
        self._path = path
        self._dim = dim
        self._analyzer = analyzer
        self._ivf_threshold = ivf_threshold
        self._lexical_shards = lexical_shards
        self._store: Store | None = None
        self._lexical: Lexical | None = None
        self._vectors: VectorIndex | None = None
        self._open_lock = threading.Lock()
        BulkLoads.__init__(self)

    @property
    def engine(self) -> str:
        return "tantivy+faiss+sqlite"

    def _parts(self) -> tuple[Store, Lexical, VectorIndex]:
        with self._open_lock:
            if self._store is None or self._lexical is None or self._vectors is None:
                self._path.mkdir(parents=True, exist_ok=True)
                store = Store(self._path / "cold.sqlite")
                lexical = open_lexical(self._path, self._lexical_shards)
                vectors = VectorIndex(self._path / "vectors.faiss", self._dim, self._ivf_threshold)
                self._catch_up(store, lexical, vectors)
                drop_other_layouts(self._path, self._lexical_shards)  # this one caught up
                self._store, self._lexical, self._vectors = store, lexical, vectors
            return self._store, self._lexical, self._vectors

    def ensure(self) -> None:
        self._parts()

    def ping(self) -> None:
        self._parts()[0].reader().execute("SELECT 1").fetchone()

    def _catch_up(
        self,
        store: Store,
        lexical: Lexical,
        vectors: VectorIndex,
        kmeans: KMeans | None = None,
        regrow: bool = False,
    ) -> None:
        """Replay into tantivy and FAISS every change newer than their watermarks; ``kmeans``
        trains and fills IVF lists (a bulk load's, on a GPU say) when FAISS is rebuilt or
        takes the load's vectors. With ``regrow`` (a bulk load's end), IVF lists the store
        outgrew are trained anew; opening the tier leaves that to ``optimize`` (a start-up
        stays quick)."""
        version = store.version()
        conn = store.reader()
        faiss_mark = vectors.load()
        n = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        if vectors.wants_rebuild(n, regrow):
            faiss_mark = -1
        if faiss_mark < 0 or (faiss_mark == 0 and n):
            vectors.build(*vector_rows(conn, self._dim), kmeans)
        elif faiss_mark < version:
            vectors.apply(*self._changes_vectors(conn, faiss_mark), kmeans)
        vectors.save(version)
        catch_up_lexical(conn, lexical, version)

    def _changes_vectors(self, conn: sqlite3.Connection, since: int) -> tuple[list[int], Vector, list[int]]:
        seqs, vecs = vector_rows(conn, self._dim, "version > ?", since)
        deleted = [r[0] for r in conn.execute("SELECT seq FROM tombstones WHERE version > ?", (since,))]
        return seqs.tolist(), vecs, deleted

    # writes ---------------------------------------------------------------------------

    def upsert(self, items: Sequence[EmbeddedChunk]) -> None:
        store, lexical, vectors = self._parts()
        with store.write_lock:
            self._drain_feeding()  # before writing: after a failed bulk feed, nothing is written
            self._adopted = None  # not adopted: a bulk load ends building FAISS from SQLite, with it
            rows, seqs = [], []
            store.tenants.update(i.chunk.tenant for i in items)
            with store.transaction() as conn:
                version = store.next_version(conn)
                for item in items:
                    row = self._write_row(conn, item, version)
                    rows.append(row)
                    seqs.append(row[0])
            lexical.apply(rows, [], version)
            vectors.apply(seqs, np.stack([i.vector for i in items]).astype(np.float32), [])

    def _write_row(self, conn: sqlite3.Connection, item: EmbeddedChunk, version: int) -> tuple[Any, ...]:
        row = row_of(item, self._analyzer)
        (seq,) = conn.execute(
            f"INSERT INTO chunks ({COLUMNS}, version) VALUES ({','.join('?' * 13)}) "
            f"{ON_CONFLICT} RETURNING seq",
            (*row, version),
        ).fetchone()
        kws = item.chunk.keywords()
        conn.execute("DELETE FROM chunk_kw WHERE seq = ?", (seq,))
        conn.executemany("INSERT INTO chunk_kw (kw, seq) VALUES (?, ?)", [(k, seq) for k in kws])
        conn.execute("DELETE FROM tombstones WHERE seq = ?", (seq,))
        tenant, year, day, terms = row[0], row[8], row[9], row[10]
        return (seq, tenant, terms, year, day, kws)

    def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        store, lexical, vectors = self._parts()
        with store.write_lock:
            self._drain_feeding()  # a bulk load's feeder may be using tantivy's writer (and failed)
            with store.transaction() as conn:
                version = store.next_version(conn)
                marks = ",".join("?" * len(chunk_ids))
                seqs = [
                    r[0]
                    for r in conn.execute(
                        f"DELETE FROM chunks WHERE tenant = ? AND chunk_id IN ({marks}) RETURNING seq",
                        (tenant, *chunk_ids),
                    )
                ]
                conn.executemany("DELETE FROM chunk_kw WHERE seq = ?", [(s,) for s in seqs])
                conn.executemany(
                    "INSERT OR REPLACE INTO tombstones (seq, version) VALUES (?, ?)",
                    [(s, version) for s in seqs],
                )
            if seqs:
                lexical.apply([], seqs, version)
                vectors.apply([], np.zeros((0, self._dim), dtype=np.float32), seqs)

    # reads ----------------------------------------------------------------------------

    def search(self, query: SearchQuery) -> LegResults:
        store, lexical, vectors = self._parts()
        conn = store.reader()
        results: dict[str, list[tuple[int, float]]] = {}
        # one tenant in the store: its filter admits every row, and either leg searches faster
        # without it (tantivy's block-max WAND prunes a bare union of terms, not one under a filter)
        alone = store.tenants <= {query.filters.tenant}
        if "lexical" in query.legs and query.terms:
            results["lexical"] = lexical.search(query.terms, query.filters, query.k, by_tenant=not alone)
        if "dense" in query.legs and query.vector is not None:
            results["dense"] = vectors.search(
                query.vector.astype(np.float32),
                query.k,
                self._allowed(conn, self._dense_filters(conn, query), alone),
                query.exact,
            )
        seqs = {seq for hits in results.values() for seq, _ in hits}
        tenant = query.filters.tenant
        rows: dict[int, StoredChunk] = {}
        if query.payload:
            rows = self._rows(conn, seqs)
            ids = {seq: row.chunk_id for seq, row in rows.items()}
        else:  # ids only: the chunk ids give the fusion keys; chunks come later from hydrate()
            ids = self._chunk_ids(conn, seqs)
        return {
            leg: [
                LegHit(chunk_key(tenant, ids[seq]), score, rows.get(seq), seq)
                for seq, score in hits
                if seq in ids
            ]
            for leg, hits in results.items()
        }

    @staticmethod
    def _dense_filters(conn: sqlite3.Connection, query: SearchQuery) -> Filters:
        """The dense leg's filters, without the query's space when no chunk is in another: a
        filter FAISS applies through a selector of every admitted row, which made each dense
        search ~3× slower on 100k chunks of one language (all English, say) for nothing."""
        if query.space is None:
            return query.filters
        others = [f"{SPACE_KEY}={v}" for v in LANGUAGES if v != query.space]
        marks = ",".join("?" * len(others))
        if conn.execute(f"SELECT 1 FROM chunk_kw WHERE kw IN ({marks}) LIMIT 1", others).fetchone() is None:
            return query.filters
        return query.dense_filters

    def _allowed(
        self, conn: sqlite3.Connection, filters: Filters, alone: bool
    ) -> np.ndarray[Any, Any] | None:
        """The seqs a filter admits, or None when it admits every row (no selector needed)."""
        unfiltered = not filters.keywords and filters.year is None and filters.date is None
        if unfiltered and alone:
            return None
        where, args = filter_sql(filters)
        seqs = [r[0] for r in conn.execute(f"SELECT seq FROM chunks WHERE {where}", args)]
        return np.asarray(seqs, dtype=np.int64)

    @staticmethod
    def _rows(conn: sqlite3.Connection, seqs: set[int]) -> dict[int, StoredChunk]:
        if not seqs:
            return {}
        marks = ",".join("?" * len(seqs))
        rows = conn.execute(f"SELECT {ROW_COLUMNS} FROM chunks WHERE seq IN ({marks})", tuple(seqs))
        return {r[0]: _stored(r) for r in rows}

    @staticmethod
    def _chunk_ids(conn: sqlite3.Connection, seqs: set[int]) -> dict[int, str]:
        if not seqs:
            return {}
        marks = ",".join("?" * len(seqs))
        return dict(conn.execute(f"SELECT seq, chunk_id FROM chunks WHERE seq IN ({marks})", tuple(seqs)))

    def hydrate(self, refs: Sequence[HitRef]) -> dict[HitRef, StoredChunk]:
        rows = self._rows(self._parts()[0].reader(), {int(r) for r in refs})
        return {seq: chunk for seq, chunk in rows.items()}

    def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        store, _, _ = self._parts()
        marks = ",".join("?" * len(doc_ids))
        rows = store.reader().execute(
            f"SELECT {ROW_COLUMNS} FROM chunks WHERE tenant = ? AND doc_id IN ({marks}) ORDER BY doc_id, n",
            (tenant, *doc_ids),
        )
        return [_stored(r) for r in rows]

    def dated(self, through_year: int) -> list[DatedDocument]:
        rows = (
            self._parts()[0]
            .reader()
            .execute(
                "SELECT tenant, doc_id, MIN(metadata) FROM chunks WHERE year <= ? GROUP BY tenant, doc_id",
                (through_year,),
            )
        )
        return [(tenant, doc_id, json.loads(meta)) for tenant, doc_id, meta in rows]

    def count(self, tenant: str | None) -> int:
        conn = self._parts()[0].reader()
        if tenant is None:
            return int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        return int(conn.execute("SELECT COUNT(*) FROM chunks WHERE tenant = ?", (tenant,)).fetchone()[0])

    def documents(self, query: DocumentQuery) -> DocumentPage:
        store = self._parts()[0]
        return document_page(store.reader(), query, store)

    def flush(self) -> None:
        """Persist the FAISS index (tantivy and SQLite are durable on every write)."""
        if self._store is not None and self._vectors is not None:
            with self._store.write_lock:
                self._vectors.save(self._vectors_mark(self._store))

    def optimize(self) -> bool:
        """Switch FAISS index kind when the collection crossed the threshold, or train IVF lists
        it outgrew anew, then persist it."""
        store, _, vectors = self._parts()
        with store.write_lock:
            conn = store.reader()
            n = int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
            rebuilt = vectors.wants_rebuild(n)
            if rebuilt:
                vectors.build(*vector_rows(conn, self._dim))
        self.flush()
        return rebuilt

    def close(self) -> None:
        with self._open_lock:
            if self._store is None:
                return
            self.flush()
            with self._store.write_lock:
                self._stop_checkpointer()  # a bulk load never ended
            if self._lexical is not None:
                self._lexical.close()
            self._store.close()
            self._store = self._lexical = self._vectors = None


class LocalColdTier(ThreadedTier):
    """The embedded cold tier: ``LocalCold`` in worker threads."""

    def __init__(
        self,
        path: Path,
        *,
        dim: int,
        analyzer: Analyzer,
        ivf_threshold: int = 200_000,
        lexical_shards: int = 1,
        nice: int = 0,
    ) -> None:
        self.local = LocalCold(
            path, dim=dim, analyzer=analyzer, ivf_threshold=ivf_threshold, lexical_shards=lexical_shards
        )
        super().__init__(self.local, name="local-cold", nice=nice)

    def flush(self) -> None:
        self.local.flush()

    async def search(self, query: SearchQuery) -> LegResults:
        """The lexical and the dense leg side by side, each in a reader thread: tantivy and FAISS
        release the GIL, so a search costs its slower leg rather than both (at 10M chunks each
        leg took tens of milliseconds, one after the other)."""
        legs = [
            leg
            for leg in query.legs
            if (leg == "lexical" and query.terms) or (leg == "dense" and query.vector is not None)
        ]
        if len(legs) < 2:
            return await super().search(query)
        parts = await asyncio.gather(
            *(self.read(self.local.search, replace(query, legs=(leg,))) for leg in legs)
        )
        return {leg: hits for part in parts for leg, hits in part.items()}


def _stored(row: tuple[Any, ...]) -> StoredChunk:
    _, chunk_id, doc_id, text, title, metadata, chash = row
    return StoredChunk(chunk_id, doc_id, text, title, json.loads(metadata), chash)

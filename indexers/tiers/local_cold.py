"""Cold tier, embedded: tantivy (BM25 + filters) and FAISS (vectors) over SQLite.

SQLite is the tier's source of truth: documents' chunks, metadata, filter fields and
vectors, each row stamped with a monotonically increasing ``version``; deletions leave a
tombstone with their version. tantivy and FAISS are derived indexes that remember the last
version they applied (a watermark beside their files), so after a crash, or when a file is
lost, ``ensure()`` replays whatever they missed. A write is acknowledged once SQLite has
committed it (WAL, synchronous=FULL) and both indexes have applied it.

FAISS index choice (see docs/design-notes.md): below ``ivf_threshold`` vectors an exact
``IndexFlatIP`` wrapped in ``IndexIDMap2`` — exact, supports ``remove_ids`` and ID
selectors, ~1.5 KB per vector; above it an ``IndexIVFScalarQuantizer`` (SQ8, 4× smaller,
still supports ``remove_ids`` and selectors). HNSW is not used: it cannot remove ids, and
this tier replaces chunks in place. Filters become an ``IDSelectorBatch`` built from SQLite,
so they apply before top-k on both legs.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import tantivy

from indexers.documents import (
    EmbeddedChunk,
    Filters,
    LegHit,
    Range,
    SearchQuery,
    StoredChunk,
    Vector,
)
from indexers.lexical import Analyzer
from indexers.tiers._worker import Worker
from indexers.tiers.base import LegResults

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL, chunk_id TEXT NOT NULL, doc_id TEXT NOT NULL, n INTEGER NOT NULL,
    text TEXT NOT NULL, title TEXT, metadata TEXT NOT NULL, content_hash TEXT NOT NULL,
    year INTEGER, day INTEGER, terms TEXT NOT NULL, vector BLOB NOT NULL, version INTEGER NOT NULL,
    UNIQUE (tenant, chunk_id)
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks (tenant, doc_id);
CREATE INDEX IF NOT EXISTS chunks_year ON chunks (tenant, year);
CREATE INDEX IF NOT EXISTS chunks_day ON chunks (tenant, day);
CREATE INDEX IF NOT EXISTS chunks_version ON chunks (version);
CREATE TABLE IF NOT EXISTS chunk_kw (kw TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (kw, seq))
    WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunk_kw_seq ON chunk_kw (seq);
CREATE TABLE IF NOT EXISTS tombstones (seq INTEGER PRIMARY KEY, version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
_ROW = "seq, chunk_id, doc_id, text, title, metadata, content_hash"


def day_number(day: dt.date) -> int:
    """2020-01-31 → 20200131: sortable, and the same in SQLite and tantivy."""
    return day.year * 10_000 + day.month * 100 + day.day


def _int_bounds(r: Range, convert: Any = int) -> tuple[int | None, int | None]:
    lo = convert(r.gte) if r.gte is not None else (convert(r.gt) + 1 if r.gt is not None else None)
    hi = convert(r.lte) if r.lte is not None else (convert(r.lt) - 1 if r.lt is not None else None)
    return lo, hi


def _day_bounds(r: Range) -> tuple[int | None, int | None]:
    def num(day: dt.date) -> int:
        return day_number(day)

    lo = num(r.gte) if r.gte else (num(r.gt + dt.timedelta(days=1)) if r.gt else None)
    hi = num(r.lte) if r.lte else (num(r.lt - dt.timedelta(days=1)) if r.lt else None)
    return lo, hi


class _Store:
    """The SQLite source of truth. One writer connection; one reader connection per thread."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()
        self.write_lock = threading.Lock()
        self.writer = self._connect(shared=True)  # used under write_lock from any worker thread
        self.writer.executescript(_SCHEMA)
        # Tenants ever written (never shrinks): one tenant means a tenant filter admits every row.
        self.tenants = {r[0] for r in self.writer.execute("SELECT DISTINCT tenant FROM chunks")}

    def _connect(self, shared: bool = False) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, timeout=30, check_same_thread=not shared)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.writer.execute("BEGIN IMMEDIATE")
        try:
            yield self.writer
        except BaseException:
            self.writer.execute("ROLLBACK")
            raise
        self.writer.execute("COMMIT")

    def next_version(self, conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "INSERT INTO meta (key, value) VALUES ('version', 1) "
            "ON CONFLICT (key) DO UPDATE SET value = value + 1 RETURNING value"
        ).fetchone()
        return int(row[0])

    def version(self) -> int:
        row = self.reader().execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.writer.close()


def _where(filters: Filters) -> tuple[str, list[Any]]:
    """Filters → an SQL condition on ``chunks`` (the FAISS ID selector's source)."""
    sql: list[str] = ["tenant = ?"]
    args: list[Any] = [filters.tenant]
    for column, r, bounds in (
        ("year", filters.year, _int_bounds),
        ("day", filters.date, _day_bounds),
    ):
        if r is None:
            continue
        lo, hi = bounds(r)
        sql.append(f"{column} IS NOT NULL")
        if lo is not None:
            sql.append(f"{column} >= ?")
            args.append(lo)
        if hi is not None:
            sql.append(f"{column} <= ?")
            args.append(hi)
    for group in filters.keyword_terms():
        marks = ",".join("?" * len(group))
        sql.append(f"seq IN (SELECT seq FROM chunk_kw WHERE kw IN ({marks}))")
        args.extend(group)
    return " AND ".join(sql), args


class _Lexical:
    """tantivy over pre-analysed terms (our Analyzer), so both tiers share one vocabulary."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("seq", stored=True, indexed=True, fast=True)
        builder.add_text_field("tenant", tokenizer_name="raw", index_option="basic")
        builder.add_text_field("kw", tokenizer_name="raw", index_option="basic")
        builder.add_text_field("terms", tokenizer_name="whitespace", index_option="position")
        builder.add_integer_field("year", indexed=True, fast=True)
        builder.add_integer_field("day", indexed=True, fast=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(path))
        self.writer = self.index.writer(heap_size=64_000_000, num_threads=1)
        self.watermark_file = path / "watermark"

    def watermark(self) -> int:
        try:
            return int(self.watermark_file.read_text())
        except (FileNotFoundError, ValueError):
            return 0

    def apply(self, rows: Sequence[tuple[Any, ...]], deleted: Sequence[int], version: int) -> None:
        for seq in deleted:
            self.writer.delete_documents_by_term("seq", seq)
        for seq, tenant, terms, year, day, kws in rows:
            self.writer.delete_documents_by_term("seq", seq)
            doc = tantivy.Document(seq=seq, tenant=tenant, terms=terms, kw=kws)
            if year is not None:
                doc.add_integer("year", year)
            if day is not None:
                doc.add_integer("day", day)
            self.writer.add_document(doc)
        self.writer.commit()
        self.index.reload()
        _write_atomic(self.watermark_file, str(version))

    def search(self, terms: Sequence[str], filters: Filters, k: int) -> list[tuple[int, float]]:
        if not terms:
            return []
        schema = self.schema
        should = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "terms", t)) for t in terms]
        clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(should))]
        for condition in self._conditions(filters):
            clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(condition, 0.0)))
        searcher = self.index.searcher()
        hits = searcher.search(tantivy.Query.boolean_query(clauses), limit=k).hits
        if not hits:
            return []
        seqs = searcher.fast_field_values("seq", [addr for _, addr in hits])
        return [
            (int(seq), float(score)) for (score, _), seq in zip(hits, seqs, strict=True) if seq is not None
        ]

    def _conditions(self, filters: Filters) -> Iterator[tantivy.Query]:
        schema = self.schema
        yield tantivy.Query.term_query(schema, "tenant", filters.tenant)
        for group in filters.keyword_terms():
            yield tantivy.Query.term_set_query(schema, "kw", group)
        for field, r, bounds in (("year", filters.year, _int_bounds), ("day", filters.date, _day_bounds)):
            if r is None:
                continue
            lo, hi = bounds(r)
            yield tantivy.Query.range_query(
                schema,
                field,
                tantivy.FieldType.Integer,
                lo if lo is not None else -(2**62),
                hi if hi is not None else 2**62,
            )

    def close(self) -> None:
        self.writer.wait_merging_threads()


class _Vectors:
    """FAISS over SQLite rows; the file is a cache that ``catch_up`` repairs."""

    def __init__(self, path: Path, dim: int, ivf_threshold: int) -> None:
        self.path = path
        self.dim = dim
        self.ivf_threshold = ivf_threshold
        self.watermark_file = path.with_suffix(".watermark")
        self.lock = threading.Lock()
        self.index: Any = None
        self.dirty = False

    def load(self) -> int:
        """Open the saved index; returns its watermark (0 when rebuilt from scratch)."""
        if self.path.exists() and self.watermark_file.exists():
            self.index = faiss.read_index(str(self.path))
            return int(self.watermark_file.read_text())
        self.index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        return 0

    def wants_rebuild(self, n: int) -> bool:
        is_ivf = self.index is not None and not isinstance(self.index, faiss.IndexIDMap2)
        return (n >= self.ivf_threshold) != is_ivf

    def build(self, seqs: np.ndarray[Any, Any], vectors: Vector) -> None:
        n = len(seqs)
        if n < self.ivf_threshold:
            index: Any = faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        else:
            nlist = int(4 * math.sqrt(n))
            quantizer = faiss.IndexFlatIP(self.dim)
            index = faiss.IndexIVFScalarQuantizer(
                quantizer, self.dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
            index.train(vectors[np.random.default_rng(0).permutation(n)[: 256 * nlist]])
            index.nprobe = max(8, nlist // 16)
        if n:
            index.add_with_ids(vectors, seqs)
        with self.lock:
            self.index = index
            self.dirty = True

    def apply(self, seqs: Sequence[int], vectors: Vector, deleted: Sequence[int]) -> None:
        with self.lock:
            gone = np.asarray(list(seqs) + list(deleted), dtype=np.int64)
            if len(gone):
                self.index.remove_ids(gone)
            if len(seqs):
                self.index.add_with_ids(vectors, np.asarray(seqs, dtype=np.int64))
            self.dirty = True

    def search(
        self, vector: Vector, k: int, allowed: np.ndarray[Any, Any] | None, exact: bool
    ) -> list[tuple[int, float]]:
        with self.lock:
            if self.index.ntotal == 0 or (allowed is not None and len(allowed) == 0):
                return []
            # The selector must outlive the search: params only hold a raw pointer to it.
            selector = faiss.IDSelectorBatch(allowed) if allowed is not None else None
            params = self._params(selector, exact)
            scores, ids = self.index.search(vector.reshape(1, -1), k, params=params)
        return [(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]

    def _params(self, selector: Any, exact: bool) -> Any:
        if isinstance(self.index, faiss.IndexIDMap2):
            if selector is None:
                return None
            params = faiss.SearchParameters()
        else:
            params = faiss.SearchParametersIVF()
            params.nprobe = self.index.nlist if exact else self.index.nprobe
        if selector is not None:
            params.sel = selector
        return params

    def save(self, version: int) -> None:
        with self.lock:
            if not self.dirty:
                return
            tmp = self.path.with_suffix(".tmp")
            faiss.write_index(self.index, str(tmp))
            tmp.replace(self.path)
            self.dirty = False
        _write_atomic(self.watermark_file, str(version))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


class LocalColdTier:
    """The embedded cold tier: SQLite + tantivy + FAISS in ``path``."""

    def __init__(self, path: Path, *, dim: int, analyzer: Analyzer, ivf_threshold: int = 200_000) -> None:
        self._path = path
        self._dim = dim
        self._analyzer = analyzer
        self._ivf_threshold = ivf_threshold
        self._store: _Store | None = None
        self._lexical: _Lexical | None = None
        self._vectors: _Vectors | None = None
        self._open_lock = threading.Lock()
        self._worker = Worker("local-cold")

    @property
    def engine(self) -> str:
        return "tantivy+faiss+sqlite"

    def _parts(self) -> tuple[_Store, _Lexical, _Vectors]:
        with self._open_lock:
            if self._store is None or self._lexical is None or self._vectors is None:
                self._path.mkdir(parents=True, exist_ok=True)
                store = _Store(self._path / "cold.sqlite")
                lexical = _Lexical(self._path / "tantivy")
                vectors = _Vectors(self._path / "vectors.faiss", self._dim, self._ivf_threshold)
                self._catch_up(store, lexical, vectors)
                self._store, self._lexical, self._vectors = store, lexical, vectors
            return self._store, self._lexical, self._vectors

    def _catch_up(self, store: _Store, lexical: _Lexical, vectors: _Vectors) -> None:
        """Replay into tantivy and FAISS every change newer than their watermarks."""
        version = store.version()
        conn = store.reader()
        faiss_mark = vectors.load()
        n = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        if vectors.wants_rebuild(n):
            faiss_mark = -1
        if faiss_mark < 0 or (faiss_mark == 0 and n):
            vectors.build(*self._all_vectors(conn))
        elif faiss_mark < version:
            vectors.apply(*self._changes_vectors(conn, faiss_mark))
        vectors.save(version)
        lex_mark = lexical.watermark()
        if lex_mark < version:
            rows = conn.execute(
                "SELECT seq, tenant, terms, year, day, "
                "(SELECT json_group_array(kw) FROM chunk_kw k WHERE k.seq = c.seq) "
                "FROM chunks c WHERE version > ?",
                (lex_mark,),
            ).fetchall()
            rows = [(*r[:5], json.loads(r[5])) for r in rows]
            deleted = [
                r[0] for r in conn.execute("SELECT seq FROM tombstones WHERE version > ?", (lex_mark,))
            ]
            lexical.apply(rows, deleted, version)
            log.info("cold tier: tantivy caught up %d changes, %d deletions", len(rows), len(deleted))

    def _all_vectors(self, conn: sqlite3.Connection) -> tuple[np.ndarray[Any, Any], Vector]:
        rows = conn.execute("SELECT seq, vector FROM chunks ORDER BY seq").fetchall()
        seqs = np.asarray([r[0] for r in rows], dtype=np.int64)
        vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, self._dim)
        return seqs, vecs

    def _changes_vectors(self, conn: sqlite3.Connection, since: int) -> tuple[list[int], Vector, list[int]]:
        rows = conn.execute("SELECT seq, vector FROM chunks WHERE version > ?", (since,)).fetchall()
        vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, self._dim)
        deleted = [r[0] for r in conn.execute("SELECT seq FROM tombstones WHERE version > ?", (since,))]
        return [r[0] for r in rows], vecs, deleted

    async def ensure(self) -> None:
        await self._worker.run(self._parts)

    # writes ---------------------------------------------------------------------------

    def _upsert(self, items: Sequence[EmbeddedChunk]) -> None:
        store, lexical, vectors = self._parts()
        with store.write_lock:
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
        c = item.chunk
        terms = " ".join(self._analyzer.terms(c.embed_text))
        day = day_number(c.date) if c.date else None
        vector = np.ascontiguousarray(item.vector, dtype=np.float32).tobytes()
        (seq,) = conn.execute(
            "INSERT INTO chunks (tenant, chunk_id, doc_id, n, text, title, metadata, content_hash, "
            "year, day, terms, vector, version) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) "
            "ON CONFLICT (tenant, chunk_id) DO UPDATE SET doc_id=excluded.doc_id, n=excluded.n, "
            "text=excluded.text, title=excluded.title, metadata=excluded.metadata, "
            "content_hash=excluded.content_hash, year=excluded.year, day=excluded.day, "
            "terms=excluded.terms, vector=excluded.vector, version=excluded.version RETURNING seq",
            (
                c.tenant,
                c.chunk_id,
                c.doc_id,
                c.n,
                c.text,
                c.title,
                json.dumps(dict(c.metadata)),
                c.content_hash,
                c.year,
                day,
                terms,
                vector,
                version,
            ),
        ).fetchone()
        kws = c.keywords()
        conn.execute("DELETE FROM chunk_kw WHERE seq = ?", (seq,))
        conn.executemany("INSERT INTO chunk_kw (kw, seq) VALUES (?, ?)", [(k, seq) for k in kws])
        conn.execute("DELETE FROM tombstones WHERE seq = ?", (seq,))
        return (seq, c.tenant, terms, c.year, day, kws)

    async def upsert(self, chunks: Sequence[EmbeddedChunk]) -> None:
        if chunks:
            await self._worker.run(self._upsert, chunks)

    def _delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        store, lexical, vectors = self._parts()
        with store.write_lock:
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

    async def delete(self, tenant: str, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            await self._worker.run(self._delete, tenant, list(chunk_ids))

    # reads ----------------------------------------------------------------------------

    def _search(self, query: SearchQuery) -> LegResults:
        store, lexical, vectors = self._parts()
        conn = store.reader()
        results: dict[str, list[tuple[int, float]]] = {}
        if "lexical" in query.legs and query.terms:
            results["lexical"] = lexical.search(query.terms, query.filters, query.k)
        if "dense" in query.legs and query.vector is not None:
            results["dense"] = vectors.search(
                query.vector.astype(np.float32),
                query.k,
                self._allowed(conn, query.filters, store.tenants),
                query.exact,
            )
        rows = self._rows(conn, {seq for hits in results.values() for seq, _ in hits})
        return {
            leg: [LegHit(rows[seq], score) for seq, score in hits if seq in rows]
            for leg, hits in results.items()
        }

    def _allowed(
        self, conn: sqlite3.Connection, filters: Filters, tenants: set[str]
    ) -> np.ndarray[Any, Any] | None:
        """The seqs a filter admits, or None when it admits every row (no selector needed)."""
        unfiltered = not filters.keywords and filters.year is None and filters.date is None
        if unfiltered and tenants <= {filters.tenant}:
            return None
        where, args = _where(filters)
        seqs = [r[0] for r in conn.execute(f"SELECT seq FROM chunks WHERE {where}", args)]
        return np.asarray(seqs, dtype=np.int64)

    @staticmethod
    def _rows(conn: sqlite3.Connection, seqs: set[int]) -> dict[int, StoredChunk]:
        if not seqs:
            return {}
        marks = ",".join("?" * len(seqs))
        rows = conn.execute(f"SELECT {_ROW} FROM chunks WHERE seq IN ({marks})", tuple(seqs))
        return {r[0]: _stored(r) for r in rows}

    async def search(self, query: SearchQuery) -> LegResults:
        return await self._worker.run(self._search, query)

    def _fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        store, _, _ = self._parts()
        marks = ",".join("?" * len(doc_ids))
        rows = store.reader().execute(
            f"SELECT {_ROW} FROM chunks WHERE tenant = ? AND doc_id IN ({marks}) ORDER BY doc_id, n",
            (tenant, *doc_ids),
        )
        return [_stored(r) for r in rows]

    async def fetch(self, tenant: str, doc_ids: Sequence[str]) -> list[StoredChunk]:
        if not doc_ids:
            return []
        return await self._worker.run(self._fetch, tenant, list(doc_ids))

    def _count(self, tenant: str | None) -> int:
        conn = self._parts()[0].reader()
        if tenant is None:
            return int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        return int(conn.execute("SELECT COUNT(*) FROM chunks WHERE tenant = ?", (tenant,)).fetchone()[0])

    async def count(self, tenant: str | None = None) -> int:
        return await self._worker.run(self._count, tenant)

    async def ping(self) -> bool:
        try:
            await self._worker.run(lambda: self._parts()[0].reader().execute("SELECT 1").fetchone())
        except Exception:  # any engine failure means "not ready"
            log.exception("cold tier ping failed")
            return False
        return True

    def flush(self) -> None:
        """Persist the FAISS index (tantivy and SQLite are durable on every write)."""
        if self._store is not None and self._vectors is not None:
            with self._store.write_lock:
                self._vectors.save(self._store.version())

    async def optimize(self) -> bool:
        await self._worker.run(self.flush)
        return True

    def _close(self) -> None:
        with self._open_lock:
            if self._store is None:
                return
            self.flush()
            if self._lexical is not None:
                self._lexical.close()
            self._store.close()
            self._store = self._lexical = self._vectors = None

    async def close(self) -> None:
        await self._worker.run(self._close)
        self._worker.shutdown()


def _stored(row: tuple[Any, ...]) -> StoredChunk:
    _, chunk_id, doc_id, text, title, metadata, chash = row
    return StoredChunk(chunk_id, doc_id, text, title, json.loads(metadata), chash)

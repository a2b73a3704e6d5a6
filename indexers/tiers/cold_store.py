"""The cold tier's source of truth: SQLite rows with versions and tombstones, and filter SQL."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from indexers.records import Vector
from indexers.sqlite import connect
from indexers.tiers.listing import DocumentPage, DocumentQuery, DocumentSummary, title_matches
from indexers.tiers.query import Filters, Range

SCHEMA = """
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
ROW_COLUMNS = "seq, chunk_id, doc_id, text, title, metadata, content_hash"
# A row is ~3.2 KB (text, terms, a 1.5 KB vector): on 4 KB pages most spill onto overflow pages.
# 16 KB pages adopted 1.6x as many rows a second as 4 KB (44k -> 69k here), and SQLite's largest,
# 64 KB, 18 % more again on the H200 machine (500k rows: 13.7 -> 11.3 s); reading 10 rows by seq
# costs 66 us instead of 51 (docs/benchmarks.md). A file made before keeps its page size.
PAGE_SIZE = 65_536


def day_number(day: dt.date) -> int:
    """2020-01-31 → 20200131: sortable, and the same in SQLite and tantivy."""
    return day.year * 10_000 + day.month * 100 + day.day


def int_bounds(r: Range, convert: Any = int) -> tuple[int | None, int | None]:
    lo = convert(r.gte) if r.gte is not None else (convert(r.gt) + 1 if r.gt is not None else None)
    hi = convert(r.lte) if r.lte is not None else (convert(r.lt) - 1 if r.lt is not None else None)
    return lo, hi


def day_bounds(r: Range) -> tuple[int | None, int | None]:
    def num(day: dt.date) -> int:
        return day_number(day)

    lo = num(r.gte) if r.gte else (num(r.gt + dt.timedelta(days=1)) if r.gt else None)
    hi = num(r.lte) if r.lte else (num(r.lt - dt.timedelta(days=1)) if r.lt else None)
    return lo, hi


# Every tenant, one index seek each (a skip over (tenant, doc_id)): DISTINCT read the whole index,
# ~1.5 s of a start-up at 10M chunks.
TENANTS = """
WITH RECURSIVE t(v) AS (
    SELECT MIN(tenant) FROM chunks
    UNION ALL SELECT (SELECT MIN(tenant) FROM chunks WHERE tenant > t.v) FROM t WHERE t.v IS NOT NULL
) SELECT v FROM t WHERE v IS NOT NULL
"""


class Store:
    """The SQLite source of truth. One writer connection; one reader connection per thread."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()
        self.write_lock = threading.Lock()
        self.writer = self._connect(shared=True)  # used under write_lock from any worker thread
        self.writer.executescript(SCHEMA)
        # Tenants ever written (never shrinks): one tenant means a tenant filter admits every row.
        self.tenants = {r[0] for r in self.writer.execute(TENANTS)}
        # A listing's total by its filters, with the version it was counted at (``counted``)
        self._totals: dict[tuple[Any, ...], tuple[int, int]] = {}

    def _connect(self, shared: bool = False) -> sqlite3.Connection:
        return connect(self._path, shared=shared, page_size=PAGE_SIZE)

    def reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE … COMMIT; rolled back when the body or the COMMIT itself fails (a full
        disk fails at COMMIT), so the connection is never left inside a transaction."""
        self.writer.execute("BEGIN IMMEDIATE")
        try:
            yield self.writer
            self.writer.execute("COMMIT")
        except BaseException:
            if self.writer.in_transaction:
                self.writer.execute("ROLLBACK")
            raise

    def next_version(self, conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "INSERT INTO meta (key, value) VALUES ('version', 1) "
            "ON CONFLICT (key) DO UPDATE SET value = value + 1 RETURNING value"
        ).fetchone()
        return int(row[0])

    def version(self) -> int:
        row = self.reader().execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        return int(row[0]) if row else 0

    def counted(self, key: tuple[Any, ...], count: Callable[[], int]) -> int:
        """``count()``, once per store version for each ``key``: paging through N documents
        counted all N on every page (a walk of the (tenant, doc_id) index), so a walk of the
        list, or a delete by filter, grew as N². The version is read before counting, so a
        write landing meanwhile is counted early, never missed."""
        version = self.version()
        hit = self._totals.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        total = count()
        if len(self._totals) >= 64:
            self._totals.clear()
        self._totals[key] = (version, total)
        return total

    def close(self) -> None:
        self.writer.close()


def filter_sql(filters: Filters) -> tuple[str, list[Any]]:
    """Filters → an SQL condition on ``chunks`` (the FAISS ID selector's source)."""
    sql: list[str] = ["tenant = ?"]
    args: list[Any] = [filters.tenant]
    for name, column, r, bounds in (
        ("year", "year", filters.year, int_bounds),
        ("date", "day", filters.date, day_bounds),
    ):
        if r is None:
            continue
        lo, hi = bounds(r)
        inside = [f"{column} IS NOT NULL"]
        if lo is not None:
            inside.append(f"{column} >= ?")
            args.append(lo)
        if hi is not None:
            inside.append(f"{column} <= ?")
            args.append(hi)
        within = " AND ".join(inside)
        sql.append(f"({within} OR {column} IS NULL)" if filters.soft(name) else within)
    for group in filters.keyword_terms():
        marks = ",".join("?" * len(group))
        sql.append(f"seq IN (SELECT seq FROM chunk_kw WHERE kw IN ({marks}))")
        args.extend(group)
    return " AND ".join(sql), args


# A row's metadata holds ``value`` at the path (a JSON path of one key): as the text SQLite gives the
# value, or any value whose text Python spells otherwise (booleans, reals, objects), so that the
# caller's own test (Python's ``str``) decides those: the walk is narrowed, never wrongly.
METADATA_HOLDS = (
    "(json_type(metadata, ?) = 'object' OR EXISTS (SELECT 1 FROM json_each(metadata, ?) "
    "WHERE type IN ('true', 'false', 'real', 'object', 'array') OR CAST(value AS TEXT) = ?))"
)


def document_page(conn: sqlite3.Connection, query: DocumentQuery, store: Store | None = None) -> DocumentPage:
    """One page of documents: an indexed walk of (tenant, doc_id) after the cursor, grouped by id.

    The bare ``title``/``metadata`` columns come from the row holding ``MIN(n)`` (SQLite's rule
    for one min/max aggregate): the document's first stored chunk.
    """
    where, args = filter_sql(query.filters)
    for key, value in query.metadata.items():
        if '"' in key or "\\" in key:  # not a JSON path label as written: the caller's test decides
            continue
        where += f" AND {METADATA_HOLDS}"
        label = f'$."{json.dumps(key)[1:-1]}"'  # spelt as the row's JSON spells it (\\u escapes)
        args += [label, label, value]
    if query.title_prefix is not None:
        # SQLite's lower() folds ASCII only: the prefix test is Python's, as in the Qdrant tiers
        conn.create_function("title_matches", 2, title_matches, deterministic=True)
        where += " AND title_matches(title, ?)"
        args.append(query.title_prefix)
    sql = f"SELECT COUNT(DISTINCT doc_id) FROM chunks WHERE {where}"

    def count() -> int:
        return int(conn.execute(sql, args).fetchone()[0])

    total = store.counted((sql, *args), count) if store is not None else count()
    after = [query.after] if query.after is not None else []
    rows = conn.execute(
        f"SELECT doc_id, COUNT(*), MIN(n), title, metadata FROM chunks WHERE {where}"
        f"{' AND doc_id > ?' if after else ''} GROUP BY doc_id ORDER BY doc_id LIMIT ?",
        [*args, *after, query.limit + 1],
    ).fetchall()
    docs = [DocumentSummary(d, title, count, json.loads(meta)) for d, count, _, title, meta in rows]
    return DocumentPage(docs[: query.limit], int(total), len(docs) > query.limit)


def lexical_rows(conn: sqlite3.Connection, where: str, *args: int) -> list[tuple[Any, ...]]:
    """What tantivy indexes of the rows ``where`` selects: seq, tenant, terms, year, day, keywords."""
    rows = conn.execute(
        "SELECT seq, tenant, terms, year, day, "
        "(SELECT json_group_array(kw) FROM chunk_kw k WHERE k.seq = c.seq) "
        f"FROM chunks c WHERE {where}",
        args,
    ).fetchall()
    return [(*r[:5], json.loads(r[5])) for r in rows]


def vector_rows(
    conn: sqlite3.Connection, dim: int, where: str = "true", *args: int
) -> tuple[np.ndarray[Any, Any], Vector]:
    """The seqs (int64) and vectors (float32, a row each) of the rows ``where`` selects, by seq."""
    rows = conn.execute(f"SELECT seq, vector FROM chunks WHERE {where} ORDER BY seq", args).fetchall()
    seqs = np.asarray([r[0] for r in rows], dtype=np.int64)
    return seqs, np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, dim)


def last_seq(conn: sqlite3.Connection) -> int:
    """The largest seq ever given (AUTOINCREMENT never gives one twice, even after a delete)."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chunks'").fetchone()
    return int(row[0]) if row else 0


def tombstones(store: Store) -> int:
    return int(store.reader().execute("SELECT COUNT(*) FROM tombstones").fetchone()[0])


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)

"""Bulk loads into the embedded cold tier: segments built by workers, adopted by the owner.

A worker (a Ray task, any process) writes a batch of embedded chunks into a **segment**: a plain
SQLite file holding the rows exactly as the tier stores them (analysed terms, keywords, vector
bytes), with no indexes and no journal, so building one costs a few microseconds a row and runs
on every core at once. The tier's owner then **adopts** segments, up to ``ADOPT_GROUP`` in one
transaction: each one's rows are copied into ``chunks`` (an upsert by ``(tenant, chunk_id)``,
inside SQLite's C code) with a version of its own, so a segment is either wholly in the tier or
not at all. tantivy and FAISS follow from the rows by version, as for any other write.

Why groups: document ids are random keys, so each transaction rewrites index pages all over the
``(tenant, chunk_id)`` and ``(tenant, doc_id)`` indexes, and the share of those pages that one
segment dirties grows with the table. Measured here (docs/benchmarks.md, 1M rows with random
ids): one segment a transaction fell from 36k to 17k rows/s as the table grew; eight a
transaction with a 512 MiB page cache, 77k to 33k (22.4 s for the million against 44.6 s).

``ColdLookup`` is the other half of a parallel load: workers read what the tier holds of their
documents (content and document hashes) straight from its SQLite file, in read-only mode, so
the comparison that decides what to embed runs beside the owner instead of inside it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from indexers.records import DOC_HASH, EmbeddedChunk
from indexers.text.lexical import Analyzer
from indexers.tiers.cold_store import PAGE_SIZE, day_number

COLUMNS = "tenant, chunk_id, doc_id, n, text, title, metadata, content_hash, year, day, terms, vector"
_SEGMENT_SCHEMA = f"CREATE TABLE chunks ({COLUMNS}); CREATE TABLE kw (tenant, chunk_id, kw);"
# A chunk written again keeps its row (and seq): every stored column but the key takes the new value.
ON_CONFLICT = "ON CONFLICT (tenant, chunk_id) DO UPDATE SET " + ", ".join(
    f"{c}=excluded.{c}" for c in [*COLUMNS.split(", ")[2:], "version"]
)


def row_of(item: EmbeddedChunk, analyzer: Analyzer) -> tuple[Any, ...]:
    """A chunk as the cold tier stores it (``COLUMNS``, in order)."""
    c = item.chunk
    return (
        c.tenant,
        c.chunk_id,
        c.doc_id,
        c.n,
        c.text,
        c.title,
        json.dumps(dict(c.metadata)),
        c.content_hash,
        c.year,
        day_number(c.date) if c.date else None,
        " ".join(analyzer.terms(c.embed_text)),
        np.ascontiguousarray(item.vector, dtype=np.float32).tobytes(),
    )


def write_segment(path: Path, items: Sequence[EmbeddedChunk], analyzer: Analyzer) -> int:
    """Write ``items`` as a segment at ``path`` (built under a temporary name, then renamed)."""
    tmp = path.with_name(path.name + ".part")
    tmp.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp)
    try:
        pragmas = f"PRAGMA page_size={PAGE_SIZE}; PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
        conn.executescript(pragmas + _SEGMENT_SCHEMA)
        rows = [row_of(i, analyzer) for i in items]
        conn.executemany(f"INSERT INTO chunks VALUES ({','.join('?' * 12)})", rows)
        conn.executemany(
            "INSERT INTO kw VALUES (?,?,?)",
            [(i.chunk.tenant, i.chunk.chunk_id, kw) for i in items for kw in i.chunk.keywords()],
        )
        conn.commit()
    finally:
        conn.close()
    tmp.replace(path)
    return len(items)


def adopt(conn: sqlite3.Connection, version: int, seg: str = "seg") -> int:
    """Copy the segment attached as ``seg`` into the tier with ``version`` (its own: the keyword
    rows of that version are replaced), inside the caller's transaction."""
    conn.execute(
        f"INSERT INTO chunks ({COLUMNS}, version) SELECT {COLUMNS}, ? FROM {seg}.chunks WHERE true "
        + ON_CONFLICT,
        (version,),
    )
    conn.execute("DELETE FROM chunk_kw WHERE seq IN (SELECT seq FROM chunks WHERE version = ?)", (version,))
    conn.execute(
        f"INSERT OR IGNORE INTO chunk_kw (kw, seq) SELECT k.kw, c.seq FROM {seg}.kw k "
        "JOIN chunks c ON c.tenant = k.tenant AND c.chunk_id = k.chunk_id"
    )
    conn.execute("DELETE FROM tombstones WHERE seq IN (SELECT seq FROM chunks WHERE version = ?)", (version,))
    return int(conn.execute(f"SELECT COUNT(*) FROM {seg}.chunks").fetchone()[0])


# Segments adopted in one transaction: each is attached, and SQLite attaches at most 10 databases.
ADOPT_GROUP = 8

HeldChunk = tuple[str, str, str, str, str | None]  # tenant, doc id, chunk id, content hash, doc hash


def write_lookup(path: Path, held: Iterable[HeldChunk]) -> int:
    """A read-only copy of what a tier holds, in the shape ``ColdLookup`` reads: for a tier that
    other processes cannot open (Qdrant Edge is one process's), taken by its owner before a run."""
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
            "CREATE TABLE chunks (tenant, doc_id, chunk_id, content_hash, metadata);"
        )
        rows = ((t, d, c, h, json.dumps({DOC_HASH: dh})) for t, d, c, h, dh in held)
        conn.executemany("INSERT INTO chunks VALUES (?,?,?,?,?)", rows)
        conn.execute("CREATE INDEX chunks_doc ON chunks (tenant, doc_id)")
        conn.commit()
        return int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
    finally:
        conn.close()


@dataclass(frozen=True, slots=True)
class ColdLookup:
    """What the tier at ``path`` holds of some documents, read from any process (read-only)."""

    path: Path

    def hashes(self, tenant: str, doc_ids: Sequence[str]) -> dict[str, dict[str, tuple[str, str | None]]]:
        """doc id → {chunk id: (content hash, document hash)}."""
        out: dict[str, dict[str, tuple[str, str | None]]] = {}
        if not doc_ids or not self.path.exists():
            return out
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30)
        try:
            for i in range(0, len(doc_ids), 500):
                part = doc_ids[i : i + 500]
                rows = conn.execute(
                    f"SELECT doc_id, chunk_id, content_hash, json_extract(metadata, '$.{DOC_HASH}') "
                    f"FROM chunks WHERE tenant = ? AND doc_id IN ({','.join('?' * len(part))})",
                    (tenant, *part),
                )
                for doc_id, chunk_id, chash, dhash in rows:
                    out.setdefault(doc_id, {})[chunk_id] = (chash, dhash)
        finally:
            conn.close()
        return out

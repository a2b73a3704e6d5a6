"""The ledger's two engines: SQLite in the data dir (one owner) and PostgreSQL (shared by replicas).

The SQL is ``SqlLedger``'s; an engine opens the connection, its transactions, and spells its
clock and row lock.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from indexers.ingest.ledger import ADDED_COLUMNS, REQUEUE, TABLES, SqlLedger
from indexers.sqlite import connect


class SqliteLedger(SqlLedger):
    """The ledger in ``jobs.sqlite`` of the data dir (WAL, ``synchronous=FULL``)."""

    NOW = "((julianday('now') - 2440587.5) * 86400.0)"
    LOCK = ""  # BEGIN IMMEDIATE holds the database's write lock for the whole claim
    ROW_LOCK = ""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._conn = connect(path)
        self._conn.executescript(TABLES.format(real="REAL", without_rowid=" WITHOUT ROWID"))
        have = {row[1] for row in self._conn.execute("PRAGMA table_info(jobs)")}
        for column, decl in ADDED_COLUMNS:  # a ledger written by an older version
            if column not in have:
                self._conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {decl}")

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, tuple(args)).fetchall()

    def recover(self) -> None:
        """One server owns a data dir: a job it left running died with it, so queue it again now."""
        with self._tx() as tx:
            tx.execute(f"UPDATE jobs SET status = {REQUEUE}, runner = NULL WHERE status = 'running'")

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class PostgresLedger(SqlLedger):
    """The ledger on a PostgreSQL server (psycopg 3), shared by every replica."""

    NOW = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"
    LOCK = " FOR UPDATE SKIP LOCKED"
    ROW_LOCK = " FOR UPDATE"

    def __init__(self, url: str) -> None:
        import psycopg  # only where PostgreSQL is configured

        super().__init__()
        self._url = url
        self._conn = psycopg.connect(url, autocommit=True)
        with self._conn.transaction():
            # one creator at a time when replicas start together (CREATE … IF NOT EXISTS races)
            self._conn.execute("SELECT pg_advisory_xact_lock(7305142)")
            for statement in TABLES.format(real="DOUBLE PRECISION", without_rowid="").split(";"):
                if statement.strip():
                    self._conn.execute(re.sub(r"--[^\n]*", "", statement))

    def _connection(self) -> Any:
        """The connection, opened again if the server dropped it (a restart, a failover): the call
        that saw it fail raised; the next one reconnects. Call with the lock held."""
        import psycopg

        if self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(self._url, autocommit=True)
        return self._conn

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        with self._lock:
            conn = self._connection()
            with conn.transaction():
                yield _Dollars(conn)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            rows: list[tuple[Any, ...]] = self._connection().execute(_dollars(sql), tuple(args)).fetchall()
            return rows

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _dollars(sql: str) -> str:
    """SQLite's ``?`` placeholders in psycopg's spelling (the SQL here has no literal ``?``)."""
    return sql.replace("?", "%s")


class _Dollars:
    """A psycopg connection that takes the ``?`` placeholders of the shared SQL."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._conn.execute(_dollars(sql), tuple(args))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self._conn.cursor().executemany(_dollars(sql), rows)


def open_ledger(url: str | None, data_dir: Path) -> SqlLedger:
    """PostgreSQL when ``url`` names one (``postgresql://…``), else SQLite in the data dir."""
    if url:
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"jobs URL {url!r}: only postgresql://… is supported")
        return PostgresLedger(url)
    data_dir.mkdir(parents=True, exist_ok=True)
    return SqliteLedger(data_dir / "jobs.sqlite")

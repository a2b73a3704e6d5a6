"""The job ledger: ingestion jobs and their documents, durable, shared by every replica.

One interface, two engines: SQLite in the data dir (one server owns it) and PostgreSQL
(``RAG_JOBS__URL=postgresql://…``), which replicas behind a load balancer share. The SQL is
written once; each engine says how to open a transaction, read the clock and lock a row.

``submit`` stores a job and every one of its documents in one transaction before the caller is
answered, so an acknowledged job survives a crash. A runner ``claim``s the oldest queued job, or
a running one whose lease expired (its runner died), and holds it with a lease it renews while
it works; the claim is one transaction that locks the row (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, the database write lock on SQLite), so a dead runner's job is taken over exactly
once. Cancelling is a flag in the row: any replica sets it, the runner sees it at its next renewal.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, Protocol

from indexers.ingest.results import DocResult, Placement
from indexers.records import Document

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
FINISHED: frozenset[str] = frozenset({"done", "failed", "cancelled"})
MAX_ERRORS = 100
_PAGE = 1000

TABLES = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    placement TEXT NOT NULL,
    status TEXT NOT NULL,
    total INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    created_docs INTEGER NOT NULL DEFAULT 0,
    updated_docs INTEGER NOT NULL DEFAULT 0,
    unchanged_docs INTEGER NOT NULL DEFAULT 0,
    chunks INTEGER NOT NULL DEFAULT 0,
    seconds {real} NOT NULL DEFAULT 0,
    errors TEXT NOT NULL DEFAULT '[]',
    created {real} NOT NULL,
    updated {real} NOT NULL,
    runner TEXT,
    lease_until {real},
    cancel INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS job_docs (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    doc_key TEXT NOT NULL,
    doc TEXT NOT NULL,
    state INTEGER NOT NULL DEFAULT 0,  -- 0 pending, 1 done, 2 failed
    PRIMARY KEY (job_id, seq)
){without_rowid};
CREATE INDEX IF NOT EXISTS job_docs_pending ON job_docs (job_id, state, seq);
CREATE INDEX IF NOT EXISTS job_docs_key ON job_docs (job_id, doc_key);
CREATE INDEX IF NOT EXISTS jobs_claim ON jobs (status, created);
"""
ADDED_COLUMNS = (  # since the first version of the SQLite ledger
    ("created_docs", "INTEGER NOT NULL DEFAULT 0"),
    ("updated_docs", "INTEGER NOT NULL DEFAULT 0"),
    ("unchanged_docs", "INTEGER NOT NULL DEFAULT 0"),
    ("runner", "TEXT"),
    ("lease_until", "REAL"),
    ("cancel", "INTEGER NOT NULL DEFAULT 0"),
)
# A running job given back (shutdown, recovery) goes back to the queue, unless a cancel was asked for.
REQUEUE = "CASE WHEN cancel = 1 THEN 'cancelled' ELSE 'queued' END"
_STATE_COLUMNS = (
    "id, tenant, status, total, done, failed, created_docs, updated_docs, unchanged_docs, "
    "chunks, seconds, errors, created, updated, cancel"
)


@dataclass(frozen=True, slots=True)
class JobState:
    id: str
    tenant: str
    status: JobStatus
    total: int
    done: int
    failed: int
    created_docs: int
    updated_docs: int
    unchanged_docs: int
    chunks: int
    seconds: float
    errors: list[dict[str, str]]
    created: float
    updated: float
    cancel: bool = False  # asked for while running: the runner stops after its batch in flight

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None before the first batch, 0 when finished)."""
        left = self.total - self.done - self.failed
        if self.finished or left == 0:
            return 0.0
        finished = self.done + self.failed
        return left * self.seconds / finished if finished and self.seconds > 0 else None

    @classmethod
    def of(cls, row: Sequence[Any]) -> JobState:
        values = dict(zip((f.name for f in fields(cls)), row, strict=True))
        return cls(**{**values, "errors": json.loads(values["errors"]), "cancel": bool(values["cancel"])})


@dataclass(frozen=True, slots=True)
class Lease:
    """What a renewal learns: whether the runner still holds the job, and whether to stop."""

    held: bool
    cancel: bool


class Ledger(Protocol):
    """The ledger's interface (blocking; the runner calls it from worker threads)."""

    def submit(self, tenant: str, placement: Placement, docs: Sequence[Document]) -> str: ...
    def get(self, job_id: str) -> JobState | None: ...
    def jobs(self, tenant: str, limit: int = 50) -> list[JobState]: ...
    def placement(self, job_id: str) -> Placement: ...
    def recover(self) -> None: ...
    def claim(self, runner: str, lease_s: float) -> str | None: ...
    def renew(self, job_id: str, runner: str, lease_s: float) -> Lease: ...
    def release(self, job_id: str, runner: str) -> None: ...
    def request_cancel(self, job_id: str) -> JobState | None: ...
    def set_status(
        self, job_id: str, status: JobStatus, error: str | None = None, *, runner: str | None = None
    ) -> bool: ...
    def pending(self, job_id: str) -> Iterator[tuple[str, Document]]: ...
    def mark(
        self, job_id: str, runner: str, results: Sequence[DocResult], chunks: int, seconds: float
    ) -> bool: ...
    def close(self) -> None: ...


def doc_key(tenant: str, doc_id: str) -> str:
    return json.dumps([tenant, doc_id])


class SqlLedger:
    """The ledger in SQL, written once; subclasses open the connection and spell the dialect."""

    NOW: str  # the database's clock, in seconds since the epoch
    LOCK: str  # appended to the claim's SELECT
    ROW_LOCK: str  # appended to a SELECT that a write in the same transaction depends on

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one connection, used by one thread at a time

    # the dialect ------------------------------------------------------------------------------

    def _tx(self) -> contextlib.AbstractContextManager[Any]:
        """A write transaction (a cursor-like object with ``execute``/``executemany``)."""
        raise NotImplementedError

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    # jobs ----------------------------------------------------------------------------------------

    def submit(self, tenant: str, placement: Placement, docs: Sequence[Document]) -> str:
        """Store the job and its documents durably; returns the job id."""
        latest = {(d.tenant, d.id): d for d in docs}  # the last copy of an id wins
        job_id = uuid.uuid4().hex
        now = time.time()
        rows = [
            (job_id, seq, doc_key(*key), json.dumps(_doc_json(doc)))
            for seq, (key, doc) in enumerate(latest.items())
        ]
        with self._tx() as tx:
            tx.execute(
                "INSERT INTO jobs (id, tenant, placement, status, total, created, updated) "
                "VALUES (?, ?, ?, 'queued', ?, ?, ?)",
                (job_id, tenant, placement, len(rows), now, now),
            )
            tx.executemany("INSERT INTO job_docs (job_id, seq, doc_key, doc) VALUES (?, ?, ?, ?)", rows)
        return job_id

    def get(self, job_id: str) -> JobState | None:
        rows = self._query(f"SELECT {_STATE_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return JobState.of(rows[0]) if rows else None

    def jobs(self, tenant: str, limit: int = 50) -> list[JobState]:
        """The tenant's latest jobs, newest first."""
        sql = f"SELECT {_STATE_COLUMNS} FROM jobs WHERE tenant = ? ORDER BY created DESC LIMIT ?"
        return [JobState.of(r) for r in self._query(sql, (tenant, limit))]

    def placement(self, job_id: str) -> Placement:
        return self._query("SELECT placement FROM jobs WHERE id = ?", (job_id,))[0][0]  # type: ignore[no-any-return]

    def recover(self) -> None:
        """At start: nothing to do where leases expire by themselves (see ``SqliteLedger``)."""

    def claim(self, runner: str, lease_s: float) -> str | None:
        """The oldest queued job, or a running one whose lease expired, now held by ``runner``.

        A job whose runner died after a cancel was asked for ends cancelled instead."""
        expired = f"(lease_until IS NULL OR lease_until < {self.NOW})"
        with self._tx() as tx:
            tx.execute(
                f"UPDATE jobs SET status = 'cancelled', updated = ? "
                f"WHERE status = 'running' AND cancel = 1 AND {expired}",
                (time.time(),),
            )
            row = tx.execute(
                "SELECT id FROM jobs WHERE status = 'queued' OR "
                f"(status = 'running' AND cancel = 0 AND {expired}) ORDER BY created LIMIT 1{self.LOCK}"
            ).fetchone()
            if row is None:
                return None
            tx.execute(
                f"UPDATE jobs SET status = 'running', runner = ?, lease_until = {self.NOW} + ?, "
                "updated = ? WHERE id = ?",
                (runner, lease_s, time.time(), row[0]),
            )
            return str(row[0])

    def renew(self, job_id: str, runner: str, lease_s: float) -> Lease:
        with self._tx() as tx:
            tx.execute(
                f"UPDATE jobs SET lease_until = {self.NOW} + ? "
                "WHERE id = ? AND runner = ? AND status = 'running'",
                (lease_s, job_id, runner),
            )
            row = tx.execute("SELECT runner, status, cancel FROM jobs WHERE id = ?", (job_id,)).fetchone()
        held = row is not None and row[0] == runner and row[1] == "running"
        return Lease(held=held, cancel=bool(row and row[2]))

    def release(self, job_id: str, runner: str) -> None:
        """Give a job back to the queue (a runner shutting down cleanly); a cancelled one ends."""
        with self._tx() as tx:
            tx.execute(
                f"UPDATE jobs SET status = {REQUEUE}, runner = NULL, lease_until = NULL "
                "WHERE id = ? AND runner = ? AND status = 'running'",
                (job_id, runner),
            )

    def _held(self, tx: Any, job_id: str, runner: str | None) -> bool:
        """Whether ``runner`` still holds the job (locking its row until the transaction ends)."""
        if runner is None:
            return True
        row = tx.execute(f"SELECT runner, status FROM jobs WHERE id = ?{self.ROW_LOCK}", (job_id,)).fetchone()
        return row is not None and row[0] == runner and row[1] == "running"

    def request_cancel(self, job_id: str) -> JobState | None:
        """A queued job is cancelled at once; a running one stops at its runner's next renewal."""
        with self._tx() as tx:
            tx.execute(
                "UPDATE jobs SET status = 'cancelled', updated = ? WHERE id = ? AND status = 'queued'",
                (time.time(), job_id),
            )
            tx.execute(  # ``updated`` moves: event streams show the job cancelling at once
                "UPDATE jobs SET cancel = 1, updated = ? WHERE id = ? AND status = 'running'",
                (time.time(), job_id),
            )
        return self.get(job_id)

    def set_status(
        self, job_id: str, status: JobStatus, error: str | None = None, *, runner: str | None = None
    ) -> bool:
        """Set the status; with ``runner``, only while it holds the job (False when it does not)."""
        with self._tx() as tx:
            if not self._held(tx, job_id, runner):
                return False
            if error is not None:
                row = tx.execute("SELECT errors FROM jobs WHERE id = ?", (job_id,)).fetchone()
                errors = [*json.loads(row[0]), {"id": "*", "error": error}][-MAX_ERRORS:]
                tx.execute("UPDATE jobs SET errors = ? WHERE id = ?", (json.dumps(errors), job_id))
            tx.execute("UPDATE jobs SET status = ?, updated = ? WHERE id = ?", (status, time.time(), job_id))
            if status in FINISHED:  # the documents' text is no longer needed
                tx.execute("UPDATE job_docs SET doc = '' WHERE job_id = ? AND state != 0", (job_id,))
                if status == "done":
                    tx.execute("DELETE FROM job_docs WHERE job_id = ?", (job_id,))
        return True

    def pending(self, job_id: str) -> Iterator[tuple[str, Document]]:
        """(doc key, document) not yet done, in order, a page at a time (memory stays flat)."""
        after = -1
        while True:
            rows = self._query(
                "SELECT seq, doc_key, doc FROM job_docs WHERE job_id = ? AND state = 0 AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (job_id, after, _PAGE),
            )
            if not rows:
                return
            for seq, key, doc in rows:
                yield key, _doc_from_json(json.loads(doc))
                after = seq

    def mark(
        self, job_id: str, runner: str, results: Sequence[DocResult], chunks: int, seconds: float
    ) -> bool:
        """Record one batch written by the pipeline, in one transaction, while ``runner`` holds the
        job; False (nothing recorded) when another runner has taken it over."""
        done = [(job_id, doc_key(r.tenant or "", r.id)) for r in results if r.status != "failed"]
        failed = [r for r in results if r.status == "failed"]
        counts = {s: sum(r.status == s for r in results) for s in ("created", "updated", "unchanged")}
        with self._tx() as tx:
            if not self._held(tx, job_id, runner):
                return False
            tx.executemany("UPDATE job_docs SET state = 1 WHERE job_id = ? AND doc_key = ?", done)
            tx.executemany(
                "UPDATE job_docs SET state = 2 WHERE job_id = ? AND doc_key = ?",
                [(job_id, doc_key(r.tenant or "", r.id)) for r in failed],
            )
            errors = json.loads(tx.execute("SELECT errors FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])
            errors += [{"id": r.id, "error": r.error or "failed"} for r in failed][: MAX_ERRORS - len(errors)]
            tx.execute(
                "UPDATE jobs SET done = (SELECT COUNT(*) FROM job_docs WHERE job_id = ? AND state = 1), "
                "failed = (SELECT COUNT(*) FROM job_docs WHERE job_id = ? AND state = 2), "
                "created_docs = created_docs + ?, updated_docs = updated_docs + ?, "
                "unchanged_docs = unchanged_docs + ?, chunks = chunks + ?, seconds = seconds + ?, "
                "errors = ?, updated = ? WHERE id = ?",
                (
                    job_id,
                    job_id,
                    counts["created"],
                    counts["updated"],
                    counts["unchanged"],
                    chunks,
                    seconds,
                    json.dumps(errors),
                    time.time(),
                    job_id,
                ),
            )
        return True

    def close(self) -> None:
        raise NotImplementedError


def _doc_json(doc: Document) -> dict[str, Any]:
    return {
        "id": doc.id,
        "text": doc.text,
        "title": doc.title,
        "metadata": dict(doc.metadata),
        "tenant": doc.tenant,
        "page_starts": list(doc.page_starts),
    }


def _doc_from_json(data: dict[str, Any]) -> Document:
    return Document(
        id=data["id"],
        text=data["text"],
        title=data["title"],
        metadata=data["metadata"],
        tenant=data["tenant"],
        page_starts=tuple(data.get("page_starts") or ()),
    )

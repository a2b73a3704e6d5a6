"""Asynchronous ingestion jobs with a durable ledger: accepted, tracked, resumed after a crash.

The ledger is SQLite (WAL, ``synchronous=FULL``). ``submit`` stores the job and every one of
its documents in one transaction before the caller is answered, so an acknowledged job
survives a crash. The runner takes jobs one at a time in submission order (a later job's
version of a document wins, as it would in one run), feeds their pending documents to the
pipeline, and marks a document done only after the pipeline reports it durable in the tiers.
On start, a job that was running when the process died is queued again and resumes from
its pending documents; those written but not yet marked are compared by content hash and
skipped, so nothing is embedded twice and nothing is duplicated.

Within one job, a document id given twice keeps its last copy (``total`` counts unique ids).
Cancelling a running job stops it between batches; documents already written stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from indexers.ingest.pipeline import DocResult, IngestReport, Pipeline, Placement
from indexers.records import Document
from indexers.sqlite import connect

log = logging.getLogger(__name__)

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
FINISHED: frozenset[str] = frozenset({"done", "failed", "cancelled"})
MAX_ERRORS = 100
_PAGE = 1000

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    placement TEXT NOT NULL,
    status TEXT NOT NULL,
    total INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    chunks INTEGER NOT NULL DEFAULT 0,
    seconds REAL NOT NULL DEFAULT 0,
    errors TEXT NOT NULL DEFAULT '[]',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS job_docs (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    doc_key TEXT NOT NULL,
    doc TEXT NOT NULL,
    state INTEGER NOT NULL DEFAULT 0,  -- 0 pending, 1 done, 2 failed
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_docs_pending ON job_docs (job_id, state, seq);
"""


@dataclass(frozen=True, slots=True)
class JobState:
    id: str
    tenant: str
    status: JobStatus
    total: int
    done: int
    failed: int
    chunks: int
    seconds: float
    errors: list[dict[str, str]]
    created: float
    updated: float

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None before the first batch, 0 when finished)."""
        left = self.total - self.done - self.failed
        if self.status in FINISHED or left == 0:
            return 0.0
        finished = self.done + self.failed
        return left * self.seconds / finished if finished and self.seconds > 0 else None


def _key(tenant: str, doc_id: str) -> str:
    return json.dumps([tenant, doc_id])


class JobLedger:
    """The jobs and their documents, on disk. Thread-safe (one connection under a lock)."""

    def __init__(self, path: Path) -> None:
        self._conn = connect(path)
        self._conn.executescript(SCHEMA)
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def submit(self, tenant: str, placement: Placement, docs: Sequence[Document]) -> str:
        """Store the job and its documents durably; returns the job id."""
        latest = {(d.tenant, d.id): d for d in docs}  # the last copy of an id wins
        job_id = uuid.uuid4().hex
        now = time.time()
        rows = [
            (job_id, seq, _key(*key), json.dumps(_doc_json(doc)))
            for seq, (key, doc) in enumerate(latest.items())
        ]
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO jobs (id, tenant, placement, status, total, created, updated) "
                "VALUES (?, ?, ?, 'queued', ?, ?, ?)",
                (job_id, tenant, placement, len(rows), now, now),
            )
            conn.executemany("INSERT INTO job_docs (job_id, seq, doc_key, doc) VALUES (?, ?, ?, ?)", rows)
        return job_id

    def get(self, job_id: str) -> JobState | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT id, tenant, status, total, done, failed, chunks, seconds, errors, created, updated "
                "FROM jobs WHERE id = ?",
                (job_id,),
            ).fetchone()
        if row is None:
            return None
        return JobState(*row[:8], errors=json.loads(row[8]), created=row[9], updated=row[10])  # type: ignore[misc]

    def placement(self, job_id: str) -> Placement:
        with self._lock:
            (value,) = self._conn.execute("SELECT placement FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return value  # type: ignore[no-any-return]

    def set_status(self, job_id: str, status: JobStatus, error: str | None = None) -> None:
        with self._tx() as conn:
            if error is not None:
                row = conn.execute("SELECT errors FROM jobs WHERE id = ?", (job_id,)).fetchone()
                errors = [*json.loads(row[0]), {"id": "*", "error": error}][-MAX_ERRORS:]
                conn.execute("UPDATE jobs SET errors = ? WHERE id = ?", (json.dumps(errors), job_id))
            conn.execute(
                "UPDATE jobs SET status = ?, updated = ? WHERE id = ?", (status, time.time(), job_id)
            )
            if status in FINISHED:  # the documents' text is no longer needed
                conn.execute("UPDATE job_docs SET doc = '' WHERE job_id = ? AND state != 0", (job_id,))
                if status == "done":
                    conn.execute("DELETE FROM job_docs WHERE job_id = ?", (job_id,))

    def unfinished(self) -> list[str]:
        """Jobs to run, oldest first; a job left running by a dead process is queued again."""
        with self._tx() as conn:
            conn.execute("UPDATE jobs SET status = 'queued' WHERE status = 'running'")
            rows = conn.execute("SELECT id FROM jobs WHERE status = 'queued' ORDER BY created").fetchall()
        return [r[0] for r in rows]

    def pending(self, job_id: str) -> Iterator[tuple[str, Document]]:
        """(doc key, document) not yet done, in order, a page at a time (memory stays flat)."""
        after = -1
        while True:
            with self._lock:
                rows = self._conn.execute(
                    "SELECT seq, doc_key, doc FROM job_docs WHERE job_id = ? AND state = 0 AND seq > ? "
                    "ORDER BY seq LIMIT ?",
                    (job_id, after, _PAGE),
                ).fetchall()
            if not rows:
                return
            for seq, key, doc in rows:
                yield key, _doc_from_json(json.loads(doc))
                after = seq

    def mark(self, job_id: str, results: Sequence[DocResult], chunks: int, seconds: float) -> None:
        """Record one batch written by the pipeline: one transaction."""
        done = [(job_id, _key(r.tenant or "", r.id)) for r in results if r.status != "failed"]
        failed = [r for r in results if r.status == "failed"]
        with self._tx() as conn:
            conn.executemany("UPDATE job_docs SET state = 1 WHERE job_id = ? AND doc_key = ?", done)
            row = conn.execute("SELECT errors FROM jobs WHERE id = ?", (job_id,)).fetchone()
            errors = json.loads(row[0])
            for r in failed:
                conn.execute(
                    "UPDATE job_docs SET state = 2 WHERE job_id = ? AND doc_key = ?",
                    (job_id, _key(r.tenant or "", r.id)),
                )
                if len(errors) < MAX_ERRORS:
                    errors.append({"id": r.id, "error": r.error or "failed"})
            conn.execute(
                "UPDATE jobs SET done = (SELECT COUNT(*) FROM job_docs WHERE job_id = ?1 AND state = 1), "
                "failed = (SELECT COUNT(*) FROM job_docs WHERE job_id = ?1 AND state = 2), "
                "chunks = chunks + ?2, seconds = seconds + ?3, errors = ?4, updated = ?5 WHERE id = ?1",
                (job_id, chunks, seconds, json.dumps(errors), time.time()),
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _doc_json(doc: Document) -> dict[str, Any]:
    return {
        "id": doc.id,
        "text": doc.text,
        "title": doc.title,
        "metadata": dict(doc.metadata),
        "tenant": doc.tenant,
    }


def _doc_from_json(data: dict[str, Any]) -> Document:
    return Document(
        id=data["id"],
        text=data["text"],
        title=data["title"],
        metadata=data["metadata"],
        tenant=data["tenant"],
    )


@dataclass
class _Running:
    job_id: str
    cancel: asyncio.Event = field(default_factory=asyncio.Event)


class JobRunner:
    """Runs ledger jobs one at a time in a background task."""

    def __init__(
        self,
        ledger: JobLedger,
        pipeline: Pipeline,
        on_batch: Callable[[Sequence[DocResult], int], None] | None = None,
    ) -> None:
        self.ledger = ledger
        self._pipeline = pipeline
        self._on_batch = on_batch  # (results, chunks written): for metrics
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._running: _Running | None = None

    def start(self) -> None:
        """Begin working, first through the jobs a previous process left unfinished."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="ingest-jobs")

    async def submit(self, tenant: str, placement: Placement, docs: Sequence[Document]) -> str:
        job_id = await asyncio.to_thread(self.ledger.submit, tenant, placement, docs)
        self._wake.set()
        return job_id

    async def get(self, job_id: str) -> JobState | None:
        return await asyncio.to_thread(self.ledger.get, job_id)

    async def cancel(self, job_id: str) -> JobState | None:
        state = await self.get(job_id)
        if state is None or state.status in FINISHED:
            return state
        if self._running is not None and self._running.job_id == job_id:
            self._running.cancel.set()  # the runner stops after the batches in flight
        else:
            await asyncio.to_thread(self.ledger.set_status, job_id, "cancelled")
        return await self.get(job_id)

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            for job_id in await asyncio.to_thread(self.ledger.unfinished):
                await self._run(job_id)
            await self._wake.wait()

    async def _run(self, job_id: str) -> None:
        state = await self.get(job_id)
        if state is None or state.status != "queued":
            return
        running = self._running = _Running(job_id)
        await asyncio.to_thread(self.ledger.set_status, job_id, "running")
        last = {"at": time.perf_counter(), "chunks": 0}

        async def on_batch(results: Sequence[DocResult], report: IngestReport) -> None:
            now = time.perf_counter()
            chunks = report.chunks_written - int(last["chunks"])
            await asyncio.to_thread(self.ledger.mark, job_id, results, chunks, now - last["at"])
            last.update(at=now, chunks=report.chunks_written)
            if self._on_batch is not None:
                self._on_batch(results, chunks)

        try:
            placement = await asyncio.to_thread(self.ledger.placement, job_id)
            docs = (doc for _, doc in self.ledger.pending(job_id))
            report = await self._pipeline.ingest(
                docs, placement=placement, on_batch=on_batch, cancel=running.cancel
            )
            status: JobStatus = "cancelled" if report.cancelled else "done"
            await asyncio.to_thread(self.ledger.set_status, job_id, status)
            log.info(
                "ingest job %s %s: %d documents, %.1f chunks/s",
                job_id,
                status,
                report.documents,
                report.chunks_per_s,
            )
        except asyncio.CancelledError:
            raise  # shutting down: the job stays "running" and resumes on the next start
        except Exception as exc:  # a tier or the embedder failed: the job fails, the service lives on
            log.exception("ingest job %s failed", job_id)
            await asyncio.to_thread(self.ledger.set_status, job_id, "failed", f"{type(exc).__name__}: {exc}")
        finally:
            self._running = None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.ledger.close()

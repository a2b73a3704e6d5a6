"""Asynchronous ingestion jobs: accepted into the ledger, run in the background, resumed after a crash.

A runner claims one job at a time from the ledger (``ledger.py``), feeds its pending documents to
the pipeline, and marks a document done only after the pipeline reports it durable in the tiers.
While it works it renews its lease; if it dies, another runner (this process after a restart, or
another replica on the same PostgreSQL ledger) claims the job when the lease expires and resumes
from its pending documents. Those written but not yet marked are compared by content hash and
skipped, so nothing is embedded twice and nothing is duplicated.

Within one job, a document id given twice keeps its last copy (``total`` counts unique ids).
A job that an engine fails (down, hung past the batch deadline, out of disk space) goes back to
the queue and resumes from its pending documents after a pause, so an outage delays jobs and
fails none; a document that cannot be read or chunked fails alone, as always.
Cancelling stops a running job between batches, on whichever replica runs it; documents already
written stay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from indexers.ingest.ledger import JobState, JobStatus, Ledger
from indexers.ingest.pipeline import Pipeline
from indexers.ingest.results import DocResult, IngestReport, Placement
from indexers.records import Document
from indexers.tiers.base import TierError
from indexers.tiers.disk import DiskGuard

log = logging.getLogger(__name__)

CLOSE_WAIT_S = 30.0  # how long close() waits for the runner to stop


@dataclass
class _Running:
    job_id: str
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    lost: bool = False  # another runner holds the job now: record nothing more


class JobRunner:
    """Runs ledger jobs one at a time in a background task.

    ``lease_s``: how long a claim lasts without renewal (a dead runner's job waits this long
    before another takes it over); renewed every ``lease_s / 5``. ``poll_s``: how often an idle
    runner looks for jobs submitted through another replica. ``recover``: this runner is the
    ledger's only one (a server owning its data dir), so at start it takes back at once what a
    dead predecessor left running instead of waiting for the lease.
    """

    def __init__(
        self,
        ledger: Ledger,
        pipeline: Pipeline,
        on_batch: Callable[[Sequence[DocResult], int], None] | None = None,
        *,
        lease_s: float = 30.0,
        poll_s: float = 1.0,
        recover: bool = True,
        guard: DiskGuard | None = None,
    ) -> None:
        self.ledger = ledger
        self._guard = guard  # under its floor no job is claimed; a job that runs out of space waits
        self._retry_s = max(poll_s, min(lease_s / 5, 5.0))  # after an engine failed a job
        self._pipeline = pipeline
        self._on_batch = on_batch  # (results, chunks written): for metrics
        self.lease_s = lease_s
        self._poll_s = poll_s
        self._recover = recover  # the only runner on this ledger: requeue what a dead one left at once
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
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

    async def jobs(self, tenant: str, limit: int = 50) -> list[JobState]:
        return await asyncio.to_thread(self.ledger.jobs, tenant, limit)

    async def cancel(self, job_id: str) -> JobState | None:
        state = await asyncio.to_thread(self.ledger.request_cancel, job_id)
        if self._running is not None and self._running.job_id == job_id:
            self._running.cancel.set()  # ours: stop after the batches in flight, without waiting
        return state

    async def _loop(self) -> None:
        """Claim and run jobs for ever; a ledger error (a lock, a restarting server) is logged and
        the turn retried after a pause, so one failure never stops the runner."""
        if self._recover:
            await self._retrying(self.ledger.recover)
        while True:
            if self._guard is not None and self._guard.low():  # jobs wait for space, not fail
                await asyncio.sleep(self._poll_s)
                continue
            try:
                job_id = await asyncio.to_thread(self.ledger.claim, self.name, self.lease_s)
            except Exception:
                log.exception("ingest jobs: claiming failed; retrying in %.0f s", self.lease_s / 5)
                await asyncio.sleep(self.lease_s / 5)
                continue
            if job_id is not None:
                await self._run(job_id)
                continue
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that lands as
            # its timeout fires, and close() then waits for ever (seen under CPU load)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll_s):
                    await self._wake.wait()
            self._wake.clear()

    async def _retrying(self, call: Callable[[], object]) -> None:
        while True:
            try:
                await asyncio.to_thread(call)
                return
            except Exception:
                log.exception("ingest jobs: the ledger failed; retrying in %.0f s", self.lease_s / 5)
                await asyncio.sleep(self.lease_s / 5)

    async def _heartbeat(self, running: _Running) -> None:
        """Renew the lease until the run ends (a cancelled run still finishes its batch in flight);
        a cancel asked through any replica, or a lost lease, stops the run."""
        while True:
            await asyncio.sleep(self.lease_s / 5)
            try:
                lease = await asyncio.to_thread(self.ledger.renew, running.job_id, self.name, self.lease_s)
            except Exception:  # try again next period; the lease outlives several misses
                log.exception("ingest job %s: renewing the lease failed", running.job_id)
                continue
            if not lease.held and not running.lost:
                log.warning("ingest job %s: lease lost to another runner; stopping", running.job_id)
                running.lost = True
            if lease.cancel or not lease.held:
                running.cancel.set()

    async def _run(self, job_id: str) -> None:
        running = self._running = _Running(job_id)
        heartbeat = asyncio.create_task(self._heartbeat(running), name=f"lease-{job_id}")
        last = {"at": time.perf_counter(), "chunks": 0}

        async def on_batch(results: Sequence[DocResult], report: IngestReport) -> None:
            now = time.perf_counter()
            chunks = report.chunks_written - int(last["chunks"])
            held = await asyncio.to_thread(
                self.ledger.mark, job_id, self.name, results, chunks, now - last["at"]
            )
            if not held:  # another runner took the job over: it records from here on
                running.lost = True
                running.cancel.set()
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
            if not running.lost and await asyncio.to_thread(
                self.ledger.set_status, job_id, status, runner=self.name
            ):
                log.info(
                    "ingest job %s %s: %d documents, %.1f chunks/s",
                    job_id,
                    status,
                    report.documents,
                    report.chunks_per_s,
                )
        except asyncio.CancelledError:
            raise  # shutting down: close() gives the job back
        except TierError as exc:  # an engine down, hung or out of space: the job waits, not fails
            log.warning("ingest job %s paused, retried in %.0f s: %s", job_id, self._retry_s, exc)
            with contextlib.suppress(Exception):  # if that fails, the lease expires instead
                await asyncio.to_thread(self.ledger.release, job_id, self.name)
            await asyncio.sleep(self._retry_s)  # back in the queue; resumed from its pending documents
        except Exception as exc:  # a tier, the embedder or the ledger failed: the job fails
            log.exception("ingest job %s failed", job_id)
            with contextlib.suppress(Exception):  # if even that fails, the lease expires instead
                error = f"{type(exc).__name__}: {exc}"
                await asyncio.to_thread(self.ledger.set_status, job_id, "failed", error, runner=self.name)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await heartbeat
            self._running = None

    async def close(self) -> None:
        """Stop; a job in flight goes back to the queue at once (another replica may take it)."""
        job_id = self._running.job_id if self._running is not None else None
        if self._task is not None:
            self._task.cancel()
            done, _ = await asyncio.wait({self._task}, timeout=CLOSE_WAIT_S)
            if not done:  # never expected; a stuck runner must not keep the tiers from closing
                log.error("ingest jobs: the runner did not stop within %.0f s", CLOSE_WAIT_S)
            self._task = None
        if job_id is not None:
            try:
                await asyncio.to_thread(self.ledger.release, job_id, self.name)
            except Exception:  # its lease expires instead
                log.exception("ingest job %s: giving it back failed", job_id)
        self.ledger.close()

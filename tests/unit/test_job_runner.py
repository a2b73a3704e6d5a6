"""The job runner keeps going through ledger failures (a lock, a restarting server)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from indexers.ingest.jobs import JobRunner
from indexers.ingest.ledger import Lease
from indexers.ingest.ledger_engines import SqliteLedger
from indexers.ingest.results import DocResult, IngestReport
from indexers.records import Document


class FlakyLedger(SqliteLedger):
    """Fails the first claims and every other renewal, as a busy or restarting database would."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.claims_to_fail = 2
        self.renewals = 0

    def claim(self, runner: str, lease_s: float) -> str | None:
        if self.claims_to_fail:
            self.claims_to_fail -= 1
            raise sqlite3.OperationalError("database is locked")
        return super().claim(runner, lease_s)

    def renew(self, job_id: str, runner: str, lease_s: float) -> Lease:
        self.renewals += 1
        if self.renewals % 2:
            raise sqlite3.OperationalError("database is locked")
        return super().renew(job_id, runner, lease_s)


class SlowPipeline:
    """Writes nothing; reports each document created, one batch per document, slowly."""

    async def ingest(
        self, docs: Iterable[Document], *, on_batch: Any, cancel: asyncio.Event, **_: Any
    ) -> IngestReport:
        report = IngestReport()
        for doc in docs:
            if cancel.is_set():
                report.cancelled = True
                break
            await asyncio.sleep(0.15)
            result = DocResult(doc.id, "created", 1, "hot", tenant=doc.tenant)
            report.counts["created"] = report.counts.get("created", 0) + 1
            report.chunks_written += 1
            await on_batch([result], report)
        return report


async def test_ledger_errors_are_retried_and_the_job_still_finishes(tmp_path: Path) -> None:
    ledger = FlakyLedger(tmp_path / "jobs.sqlite")
    runner = JobRunner(ledger, SlowPipeline(), lease_s=0.5, poll_s=0.05)  # type: ignore[arg-type]
    job_id = await runner.submit("t", "auto", [Document(f"d{i}", f"text {i}", tenant="t") for i in range(8)])
    runner.start()
    for _ in range(400):
        state = await runner.get(job_id)
        if state is not None and state.finished:
            break
        await asyncio.sleep(0.05)
    assert state is not None and (state.status, state.done) == ("done", 8)
    assert ledger.claims_to_fail == 0 and ledger.renewals >= 2  # failures happened, and were lived through
    await runner.close()


class InFlightPipeline:
    """Holds one batch in flight until ``release`` is set, then stops if cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def ingest(self, docs: Iterable[Document], *, cancel: asyncio.Event, **_: Any) -> IngestReport:
        list(docs)
        self.started.set()
        await self.release.wait()
        return IngestReport(cancelled=cancel.is_set())


async def test_a_cancelled_running_job_reads_cancelling_until_its_runner_stops(tmp_path: Path) -> None:
    from rag_router.api.schemas import JobOut

    pipeline = InFlightPipeline()
    runner = JobRunner(SqliteLedger(tmp_path / "jobs.sqlite"), pipeline, lease_s=5, poll_s=0.05)  # type: ignore[arg-type]
    job_id = await runner.submit("t", "auto", [Document("d", "text", tenant="t")])
    runner.start()
    await asyncio.wait_for(pipeline.started.wait(), 30)
    asked = await runner.cancel(job_id)
    assert asked is not None and JobOut.of(asked).status == "cancelling"
    read = await runner.get(job_id)
    assert read is not None and JobOut.of(read).status == "cancelling"
    pipeline.release.set()
    for _ in range(400):
        state = await runner.get(job_id)
        if state is not None and state.finished:
            break
        await asyncio.sleep(0.05)
    assert state is not None and JobOut.of(state).status == "cancelled"
    await runner.close()

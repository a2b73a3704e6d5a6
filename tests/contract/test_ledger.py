"""The job ledger's contract, on every engine: SQLite (the data dir) and PostgreSQL (shared by replicas)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from indexers.ingest.ledger import SqlLedger, doc_key
from indexers.ingest.ledger_engines import PostgresLedger, SqliteLedger
from indexers.ingest.results import DocResult
from indexers.records import Document

Open = Callable[[], SqlLedger]


@pytest.fixture(params=["sqlite", "postgres"])
def open_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Open]:
    """A factory of ledger handles on one store: each handle is its own connection, as a replica's is."""
    if request.param == "sqlite":
        path = tmp_path / "jobs.sqlite"
        factory: Open = lambda: SqliteLedger(path)  # noqa: E731
    else:
        url = request.getfixturevalue("pg_url")
        factory = lambda: PostgresLedger(url)  # noqa: E731
    opened: list[SqlLedger] = []

    def open_one() -> SqlLedger:
        opened.append(factory())
        return opened[-1]

    yield open_one
    for ledger in opened:
        ledger.close()


def docs(prefix: str, n: int) -> list[Document]:
    return [Document(f"{prefix}{i}", f"text {prefix} {i} ✓ 第{i}条", metadata={"n": i}) for i in range(n)]


def result(doc_id: str, status: str, error: str | None = None) -> DocResult:
    return DocResult(id=doc_id, status=status, chunks=1, tier="hot", error=error, tenant="t")  # type: ignore[arg-type]


def test_a_submitted_job_is_queued_with_its_documents_in_order(open_ledger: Open) -> None:
    ledger = open_ledger()
    batch = [*docs("a", 3), Document("a1", "the last copy wins", metadata={"n": 9})]
    job_id = ledger.submit(
        "t", "cold", [Document(d.id, d.text, metadata=d.metadata, tenant="t") for d in batch]
    )
    state = ledger.get(job_id)
    assert state is not None and (state.status, state.total, state.tenant) == ("queued", 3, "t")
    assert ledger.placement(job_id) == "cold"
    pending = [doc for _, doc in ledger.pending(job_id)]
    assert [d.id for d in pending] == ["a0", "a1", "a2"]
    assert pending[1].text == "the last copy wins" and pending[2].text == "text a 2 ✓ 第2条"
    assert ledger.get("no-such-job") is None
    assert [j.id for j in ledger.jobs("t")] == [job_id] and ledger.jobs("other") == []


def test_claims_take_the_oldest_queued_job_once(open_ledger: Open) -> None:
    ledger = open_ledger()
    first = ledger.submit("t", "auto", docs("a", 2))
    second = ledger.submit("t", "auto", docs("b", 2))
    assert ledger.claim("r1", lease_s=60) == first
    assert ledger.claim("r2", lease_s=60) == second
    assert ledger.claim("r3", lease_s=60) is None  # both held, leases alive
    state = ledger.get(first)
    assert state is not None and state.status == "running"


def test_an_expired_lease_is_taken_over_and_the_old_runner_learns_it(open_ledger: Open) -> None:
    ledger = open_ledger()
    job_id = ledger.submit("t", "auto", docs("a", 2))
    assert ledger.claim("dead", lease_s=0.2) == job_id
    assert ledger.renew(job_id, "dead", lease_s=0.2).held
    time.sleep(0.5)  # the runner stops renewing: its lease runs out
    assert ledger.claim("heir", lease_s=60) == job_id
    assert not ledger.renew(job_id, "dead", lease_s=60).held
    assert ledger.renew(job_id, "heir", lease_s=60).held


def test_an_expired_job_is_taken_over_exactly_once_by_racing_replicas(open_ledger: Open) -> None:
    handles = [open_ledger() for _ in range(6)]
    job_id = handles[0].submit("t", "auto", docs("a", 1))
    assert handles[0].claim("dead", lease_s=0.1) == job_id
    time.sleep(0.3)
    won: list[str | None] = []
    start = threading.Barrier(len(handles))

    def race(i: int) -> None:
        start.wait()
        won.append(handles[i].claim(f"replica-{i}", lease_s=60))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(handles))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(w for w in won if w is not None) == [job_id]
    assert won.count(None) == len(handles) - 1


def test_cancel_stops_a_queued_job_at_once_and_flags_a_running_one(open_ledger: Open) -> None:
    ledger, other_replica = open_ledger(), open_ledger()
    queued = ledger.submit("t", "auto", docs("q", 1))
    running = ledger.submit("t", "auto", docs("r", 1))
    assert ledger.claim("r1", lease_s=60) == queued
    ledger.release(queued, "r1")  # back to the queue: claimable again, in order
    assert ledger.claim("r1", lease_s=60) == queued
    state = other_replica.request_cancel(running)
    assert state is not None and state.status == "cancelled"
    assert not ledger.renew(queued, "r1", lease_s=60).cancel
    other_replica.request_cancel(queued)
    assert ledger.renew(queued, "r1", lease_s=60).cancel  # the runner sees it at its next renewal


def test_marks_count_outcomes_and_pending_resumes_after_them(open_ledger: Open) -> None:
    ledger = open_ledger()
    job_id = ledger.submit("t", "auto", [Document(d.id, d.text, tenant="t") for d in docs("m", 5)])
    ledger.claim("r", lease_s=60)
    batch = [result("m0", "created"), result("m1", "unchanged"), result("m2", "failed", "no text")]
    assert ledger.mark(job_id, "r", batch, chunks=7, seconds=0.5)
    state = ledger.get(job_id)
    assert state is not None
    assert (state.done, state.failed, state.created_docs, state.unchanged_docs, state.chunks) == (
        2,
        1,
        1,
        1,
        7,
    )
    assert state.errors == [{"id": "m2", "error": "no text"}]
    assert state.chunks_per_s == pytest.approx(14.0)
    assert [doc.id for _, doc in ledger.pending(job_id)] == ["m3", "m4"]
    assert [key for key, _ in ledger.pending(job_id)] == [doc_key("t", "m3"), doc_key("t", "m4")]
    assert ledger.set_status(job_id, "done", runner="r")
    finished = ledger.get(job_id)
    assert finished is not None and finished.status == "done" and finished.eta_s == 0.0


def test_a_runner_that_lost_its_lease_records_nothing(open_ledger: Open) -> None:
    """Its in-flight batch and its final status are refused: the heir's record stands."""
    ledger = open_ledger()
    job_id = ledger.submit("t", "auto", [Document(d.id, d.text, tenant="t") for d in docs("l", 4)])
    assert ledger.claim("old", lease_s=0.2) == job_id
    time.sleep(0.5)
    assert ledger.claim("heir", lease_s=60) == job_id
    assert not ledger.mark(job_id, "old", [result("l0", "created")], chunks=1, seconds=0.1)
    assert not ledger.set_status(job_id, "done", runner="old")
    assert not ledger.set_status(job_id, "failed", "stale runner", runner="old")
    state = ledger.get(job_id)
    assert state is not None and (state.status, state.done, state.errors) == ("running", 0, [])
    assert [doc.id for _, doc in ledger.pending(job_id)] == ["l0", "l1", "l2", "l3"]
    assert ledger.mark(job_id, "heir", [result("l0", "created")], chunks=1, seconds=0.1)


def test_a_cancelled_job_is_never_run_again(open_ledger: Open) -> None:
    """Given back after a cancel, or left by a dead runner after one: it ends cancelled."""
    ledger = open_ledger()
    given_back = ledger.submit("t", "auto", docs("g", 1))
    abandoned = ledger.submit("t", "auto", docs("a", 1))
    assert ledger.claim("r1", lease_s=60) == given_back
    assert ledger.claim("r2", lease_s=0.2) == abandoned
    ledger.request_cancel(given_back)
    ledger.request_cancel(abandoned)
    ledger.release(given_back, "r1")  # a clean shutdown right after the cancel
    time.sleep(0.5)  # r2 dies: its lease runs out
    assert ledger.claim("r3", lease_s=60) is None
    for job_id in (given_back, abandoned):
        state = ledger.get(job_id)
        assert state is not None and state.status == "cancelled"


def test_a_ledger_reopened_keeps_every_acknowledged_job(open_ledger: Open) -> None:
    first = open_ledger()
    job_id = first.submit("t", "hot", docs("k", 3))
    first.close()
    again = open_ledger()
    state = again.get(job_id)
    assert state is not None and state.total == 3 and again.placement(job_id) == "hot"


def test_sqlite_recovery_requeues_what_the_dead_owner_left_running(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "jobs.sqlite")
    job_id = ledger.submit("t", "auto", docs("s", 1))
    assert ledger.claim("dead", lease_s=3600) == job_id
    ledger.recover()  # the data dir's one owner starts again
    assert ledger.claim("alive", lease_s=60) == job_id
    ledger.close()


def test_a_ledger_written_by_the_first_version_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, placement TEXT NOT NULL, "
        "status TEXT NOT NULL, total INTEGER NOT NULL, done INTEGER NOT NULL DEFAULT 0, "
        "failed INTEGER NOT NULL DEFAULT 0, chunks INTEGER NOT NULL DEFAULT 0, seconds REAL NOT NULL "
        "DEFAULT 0, errors TEXT NOT NULL DEFAULT '[]', created REAL NOT NULL, updated REAL NOT NULL);"
        "INSERT INTO jobs (id, tenant, placement, status, total, done, created, updated) "
        "VALUES ('old', 't', 'auto', 'done', 4, 4, 1.0, 2.0);"
    )
    old.close()
    ledger = SqliteLedger(path)
    state = ledger.get("old")
    assert state is not None and (state.status, state.done, state.created_docs) == ("done", 4, 0)
    ledger.close()

"""A job whose runner was killed is taken over by the next runner on the shared PostgreSQL ledger."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.crash.test_sigkill import free_port, server

DOCS = 240


def doc_text(i: int) -> str:
    return " ".join(
        f"Manifest {i} entry {j}: container seal checked at the gate — 第{j}条。" for j in range(6)
    )


def wait_for(client: httpx.Client, job_id: str, done: int, timeout: float = 300) -> dict[str, object]:
    """The job once ``done`` documents are written (or it ended); ``done=0``: once it ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body: dict[str, object] = client.get(f"/v1/ingest/jobs/{job_id}").json()
        if (done and int(body["done"]) >= done) or body["status"] in ("done", "failed", "cancelled"):  # type: ignore[call-overload]
            return body
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {done} documents")


@pytest.mark.slow
def test_a_killed_runners_job_is_taken_over_and_every_document_lands_once(
    tmp_path: Path, pg_url: str
) -> None:
    ledger = {"RAG_JOBS__URL": pg_url, "RAG_JOBS__LEASE_S": "2", "RAG_JOBS__POLL_S": "0.2"}
    data = tmp_path / "data"
    documents = [
        {"id": f"m{i}", "text": doc_text(i), "metadata": {"date": "2026-11-20"}} for i in range(DOCS)
    ]
    port = free_port()
    with server(data, port, **ledger) as first:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            accepted = client.post("/v1/ingest/jobs", json={"documents": documents})
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["job_id"]
            partial = wait_for(client, job_id, done=32)
            assert partial["status"] == "running" and int(partial["done"]) < DOCS  # type: ignore[call-overload]
        os.kill(first.pid, signal.SIGKILL)  # the runner dies holding the job's lease
        first.wait()
    port = free_port()
    with (
        server(data, port, **ledger),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client,
    ):
        final = wait_for(client, job_id, done=0)  # to its end
        assert (final["status"], final["done"], final["failed"], final["total"]) == ("done", DOCS, 0, DOCS)
        for doc in documents:
            stored = client.get(f"/v1/documents/{doc['id']}").json()
            assert stored["text"] == doc["text"]
            assert len(stored["tiers"]) == 1  # in one tier …
            chunk_ids = [c["chunk_id"] for c in stored["chunks"]]
            assert len(chunk_ids) == len(set(chunk_ids))  # … once

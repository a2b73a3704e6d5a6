"""Ingestion jobs through the real app: accepted durably, tracked, cancelled, resumed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from indexers.ingest.ledger_engines import SqliteLedger
from indexers.records import Document
from rag_router.api import create_app
from rag_router.settings import Settings

JOB_FIELDS = {"job_id", "status", "total", "done", "failed", "errors", "chunks_per_s", "eta_s"}


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "max_body_bytes": 16 * 1024,
        "chunk": {"max_tokens": 32, "overlap_tokens": 0},
        "ingest": {"batch_chunks": 8},
    }
    return Settings(**{**values, **overrides})


def docs(prefix: str, n: int, sentences: int = 3) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{prefix}{i}",
            "text": " ".join(
                f"Record {prefix}{i} line {j} about harbour logistics." for j in range(sentences)
            ),
            "metadata": {"date": "2026-11-01"},
        }
        for i in range(n)
    ]


def wait(client: TestClient, job_id: str, until: set[str], timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body: dict[str, Any] = client.get(f"/v1/ingest/jobs/{job_id}").json()
        if body["status"] in until:
            return body
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached {until}")


def test_a_job_is_accepted_tracked_and_lands(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    batch = docs("a", 40)
    with TestClient(create_app(settings(tmp_path), embedder=embedder)) as client:
        # over the synchronous body limit, within the jobs one
        accepted = client.post("/v1/ingest/jobs", json={"documents": batch})
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["job_id"]
        body = wait(client, job_id, {"done"})
        assert set(body) >= JOB_FIELDS
        assert (body["total"], body["done"], body["failed"], body["errors"]) == (40, 40, 0, [])
        assert body["chunks_per_s"] > 0 and body["eta_s"] == 0
        assert 'rag_ingested_documents_total{status="created"} 40.0' in client.get("/metrics").text
        stored = client.get("/v1/documents/a7").json()
        assert stored["tiers"] == ["hot"] and len(stored["chunks"]) >= 1
        # the same corpus again: everything unchanged, nothing new stored
        before = client.get("/v1/documents/a7").json()
        again = wait(
            client, client.post("/v1/ingest/jobs", json={"documents": batch}).json()["job_id"], {"done"}
        )
        assert again["done"] == 40 and client.get("/v1/documents/a7").json() == before


def test_unknown_jobs_and_other_tenants_get_404(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    app = create_app(settings(tmp_path, api_keys=["k1", "acme:k2"]), embedder=embedder)
    with TestClient(app) as client:
        job = client.post(
            "/v1/ingest/jobs", json={"documents": docs("t", 2)}, headers={"Authorization": "Bearer k1"}
        )
        job_id = job.json()["job_id"]
        other = client.get(f"/v1/ingest/jobs/{job_id}", headers={"Authorization": "Bearer k2"})
        assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
        missing = client.delete("/v1/ingest/jobs/nope", headers={"Authorization": "Bearer k1"})
        assert missing.status_code == 404
        bad = client.post("/v1/ingest/jobs", json={"documents": []}, headers={"Authorization": "Bearer k1"})
        assert bad.status_code == 422 and "error" in bad.json()


def test_cancel_a_queued_and_a_running_job(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    with TestClient(create_app(settings(tmp_path, max_body_bytes=1 << 20), embedder=embedder)) as client:
        first = client.post("/v1/ingest/jobs", json={"documents": docs("r", 300)}).json()["job_id"]
        second = client.post("/v1/ingest/jobs", json={"documents": docs("q", 5)}).json()["job_id"]
        assert client.delete(f"/v1/ingest/jobs/{second}").json()["status"] == "cancelled"
        wait(client, first, {"running"})
        client.delete(f"/v1/ingest/jobs/{first}")
        body = wait(client, first, {"cancelled"})
        assert body["done"] < body["total"] == 300
        assert client.get("/v1/documents/q0").status_code == 404
        # cancelling a finished job changes nothing
        assert client.delete(f"/v1/ingest/jobs/{first}").json()["status"] == "cancelled"


def test_cancel_stops_a_job_whose_documents_are_all_read_already(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    """Reading runs ahead of embedding and writing: a cancel must stop the batches already read."""
    ahead = settings(tmp_path, max_body_bytes=1 << 20, ingest={"batch_chunks": 128, "queue_batches": 100})
    with TestClient(create_app(ahead, embedder=embedder)) as client:
        job_id = client.post("/v1/ingest/jobs", json={"documents": docs("w", 300, sentences=12)}).json()[
            "job_id"
        ]
        deadline = time.monotonic() + 120
        while client.get(f"/v1/ingest/jobs/{job_id}").json()["done"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)  # the first batch is written: every batch has been read by now
        client.delete(f"/v1/ingest/jobs/{job_id}")
        body = wait(client, job_id, {"cancelled", "done"})
        assert body["status"] == "cancelled" and body["done"] < body["total"] == 300
        written = [client.get(f"/v1/documents/w{i}").status_code for i in range(300)]
        assert written.count(200) == body["done"]  # what was not marked done was not written


def test_a_job_left_running_by_a_dead_process_resumes(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    ledger = SqliteLedger(tmp_path / "jobs.sqlite")
    job_id = ledger.submit(
        "default", "auto", [Document(d["id"], d["text"], metadata=d["metadata"]) for d in docs("z", 12)]
    )
    assert ledger.claim("a-runner-that-dies", lease_s=3600) == job_id  # as if the process died mid-job
    ledger.close()
    with TestClient(create_app(settings(tmp_path), embedder=embedder)) as client:
        body = wait(client, job_id, {"done"})
        assert body["done"] == 12 and client.get("/v1/documents/z11").status_code == 200


def test_an_id_given_twice_in_a_job_keeps_the_last_copy(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    first, last = docs("d", 1, sentences=6)[0], docs("d", 1, sentences=1)[0]
    last["text"] = "The final version."
    with TestClient(create_app(settings(tmp_path), embedder=embedder)) as client:
        job_id = client.post("/v1/ingest/jobs", json={"documents": [first, *docs("x", 3), last]}).json()[
            "job_id"
        ]
        assert wait(client, job_id, {"done"})["total"] == 4
        chunks = client.get("/v1/documents/d0").json()["chunks"]
        assert [c["text"] for c in chunks] == ["The final version."]


def upload_files(tmp_path: Path) -> list[tuple[str, tuple[str, bytes, str]]]:
    from tests.unit.test_load import write_pdf

    write_pdf(tmp_path / "contract.pdf", ["Page one about the harbour lease. " * 8, "Page two on fees. " * 8])
    return [
        ("files", ("notes/retention.md", b"# Data retention\n\nKeep logs for 30 days.\n", "text/markdown")),
        (
            "files",
            (
                "page.html",
                b"<html><title>Fees</title><body><p>Fees are due monthly.</p></body></html>",
                "text/html",
            ),
        ),
        ("files", ("plain.txt", "Zoll und Gebühren — 关税条款。".encode(), "text/plain")),
        ("files", ("contract.pdf", (tmp_path / "contract.pdf").read_bytes(), "application/pdf")),
        (
            "files",
            ("corpus.jsonl", b'{"_id": "c1", "title": "T", "text": "From a corpus."}\n{"_id": ""}\n', "x"),
        ),
        ("files", ("image.png", b"\x89PNG....", "image/png")),
        ("files", ("../../escape.txt", b"a name that tries to leave the upload folder", "text/plain")),
    ]


def test_files_become_one_job_named_by_their_paths(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with TestClient(create_app(settings(tmp_path / "data"), embedder=embedder)) as client:
        accepted = client.post("/v1/ingest/files", files=upload_files(tmp_path), data={"tier": "cold"})
        assert accepted.status_code == 202, accepted.text
        files = {f["name"]: f for f in accepted.json()["files"]}
        assert (
            files["image.png"]["documents"] == 0
            and "unsupported file type '.png'" in files["image.png"]["error"]
        )
        assert files["corpus.jsonl"]["documents"] == 1 and files["corpus.jsonl"]["error"]  # one bad line
        assert files["escape.txt"]["documents"] == 1  # kept inside: the name loses its ".." parts
        body = wait(client, accepted.json()["job_id"], {"done"})
        assert body["done"] == body["total"] == 6 and body["created"] == 6 and body["failed"] == 0
        md = client.get("/v1/documents/notes/retention.md").json()
        assert (
            md["title"] == "Data retention"
            and "Keep logs for 30 days." in md["text"]
            and md["tiers"] == ["cold"]
        )
        assert client.get("/v1/documents/plain.txt").json()["text"] == "Zoll und Gebühren — 关税条款。"
        assert "harbour lease" in client.get("/v1/documents/contract.pdf").json()["text"]
        assert client.get("/v1/documents/c1").status_code == 200


def test_an_upload_with_nothing_readable_is_refused_with_the_reasons(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with TestClient(create_app(settings(tmp_path), embedder=embedder)) as client:
        files = [("files", ("a.png", b"png", "image/png")), ("files", ("empty.md", b"", "text/markdown"))]
        refused = client.post("/v1/ingest/files", files=files)
        assert refused.status_code == 422
        message = refused.json()["error"]["message"]
        assert "a.png: unsupported file type" in message and "empty.md: empty file" in message
        assert client.get("/v1/ingest/jobs").json() == {"jobs": []}


def test_an_upload_names_its_tenant_only_where_there_are_no_keys(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    files = [("files", ("a.txt", b"Harbour dues are paid monthly.", "text/plain"))]
    keyed = settings(tmp_path, api_keys=["acme:k1"])
    with TestClient(create_app(keyed, embedder=embedder), headers={"Authorization": "Bearer k1"}) as client:
        refused = client.post("/v1/ingest/files", files=files, data={"tenant": "other"})
        assert refused.status_code == 422 and "the key's" in refused.json()["error"]["message"]
        own = client.post("/v1/ingest/files", files=files, data={"tenant": "acme"})  # its own: fine
        assert own.status_code == 202, own.text


def test_job_events_stream_progress_then_the_finished_job(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    import json

    with TestClient(create_app(settings(tmp_path), embedder=embedder)) as client:
        job_id = client.post("/v1/ingest/jobs", json={"documents": docs("e", 30)}).json()["job_id"]
        events: list[tuple[str, dict[str, Any]]] = []
        with client.stream("GET", f"/v1/ingest/jobs/{job_id}/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            event = ""
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:"):
                    events.append((event, json.loads(line.split(":", 1)[1])))
        kinds = [e for e, _ in events]
        assert kinds[-1] == "done" and set(kinds[:-1]) <= {"progress"}
        final = events[-1][1]
        assert final["status"] == "done" and final["done"] == 30 and final["chunks"] > 0
        done_counts = [body["done"] for _, body in events]
        assert done_counts == sorted(done_counts)  # progress never goes backwards
        assert client.get("/v1/ingest/jobs/nope/events").status_code == 404
        listed = client.get("/v1/ingest/jobs").json()["jobs"]
        assert [j["job_id"] for j in listed] == [job_id]


def test_a_file_that_cannot_be_stored_is_a_per_file_failure(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    files = [
        ("files", ("x/y.txt", b"Inside a folder named x.", "text/plain")),
        ("files", ("x", b"A file named like that folder.", "text/plain")),
    ]
    with TestClient(create_app(settings(tmp_path), embedder=embedder)) as client:
        accepted = client.post("/v1/ingest/files", files=files)
        assert accepted.status_code == 202, accepted.text
        results = {f["name"]: f for f in accepted.json()["files"]}
        assert results["x/y.txt"]["documents"] == 1
        assert results["x"]["documents"] == 0 and "cannot store the file" in results["x"]["error"]


def test_a_tenant_with_too_many_jobs_pending_gets_429(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    faults = tmp_path / "faults.json"  # the embedder hangs: jobs stay queued or running
    faults.write_text('{"embedder": {"mode": "hang"}}', encoding="utf-8")
    s = settings(
        tmp_path / "data",
        jobs={"max_pending": 2, "poll_s": 0.2, "lease_s": 2},
        ingest={"batch_chunks": 8, "batch_timeout_s": 1},
        faults_file=faults,
        api_keys=["a:ka", "b:kb"],
    )
    with TestClient(create_app(s, embedder=embedder)) as client:
        a, b = {"Authorization": "Bearer ka"}, {"Authorization": "Bearer kb"}
        ids = []
        for n in range(2):
            r = client.post("/v1/ingest/jobs", json={"documents": docs(f"j{n}-", 1)}, headers=a)
            assert r.status_code == 202
            ids.append(r.json()["job_id"])
        r = client.post("/v1/ingest/jobs", json={"documents": docs("j9-", 1)}, headers=a)
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited", r.text
        assert "at most 2" in r.json()["error"]["message"] and int(r.headers["Retry-After"]) > 0
        files = {"files": ("x.md", b"# X\n\nA note.")}
        assert client.post("/v1/ingest/files", files=files, headers=a).status_code == 429
        assert client.post("/v1/ingest/jobs", json={"documents": docs("k-", 1)}, headers=b).status_code == 202
        faults.write_text("{}", encoding="utf-8")  # the jobs can finish; then there is room again
        deadline = time.monotonic() + 120
        while (
            client.post("/v1/ingest/jobs", json={"documents": docs("j9-", 1)}, headers=a).status_code == 429
        ):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        for job_id in ids:  # the hung embedder delayed them (its batch deadline), failed none
            while (state := client.get(f"/v1/ingest/jobs/{job_id}", headers=a).json())["status"] != "done":
                assert state["status"] in ("queued", "running") and time.monotonic() < deadline, state
                time.sleep(0.2)


def test_an_upload_with_nothing_readable_lists_each_file(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with TestClient(create_app(settings(tmp_path), embedder=embedder)) as client:
        files = [
            ("files", ("zeros.txt", b"\x00" * 64, "application/octet-stream")),
            ("files", ("latin.txt", b"caf\xe9", "application/octet-stream")),
        ]
        refused = client.post("/v1/ingest/files", files=files)
    error = refused.json()["error"]
    assert refused.status_code == 422 and error["code"] == "invalid_request"
    assert [f["id"] for f in error["failures"]] == ["zeros.txt", "latin.txt"]
    assert "binary content" in error["failures"][0]["error"] and "UTF-8" in error["failures"][1]["error"]

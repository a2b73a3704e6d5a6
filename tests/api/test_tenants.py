"""Tenants proven apart: three tenants store documents (some under the same ids), then 1,200
generated requests over every endpoint — search, answer (JSON and stream), chat, documents,
jobs (create, list, get, events, cancel), uploads — each checked for anything of another tenant:
a hit, an id, a text, a count, a job, or a word in an error message."""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from indexers.embed.embedder import SentenceTransformerEmbedder
from rag_router.api import create_app
from rag_router.settings import Settings

TENANTS = ("red", "green", "blue")
REQUESTS = 1200
TOPICS = ("harbour tariffs", "grain storage", "river pilots", "customs seals")


def key(tenant: str) -> str:
    return f"key-{tenant}-0b7e"


def marker(tenant: str) -> str:
    """A word only this tenant's documents hold."""
    return f"zq{tenant}mark"


def doc(tenant: str, doc_id: str, topic: str, year: int) -> dict[str, Any]:
    text = f"Rule {doc_id} on {topic} for the {tenant} fleet, {marker(tenant)}, adopted in {year}. "
    return {
        "id": doc_id,
        "text": text * 2,
        "title": f"{topic} {marker(tenant)}",
        "metadata": {"date": f"{year}-03-01"},
    }


def corpus(tenant: str) -> list[dict[str, Any]]:
    own = [doc(tenant, f"{tenant}/{i}", TOPICS[i % 4], 2012 + i % 14) for i in range(12)]
    shared = [doc(tenant, f"shared/{i}", TOPICS[i % 4], 2015 + i) for i in range(4)]  # same ids in each
    return own + shared


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("tenants"),
        api_keys=[f"{t}:{key(t)}" for t in TENANTS],  # type: ignore[misc]
        tiers={"hot_window_days": 1000},
        chunk={"max_tokens": 48, "overlap_tokens": 0},
    )
    with TestClient(create_app(settings, embedder=embedder)) as c:
        for t in TENANTS:
            r = c.post("/v1/documents", json={"documents": corpus(t)}, headers=auth(t))
            assert r.status_code == 200, r.text
        yield c


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key(tenant)}"}


def foreign(tenant: str) -> list[re.Pattern[str]]:
    """What must never reach ``tenant``: the others' markers, ids and fleet names."""
    others = [t for t in TENANTS if t != tenant]
    return [re.compile(rf"(?<![a-z]){w}") for t in others for w in (marker(t), f"{t}/", f"{t} fleet")]


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def assert_clean(tenant: str, what: str, body: str, sent: list[str]) -> None:
    """Nothing foreign in the response, once the request's own strings (echoed back in the route,
    the filters or an error message) are taken out."""
    for part in sorted({p for p in sent if len(p) >= 3}, key=len, reverse=True):
        body = body.replace(part, " ").replace(json.dumps(part)[1:-1], " ")
    for word in foreign(tenant):
        assert not word.search(body), (tenant, what, word.pattern, body[:800])


class Jobs:
    """Job ids per tenant, made during the run (a foreign id must be a plain 404)."""

    def __init__(self) -> None:
        self.ids: dict[str, list[str]] = {t: [] for t in TENANTS}

    def foreign_id(self, tenant: str, rng: random.Random) -> str | None:
        pool = [j for t, ids in self.ids.items() if t != tenant for j in ids]
        return rng.choice(pool) if pool else None


class Recording:
    """The test client, keeping the text of the last request (path and body) it sent."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.sent: list[str] = []

    def __getattr__(self, method: str) -> Any:
        def call(path: str, **kwargs: Any) -> Any:
            self.sent = [path, *path.split("/"), *strings(kwargs.get("json")), *strings(kwargs.get("files"))]
            return getattr(self.client, method)(path, **kwargs)

        return call


def one_request(c: Any, tenant: str, rng: random.Random, jobs: Jobs) -> tuple[str, str]:
    """Send one generated request as ``tenant``; return (what, the response body)."""
    other = rng.choice([t for t in TENANTS if t != tenant])
    probe = rng.choice([marker(other), marker(tenant), rng.choice(TOPICS), f"{other} fleet rule", "shared"])
    kind = rng.randrange(12)
    h = auth(tenant)
    if kind <= 2:
        body: dict[str, Any] = {
            "query": probe,
            "top_k": rng.choice([3, 10, 50]),
            "route": rng.choice(["auto", "hot", "cold", "both"]),
        }
        if rng.random() < 0.4:
            body["filters"] = rng.choice(
                [
                    {"doc_id": [f"{other}/1", "shared/1"]},
                    {"year": {"gte": 2015}},
                    {"date": {"lte": "2020-01-01"}},
                ]
            )
        r = c.post("/v1/search", json=body, headers=h)
        assert r.status_code == 200, r.text
        for hit in r.json()["hits"]:
            assert hit["doc_id"].startswith((f"{tenant}/", "shared/", f"{tenant}-note")), hit
            assert marker(tenant) in hit["text"] or marker(tenant) in (hit.get("title") or ""), hit
        return "search", r.text
    if kind == 3:
        stream = rng.random() < 0.5
        r = c.post("/v1/answer", json={"query": probe, "stream": stream}, headers=h)
        assert r.status_code == 200, r.text
        return "answer", r.text
    if kind == 4:
        r = c.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": probe}], "stream": rng.random() < 0.5},
            headers=h,
        )
        assert r.status_code == 200, r.text
        return "chat", r.text
    if kind == 5:
        doc_id = rng.choice(
            [f"{other}/{rng.randrange(12)}", f"shared/{rng.randrange(4)}", f"{tenant}/{rng.randrange(12)}"]
        )
        r = c.get(f"/v1/documents/{doc_id}", headers=h)
        if doc_id.startswith(f"{other}/"):
            assert r.status_code == 404, r.text
        elif r.status_code == 200:
            assert marker(tenant) in r.json()["text"], r.text
        return "get document", r.text
    if kind == 6:
        doc_id = rng.choice([f"{other}/{rng.randrange(12)}", f"{other}/x"])
        r = c.delete(f"/v1/documents/{doc_id}", headers=h)
        assert r.status_code == 404, r.text  # another tenant's document: not found, not deleted
        return "delete document", r.text
    if kind == 7:
        fresh = [doc(tenant, f"{tenant}/job{rng.randrange(10**6)}", rng.choice(TOPICS), 2024)]
        r = c.post("/v1/ingest/jobs", json={"documents": fresh}, headers=h)
        assert r.status_code == 202, r.text
        jobs.ids[tenant].append(r.json()["job_id"])
        return "create job", r.text
    if kind == 8:
        r = c.get("/v1/ingest/jobs", headers=h)
        assert r.status_code == 200, r.text
        listed = {j["job_id"] for j in r.json()["jobs"]}
        assert listed <= set(jobs.ids[tenant]), (listed, jobs.ids[tenant])
        return "list jobs", r.text
    if kind in (9, 10):
        job_id = jobs.foreign_id(tenant, rng)
        if job_id is None:
            return "no job yet", ""
        path = rng.choice([f"/v1/ingest/jobs/{job_id}", f"/v1/ingest/jobs/{job_id}/events"])
        r = (
            c.delete(path, headers=h)
            if kind == 10 and not path.endswith("events")
            else c.get(path, headers=h)
        )
        assert r.status_code == 404, (path, r.status_code, r.text)
        assert job_id not in r.text or "not found" in r.text.lower(), r.text
        return "foreign job", r.text
    files = {
        "files": (
            f"{tenant}-note{rng.randrange(10**6)}.md",
            f"# Note\n\n{marker(tenant)} upload on {rng.choice(TOPICS)}.".encode(),
        )
    }
    r = c.post("/v1/ingest/files", files=files, headers=h)
    assert r.status_code == 202, r.text
    jobs.ids[tenant].append(r.json()["job_id"])
    return "upload", r.text


def test_no_request_of_one_tenant_sees_another(client: TestClient) -> None:
    rng = random.Random(20261201)
    jobs = Jobs()
    seen: dict[str, int] = {}
    recording = Recording(client)
    for _ in range(REQUESTS):
        tenant = rng.choice(TENANTS)
        what, body = one_request(recording, tenant, rng, jobs)
        assert_clean(tenant, what, body, recording.sent)
        seen[what] = seen.get(what, 0) + 1
    assert sum(seen.values()) >= 1000
    ready = client.get("/readyz")  # public: no count that spans tenants
    assert ready.status_code == 200 and "chunks" not in ready.text, ready.text
    # every endpoint was exercised, and the tenants' own documents were all found by their owners
    assert {
        "search",
        "answer",
        "chat",
        "get document",
        "delete document",
        "create job",
        "list jobs",
        "foreign job",
        "upload",
    } <= set(seen)
    for t in TENANTS:  # and each tenant's own documents are all there, its own text
        for d in corpus(t):
            r = client.get(f"/v1/documents/{d['id']}", headers=auth(t))
            assert r.status_code == 200 and r.json()["text"] == d["text"], r.text
    deadline = time.monotonic() + 300  # the jobs finish; then each tenant counts only its own
    for t in TENANTS:
        for job_id in jobs.ids[t]:
            while (state := client.get(f"/v1/ingest/jobs/{job_id}", headers=auth(t)).json())["status"] in (
                "queued",
                "running",
            ):
                assert time.monotonic() < deadline, state
                time.sleep(0.1)
            assert state["status"] == "done" and state["total"] == 1, state

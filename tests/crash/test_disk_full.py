"""A full disk under a running server: writes refused in the envelope, searches go on, nothing
acknowledged is lost, and writing resumes by itself once space returns.

The data dir lies on a small tmpfs of its own (mounting one needs root, as in CI); a ballast
file on it takes the space away and gives it back. Both embedded tiers, each placement its own
run. Acknowledged = 200 from ``POST /v1/documents`` (or a job reported done).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.crash.test_sigkill import free_port, server

pytestmark = pytest.mark.slow

FS_MB = 320
FLOOR_MB = 96  # RAG_STORAGE__MIN_FREE_MB
JOB = 300  # documents in the job the disk fills under (several seconds of embedding)


@contextlib.contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], check=False)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs (needs root, as CI has): the disk-full tests did not run")
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):  # the server's log, for a failing run
            shutil.copy(path / "server.log", path.parent / "server.log")
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(ballast: Path, leave_mb: float) -> None:
    """Grow (or shrink) the ballast file so that ``leave_mb`` stay free."""
    have = ballast.stat().st_size if ballast.exists() else 0
    free = shutil.disk_usage(ballast.parent).free
    want = max(0, have + free - int(leave_mb * 2**20))
    with ballast.open("ab") as f:
        f.truncate(min(want, have))
        if want > have:
            os.posix_fallocate(f.fileno(), have, want - have)


def docs(prefix: str, n: int, tier: str) -> list[dict[str, Any]]:
    body = "Clause {i} of the {p} charter assigns the carrier liability for cargo lost at sea, ref {p}-{i}."
    return [
        {"id": f"{prefix}/{i}", "text": body.format(i=i, p=prefix) * 3, "metadata": _dated(tier)}
        for i in range(n)
    ]


def _dated(tier: str) -> dict[str, str]:
    return {"date": "2001-01-01"} if tier == "cold" else {}


def check_stored(client: httpx.Client, sent: dict[str, str], refused: set[str], tier: str) -> None:
    """Every acknowledged document once, byte for byte, in its tier only; nothing refused stored."""
    for doc_id, text in sent.items():
        r = client.get(f"/v1/documents/{doc_id}")
        assert r.status_code == 200, (doc_id, r.text)
        got = r.json()
        assert got["text"] == text and got["tiers"] == [tier], got
        ids = [c["chunk_id"] for c in got["chunks"]]
        assert len(ids) == len(set(ids)), ids  # no duplicate
    for doc_id in refused - set(sent):
        assert client.get(f"/v1/documents/{doc_id}").status_code == 404, doc_id


@pytest.mark.parametrize("tier", ["hot", "cold"])
def test_a_full_disk_refuses_writes_keeps_searching_and_recovers(tmp_path: Path, tier: str) -> None:
    with tmpfs(tmp_path / "fs", FS_MB) as fs:
        port = free_port()
        ballast = fs / "ballast"
        env = {"RAG_STORAGE__MIN_FREE_MB": str(FLOOR_MB), "RAG_TIERS__HOT_WINDOW_DAYS": "3650"}
        with (
            server(fs / "data", port, **env) as proc,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client,
        ):
            sent: dict[str, str] = {}
            refused: set[str] = set()

            def post(batch: list[dict[str, Any]]) -> httpx.Response:
                r = client.post("/v1/documents", json={"documents": batch, "tier": tier})
                if r.status_code == 200:
                    assert all(x["status"] in ("created", "updated") for x in r.json()["results"]), r.text
                    sent.update({d["id"]: d["text"] for d in batch})
                else:
                    refused.update(d["id"] for d in batch)
                return r

            assert post(docs("before", 20, tier)).status_code == 200

            # a job under way when the disk fills: it waits, and finishes once space returns
            fill(ballast, FLOOR_MB / 2)
            r = client.post("/v1/documents", json={"documents": docs("late", 5, tier), "tier": tier})
            assert r.status_code == 507, r.text
            err = r.json()["error"]
            assert err["code"] == "insufficient_storage" and "MIN_FREE_MB" in err["message"], err
            assert int(r.headers["Retry-After"]) > 0
            refused.update(d["id"] for d in docs("late", 5, tier))
            for path in ("/v1/ingest/jobs", "/v1/retier"):
                body = {"documents": docs("job", 3, tier)} if "jobs" in path else {}
                r = client.post(path, json=body)
                assert r.status_code == 507 and r.json()["error"]["code"] == "insufficient_storage", r.text
            refused.update(d["id"] for d in docs("job", 3, tier))
            hits = client.post("/v1/search", json={"query": "carrier liability for cargo", "route": tier})
            assert hits.status_code == 200 and hits.json()["hits"], hits.text
            assert proc.poll() is None

            fill(ballast, FLOOR_MB * 2)  # space returns: no restart needed
            assert post(docs("after", 10, tier)).status_code == 200
            job = client.post("/v1/ingest/jobs", json={"documents": docs("job2", JOB, tier), "tier": tier})
            assert job.status_code == 202, job.text
            job_id = job.json()["job_id"]
            fill(ballast, FLOOR_MB / 2)  # the disk fills again while the job runs: it waits
            time.sleep(3)
            state = client.get(f"/v1/ingest/jobs/{job_id}").json()
            assert state["status"] in ("queued", "running") and not state["errors"], state
            assert client.post("/v1/search", json={"query": "cargo lost at sea"}).status_code == 200
            fill(ballast, FLOOR_MB * 2)
            deadline = time.monotonic() + 120
            while (state := client.get(f"/v1/ingest/jobs/{job_id}").json())["status"] != "done":
                assert state["status"] in ("queued", "running"), state
                assert time.monotonic() < deadline, state
                time.sleep(0.5)
            assert state["failed"] == 0, state
            sent.update({d["id"]: d["text"] for d in docs("job2", JOB, tier)})
            check_stored(client, sent, refused, tier)
            assert proc.poll() is None


def test_a_write_that_finds_no_space_is_refused_not_acknowledged(tmp_path: Path) -> None:
    """With the floor off, the cold tier's write itself fails (SQLite: disk full): 507, and the
    batch is not acknowledged; everything acknowledged before is intact."""
    with tmpfs(tmp_path / "fs", FS_MB) as fs:
        port = free_port()
        env = {"RAG_STORAGE__MIN_FREE_MB": "0", "RAG_TIERS__HOT_WINDOW_DAYS": "3650"}
        with (
            server(fs / "data", port, **env) as proc,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client,
        ):
            first = docs("before", 10, "cold")
            assert client.post("/v1/documents", json={"documents": first, "tier": "cold"}).status_code == 200
            fill(fs / "ballast", 0)
            big = docs("big", 50, "cold")
            r = client.post("/v1/documents", json={"documents": big, "tier": "cold"})
            assert r.status_code == 507, r.text
            assert r.json()["error"]["code"] == "insufficient_storage"
            assert proc.poll() is None
            (fs / "ballast").unlink()
            check_stored(client, {d["id"]: d["text"] for d in first}, {d["id"] for d in big}, "cold")
            assert client.post("/v1/documents", json={"documents": big, "tier": "cold"}).status_code == 200

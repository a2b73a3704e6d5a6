"""SIGKILL during retier: the server is killed while it moves documents from the hot tier
(Qdrant Edge) to the cold tier (tantivy + FAISS over SQLite), restarted, killed again at another
point, and finally left to finish. While it is killed, the cold tier is made slow (a failpoint,
rag_router/faults.py) so that a move takes seconds and a kill lands inside it. Nothing is lost,
nothing stays duplicated: every document ends in the cold tier once, its text byte for byte, its
chunks each once."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.crash.test_sigkill import free_port, server

pytestmark = pytest.mark.slow

DOCS = 240
KILLS = 3


def text(i: int) -> str:
    return " ".join(
        f"Archive entry {i}, paragraph {j}: the levy on river freight, ledger {i}-{j}." for j in range(4)
    )


def check(client: httpx.Client, final: bool) -> int:
    """Every document there once; returns how many are in the cold tier already."""
    cold = 0
    for i in range(DOCS):
        r = client.get(f"/v1/documents/aged/{i}")
        assert r.status_code == 200, (i, r.text)
        got = r.json()
        assert got["text"] == text(i), (i, got["text"][:200])
        for tier in got["tiers"]:
            ids = [c["chunk_id"] for c in got["chunks"] if c["tier"] == tier]
            assert len(ids) == len(set(ids)), (i, tier, ids)
        if final:
            assert got["tiers"] == ["cold"], (i, got["tiers"])
        cold += "cold" in got["tiers"]
    return cold


def retier(client: httpx.Client, result: dict[str, Any]) -> None:
    try:
        result["r"] = client.post("/v1/retier", json={})
    except httpx.HTTPError as exc:  # the server was killed under it
        result["error"] = exc


def test_sigkill_during_retier_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(7)
    data = tmp_path / "data"
    faults = tmp_path / "faults.json"  # the cold tier made slow while killing: the move takes seconds
    faults.write_text("{}", encoding="utf-8")
    env = {"RAG_TIERS__HOT_WINDOW_DAYS": "365", "RAG_CHUNK__MAX_TOKENS": "32", "RAG_FAULTS_FILE": str(faults)}
    port = free_port()
    with server(data, port, **env), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as c:
        docs = [{"id": f"aged/{i}", "text": text(i), "metadata": {"date": "2004-06-01"}} for i in range(DOCS)]
        for start in range(0, DOCS, 60):  # placed hot although old: retier has them to move
            r = c.post("/v1/documents", json={"documents": docs[start : start + 60], "tier": "hot"})
            assert r.status_code == 200, r.text
    slow = json.dumps({"cold": {"mode": "slow", "seconds": 0.25}})
    cut = 0  # kills that landed while the retier request was out
    partial = 0  # restarts that found the move half done
    for _ in range(KILLS):
        port = free_port()
        with (
            server(data, port, **env) as proc,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as c,
        ):
            partial += 0 < check(c, final=False) < DOCS
            result: dict[str, Any] = {}
            faults.write_text(slow, encoding="utf-8")
            thread = threading.Thread(target=retier, args=(c, result))
            thread.start()
            time.sleep(rng.uniform(0.5, 2.5))
            proc.kill()
            proc.wait()
            faults.write_text("{}", encoding="utf-8")
            thread.join(60)
            if "r" in result:  # it finished before the kill
                assert result["r"].status_code == 200
            else:
                cut += 1
    assert cut >= 1, "no kill landed while the retier ran: the test proved nothing"
    port = free_port()
    with server(data, port, **env), httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300) as c:
        partial += 0 < check(c, final=False) < DOCS  # after the kills: everything there once
        assert partial >= 1, "no kill cut a retier half way: the test proved nothing"
        r = c.post("/v1/retier", json={})
        assert r.status_code == 200 and not r.json()["errors"], r.text
        check(c, final=True)
        hits = c.post(
            "/v1/search", json={"query": "levy on river freight", "top_k": 50, "route": "both"}
        ).json()
        ids = [h["chunk_id"] for h in hits["hits"]]
        assert len(ids) == len(set(ids))

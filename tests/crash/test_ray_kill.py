"""Crash safety of the Ray engine: a worker and the driver SIGKILLed mid-run, then the run again.

Acknowledged = reported by the engine's ``on_batch`` (printed by tests/crash/ray_child.py). After
the kill and a complete re-run, every document is stored exactly as the in-process pipeline
stores it (same chunk ids and hashes: nothing missing, nothing twice, no stale chunk), every
acknowledged one included, and tantivy and FAISS hold exactly the rows SQLite holds.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexers.embed.embedder import AsyncEmbedder, SentenceTransformerEmbedder
from indexers.ingest.load import load_paths
from indexers.ingest.pipeline import Pipeline
from indexers.text.chunk import Chunker
from indexers.text.lexical import Analyzer
from indexers.tiers.local_cold import LocalCold, LocalColdTier
from tests.crash.ray_child import MAX_TOKENS, OVERLAP
from tests.unit.test_ray_engine import sample

pytestmark = pytest.mark.slow
CHILD = Path(__file__).with_name("ray_child.py")
ROOT = Path(__file__).resolve().parents[2]


def child(data: Path, corpus: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_LOG_LEVEL": "WARNING"}
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(data), str(corpus)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,  # Ray's processes join the child's group: one kill ends them all
    )


def read_acks(proc: subprocess.Popen[str], want: int, timeout: float) -> list[str]:
    assert proc.stdout is not None
    acks: list[str] = []
    deadline = time.monotonic() + timeout
    while len(acks) < want and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("ack "):
                acks.append(line.split(" ", 1)[1].strip())
    return acks


def ray_worker(pid: int) -> int:
    import psutil

    for p in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if p.name().startswith("ray::") or any("default_worker.py" in a for a in p.cmdline()):
                return int(p.pid)
    raise AssertionError("no Ray worker process found")


async def reference(
    tmp_path: Path, corpus: Path, embedder: SentenceTransformerEmbedder
) -> set[tuple[str, str]]:
    tier = LocalColdTier(tmp_path / "reference", dim=embedder.dim, analyzer=Analyzer())
    chunker = Chunker(embedder.count_tokens, max_tokens=MAX_TOKENS, overlap_tokens=OVERLAP)
    await Pipeline(embedder=AsyncEmbedder(embedder), chunker=chunker, tiers={"cold": tier}).ingest(
        load_paths([corpus]), placement="cold"
    )
    await tier.close()
    return rows(tmp_path / "reference" / "cold.sqlite")


def rows(path: Path) -> set[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        got = conn.execute("SELECT chunk_id, content_hash FROM chunks").fetchall()
    assert len(got) == len({cid for cid, _ in got})
    return set(got)


async def test_sigkill_of_a_worker_and_the_driver_then_resume(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    pytest.importorskip("ray")
    pytest.importorskip("psutil")
    corpus = sample(tmp_path, copies=4)
    data = tmp_path / "data"
    proc = child(data, corpus)
    try:
        acked = read_acks(proc, want=12, timeout=300)
        assert len(acked) >= 12, "the run acknowledged too little before the kill"
        os.kill(ray_worker(proc.pid), signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        rest = proc.stdout.read() if proc.stdout is not None else ""
        if proc.stdout is not None:
            proc.stdout.close()
    assert "done" not in rest, "the kill came after the end"

    again = child(data, corpus)
    out, _ = again.communicate(timeout=600)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(again.pid, signal.SIGKILL)
    assert "done 132" in out

    stored = rows(data / "cold" / "cold.sqlite")
    assert stored == await reference(tmp_path, corpus, embedder)
    assert {d for d in acked} <= {cid.rsplit("#", 1)[0] for cid, _ in stored}
    cold = LocalCold(data / "cold", dim=embedder.dim, analyzer=Analyzer())
    _, lexical, vectors = cold._parts()
    assert vectors.index.ntotal == len(stored) == lexical.index.searcher().num_docs
    cold.close()
    assert not list((data / "cold" / "segments").glob("*.segment*"))

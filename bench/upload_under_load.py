"""Writes inside the server against search: /v1/search latency idle and during a file upload.

    python bench/upload_under_load.py --out bench/results/bench-upload.json

1. SciFact's corpus is written as one Markdown file per document (``# title`` + abstract).
2. In process: ``rag-router ingest FILES`` into a fresh data dir (no server): chunks/s.
3. A server on a fresh data dir holding Cranfield (ingested first, in process), then
   ``/v1/search`` (route ``both``, query cache off: every query is embedded) at 8 clients:
   idle for ``--idle-s``, then while ``rag-router ingest FILES --url …`` uploads the same
   files through ``/v1/ingest/files`` and follows the jobs to their end.
4. Through the API with no search load (a second fresh server): chunks/s from the first job's
   acceptance to the last job's end (upload, queueing and writing included), against the
   in-process figure. ``--throughput`` runs steps 1, 2 and 4 only.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, machine, percentiles, server

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CLI = [sys.executable, "-m", "rag_router.cli"]


def write_files(dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    with gzip.open(DATA / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as corpus:
        for line in corpus:
            doc = json.loads(line)
            body = f"# {doc.get('title') or doc['_id']}\n\n{doc['text']}\n"
            (dest / f"{doc['_id']}.md").write_text(body, encoding="utf-8")
            n += 1
    return n


def cli(args: list[str], data_dir: Path, **env: str) -> tuple[str, float]:
    started = time.perf_counter()
    full_env = {
        **os.environ,
        "RAG_DATA_DIR": str(data_dir),
        "RAG_LOG_LEVEL": "WARNING",
        "COLUMNS": "200",
        **env,
    }
    done = subprocess.run([*CLI, *args], env=full_env, capture_output=True, text=True, check=True)
    return done.stdout + done.stderr, time.perf_counter() - started


def report_value(output: str, label: str) -> float:
    found = re.search(rf"{re.escape(label)}\s+│\s+([0-9.]+)", output)
    if found is None:
        raise RuntimeError(f"no {label!r} in the report:\n{output[-2000:]}")
    return float(found.group(1))


def queries() -> list[str]:
    lines = (DATA / "scifact" / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


async def search_load(url: str, clients: int, keep_going: Any, texts: list[str]) -> dict[str, Any]:
    """``clients`` workers, one request at a time each, while ``keep_going()`` is true."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(1 << 40))
    async with aiohttp.ClientSession(base_url=url, timeout=aiohttp.ClientTimeout(total=60)) as session:

        async def worker() -> None:
            nonlocal errors
            await asyncio.sleep(random.uniform(0, 1))
            while keep_going():
                body = {"query": texts[next(counter) % len(texts)], "top_k": 10, "route": "both"}
                started = time.perf_counter()
                async with session.post("/v1/search", json=body) as r:
                    await r.read()
                    if r.status == 200:
                        latencies.append((time.perf_counter() - started) * 1000)
                    else:
                        errors += 1

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    return {
        "seconds": round(elapsed, 1),
        "ok_per_s": round(len(latencies) / elapsed, 1),
        "latency_ms": percentiles(latencies),
        "errors": errors,
    }


def start_upload(url: str, files: Path, data_dir: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RAG_DATA_DIR": str(data_dir), "RAG_LOG_LEVEL": "WARNING"}
    command = [*CLI, "ingest", str(files), "--url", url]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def api_rate(url: str) -> dict[str, float]:
    jobs = httpx.get(f"{url}/v1/ingest/jobs", timeout=30).json()["jobs"]
    chunks = sum(j["chunks"] for j in jobs)
    span = max(j["updated_at"] for j in jobs) - min(j["created_at"] for j in jobs)
    writing = sum(j["seconds"] for j in jobs)
    return {
        "jobs": len(jobs),
        "documents": sum(j["done"] for j in jobs),
        "chunks": chunks,
        "seconds_end_to_end": round(span, 1),
        "chunks_per_s_end_to_end": round(chunks / span, 1),
        "chunks_per_s_writing": round(chunks / writing, 1),
    }


def under_load(args: argparse.Namespace, files: Path) -> dict[str, Any]:
    """Search latency at ``args.clients`` clients, idle and while the files are uploaded."""
    served = args.work / "served"
    cli(["ingest", str(DATA / "cranfield" / "corpus.jsonl")], served)  # something to search
    texts = queries()
    env = {"RAG_DATA_DIR": str(served), "RAG_EMBEDDING__QUERY_CACHE": "0", "RAG_LOG_LEVEL": "WARNING"}
    with server(env, args.work / "server.log") as (url, _):
        deadline = time.monotonic() + args.idle_s
        idle = asyncio.run(search_load(url, args.clients, lambda: time.monotonic() < deadline, texts))
        upload = start_upload(url, files, served)
        during = asyncio.run(search_load(url, args.clients, lambda: upload.poll() is None, texts))
        if upload.wait() != 0:
            raise RuntimeError("the upload failed")
        loaded_rate = api_rate(url)
    return {
        "search_clients": args.clients,
        "search_idle": idle,
        "search_during_upload": during,
        "p99_during_over_idle": round(during["latency_ms"]["p99"] / idle["latency_ms"]["p99"], 2),
        "ingest_through_api_under_search_load": loaded_rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/rag-bench-upload"))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--idle-s", type=float, default=30)
    parser.add_argument("--throughput", action="store_true", help="ingest rates only (no search load)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    files = args.work / "scifact-md"
    documents = write_files(files)

    output, wall = cli(["ingest", str(files)], args.work / "in-process")
    in_process = {
        "chunks": report_value(output, "chunks written"),
        "chunks_per_s": report_value(output, "chunks/s"),
        "seconds_pipeline": report_value(output, "seconds"),
        "seconds_wall": round(wall, 1),
    }
    result: dict[str, Any] = {"machine": machine(), "files": documents, "ingest_in_process": in_process}
    if not args.throughput:
        result |= under_load(args, files)
    quiet = args.work / "quiet"
    with server({"RAG_DATA_DIR": str(quiet), "RAG_LOG_LEVEL": "WARNING"}, args.work / "quiet.log") as (
        url,
        _,
    ):
        started = time.perf_counter()
        if start_upload(url, files, quiet).wait() != 0:
            raise RuntimeError("the upload failed")
        through_api = api_rate(url)
    through_api["seconds_cli_wall"] = round(time.perf_counter() - started, 1)
    result["ingest_through_api"] = through_api
    result["api_over_in_process"] = round(
        through_api["chunks_per_s_end_to_end"] / in_process["chunks_per_s"], 2
    )
    emit(result, args.out)


if __name__ == "__main__":
    main()

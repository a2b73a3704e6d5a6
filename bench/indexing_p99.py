"""Search latency of the running server while it indexes: does sealing a hot shard stall serving?

Starts ``rag-router serve`` on loopback, keeps one client searching (closed loop, real SciFact
queries) while another posts documents (SciFact abstracts split into sentences, undated →
hot tier) until the fresh shard passes its limit and is sealed. Reports search latency before
ingest, during ingest and while the sealed shard is built, for each compaction mode:
``subprocess`` (the default: optimize in a child process) and ``inprocess`` (optimize in a
worker thread of the server — Qdrant Edge holds the GIL throughout).

    python bench/indexing_p99.py --data ../shared/data/scifact --docs 20000
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gzip
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _common import machine, percentiles, server

_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*hot tier: (sealing|sealed)")


def sentences(data: Path, n: int) -> list[str]:
    out: list[str] = []
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            out.extend(s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 5)
            if len(out) >= n:
                return out[:n]
    return out


def queries(data: Path) -> list[str]:
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


async def searcher(
    url: str, texts: list[str], stop: asyncio.Event, out: list[tuple[float, float, int]]
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        i = 0
        while not stop.is_set():
            started = time.time()
            r = await client.post("/v1/search", json={"query": texts[i % len(texts)], "top_k": 10})
            out.append((started, (time.time() - started) * 1000, r.status_code))
            i += 1
            await asyncio.sleep(0.05)


async def run_mode(
    mode: str, docs: list[str], texts: list[str], fresh_limit: int, work: Path
) -> dict[str, Any]:
    log_path = work / f"server-{mode}.log"
    env = {
        "RAG_DATA_DIR": str(work / mode),
        "RAG_QDRANT__FRESH_LIMIT": str(fresh_limit),
        "RAG_QDRANT__COMPACTION": mode,
    }
    samples: list[tuple[float, float, int]] = []
    with server(env, log_path) as (url, _):
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:
            stop = asyncio.Event()
            task = asyncio.create_task(searcher(url, texts, stop, samples))
            await asyncio.sleep(10)
            ingest_start = time.time()
            for start in range(0, len(docs), 256):
                batch = [{"id": f"s{i}", "text": t} for i, t in enumerate(docs[start : start + 256], start)]
                r = await client.post("/v1/documents", json={"documents": batch, "tier": "hot"})
                r.raise_for_status()
            ingest_end = time.time()
            sealed = await wait_for_seal(log_path, timeout=1800)
            await asyncio.sleep(5)
            stop.set()
            await task
    seal_start, seal_end = sealed

    def window(a: float, b: float) -> list[float]:
        return [ms for t, ms, _ in samples if a <= t < b]

    return {
        "mode": mode,
        "docs": len(docs),
        "ingest_s": round(ingest_end - ingest_start, 1),
        "seal_s": round(seal_end - seal_start, 1),
        "errors": sum(1 for *_, status in samples if status != 200),
        "idle": percentiles(window(0, ingest_start)),
        "ingesting": percentiles(window(ingest_start, min(ingest_end, seal_start))),
        "sealing": percentiles(window(seal_start, seal_end)),
    }


async def wait_for_seal(log_path: Path, timeout: float) -> tuple[float, float]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        stamps = {
            m.group(2): m.group(1) for m in map(_LOG_TIME.match, log_path.read_text().splitlines()) if m
        }
        if "sealed" in stamps and "sealing" in stamps:

            def ts(s: str) -> float:
                return dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f").timestamp()

            return ts(stamps["sealing"]), ts(stamps["sealed"])
        await asyncio.sleep(1)
    raise TimeoutError("the fresh shard was not sealed in time")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/scifact"
    )
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--modes", default="subprocess,inprocess")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON result here")
    args = parser.parse_args()
    docs = sentences(args.data, args.docs)
    texts = queries(args.data)
    results: dict[str, Any] = {"machine": machine(), "runs": []}
    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp:
        for mode in args.modes.split(","):
            results["runs"].append(asyncio.run(run_mode(mode, docs, texts, len(docs), Path(tmp))))
            print(json.dumps(results["runs"][-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

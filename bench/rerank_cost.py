"""What the rerank stage costs a search: ``/v1/search`` with and without it, on one server.

Starts ``rag-router serve`` on an already-ingested data dir (``rag-router eval … --data-dir``),
then asks the set's queries (top_k 10, route both) twice each, with ``"rerank": false`` and with
the server's reranker, interleaved so that both see the same machine:

- single client: p50 / p95 of each;
- ``--clients`` concurrent clients: requests per second of each, in alternating rounds.

With ``--ingest N`` it measures the other cost instead: the set's first N documents ingested
into a fresh store with and without the sentence vectors (``RAG_RERANK__AT_INGEST``), the
time and the data dir's size of each.

    python bench/rerank_cost.py --data ../shared/data/scifact --data-dir /tmp/sf \
        --out bench/results/rerank-cost.json
    python bench/rerank_cost.py --data ../shared/data/scifact --ingest 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import emit, machine, percentiles, server


def queries(data: Path, n: int) -> list[str]:
    with (data / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:n]


def body(query: str, rerank: bool) -> dict[str, Any]:
    return {"query": query, "top_k": 10, "route": "both", "rerank": rerank}


def single(url: str, texts: list[str]) -> dict[str, Any]:
    times: dict[bool, list[float]] = {False: [], True: []}
    stage: list[float] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for i, text in enumerate(texts):
            for rerank in (i % 2 == 0, i % 2 != 0):  # alternate which goes first
                started = time.perf_counter()
                r = client.post("/v1/search", json=body(text, rerank))
                times[rerank].append((time.perf_counter() - started) * 1000)
                r.raise_for_status()
                if rerank:
                    stage.append(r.json()["timings_ms"].get("rerank", 0.0))
    return {"off": percentiles(times[False]), "on": percentiles(times[True]), "stage": percentiles(stage)}


async def throughput(url: str, texts: list[str], clients: int, rerank: bool) -> float:
    todo = list(texts)
    async with httpx.AsyncClient(
        base_url=url, timeout=120, limits=httpx.Limits(max_connections=clients)
    ) as c:

        async def worker() -> int:
            done = 0
            while todo:
                r = await c.post("/v1/search", json=body(todo.pop(), rerank))
                done += r.status_code == 200
            return done

        started = time.perf_counter()
        ok = sum(await asyncio.gather(*(worker() for _ in range(clients))))
        return ok / (time.perf_counter() - started)


def ingest_cost(data: Path, n: int) -> dict[str, Any]:
    import shutil
    import tempfile

    from rag_router.cli.common import local_services
    from rag_router.evaluation.retrieval import Dataset
    from rag_router.settings import get_settings

    docs = [d for _, d in zip(range(n), Dataset(data, {}, {}, {}).corpus(), strict=False)]
    out: dict[str, Any] = {"machine": machine(), "documents": len(docs)}
    for at_ingest in (False, True, False, True):  # twice each, interleaved
        folder = Path(tempfile.mkdtemp(prefix="rerank-ingest-"))
        settings = get_settings(data_dir=folder, log_level="WARNING", rerank={"at_ingest": at_ingest})

        async def run(settings: Any = settings) -> Any:
            async with local_services(settings) as services:
                started = time.perf_counter()
                report = await services.pipeline.ingest(docs)
                return time.perf_counter() - started, report.chunks_embedded

        seconds, chunks = asyncio.run(run())
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        key = "with_sentences" if at_ingest else "without"
        out.setdefault(key, []).append(
            {
                "seconds": round(seconds, 1),
                "chunks": chunks,
                "chunks_per_s": round(chunks / seconds, 1),
                "data_dir_mb": round(size / 2**20, 1),
            }
        )
        shutil.rmtree(folder, ignore_errors=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="the BEIR folder whose queries are asked")
    p.add_argument("--data-dir", type=Path, help="an ingested index")
    p.add_argument("--ingest", type=int, help="measure ingest with and without sentence vectors instead")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.ingest:
        emit(ingest_cost(a.data, a.ingest), a.out)
        return
    if a.data_dir is None:
        p.error("--data-dir is required (or --ingest N)")
    texts = queries(a.data, a.queries)
    env = {"RAG_DATA_DIR": str(a.data_dir), "RAG_MAX_INFLIGHT": str(max(64, a.clients))}
    with server(env, Path("/tmp/rerank-cost-server.log")) as (url, _):
        for text in texts[:20]:  # warm: models, caches, the first sentence vectors
            httpx.post(f"{url}/v1/search", json=body(text, True), timeout=60)
        result: dict[str, Any] = {"machine": machine(), "queries": len(texts), "single": single(url, texts)}
        rounds: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(a.rounds):
            for name, rerank in (("off", False), ("on", True)):
                rounds[name].append(round(asyncio.run(throughput(url, texts, a.clients, rerank)), 1))
        result[f"throughput_{a.clients}_clients"] = rounds
    s = result["single"]
    result["p50_ratio"] = round(s["on"]["p50"] / s["off"]["p50"], 2)
    result["throughput_ratio"] = round(sum(rounds["on"]) / sum(rounds["off"]), 2)
    emit(result, a.out)


if __name__ == "__main__":
    main()
